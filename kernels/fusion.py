"""Fused elementwise kernels: code generation, compilation and the persistent disk cache.

A ``KernelSpec`` describes one fused region with no reference to tracing: the collapsed loop rank, each input's
dtype and which loop axes it broadcasts over (size 1), and the scalar program (op names over input/op/constant
references). ``generate_source(spec)`` turns it into numba source for one loop nest (outputs allocated by the caller
and passed in; no NumPy array expressions inside); ``diskcache.load_kernel`` compiles it, or loads it from the
private disk cache, keyed by a content hash of the source plus funclib/numba/vmath versions, so a new batch size
reuses the compiled kernel.

The op names are the primitives' kernel names; each primitive's record hands its ``Lowering`` (the scalar
expression per dtype and what the fusion planner needs to know) to ``register_op``, so this module holds no table
of ops of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from . import diskcache, lowp, vmath

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
F16 = np.dtype(np.float16)
BF16 = np.dtype("bfloat16") if "bfloat16" in np.sctypeDict else None
HALF = frozenset(d for d in (F16, BF16) if d is not None)
FLOAT8 = frozenset(lowp.FLOAT8)
# dtypes numba cannot hold: kernels take their bits as these unsigned views and compute in float32
CARRIER = {**{d: np.dtype(np.uint16) for d in HALF}, **{d: np.dtype(np.uint8) for d in FLOAT8}}
_TO_F32 = {F16: "h2f", BF16: "bf2f", **{d: f"{lowp.FORMATS[d].name}_to" for d in FLOAT8}}
_FROM_F32 = {F16: "f2h", BF16: "f2bf", **{d: f"{lowp.FORMATS[d].name}_from" for d in FLOAT8}}


@dataclass(frozen=True)
class Lowering:
    """How the code generator writes one elementwise op as a scalar expression in a fused loop.

    A template is numba source with ``{0}``, ``{1}``, ... for the operands. The result's dtype picks it: ``f32``
    where the result is computed in float32 (float16 and bfloat16 are computed in float32 too), ``f64`` for
    float64, ``integer`` and ``boolean`` for those results, ``expr`` for each of these not given its own. An op is
    fused only at the dtypes it has a template for. ``emit(args, dtype, param)`` replaces the templates for ops
    whose expression depends on a static parameter (``convert``, ``integer_pow``).

    ``float_inputs``: fused only when every operand is floating-point. ``vector_constants``: about how many vector
    constants (coefficients, masks, clamps) its float32 math keeps live in a loop (see ``register_pressure``).
    ``split``: loop fission may start a new loop before it (see ``split_passes``). ``exact``: its result is
    already a value of its dtype (one of its operands, or a cast that rounds itself), so a float8 result is not
    rounded again; every other op's float8 result rounds, as eager does. ``wraps``: an integer result can leave
    the operands' range (numba computes narrow integers in int64), so it is wrapped at its width, as NumPy does.

    >>> Lowering(f32="fexp({0})", f64="np.exp({0})", vector_constants=14, split=True).template(F32)
    'fexp({0})'
    """

    expr: str | None = None
    f32: str | None = None
    f64: str | None = None
    integer: str | None = None
    boolean: str | None = None
    emit: Callable[[list[str], np.dtype, object], str] | None = None
    float_inputs: bool = False
    vector_constants: int = 0
    split: bool = False
    exact: bool = False
    wraps: bool = False

    def template(self, d: np.dtype) -> str | None:
        """The template for a result computed in dtype ``d`` (None: not fusible there)."""
        own = self.f32 if d == F32 else self.f64 if d == F64 else self.boolean if d.kind == "b" else self.integer
        return own if own is not None else self.expr


# op name -> its lowering, filled by the primitives that lower to these ops (``register_op``)
OPS: dict[str, Lowering] = {}


def register_op(name: str, lowering: Lowering) -> None:
    """Make the elementwise op ``name`` fusible: the planner (``supports``, ``register_pressure``) and the code
    generators (``generate_source``, ``generate_staged_source``, ``loopgen``) read its ``lowering``.

    >>> register_op("demo_twice", Lowering("({0} + {0})"))
    >>> supports("demo_twice", [F32], F32)
    True
    >>> del OPS["demo_twice"]
    """
    old = OPS.get(name)
    if old is not None and old != lowering:
        raise ValueError(f"register_op: elementwise op {name!r} already has a different lowering ({old})")
    OPS[name] = lowering


def _convert_expr(a: list[str], d: np.dtype, param) -> str:
    target = np.dtype(param)
    if target == np.dtype(np.bool_):
        return f"({a[0]} != 0)"
    if target in FLOAT8:
        return _round(target, a[0])  # the converter takes any float or integer exactly (through float64)
    if target in HALF:
        return _round(target, f"np.float32({a[0]})")  # round to half precision, keep computing in float32
    return f"np.{d.name}({a[0]})"


def _integer_pow_expr(a: list[str], d: np.dtype, param) -> str:
    y = int(param)
    k = abs(y)
    if k == 0:
        return f"np.{d.name}(1)"
    expr = "*".join([a[0]] * k) if k <= 4 else f"({a[0]} ** {k})"
    return f"(np.{d.name}(1) / ({expr}))" if y < 0 else f"({expr})"


# the two ops whose expression depends on a static parameter: a cast (``param``: the target dtype) and x**n
CONVERT = Lowering(emit=_convert_expr, exact=True)
INTEGER_POW = Lowering(emit=_integer_pow_expr, wraps=True)


FUSIBLE_DTYPES = (
    frozenset(
        np.dtype(t)
        for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, F32, F64)
    )
    | HALF
    | FLOAT8
)
# float8 reductions run unfused: they accumulate in float32 and round back with funclib's saturating cast
REDUCIBLE_DTYPES = FUSIBLE_DTYPES - FLOAT8


@dataclass(frozen=True)
class InputSpec:
    dtype: str
    bcast: tuple[bool, ...]  # per collapsed loop axis: True if this input has size 1 there


@dataclass(frozen=True)
class OpSpec:
    name: str
    args: tuple  # ("in", i) | ("op", j) | ("const", repr_value, dtype_str)
    dtype: str  # result dtype
    param: object = None  # convert: target dtype str; integer_pow: exponent


@dataclass(frozen=True)
class ReductionSpec:
    kind: str  # "sum" | "max" | "min"
    op: int  # index of the op whose value is reduced
    n_reduced: int  # how many collapsed loop axes are reduced
    leading: bool  # reduced axes come first (else last)
    dtype: str


@dataclass(frozen=True)
class KernelSpec:
    rank: int
    inputs: tuple[InputSpec, ...]
    ops: tuple[OpSpec, ...]
    outputs: tuple[int, ...]  # op indices to store at full shape, in output order
    reduction: ReductionSpec | None = None

    def __post_init__(self):
        _distinct_outputs(self.outputs)


def _distinct_outputs(outputs: tuple[int, ...]) -> None:
    # the generators store each op's value into one output array: an op listed twice would leave an array unwritten
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"kernel outputs must be distinct ops, got {outputs}; give the callers one array and a view")


def _compute(d: np.dtype) -> np.dtype:
    """The register dtype: float16/bfloat16 (carried as uint16 in memory) and float8 (as uint8) compute in float32."""
    return F32 if d in CARRIER else d


def _load(d: np.dtype, e: str) -> str:
    return f"{_TO_F32[d]}({e})" if d in CARRIER else e


def _store(d: np.dtype, v: str) -> str:
    return f"{_FROM_F32[d]}({v})" if d in CARRIER else v


def _round(d: np.dtype, v: str) -> str:
    """``v`` (float32) rounded to the carried dtype ``d`` and back: the value an unfused op would produce."""
    return f"{_TO_F32[d]}({_FROM_F32[d]}({v}))"


def _expr(op: OpSpec, a: list[str], in_dtypes: list[str]) -> str:
    lowering = OPS[op.name]
    d = np.dtype(op.dtype)
    c = _compute(d)
    e = lowering.emit(a, c, op.param) if lowering.emit is not None else lowering.template(c).format(*a)
    if d in FLOAT8 and not lowering.exact:
        # every float8 op rounds its float32 result, as eager does (negation, ceil, ... can make a -0 that the fnuz
        # formats do not have)
        return _round(d, e)
    if d.kind in "iu" and d.itemsize < 8 and lowering.wraps:
        return f"np.{d.name}({e})"  # wrap at the op's width before later ops compare or divide
    return e


def supports(name: str, dtypes_in: list[np.dtype], dtype_out: np.dtype) -> bool:
    """Whether an op can be emitted as a scalar expression for these dtypes."""
    lowering = OPS.get(name)
    if lowering is None:
        return False
    if any(d not in FUSIBLE_DTYPES for d in dtypes_in) or dtype_out not in FUSIBLE_DTYPES:
        return False
    if lowering.float_inputs and any(_compute(d) not in (F32, F64) for d in dtypes_in):
        return False
    return lowering.emit is not None or lowering.template(_compute(dtype_out)) is not None


def _combine(kind: str, acc: str, v: str, dtype: np.dtype) -> str:
    if kind == "sum":
        return f"{acc} + {v}"
    cmp = ">" if kind == "max" else "<"
    if dtype.kind == "f":
        return f"{acc} if ({acc} {cmp} {v} or {acc} != {acc}) else {v}"
    return f"{acc} if {acc} {cmp} {v} else {v}"


def _init(kind: str, dtype: np.dtype) -> str:
    if kind == "sum":
        return f"np.{dtype.name}(0)"
    if dtype.kind == "f":
        return f"np.{dtype.name}({'-' if kind == 'max' else ''}np.inf)"
    if dtype.kind == "b":
        return "False" if kind == "max" else "True"
    info = np.iinfo(dtype)
    return f"np.{dtype.name}({info.min if kind == 'max' else info.max})"


# the imports every generated kernel module (fused, staged, loopgen) starts with; naming vmath's version puts it
# into the source, and so into every kernel's cache key
KERNEL_IMPORTS = (
    "import math",
    "import numba",
    "import numpy as np",
    f"from funclib.kernels.vmath import {', '.join(vmath.SCALAR_FUNCTIONS)}  # vmath {vmath.VERSION}",
    "from funclib.kernels.fusion import _logistic64",
    "from funclib.kernels.halfconv import bf2f, f2bf, f2h, h2f",
)


def _module_header(consts: dict, dts=()) -> list[str]:
    """The imports and typed constants every generated kernel module starts with (``dts``: the dtypes it handles,
    for the float8 converters it needs)."""
    lines = [*KERNEL_IMPORTS]
    f8 = sorted({lowp.FORMATS[np.dtype(d)].name for d in dts if np.dtype(d) in FLOAT8})
    if f8:
        names = ", ".join(f"{n}_{w}" for n in f8 for w in ("to", "from"))
        lines.append(f"from funclib.kernels.lowp import {names}  # lowp {lowp.VERSION}")
    lines.append("")
    for dn in ("float32", "float64"):
        lines.append(f"_ZERO_{dn} = np.{dn}(0)")
    for (val, dt), name in consts.items():
        # repr of inf/nan is not Python source; float('inf') is
        lines.append(
            f"{name} = np.{dt}({val})" if val not in ("inf", "-inf", "nan") else f"{name} = np.{dt}(float('{val}'))"
        )
    return lines + ["", ""]


def fused_row_split(spec: KernelSpec, row_calls: bool):
    """How an elementwise nest's row function is split into several loops over the row (see ``split_passes``):
    ``(loop of each op, {op: row buffer}, buffer dtypes, {op: output})``, or None for one loop.

    A value used by a later loop is read back from its own output row when it is an output, else held in the row
    of an output computed in the last loop (one value after another), else in a row buffer."""
    if not row_calls or spec.reduction is not None or spec.rank < 2:
        return None
    sub = _fission(spec.ops, range(len(spec.ops)))
    last = max(sub.values(), default=0)
    if last == 0:
        return None
    reads: dict[int, int] = {}
    for j, op in enumerate(spec.ops):
        for a in op.args:
            if a[0] == "op" and sub[a[1]] < sub[j]:
                reads[a[1]] = max(reads.get(a[1], 0), sub[j])
    own = {j: k for k, j in enumerate(spec.outputs) if np.dtype(spec.ops[j].dtype) not in CARRIER}
    slots = [  # [kind, index, dtype, loop from which it is free]
        ["out", k, _compute(np.dtype(spec.ops[j].dtype)), 0]
        for k, j in enumerate(spec.outputs)
        if sub[j] == last and np.dtype(spec.ops[j].dtype) not in CARRIER
    ]
    order = sorted((j for j in reads if j not in own), key=lambda j: (sub[j], j))
    in_buf, dtypes, in_out = _assign_rows(spec, order, sub, reads, slots, lambda slot, j: True)
    in_out.update({j: own[j] for j in reads if j in own})
    return sub, in_buf, dtypes, in_out


def _assign_rows(spec, order, start, reads, slots, fits):
    """Give each value in ``order`` a row to wait in: the first of ``slots`` (``[kind, index, dtype, free from]``)
    of its dtype that is free by the pass ``start[j]`` computing it and ``fits``, else a new row buffer. A row
    is free again in the pass that last reads its value: each element is read there before it is overwritten.
    Returns ``({value: buffer}, buffer dtypes, {value: output})``."""
    in_buf: dict[int, int] = {}
    in_out: dict[int, int] = {}
    dtypes: list[np.dtype] = []
    for j in order:
        d = _compute(np.dtype(spec.ops[j].dtype))
        slot = next((sl for sl in slots if sl[2] == d and sl[3] <= start[j] and fits(sl, j)), None)
        if slot is None:
            slot = ["buf", len(dtypes), d, 0]
            dtypes.append(d)
            slots.append(slot)
        (in_out if slot[0] == "out" else in_buf)[j] = slot[1]
        slot[3] = reads[j]
    return in_buf, dtypes, in_out


def fused_buffer_dtypes(spec: KernelSpec, row_calls: bool) -> list[np.dtype]:
    """The dtypes of the row buffers a fused kernel takes after its outputs (see ``fused_row_split``)."""
    split = fused_row_split(spec, row_calls)
    return [] if split is None else split[2]


def _split_row_body(spec: KernelSpec, split, body: list[str], n_in: int, idx: str, col: str, n: str) -> list[str]:
    """A row function's loops over the row for ``split``, from the one-loop ``body``: input loads, op lines,
    output stores, in that order."""
    sub, in_buf, _, in_out = split
    n_ops = len(spec.ops)
    loads, ops = body[:n_in], body[n_in : n_in + n_ops]
    stores: dict[int, list[str]] = {}
    for k, j in enumerate(spec.outputs):
        stores.setdefault(j, []).append(body[n_in + n_ops + k])
    held = {j: f"buf{b}[{col}]" for j, b in in_buf.items()}
    held.update({j: f"out{k}[{idx}]" for j, k in in_out.items()})
    own = {j for j, k in in_out.items() if spec.outputs[k] == j}
    out: list[str] = []
    for loop in range(max(sub.values()) + 1):
        mine = [j for j in range(n_ops) if sub[j] == loop]
        used_in = sorted({a[1] for j in mine for a in spec.ops[j].args if a[0] == "in"})
        earlier = sorted({a[1] for j in mine for a in spec.ops[j].args if a[0] == "op" and sub[a[1]] < loop})
        lines = [loads[i] for i in used_in]
        lines += [f"t{v} = {held[v]}" for v in earlier]
        for j in mine:
            lines.append(ops[j])
            if j in held and j not in own:
                lines.append(f"{held[j]} = t{j}")
            lines += stores.get(j, [])
        out += [f"    for {col} in range({n}):", *("        " + b for b in lines)]
    return out


def operand_names(op: OpSpec, x: str, t: str, consts: dict) -> list[str]:
    """The source names of ``op``'s operands: input ``i`` is ``{x}{i}``, op ``j``'s result ``{t}{j}``, and a
    constant the ``cK`` that ``consts`` (``(text, compute dtype) -> name``, extended here) gives it. Every code
    generator names operands this way, so the same program gives the same source (and cache key)."""
    names = []
    for ref in op.args:
        if ref[0] == "in":
            names.append(f"{x}{ref[1]}")
        elif ref[0] == "op":
            names.append(f"{t}{ref[1]}")
        else:
            key = (ref[1], _compute(np.dtype(ref[2])).name)
            if key not in consts:
                consts[key] = f"c{len(consts)}"
            names.append(consts[key])
    return names


def _open_loops(lines: list[str], dims, ind: str = "    ") -> str:
    """Append ``for iK in range(nK):`` for each ``K`` of ``dims``, each inside the last; returns the body's indent."""
    for k in dims:
        lines.append(f"{ind}for i{k} in range(n{k}):")
        ind += "    "
    return ind


def generate_source(spec: KernelSpec, row_calls: bool = False) -> str:
    """numba source for one fused loop nest (with an optional trailing or leading reduction).

    ``row_calls`` (elementwise nests of rank 2 or more) puts the innermost loop in a function of its own, for the
    reason ``generate_staged_source`` gives."""
    r = max(spec.rank, 1)
    consts: dict = {}
    n_in = len(spec.inputs)
    red = spec.reduction
    split = fused_row_split(spec, row_calls)
    args = [f"in{i}" for i in range(n_in)] + [f"out{k}" for k in range(len(spec.outputs))]
    if red is not None:
        args.append("red0")
    if split is not None:
        args += [f"buf{b}" for b in range(len(split[2]))]
    args.append("dims")
    body = []
    idx_all = ", ".join(f"i{k}" for k in range(r))
    for i, inp in enumerate(spec.inputs):
        idx = ", ".join("0" if (spec.rank and inp.bcast[k]) else f"i{k}" for k in range(r))
        load = f"in{i}[{idx}]"
        dt = np.dtype(inp.dtype)
        body.append(f"x{i} = {_load(dt, load)}")
    for j, op in enumerate(spec.ops):
        body.append(f"t{j} = {_expr(op, operand_names(op, 'x', 't', consts), [])}")
    for k, j in enumerate(spec.outputs):
        dt = np.dtype(spec.ops[j].dtype)
        body.append(f"out{k}[{idx_all}] = {_store(dt, f't{j}')}")
    lines = _module_header(consts, [i.dtype for i in spec.inputs] + [op.dtype for op in spec.ops])
    # reductions may reassociate (that is what vectorizes them); pure elementwise kernels keep IEEE semantics
    fm = ", fastmath={'reassoc', 'contract'}" if red is not None and red.kind == "sum" else ""
    jit = f"@numba.njit(error_model='numpy', nogil=True, no_cfunc_wrapper=True{fm})"
    lines.append(jit)
    lines.append(f"def kernel({', '.join(args)}):")
    for k in range(r):
        lines.append(f"    n{k} = dims[{k}]")
    if red is None:
        outer = r - 1 if (row_calls and r >= 2) else r
        ind = _open_loops(lines, range(outer))
        if outer == r:
            lines += [ind + b for b in body]
            return "\n".join(lines) + "\n"
        head = ", ".join(f"i{k}" for k in range(outer))
        arrays = ", ".join(args[:-1])
        lines.append(f"{ind}_row({head}, {arrays}, n{r - 1})")
        at = lines.index(jit)  # the row function goes right before the kernel, under the same decorator
        row = [jit, f"def _row({head}, {arrays}, n{r - 1}):"]
        if split is None:
            row += [f"    for i{r - 1} in range(n{r - 1}):", *("        " + b for b in body)]
        else:
            row += _split_row_body(spec, split, body, n_in, idx_all, f"i{r - 1}", f"n{r - 1}")
        return "\n".join(lines[:at] + row + ["", ""] + lines[at:]) + "\n"
    d = _compute(np.dtype(red.dtype))
    m = red.n_reduced
    # a leading reduction accumulates into red0 across the whole nest; a trailing one in a scalar per kept index
    kept = range(m, r) if red.leading else range(0, r - m)
    kidx = ", ".join(f"i{k}" for k in kept) or "0"
    ind = _open_loops(lines, kept)
    if red.leading:
        acc = f"red0[{kidx}]"
        lines.append(f"{ind}{acc} = {_init(red.kind, d)}")
        ind = _open_loops(lines, range(r))
    else:
        acc, acc_ind = "acc", ind
        lines.append(f"{ind}acc = {_init(red.kind, d)}")
        ind = _open_loops(lines, range(r - m, r), ind)
    lines += [ind + b for b in body]
    lines.append(f"{ind}{acc} = {_combine(red.kind, acc, f't{red.op}', d)}")
    if not red.leading:
        lines.append(f"{acc_ind}red0[{kidx}] = acc")
    return "\n".join(lines) + "\n"


def collapse_segments(shape: tuple[int, ...], in_shapes: list[tuple[int, ...]], split: int):
    """``collapse`` applied separately to axes ``[:split]`` and ``[split:]`` (a reduction boundary)."""
    a_out, a_in = collapse(shape[:split], [s[:split] for s in in_shapes]) if split else ((), [()] * len(in_shapes))
    b_out, b_in = (
        collapse(shape[split:], [s[split:] for s in in_shapes]) if split < len(shape) else ((), [()] * len(in_shapes))
    )
    return a_out + b_out, [x + y for x, y in zip(a_in, b_in)], len(a_out)


@diskcache.njit(error_model="numpy", inline="always")
def _logistic64(x):
    if x >= 0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


def collapse(out_shape: tuple[int, ...], in_shapes: list[tuple[int, ...]]):
    """Merge adjacent loop axes that every input treats alike (all full or all broadcast).

    ``in_shapes`` are already padded to ``len(out_shape)``. Returns (collapsed out shape, collapsed input shapes).
    """
    r = len(out_shape)
    if r == 0:
        return (1,), [(1,) for _ in in_shapes]
    groups: list[list[int]] = [[0]]
    for k in range(1, r):
        prev = groups[-1][-1]
        same = all((s[k] == 1) == (s[prev] == 1) for s in in_shapes) and out_shape[k] != 1 and out_shape[prev] != 1
        if same:
            groups[-1].append(k)
        else:
            groups.append([k])
    out = tuple(int(np.prod([out_shape[k] for k in g])) for g in groups)
    ins = [tuple(int(np.prod([s[k] for k in g])) for g in groups) for s in in_shapes]
    return out, ins


# ---------------------------------------------------------------------------------------------------------------
# Staged row kernels: trailing reductions and what consumes them, in one pass over each row


@dataclass(frozen=True)
class StagedOp:
    name: str  # an elementwise op name, or "reduce" (param: "sum" | "max" | "min")
    args: tuple  # ("in", i) | ("op", j) | ("const", repr_value, dtype_str)
    dtype: str
    param: object = None
    row: bool = False  # computed once per row (between passes) rather than per element
    stage: int = 0  # elementwise: the pass that computes it; row-level: the pass before which it is available


@dataclass(frozen=True)
class StagedSpec:
    """A kernel over a (rows, cols) iteration space. Pass ``s`` runs over the columns of a row, computing the
    elementwise ops of stage ``s`` and accumulating the reductions of stage-``s`` values; row-level ops (on
    reduction results, per-row inputs and constants) run between passes. Elementwise values needed by a later
    pass are kept in a row-sized buffer, so each row is read from memory once and stays in cache."""

    inputs: tuple  # (dtype, kind) with kind "full" (rows, cols) | "col" (1, cols) | "row" (rows, 1) | "scalar"
    ops: tuple[StagedOp, ...]
    outputs: tuple[int, ...]  # op indices; row-level ones are written per row, elementwise ones per element
    n_stages: int

    def __post_init__(self):
        _distinct_outputs(self.outputs)


def _reads(spec: StagedSpec) -> dict[int, int]:
    """Elementwise ops whose value is used in a later pass than the one computing it -> the last pass using it."""
    last: dict[int, int] = {}
    for op in spec.ops:
        for ref in op.args:
            if ref[0] == "op":
                src = spec.ops[ref[1]]
                use_stage = op.stage - 1 if (op.row or op.name == "reduce") else op.stage
                if not src.row and use_stage > src.stage:
                    last[ref[1]] = max(last.get(ref[1], -1), use_stage)
    return last


def _recomputed(spec: StagedSpec) -> set[int]:
    """Values of an earlier pass that later passes recompute instead of reading from a buffer: one add/sub/mul/neg
    of constants, per-row values and buffered values (read there anyway), so a pass drops a store and the next
    one a load."""
    need = _reads(spec)

    def elementwise_args(j):
        return [r[1] for r in spec.ops[j].args if r[0] == "op" and not spec.ops[r[1]].row]

    cand = {
        j
        for j in need
        if spec.ops[j].name in _CHEAP
        and not any(r[0] == "in" for r in spec.ops[j].args)
        and elementwise_args(j)
        and all(a in need for a in elementwise_args(j))
    }
    return {j for j in cand if not any(a in cand for a in elementwise_args(j))}  # no chains: arguments stay held


def _staged_buffers(spec: StagedSpec) -> tuple[dict[int, int], list[np.dtype], dict[int, int]]:
    """Where elementwise values used in a later pass than the one computing them (and not recomputed there) are
    held: ``({op: row buffer}, buffer dtypes, {op: output})``.

    An output written only in the last pass lends its row: holding the earliest value there means that row is
    fetched for writing while the compute-heavy first pass runs, not in a last pass that only streams (8-10 % on
    a gelu*sigmoid layer norm). A row (an output's or a buffer) holds one value after another: a value can take
    it in the pass that last reads the previous one, which each element reads before it is overwritten."""
    reads = _reads(spec)
    redo = _recomputed(spec)
    for j in redo:  # a recomputed value reads its arguments where it is used
        for r in spec.ops[j].args:
            if r[0] == "op" and r[1] in reads:
                reads[r[1]] = max(reads[r[1]], reads[j])
    need = set(reads) - redo
    last = max((op.stage for op in spec.ops if not op.row and op.name != "reduce"), default=-1)
    # [kind, index, dtype, pass from which it is free]; output rows are tried first
    slots = [
        ["out", k, _compute(np.dtype(spec.ops[j].dtype)), 0]
        for k, j in enumerate(spec.outputs)
        if not spec.ops[j].row and spec.ops[j].stage == last and np.dtype(spec.ops[j].dtype) not in CARRIER
    ]
    order = sorted(need, key=lambda j: (spec.ops[j].stage, j))
    stage = {j: spec.ops[j].stage for j in need}

    def fits(slot, j):  # an output's row is overwritten in pass `last`: every read must come in it or before
        return slot[0] == "buf" or (spec.outputs[slot[1]] != j and reads[j] <= last)

    return _assign_rows(spec, order, stage, reads, slots, fits)


_CHEAP = frozenset({"add", "sub", "mul", "neg"})


# a row call costs 30-45 ns: worth it from rows of this length on, and only for kernels that spill
ROW_CALL_MIN_COLS = 256
ROW_CALL_MIN_CONSTANTS = 24


def row_calls_pay(spec: KernelSpec | StagedSpec, cols: int) -> bool:
    """Whether rows of ``cols`` elements should run in a function of their own (see ``generate_staged_source``)."""
    return cols >= ROW_CALL_MIN_COLS and register_pressure(spec) > ROW_CALL_MIN_CONSTANTS


def register_pressure(spec: KernelSpec | StagedSpec) -> int:
    """Estimated vector constants the elementwise ops of ``spec`` need: its float32 math functions' and its
    literals. Beyond AVX2's 16 vector registers, LLVM rematerializes them inside a nested inner loop."""
    n = 0
    for op in spec.ops:
        if getattr(op, "row", False) or op.name == "reduce":
            continue
        if _compute(np.dtype(op.dtype)) == F32:
            n += OPS[op.name].vector_constants if op.name in OPS else 0
        n += sum(1 for r in op.args if r[0] == "const")
    return n


# Loop distribution: a pass whose float32 math needs more vector constants than this is split into several passes
# over the row, each with about a register file's worth (see ``split_passes``).
SPLIT_MIN_CONSTANTS = 36


def _fission(ops, members) -> dict[int, int]:
    """Loop number of each op in ``members`` (in op order): a new loop starts before a float32 math function that
    would take the current loop's vector constants past ``SPLIT_MIN_CONSTANTS``. A light op of inputs and constants
    alone then moves to the first loop that uses it, so that it is not held from one loop to the next."""
    sub: dict[int, int] = {}
    weight: dict[int, int] = {}
    cur = pressure = 0
    heavy = False
    for j in members:
        op = ops[j]
        lw = OPS.get(op.name)
        w = lw.vector_constants if lw is not None and lw.split and _compute(np.dtype(op.dtype)) == F32 else 0
        if w and heavy and pressure + w > SPLIT_MIN_CONSTANTS:
            cur, pressure, heavy = cur + 1, 0, False
        sub[j], weight[j] = cur, w
        pressure += w + sum(1 for r in op.args if r[0] == "const")
        heavy = heavy or w > 0
    if cur:
        users: dict[int, list[int]] = {j: [] for j in sub}
        for k in sub:
            for a in ops[k].args:
                if a[0] == "op" and a[1] in users:
                    users[a[1]].append(k)
        for j in reversed(list(sub)):
            if not weight[j] and users[j] and all(a[0] != "op" for a in ops[j].args):
                sub[j] = max(sub[j], min(sub[u] for u in users[j]))
    return sub


def split_passes(spec: StagedSpec) -> StagedSpec:
    """``spec`` with each pass whose vector math would need more than ``SPLIT_MIN_CONSTANTS`` vector constants
    distributed over consecutive passes over the same row (loop fission), in op order.

    One loop computing erf and logistic keeps about 42 constants live against AVX2's 16 registers and spills;
    two loops, the second reading the first's result back from a row that is still in L1, ran 10-12 % faster
    on gelu(x) * sigmoid(x) with its row sum, and 14-17 % on two erfs. Values crossing into a later pass are
    held like any other (``_staged_buffers``); a reduction accumulates in the pass computing its operand."""
    sub: dict[int, int] = {}
    counts = []
    for s in range(spec.n_stages):
        part = _fission(spec.ops, [j for j, op in enumerate(spec.ops) if not op.row and op.stage == s])
        sub.update(part)
        counts.append(max(part.values(), default=0) + 1)
    if all(c == 1 for c in counts):
        return spec
    base = [sum(counts[:s]) for s in range(spec.n_stages + 1)]
    ops = []
    for j, op in enumerate(spec.ops):
        if not op.row:
            stage = base[op.stage] + sub[j]
        elif op.name == "reduce":
            # accumulated in old pass op.stage - 1: now in the sub-pass computing its operand (the first sub-pass
            # for an input or an earlier pass's value)
            a = op.args[0]
            here = a[0] == "op" and not spec.ops[a[1]].row and spec.ops[a[1]].stage == op.stage - 1
            stage = base[op.stage - 1] + (sub[a[1]] if here else 0) + 1
        else:
            stage = base[op.stage]
        ops.append(replace(op, stage=stage))
    return replace(spec, ops=tuple(ops), n_stages=base[-1])


def generate_staged_source(spec: StagedSpec, row_calls: bool = False) -> str:
    """numba source for a ``StagedSpec``: one loop over rows, with one inner loop per pass.

    With ``row_calls`` one row's passes are a function of their own, which the row loop calls: compiled apart
    from the row loop, LLVM keeps the vector math's constants in registers or as memory operands instead of
    rematerializing each one in every inner iteration (two instructions apiece with numba's large code model),
    20-25 % faster for an erf-and-logistic row. The call costs about 30 ns, so it pays only for long rows.
    """
    consts: dict = {}
    in_buf, buf_dtypes, in_out = _staged_buffers(spec)
    redo = _recomputed(spec)
    held = {j: f"buf{b}[i1]" for j, b in in_buf.items()}
    held.update({j: f"out{k}[i0, i1]" for j, k in in_out.items()})
    n_in = len(spec.inputs)
    args = [f"in{i}" for i in range(n_in)] + [f"out{k}" for k in range(len(spec.outputs))]
    args += [f"buf{b}" for b in range(len(buf_dtypes))] + ["dims"]

    def load(i: int, idx: str) -> str:
        dt = np.dtype(spec.inputs[i][0])
        e = f"in{i}[{idx}]"
        return _load(dt, e)

    def ref(r) -> str:
        if r[0] == "in":
            return f"x{r[1]}"
        if r[0] == "op":
            return f"t{r[1]}"
        key = (r[1], _compute(np.dtype(r[2])).name)
        if key not in consts:
            consts[key] = f"c{len(consts)}"
        return consts[key]

    def store(k: int, j: int, idx: str) -> str:
        dt = np.dtype(spec.ops[j].dtype)
        return f"out{k}[{idx}] = {_store(dt, f't{j}')}"

    def value(j: int) -> str:
        op = spec.ops[j]
        if op.name == "reduce":
            d = np.dtype(op.dtype)
            acc = f"acc{j}"
            if d == F16:
                return f"h2f(f2h({acc}))"  # the reduction's result rounds to its dtype, as the unfused one does
            if d in HALF:
                return f"bf2f(f2bf({acc}))"
            return acc
        return _expr(_as_opspec(op), [ref(r) for r in op.args], [])

    body: list[str] = []
    ind = "    "
    # per-row and scalar inputs are loaded once per row
    for i, (_, kind) in enumerate(spec.inputs):
        if kind in ("row", "scalar"):
            body.append(f"{ind}x{i} = {load(i, 'i0, 0' if kind == 'row' else '0, 0')}")
    out_at = {j: k for k, j in enumerate(spec.outputs)}
    for s in range(spec.n_stages + 1):
        for j, op in enumerate(spec.ops):
            if op.row and op.stage == s:
                body.append(f"{ind}t{j} = {value(j)}")
                if j in out_at:
                    body.append(ind + store(out_at[j], j, "i0"))
        if s == spec.n_stages:
            break
        elem = [j for j, op in enumerate(spec.ops) if not op.row and op.stage == s]
        reds = [j for j, op in enumerate(spec.ops) if op.name == "reduce" and op.stage - 1 == s]
        if not elem and not reds:
            continue
        for j in reds:
            d = _compute(np.dtype(spec.ops[j].dtype))
            body.append(f"{ind}acc{j} = {_init(spec.ops[j].param, d)}")
        body.append(f"{ind}for i1 in range(n1):")
        inner = ind + "    "
        used_in = set()
        used_ops = set()
        for j in elem + reds:
            for r in spec.ops[j].args:
                if r[0] == "in":
                    used_in.add(r[1])
                elif r[0] == "op":
                    used_ops.add(r[1])
        for i in sorted(used_in):
            kind = spec.inputs[i][1]
            if kind in ("full", "col"):
                body.append(f"{inner}x{i} = {load(i, 'i0, i1' if kind == 'full' else '0, i1')}")
        earlier = {j for j in used_ops if not spec.ops[j].row and spec.ops[j].stage < s}
        again = sorted(earlier & redo)
        loads = (earlier - redo) | {r[1] for j in again for r in spec.ops[j].args if r[0] == "op" and r[1] in held}
        for j in sorted(loads):
            body.append(f"{inner}t{j} = {held[j]}")
        for j in again:
            body.append(f"{inner}t{j} = {value(j)}")
        for j in elem:
            body.append(f"{inner}t{j} = {value(j)}")
            if j in held:
                body.append(f"{inner}{held[j]} = t{j}")
            if j in out_at:
                body.append(inner + store(out_at[j], j, "i0, i1"))
        for j in reds:
            d = _compute(np.dtype(spec.ops[j].dtype))
            src = ref(spec.ops[j].args[0])
            body.append(f"{inner}acc{j} = {_combine(spec.ops[j].param, f'acc{j}', src, d)}")
    lines = _module_header(consts, [d for d, _ in spec.inputs] + [op.dtype for op in spec.ops])
    has_sum = any(op.name == "reduce" and op.param == "sum" for op in spec.ops)
    fm = ", fastmath={'reassoc', 'contract'}" if has_sum else ""
    jit = f"@numba.njit(error_model='numpy', nogil=True, no_cfunc_wrapper=True{fm})"
    head = [jit, f"def kernel({', '.join(args)}):", "    n1 = dims[1]", "    for i0 in range(dims[0]):"]
    if not row_calls:
        return "\n".join(lines + head + ["    " + b for b in body]) + "\n"
    arrays = ", ".join(args[:-1])
    lines += [jit, f"def _row(i0, {arrays}, n1):", *body, "", ""]
    return "\n".join(lines + head + [f"        _row(i0, {arrays}, n1)"]) + "\n"


def _as_opspec(op: StagedOp) -> OpSpec:
    return OpSpec(op.name, op.args, op.dtype, op.param)


def staged_buffer_dtypes(spec: StagedSpec) -> list[np.dtype]:
    """The dtype of each row buffer the kernel takes, in argument order."""
    return _staged_buffers(spec)[1]
