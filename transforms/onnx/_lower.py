"""The lowering context: walks a jaxpr, calls each equation's rule from ``ONNX_RULES``, and builds the graph.

Rules see ONNX value names for their inputs and emit nodes through the context (``ctx.node``, ``ctx.math``,
``ctx.const``). Sizes that depend on a dynamic axis come from ``ctx.shape(atom)`` and ``ctx.params(eqn)`` as
``Dim`` objects; ``ctx.dim``/``ctx.shape_tensor`` compute them in the graph from the inputs' ``Shape``.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Sequence
from fractions import Fraction
from math import lcm

import numpy as np

from funclib import dtypes as D
from funclib.core import Tensor
from funclib.jaxpr import Eqn, Jaxpr, Literal, Var

from ._dims import _VARIES, ConstInfo, Dim, Symbolic
from ._errors import ExportError, where

ONNX_RULES: dict[str, Callable] = {}
"""The lowering of each primitive, by name: ``rule(ctx, eqn, ins) -> [output value names]``."""

DYNAMIC_PARAMS: dict[str, frozenset] = {}
"""Parameters a rule reads through ``ctx.params`` and so may depend on a dynamic axis."""

NOT_EXPORTABLE: dict[str, str] = {}
"""Primitives with no lowering, and why."""


MIN_OPSET: dict[str, int] = {}
"""Primitives whose lowering needs a later opset than 18 (``nextafter`` reads float bits with BitCast, opset 26)."""


def onnx_rule(*names: str, dynamic: Sequence[str] = (), min_opset: int = 18):
    """Register ``f(ctx, eqn, ins)`` as the ONNX lowering of the named primitives.

    ``dynamic``: parameters the rule reads through ``ctx.params``, so they may depend on a dynamic axis;
    ``min_opset``: the first opset the lowering works in.
    """

    def deco(f):
        for n in names:
            ONNX_RULES[n] = f
            DYNAMIC_PARAMS[n] = frozenset(dynamic)
            if min_opset > 18:
                MIN_OPSET[n] = min_opset
        return f

    return deco


def require_onnx():
    """The ``onnx`` module, or an ImportError naming the extra to install."""
    try:
        return importlib.import_module("onnx")
    except ImportError:
        raise ImportError(
            "fl.onnx.export needs the onnx package: pip install funclib[onnx] (installs onnx and onnxruntime)"
        ) from None


_TENSOR_TYPES = {
    D.bool_: "BOOL",
    D.int8: "INT8",
    D.int16: "INT16",
    D.int32: "INT32",
    D.int64: "INT64",
    D.uint8: "UINT8",
    D.uint16: "UINT16",
    D.uint32: "UINT32",
    D.uint64: "UINT64",
    D.float16: "FLOAT16",
    D.bfloat16: "BFLOAT16",
    D.float32: "FLOAT",
    D.float64: "DOUBLE",
}


def elem_type(dtype, what: str = "a value") -> int:
    onnx = require_onnx()
    name = _TENSOR_TYPES.get(np.dtype(dtype))
    if name is None:
        raise ExportError(
            f"fl.onnx.export: {what} has dtype {np.dtype(dtype).name}, which ONNX Runtime cannot compute with "
            "(ONNX has no complex arithmetic); split it into real and imaginary parts outside the exported function"
        )
    return getattr(onnx.TensorProto, name)


class _Graph:
    def __init__(self, name: str):
        self.name = name
        self.nodes: list = []
        self.inputs: list = []
        self.outputs: list = []


class Lowering:
    """Builds one ONNX model from a jaxpr (see the module docstring)."""

    def __init__(self, sym: Symbolic, opset: int):
        self.onnx = require_onnx()
        self.helper = self.onnx.helper
        self.sym = sym
        self.opset = opset
        self.main = _Graph("main")
        self.cur = self.main
        self.initializers: list = []
        self._init_names: set = set()
        self._count = 0
        self.symbol_value: dict[str, str] = {}  # dynamic axis name -> int64[1] value in the main graph
        self._dim_cache: dict = {}
        self._const_cache: dict = {}
        self._value_cache: dict = {}  # id(constant) -> (constant, initializer name)
        self.producers: list[dict] = []  # per jaxpr being lowered: Var -> Eqn
        self.envs: list[dict] = []  # per jaxpr being lowered: Var -> ONNX name

    # --- names and nodes ---------------------------------------------------------------------------------------
    def fresh(self, hint: str = "v") -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def node(self, op: str, inputs: Sequence[str], n_out: int = 1, *, graph: _Graph | None = None, **attrs):
        """Emit one node; returns its output name (a list when ``n_out != 1``)."""
        outs = [self.fresh(op.lower()) for _ in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        (graph or self.cur).nodes.append(self.helper.make_node(op, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype=None, name: str | None = None) -> str:
        """An initializer holding ``value`` (deduplicated when small)."""
        arr = np.asarray(value, dtype=dtype)
        key = None
        if name is None and arr.size <= 16:
            key = (arr.dtype.str, arr.shape, arr.tobytes())
            hit = self._const_cache.get(key)
            if hit is not None:
                return hit
        nm = name or self.fresh("const")
        if nm in self._init_names:
            raise ExportError(f"fl.onnx.export: two initializers are named {nm!r}; rename one of the inputs")
        self._init_names.add(nm)
        elem_type(arr.dtype, f"constant {nm!r}")
        t = self.onnx.numpy_helper.from_array(arr if arr.flags.c_contiguous else arr.copy(order="C"), nm)
        self.initializers.append(t)
        if key is not None:
            self._const_cache[key] = nm
        return nm

    def i64(self, values) -> str:
        return self.const(np.asarray(values, np.int64).reshape(-1))

    def scalar(self, value, dtype) -> str:
        return self.const(np.asarray(value, dtype=dtype))

    # --- arithmetic with the types ONNX Runtime computes in -----------------------------------------------------
    def math(
        self,
        op: str,
        inputs: Sequence[str],
        dtype,
        *,
        kind: str = "value",
        out: str = "same",
        extra: Sequence[str] = (),
        **attrs,
    ) -> str:
        """Emit ``op`` on ``inputs`` of ``dtype`` (then the ``extra`` inputs: axes, indices), computing in a wider
        type where ONNX Runtime lacks kernels (see ``compute_dtype``).

        ``kind``: ``"wrap"`` for operations exact modulo 2**bits (add, mul, sums), ``"order"`` for those that only
        compare (max, argmax, less: uint64 maps to int64 by flipping the top bit, which keeps the order),
        ``"value"`` for the rest (division, float math). ``out="same"`` casts the result back to ``dtype``;
        ``out="keep"`` leaves it (a comparison's bool, an index).
        """
        dtype = np.dtype(dtype)
        if dtype == D.uint64 and kind == "order":
            flipped = [self.flip_u64(i) for i in inputs]
            y = self.node(op, [*flipped, *extra], **attrs)
            return self.unflip_u64(y) if out == "same" else y
        wide = compute_dtype(dtype, kind)
        if wide != dtype:
            inputs = [self.cast(i, wide) for i in inputs]
        y = self.node(op, [*inputs, *extra], **attrs)
        if wide != dtype and out == "same":
            y = self.cast(y, dtype)
        return y

    def flip_u64(self, x: str) -> str:
        """uint64 as int64 with the top bit flipped: the map keeps the order (ONNX Runtime lacks uint64 kernels
        for comparisons, reductions and TopK)."""
        return self.node("BitwiseXor", [self.cast(x, np.int64), self.const(np.int64(np.iinfo(np.int64).min))])

    def unflip_u64(self, y: str) -> str:
        return self.cast(self.node("BitwiseXor", [y, self.const(np.int64(np.iinfo(np.int64).min))]), np.uint64)

    def where(self, cond: str, x: str, y: str, dtype) -> str:
        """``Where`` for any dtype (ONNX Runtime's lacks bool, 16-bit, uint64 and bfloat16 kernels)."""
        dtype = np.dtype(dtype)
        if dtype == D.bool_:
            return self.node("Or", [self.node("And", [cond, x]), self.node("And", [self.node("Not", [cond]), y])])
        wide = {D.int16: np.int32, D.uint16: np.int32, D.uint64: np.int64, D.bfloat16: np.float32}.get(dtype)
        if wide is None:
            return self.node("Where", [cond, x, y])
        # uint64 -> int64 keeps the bits, the others keep the values
        return self.cast(self.node("Where", [cond, self.cast(x, wide), self.cast(y, wide)]), dtype)

    def pad(self, x: str, pads: Sequence[int], value: str, dtype) -> str:
        """Constant ``Pad`` for any dtype (ONNX Runtime's lacks 16-bit and bfloat16 kernels)."""
        dtype = np.dtype(dtype)
        wide = {D.int16: np.int32, D.uint16: np.int32, D.bfloat16: np.float32}.get(dtype)
        if wide is None:
            return self.node("Pad", [x, self.i64(pads), value], mode="constant")
        y = self.node("Pad", [self.cast(x, wide), self.i64(pads), self.cast(value, wide)], mode="constant")
        return self.cast(y, dtype)

    def cast(self, x: str, dtype) -> str:
        return self.node("Cast", [x], to=elem_type(dtype))

    # --- shapes ------------------------------------------------------------------------------------------------
    def shape(self, atom) -> tuple:
        """The shape of a jaxpr value, with a ``Dim`` for each size that depends on a dynamic axis."""
        return self.sym.shape(atom)

    def params(self, eqn: Eqn) -> dict:
        """``eqn.params`` with each parameter that depends on a dynamic axis as ``Dim``s."""
        changed = self.sym.params.get(id(eqn))
        if not changed:
            return eqn.params
        out = dict(eqn.params)
        for k, v in changed.items():
            if v is _VARIES:
                raise ExportError(
                    f"fl.onnx.export: parameter {k!r} of '{eqn.prim.name}'{where(eqn)} changes with the size of a "
                    "dynamic axis; export with a static size"
                )
            out[k] = v
        return out

    def dim(self, d) -> str:
        """An int64[1] value holding size ``d`` (an int or a ``Dim``), computed in the main graph."""
        if not isinstance(d, Dim):
            return self.i64([d])
        hit = self._dim_cache.get(d)
        if hit is not None:
            return hit
        den = lcm(*[c.denominator for c in d.terms.values()])
        total = None
        for mono, c in d.terms.items():
            num = int(c * den)
            if not mono:
                term = self.i64([num])
            else:
                term = None
                for s in mono:
                    v = self.symbol_value[s]
                    term = v if term is None else self.node("Mul", [term, v], graph=self.main)
                if num != 1:
                    term = self.node("Mul", [term, self.i64([num])], graph=self.main)
            total = term if total is None else self.node("Add", [total, term], graph=self.main)
        if den != 1:
            total = self.node("Div", [total, self.i64([den])], graph=self.main)
        self._dim_cache[d] = total
        return total

    def shape_tensor(self, dims: Sequence) -> str:
        """An int64 1-d value holding ``dims`` (static runs are one constant)."""
        if not any(isinstance(d, Dim) for d in dims):
            return self.i64(list(dims))
        parts, run = [], []
        for d in dims:
            if isinstance(d, Dim):
                if run:
                    parts.append(self.i64(run))
                    run = []
                parts.append(self.dim(d))
            else:
                run.append(int(d))
        if run:
            parts.append(self.i64(run))
        return self.node("Concat", parts, axis=0, graph=self.main) if len(parts) > 1 else parts[0]

    def reshape(self, x: str, dims: Sequence) -> str:
        """``x`` reshaped to ``dims`` (ints and ``Dim``s); one dynamic size becomes -1, computing nothing."""
        dims = list(dims)
        n_dyn = sum(isinstance(d, Dim) for d in dims)
        if any(d == 0 for d in dims if not isinstance(d, Dim)):
            return self.node("Reshape", [x, self.shape_tensor(dims)], allowzero=1)
        if n_dyn == 1:
            dims = [-1 if isinstance(d, Dim) else d for d in dims]
        return self.node("Reshape", [x, self.shape_tensor(dims)])

    @property
    def env(self) -> dict:
        """The ONNX names of the values of the jaxpr being lowered."""
        return self.envs[-1]

    def producer(self, v) -> Eqn | None:
        return self.producers[-1].get(v) if self.producers and type(v) is Var else None

    # --- values ------------------------------------------------------------------------------------------------
    def literal(self, lit: Literal) -> str:
        d = self.sym.literal.get(id(lit))
        dtype = lit.aval.dtype
        if d is not None:
            return self._dim_scalar(d, dtype)
        arr = np.asarray(lit.val, dtype=dtype)
        return self.const(arr)

    def _dim_scalar(self, d: Dim, dtype) -> str:
        if all(c.denominator == 1 for c in d.terms.values()):
            s = self.node("Reshape", [self.dim(d), self.i64([])], graph=self.main)
            return self.node("Cast", [s], to=elem_type(dtype), graph=self.main)
        # a non-integral polynomial (a float literal such as n / 2): evaluate it in the literal's dtype
        total = None
        for mono, c in d.terms.items():
            term = self.const(np.asarray(float(Fraction(c)), dtype))
            for s in mono:
                sv = self.node("Reshape", [self.symbol_value[s], self.i64([])], graph=self.main)
                term = self.node(
                    "Mul", [term, self.node("Cast", [sv], to=elem_type(dtype), graph=self.main)], graph=self.main
                )
            total = term if total is None else self.node("Add", [total, term], graph=self.main)
        return total

    def const_value(self, var: Var, value) -> str:
        """A constant of the program: an initializer, or built in the graph when its shape is dynamic."""
        info: ConstInfo | None = self.sym.consts.get(var)
        arr = np.asarray(value._value if isinstance(value, Tensor) else value)
        if info is None:
            # a body lowered twice (a while loop's condition) reads its constants once
            hit = self._value_cache.get(id(value))
            if hit is None or hit[0] is not value:
                hit = self._value_cache[id(value)] = (value, self.const(arr))
            return hit[1]
        shape = self.shape_tensor(info.shape)
        if info.kind == "fill":
            scalar = self.const(np.asarray(info.value, arr.dtype).reshape(1))
            return self.node("Expand", [scalar, shape], graph=self.main)
        if info.kind == "tri":
            rows, cols = (self._range(n) for n in info.shape)
            diff = self.node(
                "Sub",
                [
                    self.node("Unsqueeze", [cols, self.i64([0])], graph=self.main),
                    self.node("Unsqueeze", [rows, self.i64([1])], graph=self.main),
                ],
                graph=self.main,
            )
            inside = self.node("LessOrEqual", [diff, self.const(np.int64(info.axis))], graph=self.main)
            a, b = (self.const(np.asarray(v, arr.dtype)) for v in info.value)
            prev, self.cur = self.cur, self.main
            try:
                return self.where(inside, a, b, arr.dtype)
            finally:
                self.cur = prev
        r = self.node("Cast", [self._range(info.shape[info.axis])], to=elem_type(arr.dtype), graph=self.main)
        rank = len(info.shape)
        r = self.node("Reshape", [r, self.i64([-1 if i == info.axis else 1 for i in range(rank)])], graph=self.main)
        return self.node("Expand", [r, shape], graph=self.main)

    def _range(self, n) -> str:
        """int64 ``arange(n)`` in the main graph."""
        size = self.node("Reshape", [self.dim(n), self.i64([])], graph=self.main)
        return self.node("Range", [self.const(np.int64(0)), size, self.const(np.int64(1))], graph=self.main)

    # --- jaxprs ------------------------------------------------------------------------------------------------
    def lower_jaxpr(self, jaxpr: Jaxpr, consts: list, args: Sequence[str]) -> list[str]:
        """Lower ``jaxpr`` into the current graph with ``args`` for its inputs; returns its output names."""
        env: dict = {}
        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c if isinstance(c, str) else self.const_value(v, c)
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        self.producers.append({o: e for e in jaxpr.eqns for o in e.outputs})
        self.envs.append(env)
        try:
            for eqn in jaxpr.eqns:
                self.lower_eqn(eqn, env)
        finally:
            self.producers.pop()
            self.envs.pop()
        return [self._read(env, a) for a in jaxpr.outvars]

    def _read(self, env, a) -> str:
        if type(a) is Literal:
            return self.literal(a)
        return env[a]

    def lower_eqn(self, eqn: Eqn, env: dict) -> None:
        name = eqn.prim.name
        rule = ONNX_RULES.get(name)
        if rule is None:
            why = NOT_EXPORTABLE.get(name)
            raise ExportError(
                f"fl.onnx.export: primitive '{name}'{where(eqn)} has no ONNX lowering"
                + (f": {why}" if why else "")
                + ". Compute it outside the exported function and pass the result in as an input, or register a "
                f"lowering with @fl.onnx.onnx_rule({name!r}) (the rules are in funclib/transforms/onnx/_rules/)."
            )
        need = MIN_OPSET.get(name, 18)
        if self.opset < need:
            raise ExportError(
                f"fl.onnx.export: primitive '{name}'{where(eqn)} needs opset {need} or later (it is exported with "
                f"opset {self.opset}); pass opset={need}"
            )
        changed = self.sym.params.get(id(eqn))
        if changed:
            bad = sorted(set(changed) - DYNAMIC_PARAMS.get(name, frozenset()))
            if bad:
                raise ExportError(
                    f"fl.onnx.export: parameter {bad[0]!r} of '{name}'{where(eqn)} changes with the size of a dynamic "
                    f"axis ({eqn.params[bad[0]]} at the example size), and its lowering bakes it in; export with a "
                    "static size along that axis"
                )
        for a in eqn.inputs:
            if type(a) is not Literal:
                elem_type(a.aval.dtype, f"an input of '{name}'{where(eqn)}")
        ins = [self._read(env, a) for a in eqn.inputs]
        outs = rule(self, eqn, ins)
        if len(outs) != len(eqn.outputs):
            raise AssertionError(f"the ONNX rule of {name} returned {len(outs)} outputs for {len(eqn.outputs)}")
        for v, o in zip(eqn.outputs, outs):
            env[v] = o

    @contextlib.contextmanager
    def subgraph(self, name: str):
        """Make a new graph current (a Loop or If body); yields it."""
        g = _Graph(self.fresh(name))
        prev, self.cur = self.cur, g
        try:
            yield g
        finally:
            self.cur = prev

    def value_info(self, name: str, atom) -> object:
        return self.helper.make_tensor_value_info(
            name, elem_type(atom.aval.dtype), [d if not isinstance(d, Dim) else str(d) for d in self.shape(atom)]
        )

    def graph_proto(self, g: _Graph, initializers: list | None = None):
        return self.helper.make_graph(g.nodes, g.name, g.inputs, g.outputs, initializer=initializers or [])


def compute_dtype(dtype, kind: str):
    """The dtype an arithmetic node computes ``dtype`` values in.

    float16 and bfloat16 compute in float32 and round (what NumPy and ml_dtypes do, so results match); integers
    narrower than 32 bits compute in int32 and uint32 in int64 (ONNX Runtime has few kernels for them), which
    holds their values; uint64 computes in int64 where only the bits modulo 2**64 matter (``"wrap"``). Booleans
    compute in int32.
    """
    dtype = np.dtype(dtype)
    if dtype in (D.float16, D.bfloat16):
        return np.dtype(np.float32)
    if dtype in (D.int8, D.int16, D.uint8, D.uint16, D.bool_):
        return np.dtype(np.int32)
    if dtype == D.uint32 or (dtype == D.uint64 and kind == "wrap"):
        return np.dtype(np.int64)
    return dtype
