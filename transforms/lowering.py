"""Lowering a jaxpr to a ``Program``: a flat list of steps run by a small Python executor.

Steps are fused elementwise kernels (each maximal region of elementwise/broadcast equations with one iteration
shape becomes one generated numba loop nest, see ``funclib.kernels.fusion``), reductions with their elementwise
producers fused in, ``dot_general`` on BLAS, and every other primitive's NumPy impl. Slots are freed after their
last use, so peak memory follows the live values, not the whole program.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from funclib.kernels import diskcache, fusion

from funclib import config
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, use_counts
from funclib.primitives.collectives import ExternalAxis
from funclib.primitives.conv import _col2im_impl
from funclib.primitives.dot import _dot_impl


class Program:
    __slots__ = ("in_slots", "out_slots", "consts", "steps", "describe_lines", "kernels", "fallback_names", "_run")

    def __init__(self):
        self.steps: list = []
        self.consts: list = []  # (slot, value)
        self.describe_lines: list[str] = []
        self.kernels: list = []
        self.fallback_names: set[str] = set()
        self._run = None

    def run(self, args: list) -> list:
        """The outputs for ``args`` (one array per input slot)."""
        run = self._run
        if run is None:
            run = self._run = self._straight_line()
        return run(args)

    def _straight_line(self):
        """``run`` as generated straight-line Python: one local per slot, one line per step, ``del`` after a value's
        last use. An interpreted loop over ``steps`` with an environment list cost 4-6 us more per call."""
        const_slots = {s for s, _ in self.consts}
        ns: dict = {f"k{s}": v for s, v in self.consts}

        def name(s):
            return f"k{s}" if s in const_slots else f"v{s}"

        lines = ["def run(args):"]
        if self.in_slots:
            lines.append(f"    {''.join(name(s) + ', ' for s in self.in_slots)}= args")
        for i, (fn, ins, outs, multi, frees) in enumerate(self.steps):
            ns[f"f{i}"] = fn
            call = f"f{i}({', '.join(name(s) for s in ins)})"
            target = "".join(name(s) + ", " for s in outs) if multi else name(outs[0])
            lines.append(f"    {target} = {call}" if target else f"    {call}")
            dead = [name(s) for s in frees if s not in const_slots]
            if dead:
                lines.append(f"    del {', '.join(dead)}")
        lines.append(f"    return [{', '.join(name(s) for s in self.out_slots)}]")
        exec(compile("\n".join(lines), "<funclib program>", "exec"), ns)
        return ns["run"]

    def kernel_sources(self) -> list[str]:
        return [k.source for k in self.kernels]

    def fallbacks(self) -> list[str]:
        return sorted(self.fallback_names)

    def describe(self) -> str:
        return "\n".join(self.describe_lines)


def _impl_step(eqn):
    prim = eqn.prim
    if getattr(prim, "collective", False):
        axes = eqn.params["axes"]
        if len(axes) == 1 and isinstance(axes[0], ExternalAxis):
            # across processes: the axis runs it (MPI), in program order; the program's guard checked the ranks
            return axes[0].program_step(prim.name, {k: v for k, v in eqn.params.items() if k != "axes"})
    # a call primitive may run its body its own way (``prim.jit_step(eqn) -> step or None``)
    lower = _LOOP_LOWERINGS.get(prim.name) or prim.jit_step
    if lower is not None:
        step = lower(eqn)
        if step is not None:
            return step
    impl = prim.rule("impl")
    return functools.partial(impl, **eqn.params) if eqn.params else impl


def closed_program(cj) -> Program | None:
    """A Program for a body ClosedJaxpr, its constants baked in; None if a constant is not concrete."""
    j = cj.jaxpr
    prog = j.cache.get("closed_program")
    if prog is None:
        consts = []
        for c in cj.consts:
            v = getattr(c, "_value", c)
            if not isinstance(v, (np.ndarray, np.generic, int, float, bool, complex)) or hasattr(c, "_trace"):
                return None
            consts.append(np.asarray(v))
        body = Jaxpr(j.constvars, j.invars, j.eqns, j.outvars)
        body.cache["consts"] = consts
        prog = compile_program(body, guard=False)  # the enclosing program's guard covers its bodies
        j.cache["closed_program"] = prog
    return prog


def _lower_scan(eqn):
    p = eqn.params
    prog = closed_program(p["jaxpr"])
    if prog is None:
        return None
    nc, ncar, length, reverse = p["num_consts"], p["num_carry"], p["length"], p["reverse"]
    y_avals = p["jaxpr"].out_avals[ncar:]

    def run(*args):
        consts = list(args[:nc])
        carry = list(args[nc : nc + ncar])
        xs = [np.asarray(x) for x in args[nc + ncar :]]
        ys = [np.empty((length,) + a.shape, a.dtype) for a in y_avals]
        for i in range(length - 1, -1, -1) if reverse else range(length):
            out = prog.run(consts + carry + [x[i] for x in xs])
            carry = out[:ncar]
            for buf, y in zip(ys, out[ncar:]):
                buf[i] = y
        return [np.asarray(c) for c in carry] + ys

    if config.fuse_kernels and config.native_loops:
        # the whole loop as one generated numba function where the body allows; the executor loop otherwise
        # (imported here: native_scan imports this module, a circle the lowering split removes)
        from .native_scan import native_scan

        native = native_scan(eqn, run)
        if native is not None:
            return native
    return run


def _lower_while(eqn):
    p = eqn.params
    cprog, bprog = closed_program(p["cond_jaxpr"]), closed_program(p["body_jaxpr"])
    if cprog is None or bprog is None:
        return None
    cn, bn, max_steps = p["cond_nconsts"], p["body_nconsts"], p["max_steps"]

    def run(*args):
        cc = list(args[:cn])
        bc = list(args[cn : cn + bn])
        carry = list(args[cn + bn :])
        k = 0
        while max_steps is None or k < max_steps:
            if not cprog.run(cc + carry)[0]:
                break
            carry = bprog.run(bc + carry)
            k += 1
        return [np.asarray(c) for c in carry]

    return run


def _lower_cond(eqn):
    progs = [closed_program(b) for b in eqn.params["branches"]]
    if any(pr is None for pr in progs):
        return None

    def run(index, *ops):
        i = min(max(int(index), 0), len(progs) - 1)
        return [np.asarray(o) for o in progs[i].run(list(ops))]

    return run


# loops run natively around their compiled bodies: one executor pass per iteration, no tracing or dispatch
_LOOP_LOWERINGS = {"scan": _lower_scan, "while": _lower_while, "cond": _lower_cond}


def _external_axes(jaxpr: Jaxpr, found: dict) -> dict:
    """The process axes that collectives in ``jaxpr`` act over, at any depth, in order of appearance."""
    for e in jaxpr.eqns:
        if getattr(e.prim, "collective", False):
            for a in e.params["axes"]:
                if isinstance(a, ExternalAxis):
                    found.setdefault(a, None)
        for v in e.params.values():
            for sub in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(sub, (Jaxpr, ClosedJaxpr)):
                    _external_axes(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub, found)
    return found


def compile_program(jaxpr: Jaxpr, guard: bool = True, name: str = "program") -> Program:
    """Lower ``jaxpr`` (no constvars, or constvars with values in ``jaxpr.cache['consts']``) to a Program.

    A program with collectives over process axes starts with each axis' guard step (unless ``guard`` is off, for
    loop bodies): the ranks agree that they run the same program before any of them enters a collective.
    """
    prog = Program()
    slot: dict = {}
    n = 0

    def new_slot():
        nonlocal n
        n += 1
        return n - 1

    consts = jaxpr.cache.get("consts", [])
    for v, c in zip(jaxpr.constvars, consts):
        slot[v] = new_slot()
        prog.consts.append((slot[v], np.asarray(c)))
    prog.in_slots = []
    for v in jaxpr.invars:
        slot[v] = new_slot()
        prog.in_slots.append(slot[v])

    def atom_slot(a):
        if type(a) is Literal:
            s = new_slot()
            prog.consts.append((s, np.asarray(a.val, dtype=a.aval.dtype)))
            return s
        return slot[a]

    if config.fuse_kernels:
        jaxpr = _fuse_dot_col2im(jaxpr)
    groups = plan(jaxpr) if config.fuse_kernels else [("eqn", e) for e in jaxpr.eqns]
    raw_steps = []
    if guard:
        for ax in _external_axes(jaxpr, {}):
            check = ax.program_guard(jaxpr, name)
            if check is not None:
                raw_steps.append((check, [], [], True, f"guard[{ax.name!r}]"))
    for kind, item in groups:
        if kind == "eqn":
            eqn = item
            ins = [atom_slot(a) for a in eqn.inputs]
            outs = []
            for v in eqn.outputs:
                slot[v] = new_slot()
                outs.append(slot[v])
            if (
                eqn.prim.name not in ("dot_general", "jit", "dot_col2im")
                and eqn.prim.name not in _VIEW_PRIMS
                and eqn.prim.name not in _LOOP_LOWERINGS
                and eqn.prim.jit_step is None
                and _kernel_name(eqn) is None
            ):
                prog.fallback_names.add(eqn.prim.name)
            step = _impl_step(eqn)
            if hasattr(step, "source"):  # a generated loop (native scan): show it with the fused kernels
                prog.kernels.append(step)
            raw_steps.append((step, ins, outs, eqn.prim.multiple_results, eqn.prim.name))
        else:  # a fused group
            group = item
            kernel = build(group)
            prog.kernels.append(kernel)
            ins = [atom_slot(a) for a in group.inputs]
            outs = []
            for v in group.outputs:
                slot[v] = new_slot()
                outs.append(slot[v])
            raw_steps.append((kernel, ins, outs, True, f"fused[{', '.join(e.prim.name for e in group.eqns)}]"))
    prog.out_slots = [atom_slot(a) for a in jaxpr.outvars]
    # free each slot after its last use (never inputs' caller-owned arrays: dropping our reference is harmless)
    last_use: dict = {}
    for i, (_, ins, _, _, _) in enumerate(raw_steps):
        for s in ins:
            last_use[s] = i
    keep = set(prog.out_slots)
    frees_at: dict = {}
    for s, i in last_use.items():
        if s not in keep:
            frees_at.setdefault(i, []).append(s)
    for i, (fn, ins, outs, multi, label) in enumerate(raw_steps):
        prog.steps.append((fn, ins, outs, multi, tuple(frees_at.get(i, ()))))
        prog.describe_lines.append(f"{outs} = {label}{ins}")
    return prog


class _LoweredOp:
    """An operation that exists only in lowered programs, never in a trace: a name and an impl."""

    multiple_results = False
    family = "lowered"
    kernel = None
    jit_step = None

    def __init__(self, name: str, impl):
        self.name = name
        self.impl = impl

    def rule(self, kind: str):
        if kind != "impl":
            raise KeyError(f"{self.name} exists only in lowered programs and has no {kind} rule")
        return self.impl


def _dot_col2im_impl(x, y, *, dimension_numbers, cols_shape, col2im_params):
    """Per example: its batched matmul, then col2im of the result, while that result is still in cache."""
    n = x.shape[0]
    out = None
    for i in range(n):
        d = _dot_impl(x[i : i + 1], y[i : i + 1], dimension_numbers=dimension_numbers)
        r = _col2im_impl(d.reshape((1,) + tuple(cols_shape[1:])), **col2im_params)
        if out is None:
            out = np.empty((n,) + r.shape[1:], r.dtype)
        out[i] = r[0]
    return out


_DOT_COL2IM = _LoweredOp("dot_col2im", _dot_col2im_impl)


def _fuse_dot_col2im(jaxpr: Jaxpr) -> Jaxpr:
    """``conv_patches_transpose(reshape(dot_general(x, y)))`` batched over axis 0, as in a convolution's input
    gradient, becomes one step that never materializes the whole patch gradient (25 MB for a (64, 16, 28, 28)
    input and a 3x3 kernel): each example's product is folded back while it is in cache."""
    uses = use_counts(jaxpr)
    producer = {v: e for e in jaxpr.eqns for v in e.outputs}
    replace: dict = {}
    drop: set = set()
    for e in jaxpr.eqns:
        if e.prim.name != "conv_patches_transpose" or e.params.get("channels_last", True):
            continue
        r = e.inputs[0]
        re = producer.get(r) if type(r) is Var else None
        if re is None or re.prim.name != "reshape" or uses.get(r) != 1:
            continue
        d = re.inputs[0]
        de = producer.get(d) if type(d) is Var else None
        if de is None or de.prim.name != "dot_general" or uses.get(d) != 1 or "preferred_element_type" in de.params:
            continue
        (_, _), (lb, rb) = de.params["dimension_numbers"]
        if not lb or lb[0] != 0 or rb[0] != 0 or d.aval.shape[0] != r.aval.shape[0]:
            continue
        params = {
            "dimension_numbers": de.params["dimension_numbers"],
            "cols_shape": tuple(r.aval.shape),
            "col2im_params": dict(e.params),
        }
        replace[id(e)] = Eqn(_DOT_COL2IM, list(de.inputs), params, list(e.outputs), e.source)
        drop.update((id(re), id(de)))
    if not replace:
        return jaxpr
    eqns = [replace.get(id(e), e) for e in jaxpr.eqns if id(e) not in drop]
    out = Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars)
    out.cache = jaxpr.cache
    return out


# ---------------------------------------------------------------------------------------------------------------
# Fusion planning: group maximal elementwise regions per iteration shape

_VIEW_PRIMS = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "rev", "squeeze"})


def _kernel_name(eqn) -> str | None:
    prim = eqn.prim
    if prim.family in ("unary", "binary", "select"):
        name = prim.kernel or prim.name
    elif prim.name == "convert_element_type":
        name = "convert"
    else:
        return None
    if name == "convert_element_type":
        name = "convert"
    dts = [a.aval.dtype for a in eqn.inputs]
    if not fusion.supports(name, dts, eqn.outputs[0].aval.dtype):
        return None
    if any(a.aval.ndim > eqn.outputs[0].aval.ndim for a in eqn.inputs):
        return None
    return name


class Group:
    __slots__ = ("shape", "eqns", "names", "vars", "inputs", "outputs", "reduction", "split", "level")

    def __init__(self, shape):
        self.shape = shape
        self.eqns: list = []
        self.names: list = []
        self.vars: set = set()
        self.inputs: list = []
        self.outputs: list = []
        self.reduction = None  # a reduce_* equation fed by the group, computed in the same loop nest
        # staged (row) groups: trailing reductions over the axes after ``split`` and what consumes them per row;
        # level maps each member value to (is_row_level, stage)
        self.split: int | None = None
        self.level: dict = {}

    @property
    def staged(self) -> bool:
        return self.split is not None


_REDUCTIONS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min"}


def _fusible_reduction(eqn, g) -> bool:
    kind = _REDUCTIONS.get(eqn.prim.name)
    if kind is None or g is None or g.reduction is not None or g.staged:
        return False
    x = eqn.inputs[0]
    if type(x) is not Var or x not in g.vars or tuple(x.aval.shape) != tuple(g.shape):
        return False
    d = x.aval.dtype
    if d not in fusion.REDUCIBLE_DTYPES or (kind == "sum" and d == np.dtype(np.bool_)):
        return False
    axes = tuple(eqn.params["axes"])
    r = len(g.shape)
    k = len(axes)
    return k > 0 and (axes == tuple(range(k)) or axes == tuple(range(r - k, r)))


def _segments_ok(shape: tuple, full: tuple, split: int) -> bool:
    """Whether an operand of ``shape`` (padded to the group's rank) is whole or broadcast on each side of split."""
    a, b = shape[:split], shape[split:]
    return (a == full[:split] or all(n == 1 for n in a)) and (b == full[split:] or all(n == 1 for n in b))


def _elem_operand_ok(a, g) -> bool:
    shape = tuple(a.aval.shape)
    r = len(g.shape)
    return len(shape) <= r and _segments_ok((1,) * (r - len(shape)) + shape, tuple(g.shape), g.split)


def _row_shapes(g) -> tuple:
    rows = tuple(g.shape[: g.split])
    return rows, rows + (1,) * (len(g.shape) - g.split)


def _trailing_reduction(eqn, g) -> bool:
    """A sum/max/min over exactly the group's trailing axes, of a value the group can read per element."""
    kind = _REDUCTIONS.get(eqn.prim.name)
    x = eqn.inputs[0]
    if kind is None or type(x) is not Var or tuple(x.aval.shape) != tuple(g.shape):
        return False
    d = x.aval.dtype
    if d not in fusion.REDUCIBLE_DTYPES or (kind == "sum" and d == np.dtype(np.bool_)):
        return False
    r = len(g.shape)
    axes = tuple(sorted(eqn.params["axes"]))
    return len(axes) > 0 and axes == tuple(range(r - len(axes), r)) and (g.split is None or axes[0] == g.split)


def _start_staged(g, eqn) -> bool:
    """Turn ``g`` into a staged group reducing over the trailing axes of ``eqn``; False if its operands don't
    split into whole-or-broadcast row and column parts."""
    split = len(g.shape) - len(eqn.params["axes"])
    g.split = split
    if not all(_elem_operand_ok(a, g) for e in g.eqns for a in e.inputs if type(a) is not Var or a not in g.vars):
        g.split = None
        return False
    for v in g.vars:
        g.level[v] = (False, 0)
    return True


def _absorb(g, eqn) -> bool:
    """Add ``eqn`` to the staged group ``g`` if it is a trailing reduction of a member, a keepdims reshape of a
    row-level member, or an elementwise op on members at element or row level. Records its level."""
    name = eqn.prim.name
    if eqn.prim.multiple_results or len(eqn.outputs) != 1:
        return False
    out = eqn.outputs[0]
    oshape = tuple(out.aval.shape)
    level = g.level
    if name in _REDUCTIONS:
        x = eqn.inputs[0]
        if not _trailing_reduction(eqn, g):
            return False
        if x in level:
            row, st = level[x]
            if row:
                return False
        elif not _elem_operand_ok(x, g):
            return False
        else:
            st = 0
        level[out] = (True, st + 1)
        return True
    row_shapes = _row_shapes(g)
    if name in ("reshape", "broadcast_in_dim"):
        x = eqn.inputs[0]
        if type(x) is Var and x in level and level[x][0] and oshape in row_shapes and tuple(x.aval.shape) in row_shapes:
            level[out] = level[x]
            return True
        return False
    if _kernel_name(eqn) is None:
        return False
    ins = [a for a in eqn.inputs if type(a) is Var or np.asarray(a.val).ndim > 0]
    if oshape == tuple(g.shape):
        st = 0
        for a in ins:
            if a in level:
                row, s = level[a]
                if row and tuple(a.aval.shape) != row_shapes[1] and a.aval.ndim != 0:
                    return False  # a rank-deficient row value would broadcast along the columns
                st = max(st, s)
            elif not _elem_operand_ok(a, g):
                return False
        level[out] = (False, st)
        return True
    if oshape in row_shapes:
        st = 0
        member = False
        for a in ins:
            if a in level:
                row, s = level[a]
                if not row:
                    return False
                member = True
                st = max(st, s)
            elif tuple(a.aval.shape) not in ((), oshape):
                return False
        if not member:
            return False
        level[out] = (True, st)
        return True
    return False


def plan(jaxpr: Jaxpr, staged: bool = True) -> list:
    """Split the equations into fused groups and single steps, in a valid execution order.

    With ``staged``, a reduction over the trailing axes of a group keeps the group open: the per-row results, ops
    on them and elementwise ops consuming them join it as later passes over the same rows (a softmax or a
    normalization becomes one kernel)."""
    consumers: dict = {}
    for i, e in enumerate(jaxpr.eqns):
        for a in e.inputs:
            if type(a) is Var:
                consumers.setdefault(a, []).append(i)
    outset = {v for v in jaxpr.outvars if type(v) is Var}
    out: list = []
    open_groups: dict = {}
    owner: dict = {}

    def close(g):
        if open_groups.get(g.shape) is g:
            del open_groups[g.shape]
        for v in g.vars:
            owner.pop(v, None)
        if g.reduction is None and not g.staged:
            if not g.shape:
                # scalar ops run their impls: a kernel would cost a compile (0.15 s and more) to save nothing
                out.extend(("eqn", e) for e in g.eqns)
                return
            parts = _components(g)
            if len(parts) > 1:
                names = {id(e): n for e, n in zip(g.eqns, g.names)}
                for part in parts:
                    sub = Group(g.shape)
                    sub.eqns = part
                    sub.names = [names[id(e)] for e in part]
                    sub.vars = {v for e in part for v in e.outputs}
                    emit(sub)
                return
        emit(g)

    def emit(g):
        if len(g.eqns) == 1 and g.reduction is None:
            out.append(("eqn", g.eqns[0]))
            return
        member_ids = {id(e) for e in g.eqns}
        ids = {i for i, e in enumerate(jaxpr.eqns) if id(e) in member_ids or e is g.reduction}
        g.outputs = [
            v for e in g.eqns for v in e.outputs if v in outset or any(c not in ids for c in consumers.get(v, ()))
        ]
        ext = []
        seen = set()
        for e in g.eqns:
            for a in e.inputs:
                if type(a) is Var and a not in g.vars and a not in seen:
                    seen.add(a)
                    ext.append(a)
                elif type(a) is Literal and np.asarray(a.val).ndim > 0 and id(a) not in seen:
                    seen.add(id(a))
                    ext.append(a)
        g.inputs = ext
        out.append(("group", g))

    def join(g, eqn, name):
        g.eqns.append(eqn)
        g.names.append(name)
        for v in eqn.outputs:
            g.vars.add(v)
            owner[v] = g

    for eqn in jaxpr.eqns:
        shape = eqn.outputs[0].aval.shape if eqn.outputs else None
        if staged:
            sg = None
            for a in eqn.inputs:
                if type(a) is Var and a in owner and owner[a].staged:
                    sg = owner[a] if sg in (None, owner[a]) else False
            if sg is None and shape is not None:
                cand = open_groups.get(shape)
                sg = cand if cand is not None and cand.staged else None
            if sg:
                for a in eqn.inputs:  # an operand still being built by another group must be computed first
                    if type(a) is Var and a in owner and owner[a] is not sg and not owner[a].staged:
                        close(owner[a])
                if _absorb(sg, eqn):
                    join(sg, eqn, _kernel_name(eqn) or eqn.prim.name)
                    continue
            if shape is not None and open_groups.get(shape) is not None and open_groups[shape].staged:
                close(open_groups[shape])
        if eqn.prim.name in _REDUCTIONS and type(eqn.inputs[0]) is Var:
            g = owner.get(eqn.inputs[0])
            if staged and eqn.inputs[0].aval.ndim > 0:
                if g is None and eqn.inputs[0].aval.size > 0:
                    g = Group(tuple(eqn.inputs[0].aval.shape))
                    g.split = len(g.shape) - len(eqn.params["axes"])
                    if _trailing_reduction(eqn, g) and open_groups.get(g.shape) is None and _absorb(g, eqn):
                        open_groups[g.shape] = g
                        join(g, eqn, eqn.prim.name)
                        continue
                    g = None
                elif g is not None and not g.staged and _fusible_reduction(eqn, g) and _trailing_reduction(eqn, g):
                    if open_groups.get(g.shape) is g and _start_staged(g, eqn) and _absorb(g, eqn):
                        join(g, eqn, eqn.prim.name)
                        continue
            if _fusible_reduction(eqn, g):
                g.reduction = eqn
                close(g)
                continue
        name = _kernel_name(eqn) if not eqn.prim.multiple_results else None
        g = open_groups.get(shape) if name is not None else None
        for a in eqn.inputs:
            if type(a) is Var and a in owner and owner[a] is not g:
                close(owner[a])
        if name is None:
            out.append(("eqn", eqn))
            continue
        if g is None or open_groups.get(shape) is not g:
            g = Group(shape)
            open_groups[shape] = g
        g.eqns.append(eqn)
        g.names.append(name)
        for v in eqn.outputs:
            g.vars.add(v)
            owner[v] = g
    for g in list(open_groups.values()):
        close(g)
    return out


def _components(g) -> list[list]:
    """``g``'s equations in groups that share no array: neither a value computed in ``g`` nor a non-scalar input.

    Independent computations of one shape (say, the Adam updates of two parameters of the same shape) then get a
    kernel each, the same kernel whatever else runs beside them, instead of one more kernel to compile per
    combination. Those reading the same array stay together, so it is read once."""
    parent = list(range(len(g.eqns)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict = {}
    for i, e in enumerate(g.eqns):
        keys = [v for v in e.outputs] + [a for a in e.inputs if type(a) is Var and (a in g.vars or a.aval.shape)]
        for v in keys:
            j = first.setdefault(v, i)
            parent[find(i)] = find(j)
    parts: dict = {}
    for i, e in enumerate(g.eqns):
        parts.setdefault(find(i), []).append(e)
    return list(parts.values())


def _const_ref(a: Literal) -> tuple:
    """A scalar literal as a kernel constant reference."""
    v = np.asarray(a.val, dtype=a.aval.dtype)
    return ("const", repr(v.item()), a.aval.dtype.name)


def _op_param(e, name: str):
    """The one parameter a kernel op takes: a conversion's target dtype or an integer power's exponent."""
    if name == "convert":
        return e.params["new_dtype"].name
    if e.prim.name == "integer_pow":
        return e.params["y"]
    return None


class FusedStep:
    """Runs one fused group: prepares inputs (zero-stride axes become size 1), picks the kernel for the
    broadcast pattern, allocates outputs and calls it."""

    def __init__(self, group: Group):
        self.shape = tuple(group.shape)
        self.rank = len(self.shape)
        index = {v: i for i, v in enumerate(group.inputs) if type(v) is Var}
        lit_index = {id(v): i for i, v in enumerate(group.inputs) if type(v) is Literal}
        ops = []
        pos = {}
        for j, (e, name) in enumerate(zip(group.eqns, group.names)):
            args = []
            for a in e.inputs:
                if type(a) is Literal:
                    if id(a) in lit_index:
                        args.append(("in", lit_index[id(a)]))
                    else:
                        args.append(_const_ref(a))
                elif a in pos:
                    args.append(("op", pos[a]))
                else:
                    args.append(("in", index[a]))
            ops.append((name, tuple(args), e.outputs[0].aval.dtype.name, _op_param(e, name)))
            pos[e.outputs[0]] = j
        self.ops = tuple(fusion.OpSpec(n, a, d, p) for n, a, d, p in ops)
        self.out_ops = tuple(pos[v] for v in group.outputs)
        self.out_dtypes = [v.aval.dtype for v in group.outputs]
        red = group.reduction
        self.red = None
        if red is not None:
            axes = tuple(red.params["axes"])
            r = len(self.shape)
            leading = axes == tuple(range(len(axes))) and not (
                axes == tuple(range(r - len(axes), r)) and len(axes) == r
            )
            self.red = (
                _REDUCTIONS[red.prim.name],
                pos[red.inputs[0]],
                leading,
                len(axes),
                red.outputs[0].aval.dtype,
                tuple(red.outputs[0].aval.shape),
            )
            group.outputs = list(group.outputs) + [red.outputs[0]]
        self.in_dtypes = [a.aval.dtype.name for a in group.inputs]
        self.in_ndims = [a.aval.ndim for a in group.inputs]
        self.kernels: dict = {}
        self.plans: dict = {}
        self.label = ", ".join(group.names)
        # the kernel as planned from the static shapes (what .lower() shows before any call)
        shapes = [(1,) * (self.rank - a.aval.ndim) + tuple(a.aval.shape) for a in group.inputs]
        cshape, cins, csplit = self._collapse(shapes)
        self.static_spec = self._spec(cshape, cins, csplit)
        self.source = fusion.generate_source(self.static_spec, self._row_calls(self.static_spec, cshape))

    def _row_calls(self, spec, cshape) -> bool:
        return self.red is None and len(cshape) >= 2 and fusion.row_calls_pay(spec, cshape[-1])

    def _collapse(self, shapes):
        if self.red is None:
            cshape, cins = fusion.collapse(self.shape, shapes)
            return cshape, cins, None
        _, _, leading, k, _, _ = self.red
        r = len(self.shape)
        split = k if leading else r - k
        return fusion.collapse_segments(self.shape, shapes, split)

    def _spec(self, cshape, cins, csplit):
        reduction = None
        if self.red is not None:
            kind, op, leading, _, dtype, _ = self.red
            n_red = csplit if leading else len(cshape) - csplit
            # half-precision reductions accumulate in (and are written from) a float32 buffer
            acc = np.dtype(np.float32) if dtype in fusion.HALF else dtype
            reduction = fusion.ReductionSpec(kind, op, n_red, leading, acc.name)
        return fusion.KernelSpec(
            rank=len(cshape),
            inputs=tuple(
                fusion.InputSpec(d, tuple(s == 1 and o != 1 for s, o in zip(sh, cshape)))
                for d, sh in zip(self.in_dtypes, cins)
            ),
            ops=self.ops,
            outputs=self.out_ops,
            reduction=reduction,
        )

    def _plan(self, arrays):
        """How to call the kernel for these input layouts: per input, the reshapes and slice that give its collapsed
        view; the kernel; the collapsed shape and the reduction buffer's shape."""
        r = self.rank
        views = []
        shapes = []
        steps = []
        for a, nd in zip(arrays, self.in_ndims):
            pad = None
            if nd < r:
                pad = (1,) * (r - nd) + a.shape
                a = a.reshape(pad)
            sl = None
            if 0 in a.strides:
                # a broadcast view: read it as size 1 on its zero-stride axes (no copy)
                sl = tuple(slice(0, 1) if (s == 0 and n > 1) else slice(None) for s, n in zip(a.strides, a.shape))
                a = a[sl]
            views.append(a)
            shapes.append(a.shape)
            steps.append((pad, sl))
        cshape, cins, csplit = self._collapse(shapes)
        spec = self._spec(cshape, cins, csplit)
        row_calls = self._row_calls(spec, cshape)
        key = tuple(tuple(s == 1 and o != 1 for s, o in zip(sh, cshape)) for sh in cins)
        key += (len(cshape), csplit, row_calls)
        k = self.kernels.get(key)
        if k is None:
            k = self.kernels[key] = diskcache.load_kernel(fusion.generate_source(spec, row_calls))
        ins = tuple((pad, sl, tuple(c), fusion.CARRIER.get(a.dtype)) for (pad, sl), c, a in zip(steps, cins, views))
        red_shape = None
        if self.red is not None:
            leading = self.red[2]
            red_shape = (cshape[csplit:] if leading else cshape[:csplit]) or (1,)
        n = math.prod(self.shape)
        outs = tuple((d, fusion.CARRIER.get(d), n * d.itemsize >= _ALIAS_MIN_BYTES) for d in self.out_dtypes)
        bufs = tuple(fusion.fused_buffer_dtypes(spec, row_calls))
        return k, ins, tuple(cshape), np.asarray(cshape, dtype=np.int64), outs, red_shape, bufs

    def __call__(self, *arrays):
        try:
            sig = tuple([(a.shape, a.strides, a.dtype) for a in arrays])
        except AttributeError:  # a Python scalar from a NumPy fallback step
            arrays = [np.asarray(a) for a in arrays]
            sig = tuple([(a.shape, a.strides, a.dtype) for a in arrays])
        p = self.plans.get(sig)
        if p is None:
            p = self.plans[sig] = self._plan(arrays)
        k, in_plan, cshape, dims, out_plan, red_shape, bufs = p
        args = []
        for a, (pad, sl, c, half) in zip(arrays, in_plan):
            if pad is not None:
                a = a.reshape(pad)
            if sl is not None:
                a = a[sl]
            if a.shape != c:
                a = a.reshape(c)
            args.append(a if half is None else a.view(half))
        shape = self.shape
        ref = _big_input(arrays)
        outs = []
        for d, half, big in out_plan:
            o = _placed_empty(shape, d, ref, 1) if big and ref is not None else np.empty(shape, d)
            outs.append(o)
            if shape != cshape:
                o = o.reshape(cshape)
            args.append(o if half is None else o.view(half))
        for b, d in enumerate(bufs):
            args.append(_row_buffer(cshape[-1], d, ref, b))
        if red_shape is None:
            k(*args, dims)
            return outs
        dtype, out_shape = self.red[4], self.red[5]
        half = dtype in fusion.HALF
        red = np.empty(red_shape, np.float32 if half else dtype)
        k(*args, red, dims)
        red = red.astype(dtype) if half else red
        outs.append(red.reshape(out_shape))
        return outs


class StagedStep:
    """Runs one staged group: a (rows, cols) kernel whose passes over each row compute elementwise values,
    trailing reductions of them, per-row ops on the results and the elementwise ops that consume those."""

    def __init__(self, group: Group):
        shape = tuple(group.shape)
        r, split = len(shape), group.split
        self.shape = shape
        rows, cols = math.prod(shape[:split]), math.prod(shape[split:])
        self.dims = np.asarray([rows, cols], dtype=np.int64)
        self.cols = cols
        level = group.level
        entry: dict = {}  # (input position, row mode) -> staged input index
        self.in_prep: list = []  # per staged input: (group input position, collapsed 2-D shape, bits view dtype)
        in_specs: list = []
        index = {(v if type(v) is Var else id(v)): i for i, v in enumerate(group.inputs)}

        def inp(a, row_mode: bool):
            i = index[a if type(a) is Var else id(a)]
            key = (i, row_mode)
            if key not in entry:
                sh = tuple(a.aval.shape)
                pad = sh + (1,) * (r - len(sh)) if row_mode else (1,) * (r - len(sh)) + sh
                has_rows = any(n != 1 for n in pad[:split])
                has_cols = any(n != 1 for n in pad[split:])
                kind = {(True, True): "full", (True, False): "row", (False, True): "col"}.get(
                    (has_rows, has_cols), "scalar"
                )
                entry[key] = len(in_specs)
                in_specs.append((a.aval.dtype.name, kind))
                self.in_prep.append(
                    (i, (rows if has_rows else 1, cols if has_cols else 1), fusion.CARRIER.get(a.aval.dtype))
                )
            return ("in", entry[key])

        pos: dict = {}
        ops: list = []
        for e, name in zip(group.eqns, group.names):
            out = e.outputs[0]
            row, stage = level[out]
            if e.prim.name in ("reshape", "broadcast_in_dim"):
                pos[out] = pos[e.inputs[0]]
                continue
            args = []
            for a in e.inputs:
                if type(a) is Literal and np.asarray(a.val).ndim == 0:
                    args.append(_const_ref(a))
                elif type(a) is Var and a in pos:
                    args.append(("op", pos[a]))
                else:
                    args.append(inp(a, row))
            if e.prim.name in _REDUCTIONS:
                ops.append(
                    fusion.StagedOp("reduce", tuple(args), out.aval.dtype.name, _REDUCTIONS[e.prim.name], True, stage)
                )
            else:
                ops.append(fusion.StagedOp(name, tuple(args), out.aval.dtype.name, _op_param(e, name), row, stage))
            pos[out] = len(ops) - 1
        # the kernel writes each op once: a row value that leaves the group both as itself and as its keepdims
        # reshape is one array, the other output a view of it
        self.out_plan = []
        kernel_outs: list = []
        self.out_views: list | None = []
        for v in group.outputs:
            j = pos[v]
            shape = tuple(v.aval.shape)
            if j in kernel_outs:
                self.out_views.append((kernel_outs.index(j), shape))
                continue
            self.out_views.append((len(kernel_outs), None))
            kernel_outs.append(j)
            d = v.aval.dtype
            big = math.prod(shape) * d.itemsize >= _ALIAS_MIN_BYTES
            self.out_plan.append((shape, d, (rows,) if ops[j].row else (rows, cols), fusion.CARRIER.get(d), big))
        if len(kernel_outs) == len(group.outputs):
            self.out_views = None
        n_stages = 1 + max((op.stage - (1 if op.row else 0) for op in ops), default=0)
        spec = fusion.StagedSpec(tuple(in_specs), tuple(ops), tuple(kernel_outs), n_stages)
        row_calls = fusion.row_calls_pay(spec, cols)
        # long rows whose math spills are also split into several passes over the row
        self.spec = fusion.split_passes(spec) if row_calls else spec
        self.source = fusion.generate_staged_source(self.spec, row_calls=row_calls)
        self.buf_dtypes = fusion.staged_buffer_dtypes(self.spec)
        self.label = ", ".join(group.names)
        self._kernel = None

    def __call__(self, *arrays):
        k = self._kernel
        if k is None:
            k = self._kernel = diskcache.load_kernel(self.source)
        args = []
        for i, cshape, half in self.in_prep:
            a = arrays[i]
            if type(a) is not np.ndarray:
                a = np.asarray(a)
            if a.shape != cshape:
                a = a.reshape(cshape)
            args.append(a if half is None else a.view(half))
        ref = _big_input(arrays)
        outs = []
        for shape, d, ks, half, big in self.out_plan:
            o = _placed_empty(shape, d, ref, 1) if big and ref is not None else np.empty(shape, d)
            outs.append(o)
            if o.shape != ks:
                o = o.reshape(ks)
            args.append(o if half is None else o.view(half))
        for b, d in enumerate(self.buf_dtypes):
            args.append(_row_buffer(self.cols, d, ref, b))
        k(*args, self.dims)
        if self.out_views is None:
            return outs
        return [outs[i] if shape is None else outs[i].reshape(shape) for i, shape in self.out_views]


_ALIAS_MIN_BYTES = 1 << 16


def _placed_empty(shape, dtype, ref, half_pages: int) -> np.ndarray:
    """``np.empty(shape, dtype)`` whose address modulo 4 KiB is ``ref``'s plus ``half_pages`` half pages.

    A loop storing into an array whose address modulo 4 KiB sits just below that of an array it loads from stalls
    on false store-to-load dependencies (4K aliasing): 35 % slower for a row kernel over (1024, 1024) float32,
    depending only on where malloc happened to put the output.
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + 4096, np.uint8)
    off = (ref.ctypes.data + 2048 * half_pages - raw.ctypes.data) % 4096
    return raw[off : off + nbytes].view(dtype).reshape(shape)


def _row_buffer(n: int, dtype, ref, k: int) -> np.ndarray:
    """Row buffer ``k`` of a kernel's passes over a row, half a page from the previous one modulo 4 KiB (the first
    half a page from ``ref``): each pass loads from one and stores into the next."""
    return np.empty(n, dtype) if ref is None else _placed_empty((n,), dtype, ref, k + 1)


def _big_input(arrays):
    for a in arrays:
        if type(a) is np.ndarray and a.nbytes >= _ALIAS_MIN_BYTES:
            return a
    return None


def _u16(a):
    # numba computes with neither float16 nor bfloat16 arrays: kernels read and write their bits as uint16
    return a.view(np.uint16) if a.dtype in fusion.HALF else a


def build(group: Group) -> FusedStep | StagedStep:
    return StagedStep(group) if group.staged else FusedStep(group)
