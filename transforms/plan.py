"""The plan of a compiled program: pure data saying what each step computes and where each value lives.

``plan_program(jaxpr, emitter)`` rewrites what only lowered programs do (``fuse_dot_col2im``), groups the
equations (``fusion_plan.plan_groups``), describes each fused group as a region (``FusedRegion``: one loop nest,
optionally ending in a reduction; ``StagedRegion``: passes over the rows of a (rows, cols) space) and numbers
every value: each step reads and writes slots, and lists the slots whose last reader it is, so the program can
drop them. Nothing here generates code or touches array data: ``transforms/steps.py`` makes each planned step
executable through an emitter, ``transforms/program.py`` runs them.

>>> import funclib as fl
>>> from funclib.kernels.numba_cpu import CPU
>>> jaxpr = fl.jit(lambda x, w: fl.softmax(x @ w, axis=-1)).trace(fl.ones((2, 3)), fl.ones((3, 4))).jaxpr
>>> plan = plan_program(jaxpr, CPU)
>>> [(s.kind, s.ins, s.outs) for s in plan.steps]
[('eqn', [0, 1], [2]), ('staged', [2], [3])]
>>> softmax = plan.steps[1].what  # one kernel: a pass for the row max, one for the sum of exps, one to divide
>>> softmax.rows, softmax.cols, softmax.spec.n_stages
(2, 4, 3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from funclib.kernels import fusion
from funclib.kernels.backend import Emitter

from funclib import config
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, use_counts
from funclib.primitives.collectives import ExternalAxis

from .fusion_plan import REDUCTIONS, VIEW_PRIMS, Group, kernel_name, plan_groups


@dataclass(frozen=True)
class RegionReduction:
    """A sum/max/min over the leading or trailing axes of a fused region, computed in its loop nest."""

    kind: str  # "sum" | "max" | "min"
    op: int  # index of the reduced op
    leading: bool
    n_axes: int
    dtype: np.dtype
    shape: tuple[int, ...]  # of the result


@dataclass(frozen=True)
class FusedRegion:
    """One loop nest over ``shape``: the scalar ops (``fusion.OpSpec`` over inputs, earlier ops and constants),
    which ops are stored at full shape, and an optional reduction."""

    shape: tuple[int, ...]
    in_dtypes: tuple[str, ...]
    in_shapes: tuple[tuple[int, ...], ...]  # as traced
    ops: tuple[fusion.OpSpec, ...]
    outputs: tuple[int, ...]  # op index of each full-shape output
    out_dtypes: tuple[np.dtype, ...]
    reduction: RegionReduction | None

    def collapse(self, shapes: list[tuple[int, ...]]) -> tuple[tuple[int, ...], list, int | None]:
        """Collapsed loop shape, input shapes and reduction boundary for inputs of ``shapes`` (padded to rank)."""
        if self.reduction is None:
            cshape, cins = fusion.collapse(self.shape, shapes)
            return cshape, cins, None
        r = len(self.shape)
        split = self.reduction.n_axes if self.reduction.leading else r - self.reduction.n_axes
        return fusion.collapse_segments(self.shape, shapes, split)

    def kernel_spec(self, cshape: tuple[int, ...], cins: list, csplit: int | None) -> fusion.KernelSpec:
        """The kernel for one collapsed layout (``collapse``'s result)."""
        reduction = None
        red = self.reduction
        if red is not None:
            n_red = csplit if red.leading else len(cshape) - csplit
            # half-precision reductions accumulate in (and are written from) a float32 buffer
            acc = np.dtype(np.float32) if red.dtype in fusion.HALF else red.dtype
            reduction = fusion.ReductionSpec(red.kind, red.op, n_red, red.leading, acc.name)
        return fusion.KernelSpec(
            rank=len(cshape),
            inputs=tuple(
                fusion.InputSpec(d, tuple(s == 1 and o != 1 for s, o in zip(sh, cshape)))
                for d, sh in zip(self.in_dtypes, cins)
            ),
            ops=self.ops,
            outputs=self.outputs,
            reduction=reduction,
        )


@dataclass(frozen=True)
class StagedRegion:
    """A kernel over ``rows`` x ``cols`` (``spec``: its passes over each row), with how each group input is read
    (``inputs``: group input position, 2-D shape, dtype) and each output written (``outputs``: shape, dtype,
    kernel-side shape); ``out_views`` maps group outputs to kernel outputs when two are one array (else None)."""

    shape: tuple[int, ...]
    rows: int
    cols: int
    inputs: tuple[tuple[int, tuple[int, int], np.dtype], ...]
    spec: fusion.StagedSpec
    outputs: tuple[tuple[tuple[int, ...], np.dtype, tuple[int, ...]], ...]
    out_views: tuple[tuple[int, tuple[int, ...] | None], ...] | None


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


def fused_region(group: Group) -> tuple[FusedRegion, list]:
    """The region of an elementwise group, and the values it produces (its reduction's last)."""
    index = {v: i for i, v in enumerate(group.inputs) if type(v) is Var}
    lit_index = {id(v): i for i, v in enumerate(group.inputs) if type(v) is Literal}
    ops = []
    pos: dict = {}
    for j, (e, name) in enumerate(zip(group.eqns, group.names)):
        args = []
        for a in e.inputs:
            if type(a) is Literal:
                args.append(("in", lit_index[id(a)]) if id(a) in lit_index else _const_ref(a))
            elif a in pos:
                args.append(("op", pos[a]))
            else:
                args.append(("in", index[a]))
        ops.append(fusion.OpSpec(name, tuple(args), e.outputs[0].aval.dtype.name, _op_param(e, name)))
        pos[e.outputs[0]] = j
    outputs = list(group.outputs)
    red = None
    r_eqn = group.reduction
    if r_eqn is not None:
        axes = tuple(r_eqn.params["axes"])
        r, k = len(group.shape), len(axes)
        leading = axes == tuple(range(k)) and not (axes == tuple(range(r - k, r)) and k == r)
        out = r_eqn.outputs[0]
        red = RegionReduction(
            REDUCTIONS[r_eqn.prim.name], pos[r_eqn.inputs[0]], leading, k, out.aval.dtype, tuple(out.aval.shape)
        )
        outputs.append(out)
    region = FusedRegion(
        shape=tuple(group.shape),
        in_dtypes=tuple(a.aval.dtype.name for a in group.inputs),
        in_shapes=tuple(tuple(a.aval.shape) for a in group.inputs),
        ops=tuple(ops),
        outputs=tuple(pos[v] for v in group.outputs),
        out_dtypes=tuple(v.aval.dtype for v in group.outputs),
        reduction=red,
    )
    return region, outputs


def staged_region(group: Group) -> StagedRegion:
    """The region of a staged group (its outputs are the group's)."""
    shape = tuple(group.shape)
    r, split = len(shape), group.split
    rows, cols = math.prod(shape[:split]), math.prod(shape[split:])
    level = group.level
    entry: dict = {}  # (input position, row mode) -> staged input index
    inputs: list = []
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
            inputs.append((i, (rows if has_rows else 1, cols if has_cols else 1), a.aval.dtype))
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
        if e.prim.name in REDUCTIONS:
            ops.append(
                fusion.StagedOp("reduce", tuple(args), out.aval.dtype.name, REDUCTIONS[e.prim.name], True, stage)
            )
        else:
            ops.append(fusion.StagedOp(name, tuple(args), out.aval.dtype.name, _op_param(e, name), row, stage))
        pos[out] = len(ops) - 1
    # the kernel writes each op once: a row value that leaves the group both as itself and as its keepdims
    # reshape is one array, the other output a view of it
    outputs: list = []
    kernel_outs: list = []
    out_views: list = []
    for v in group.outputs:
        j = pos[v]
        vshape = tuple(v.aval.shape)
        if j in kernel_outs:
            out_views.append((kernel_outs.index(j), vshape))
            continue
        out_views.append((len(kernel_outs), None))
        kernel_outs.append(j)
        outputs.append((vshape, v.aval.dtype, (rows,) if ops[j].row else (rows, cols)))
    n_stages = 1 + max((op.stage - (1 if op.row else 0) for op in ops), default=0)
    spec = fusion.StagedSpec(tuple(in_specs), tuple(ops), tuple(kernel_outs), n_stages)
    views = None if len(kernel_outs) == len(group.outputs) else tuple(out_views)
    return StagedRegion(shape, rows, cols, tuple(inputs), spec, tuple(outputs), views)


@dataclass
class PlannedStep:
    """One step of a program: ``kind`` "eqn" (``what`` an equation), "fused" (a ``FusedRegion``), "staged" (a
    ``StagedRegion``) or "guard" (``what`` an ``ExternalAxis`` whose ranks must agree before the program runs);
    the slots it reads and writes, whether it returns a list, and the slots nobody reads after it."""

    kind: str
    what: Any
    ins: list[int]
    outs: list[int]
    multi: bool
    label: str
    frees: tuple[int, ...] = ()


@dataclass
class ProgramPlan:
    """The steps of a program over numbered slots: its inputs', its constants' (with their values) and every
    step's outputs. ``jaxpr`` is the equations planned (after the lowering-only rewrites); ``fallbacks`` the
    primitives that run their NumPy impl."""

    jaxpr: Jaxpr
    in_slots: list[int]
    out_slots: list[int]
    consts: list[tuple[int, np.ndarray]]
    steps: list[PlannedStep]
    fallbacks: set[str]


# run by steps of their own (BLAS, a compiled body, a loop around compiled bodies, a view), not by a NumPy impl
_OWN_STEPS = VIEW_PRIMS | {"dot_general", "jit", "dot_col2im", "scan", "while", "cond"}


def plan_program(jaxpr: Jaxpr, emitter: Emitter, guard: bool = True) -> ProgramPlan:
    """Plan ``jaxpr`` (no constvars, or constvars with values in ``jaxpr.cache['consts']``) for ``emitter``.

    With ``guard``, the program starts with a guard step for each process axis its collectives use (see
    ``ExternalAxis.program_guard``); loop bodies leave it out, as their program's guard covers them.
    """
    fuse = config.fuse_kernels
    if fuse:
        jaxpr = fuse_dot_col2im(jaxpr)
    n = 0
    slot: dict = {}
    consts: list = []

    def new_slot():
        nonlocal n
        n += 1
        return n - 1

    for v, c in zip(jaxpr.constvars, jaxpr.cache.get("consts", [])):
        slot[v] = new_slot()
        consts.append((slot[v], np.asarray(c)))
    in_slots = []
    for v in jaxpr.invars:
        slot[v] = new_slot()
        in_slots.append(slot[v])

    def atom_slot(a):
        if type(a) is Literal:
            s = new_slot()
            consts.append((s, np.asarray(a.val, dtype=a.aval.dtype)))
            return s
        return slot[a]

    def out_slots(vs):
        outs = []
        for v in vs:
            slot[v] = new_slot()
            outs.append(slot[v])
        return outs

    steps = []
    fallbacks: set = set()
    if guard:
        steps += [PlannedStep("guard", ax, [], [], True, f"guard[{ax.name!r}]") for ax in external_axes(jaxpr, {})]
    for kind, item in plan_groups(jaxpr, emitter) if fuse else [("eqn", e) for e in jaxpr.eqns]:
        if kind == "eqn":
            eqn = item
            ins = [atom_slot(a) for a in eqn.inputs]
            name = eqn.prim.name
            own = name in _OWN_STEPS or eqn.prim.jit_step is not None
            if not own and kernel_name(eqn, emitter) is None:
                fallbacks.add(name)
            steps.append(PlannedStep("eqn", eqn, ins, out_slots(eqn.outputs), eqn.prim.multiple_results, name))
            continue
        if item.staged:
            region, outputs = staged_region(item), item.outputs
        else:
            region, outputs = fused_region(item)
        ins = [atom_slot(a) for a in item.inputs]
        label = f"fused[{', '.join(e.prim.name for e in item.eqns)}]"
        steps.append(PlannedStep("staged" if item.staged else "fused", region, ins, out_slots(outputs), True, label))
    outs = [atom_slot(a) for a in jaxpr.outvars]
    # free each slot after its last use (never inputs' caller-owned arrays: dropping our reference is harmless)
    last_use: dict = {}
    for i, st in enumerate(steps):
        for s in st.ins:
            last_use[s] = i
    keep = set(outs)
    frees_at: dict = {}
    for s, i in last_use.items():
        if s not in keep:
            frees_at.setdefault(i, []).append(s)
    for i, st in enumerate(steps):
        st.frees = tuple(frees_at.get(i, ()))
    return ProgramPlan(jaxpr, in_slots, outs, consts, steps, fallbacks)


def external_axes(jaxpr: Jaxpr, found: dict) -> dict:
    """The process axes that collectives in ``jaxpr`` act over, at any depth, in order of appearance."""
    for e in jaxpr.eqns:
        if getattr(e.prim, "collective", False):
            for a in e.params["axes"]:
                if isinstance(a, ExternalAxis):
                    found.setdefault(a, None)
        for v in e.params.values():
            for sub in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(sub, (Jaxpr, ClosedJaxpr)):
                    external_axes(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub, found)
    return found


class LoweredOp:
    """An operation that exists only in lowered programs, never in a trace: a name (``steps.LOWERED`` runs it)."""

    multiple_results = False
    family = "lowered"
    kernel = None
    jit_step = None

    def __init__(self, name: str):
        self.name = name


DOT_COL2IM = LoweredOp("dot_col2im")


def fuse_dot_col2im(jaxpr: Jaxpr) -> Jaxpr:
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
        replace[id(e)] = Eqn(DOT_COL2IM, list(de.inputs), params, list(e.outputs), e.source)
        drop.update((id(re), id(de)))
    if not replace:
        return jaxpr
    eqns = [replace.get(id(e), e) for e in jaxpr.eqns if id(e) not in drop]
    out = Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars)
    out.cache = jaxpr.cache
    return out
