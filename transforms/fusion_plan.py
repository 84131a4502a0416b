"""Which equations of a jaxpr fuse: maximal elementwise regions per iteration shape, the reductions that join
them, and staged groups (a reduction over the trailing axes and what consumes it per row).

``plan_groups(jaxpr, emitter)`` returns the equations in execution order, as single equations and ``Group``s; what
can be fused is the emitter's to say (``Emitter.supports``, ``Emitter.reducible``), how it is grouped is the same
for every device. ``transforms/plan.py`` turns the groups into regions and the whole program into a plan.
"""

from __future__ import annotations

import numpy as np
from funclib.kernels.backend import Emitter

from funclib.jaxpr import Jaxpr, Literal, Var

# primitives a program runs as NumPy views of their operand, never as kernels
VIEW_PRIMS = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "rev", "squeeze"})


def kernel_name(eqn, emitter: Emitter) -> str | None:
    """The fused-kernel op computing ``eqn``, or None if it cannot be fused for ``emitter``."""
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
    if not emitter.supports(name, dts, eqn.outputs[0].aval.dtype):
        return None
    if any(a.aval.ndim > eqn.outputs[0].aval.ndim for a in eqn.inputs):
        return None
    return name


class Group:
    """Equations fused into one kernel over ``shape`` (``names``: their kernel ops), with the values it reads
    (``inputs``) and those read after it (``outputs``), filled in when the group is closed."""

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


REDUCTIONS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min"}


def _fusible_reduction(eqn, g, emitter) -> bool:
    kind = REDUCTIONS.get(eqn.prim.name)
    if kind is None or g is None or g.reduction is not None or g.staged:
        return False
    x = eqn.inputs[0]
    if type(x) is not Var or x not in g.vars or tuple(x.aval.shape) != tuple(g.shape):
        return False
    d = x.aval.dtype
    if not emitter.reducible(d) or (kind == "sum" and d == np.dtype(np.bool_)):
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


def _trailing_reduction(eqn, g, emitter) -> bool:
    """A sum/max/min over exactly the group's trailing axes, of a value the group can read per element."""
    kind = REDUCTIONS.get(eqn.prim.name)
    x = eqn.inputs[0]
    if kind is None or type(x) is not Var or tuple(x.aval.shape) != tuple(g.shape):
        return False
    d = x.aval.dtype
    if not emitter.reducible(d) or (kind == "sum" and d == np.dtype(np.bool_)):
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


def _absorb(g, eqn, emitter) -> bool:
    """Add ``eqn`` to the staged group ``g`` if it is a trailing reduction of a member, a keepdims reshape of a
    row-level member, or an elementwise op on members at element or row level. Records its level."""
    name = eqn.prim.name
    if eqn.prim.multiple_results or len(eqn.outputs) != 1:
        return False
    out = eqn.outputs[0]
    oshape = tuple(out.aval.shape)
    level = g.level
    if name in REDUCTIONS:
        x = eqn.inputs[0]
        if not _trailing_reduction(eqn, g, emitter):
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
    if kernel_name(eqn, emitter) is None:
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


def plan_groups(jaxpr: Jaxpr, emitter: Emitter, staged: bool = True, scalars: bool = False) -> list:
    """Split the equations into fused groups and single steps, in a valid execution order.

    With ``staged``, a reduction over the trailing axes of a group keeps the group open: the per-row results, ops
    on them and elementwise ops consuming them join it as later passes over the same rows (a softmax or a
    normalization becomes one kernel). With ``scalars``, groups of 0-d ops stay groups (inside a generated
    loop they cost nothing to compile apart); otherwise they run as single steps."""
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
            if not g.shape and not scalars:
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

    # a device whose unfused elementwise ops cost more than a kernel of their own (the CPU's run NumPy's loops)
    single_kernels = getattr(emitter, "fuses_single_ops", False)

    def emit(g):
        if len(g.eqns) == 1 and g.reduction is None and not single_kernels:
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
                if _absorb(sg, eqn, emitter):
                    join(sg, eqn, kernel_name(eqn, emitter) or eqn.prim.name)
                    continue
            if shape is not None and open_groups.get(shape) is not None and open_groups[shape].staged:
                close(open_groups[shape])
        if eqn.prim.name in REDUCTIONS and type(eqn.inputs[0]) is Var:
            g = owner.get(eqn.inputs[0])
            if staged and eqn.inputs[0].aval.ndim > 0:
                if g is None and eqn.inputs[0].aval.size > 0:
                    g = Group(tuple(eqn.inputs[0].aval.shape))
                    g.split = len(g.shape) - len(eqn.params["axes"])
                    if (
                        _trailing_reduction(eqn, g, emitter)
                        and open_groups.get(g.shape) is None
                        and _absorb(g, eqn, emitter)
                    ):
                        open_groups[g.shape] = g
                        join(g, eqn, eqn.prim.name)
                        continue
                    g = None
                elif (
                    g is not None
                    and not g.staged
                    and _fusible_reduction(eqn, g, emitter)
                    and _trailing_reduction(eqn, g, emitter)
                ):
                    if open_groups.get(g.shape) is g and _start_staged(g, eqn) and _absorb(g, eqn, emitter):
                        join(g, eqn, eqn.prim.name)
                        continue
            if _fusible_reduction(eqn, g, emitter):
                g.reduction = eqn
                close(g)
                continue
        name = kernel_name(eqn, emitter) if not eqn.prim.multiple_results else None
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
