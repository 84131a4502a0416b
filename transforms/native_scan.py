"""A ``scan`` whose whole body lowers to numba runs as one generated loop (``funclib.kernels.loopgen``).

``native_scan(eqn, fallback, emitter)`` describes the body's equations as a ``loopgen.LoopSpec`` (the fusion
plan's elementwise regions with their reductions, stand-alone reductions, ``dot_general``, ``transpose``, ``reshape``,
``broadcast_in_dim``, ``slice`` and ``rev``) and asks the emitter for its loop kernel. A body with anything else
(another loop, a ``cond``, a gather, a sort, float16 values, ...) gives ``None`` and the caller keeps its executor
loop. If the generated kernel fails to
compile, the step logs it and runs ``fallback`` from then on, so results never depend on which path ran.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from funclib.kernels import fusion, loopgen
from funclib.kernels.backend import Emitter, Unsupported

from funclib.jaxpr import Literal, Var

from .fusion_plan import REDUCTIONS, Group, kernel_name, plan_groups
from .plan import fused_region

log = logging.getLogger("funclib.jit")


class NativeScan:
    """The executor step for a scan: runs the generated loop kernel; ``fallback`` if it cannot be compiled."""

    def __init__(
        self, kernel: Callable, body_consts: list, lit_consts: list, params: dict, fallback: Callable
    ):
        self.kernel = kernel
        self.source = kernel.source
        self.body_consts = body_consts
        self.lit_consts = lit_consts
        self.nc, self.ncar, self.length = params["num_consts"], params["num_carry"], params["length"]
        self.fallback = fallback
        self.failed = False
        self.ran = False

    def __call__(self, *args):
        if not self.failed:
            nc, ncar = self.nc, self.ncar
            try:
                carry, ys = self.kernel(
                    self.length,
                    self.body_consts + list(args[:nc]) + self.lit_consts,
                    args[nc : nc + ncar],
                    args[nc + ncar :],
                )
                self.ran = True
                return carry + ys
            except Exception as e:
                if self.ran:
                    raise
                # a body the generator describes but numba cannot compile: a generator limitation, not a user error
                log.warning(
                    "scan: the generated loop kernel failed (%s: %s); running the executor loop", type(e).__name__, e
                )
                self.failed = True
        return self.fallback(*args)


def native_scan(eqn, fallback: Callable, emitter: Emitter) -> NativeScan | None:
    """A ``NativeScan`` for this scan equation, or ``None`` if its body holds an unsupported step."""
    p = eqn.params
    body = p["jaxpr"]
    try:
        spec, consts, lit_consts = _describe(body, p, emitter)
        kernel = emitter.loop_kernel(spec)
    except Unsupported as e:
        log.debug("scan: executor loop (%s)", e)
        return None
    return NativeScan(kernel, consts, lit_consts, p, fallback)


def _describe(body, p, emitter):
    j = body.jaxpr
    consts = [np.asarray(getattr(c, "_value", c)) for c in body.consts]
    values: list = []
    ids: dict = {}
    lit_consts: list = []

    def new(aval) -> int:
        values.append(loopgen.Value(aval.dtype.name, tuple(aval.shape)))
        return len(values) - 1

    items = plan_groups(j, emitter, staged=False)
    # literal operands of non-elementwise steps, array literals, and literal body outputs become loop-invariant
    # inputs, after the scan's own constants
    lits: dict = {}
    for kind, item in items:
        if kind == "group":
            operands = item.inputs
        elif not item.prim.multiple_results and kernel_name(item, emitter) is not None:
            operands = _distinct_inputs(item.inputs)
        else:
            operands = item.inputs
        for a in operands:
            if type(a) is Literal:
                lits.setdefault(id(a), a)
    for a in j.outvars:
        if type(a) is Literal:
            lits.setdefault(id(a), a)
    for v in list(j.constvars) + list(j.invars[: p["num_consts"]]):
        ids[v] = new(v.aval)
    for key, a in lits.items():
        lit_consts.append(np.asarray(a.val, dtype=a.aval.dtype))
        ids[key] = new(a.aval)
    n_consts = len(values)
    for v in j.invars[p["num_consts"] :]:
        ids[v] = new(v.aval)
    n_in = len(values)
    steps: list = []

    def ref(a) -> int:
        return ids[a if type(a) is Var else id(a)]

    def out(v) -> int:
        ids[v] = new(v.aval)
        return ids[v]

    for kind, item in items:
        if kind == "group":
            steps.append(_region(item, ref, out))
            continue
        e = item
        name = e.prim.name
        if not e.prim.multiple_results and kernel_name(e, emitter) is not None:
            g = Group(e.outputs[0].aval.shape)
            g.eqns, g.names, g.vars = [e], [kernel_name(e, emitter)], set(e.outputs)
            g.inputs = _distinct_inputs(e.inputs)
            g.outputs = list(e.outputs)
            steps.append(_region(g, ref, out))
        elif name in REDUCTIONS:
            src = ref(e.inputs[0])
            dt = e.outputs[0].aval.dtype
            if name == "reduce_sum" and dt == np.dtype(np.bool_):
                raise Unsupported("a boolean sum")
            ops = (fusion.OpSpec("copy", (("in", 0),), dt.name),)
            axes = tuple(sorted(e.params["axes"]))
            red = loopgen.Reduction(REDUCTIONS[name], 0, axes, out(e.outputs[0]))
            steps.append(loopgen.Elementwise((src,), ops, (), tuple(e.inputs[0].aval.shape), red))
        elif name == "dot_general":
            if "preferred_element_type" in e.params:
                raise Unsupported("dot_general with a preferred_element_type")
            (lc, rc), (lb, rb) = e.params["dimension_numbers"]
            lhs, rhs = ref(e.inputs[0]), ref(e.inputs[1])
            steps.append(loopgen.Dot(lhs, rhs, out(e.outputs[0]), (tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))))
        elif name == "transpose":
            steps.append(loopgen.Transpose(ref(e.inputs[0]), out(e.outputs[0]), tuple(e.params["permutation"])))
        elif name == "reshape":
            steps.append(loopgen.Reshape(ref(e.inputs[0]), out(e.outputs[0])))
        elif name == "broadcast_in_dim":
            src = ref(e.inputs[0])
            steps.append(loopgen.Broadcast(src, out(e.outputs[0]), tuple(e.params["broadcast_dimensions"])))
        elif name == "slice":
            pr = e.params
            strides = pr["strides"] or (1,) * len(pr["start_indices"])
            steps.append(
                loopgen.Slice(
                    ref(e.inputs[0]),
                    out(e.outputs[0]),
                    tuple(pr["start_indices"]),
                    tuple(pr["limit_indices"]),
                    tuple(strides),
                )
            )
        elif name == "rev":
            steps.append(loopgen.Rev(ref(e.inputs[0]), out(e.outputs[0]), tuple(e.params["dimensions"])))
        else:
            raise Unsupported(f"primitive {name}")

    outs = [ref(a) for a in j.outvars]
    ncar = p["num_carry"]
    spec = loopgen.LoopSpec(
        values=tuple(values),
        n_consts=n_consts,
        n_carry=ncar,
        n_xs=n_in - n_consts - ncar,
        steps=tuple(steps),
        carry_out=tuple(outs[:ncar]),
        ys=tuple(outs[ncar:]),
        reverse=bool(p["reverse"]),
    )
    return spec, consts, lit_consts


def _distinct_inputs(inputs) -> list:
    seen: set = set()
    out = []
    for a in inputs:
        key = a if type(a) is Var else id(a)
        if key in seen or (type(a) is Literal and np.asarray(a.val).ndim == 0):
            continue
        seen.add(key)
        out.append(a)
    return out


def _region(g: Group, ref: Callable, out: Callable) -> loopgen.Elementwise:
    region, values = fused_region(g)
    inputs = [ref(a) for a in g.inputs]
    n_out = len(region.outputs)
    outputs = tuple((op, out(v)) for op, v in zip(region.outputs, values[:n_out]))
    red = None
    if region.reduction is not None:
        k, r = region.reduction.n_axes, len(g.shape)
        axes = tuple(range(k)) if region.reduction.leading else tuple(range(r - k, r))
        red = loopgen.Reduction(region.reduction.kind, region.reduction.op, axes, out(values[n_out]))
    return loopgen.Elementwise(tuple(inputs), region.ops, outputs, tuple(g.shape), red)
