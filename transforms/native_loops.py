"""Loops whose whole body lowers to generated code run as one loop kernel (``funclib.kernels.loopgen``).

``native_scan(eqn, fallback, emitter)`` and ``native_while(eqn, fallback, emitter)`` describe the loop as a
``loopgen.LoopSpec`` and ask the emitter for its loop kernel. The description is built from pieces any loop can
use: ``plan_body`` plans a body's equations (the fusion plan's elementwise regions with their reductions) and
finds the literals that become loop-invariant inputs, ``BodyValues`` numbers the values, and ``describe_steps``
turns the planned equations into loop steps (fused regions, stand-alone reductions, ``dot_general``,
``transpose``, ``reshape``, ``broadcast_in_dim``, ``slice``, ``rev``, ``concatenate``). A ``while`` loop's
predicate is computed by steps of its own, ahead of the body's, and ``max_steps`` is the kernel's run-time trip
limit. A body with anything else (another loop, a ``cond``, a gather, a sort, float16 values, ...) gives ``None``
and the caller keeps its executor loop. If the generated kernel fails to compile, the step logs it and runs
``fallback`` from then on, so results never depend on which path ran.
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

# the trip limit of a while loop without max_steps
_UNBOUNDED = np.iinfo(np.int64).max


class NativeLoop:
    """The executor step for a loop: runs the generated loop kernel; ``fallback`` if it cannot be compiled.

    ``consts`` are the constants the kernel takes ahead of the loop's constant operands (the bodies' closed-over
    values), ``lit_consts`` those after them (the bodies' array literals).
    """

    kind = "loop"

    def __init__(self, kernel: Callable, consts: list, lit_consts: list, fallback: Callable):
        self.kernel = kernel
        self.source = kernel.source
        self.body_consts = consts
        self.lit_consts = lit_consts
        self.fallback = fallback
        self.failed = False
        self.ran = False

    def run(self, args) -> list:
        raise NotImplementedError

    def __call__(self, *args):
        if not self.failed:
            try:
                out = self.run(args)
                self.ran = True
                return out
            except Exception as e:
                if self.ran:
                    raise
                # a body the generator describes but numba cannot compile: a generator limitation, not a user error
                log.warning(
                    "%s: the generated loop kernel failed (%s: %s); running the executor loop",
                    self.kind,
                    type(e).__name__,
                    e,
                )
                self.failed = True
        return self.fallback(*args)


class NativeScan(NativeLoop):
    """A ``scan`` as one loop kernel; the trip count is a run-time argument."""

    kind = "scan"

    def __init__(self, kernel, consts, lit_consts, params: dict, fallback):
        super().__init__(kernel, consts, lit_consts, fallback)
        self.nc, self.ncar, self.length = params["num_consts"], params["num_carry"], params["length"]

    def run(self, args) -> list:
        nc, ncar = self.nc, self.ncar
        carry, ys = self.kernel(
            self.length, self.body_consts + list(args[:nc]) + self.lit_consts, args[nc : nc + ncar], args[nc + ncar :]
        )
        return carry + ys


class NativeWhile(NativeLoop):
    """A ``while`` as one loop kernel; ``max_steps`` is a run-time argument."""

    kind = "while"

    def __init__(self, kernel, cond_consts, body_consts, lit_consts, params: dict, fallback):
        super().__init__(kernel, cond_consts + body_consts, lit_consts, fallback)
        self.ncc, self.n_cond_closed = params["cond_nconsts"], len(cond_consts)
        self.nbc = params["body_nconsts"]
        m = params["max_steps"]
        self.limit = _UNBOUNDED if m is None else int(m)

    def run(self, args) -> list:
        ncc, nbc, k = self.ncc, self.nbc, self.n_cond_closed
        bc = self.body_consts
        consts = bc[:k] + list(args[:ncc]) + bc[k:] + list(args[ncc : ncc + nbc]) + self.lit_consts
        carry, _ = self.kernel(self.limit, consts, args[ncc + nbc :], [])
        return carry


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


def native_while(eqn, fallback: Callable, emitter: Emitter) -> NativeWhile | None:
    """A ``NativeWhile`` for this while equation, or ``None`` if its predicate or body holds an unsupported step."""
    p = eqn.params
    try:
        spec, cconsts, bconsts, lit_consts = _describe_while(p, emitter)
        kernel = emitter.loop_kernel(spec)
    except Unsupported as e:
        log.debug("while: executor loop (%s)", e)
        return None
    return NativeWhile(kernel, cconsts, bconsts, lit_consts, p, fallback)


class BodyValues:
    """The numbered values of a loop body as ``loopgen.Value``s, and which jaxpr atom each one is."""

    def __init__(self):
        self.values: list[loopgen.Value] = []
        self.ids: dict = {}

    def bind(self, a) -> int:
        """A new value for the variable (or literal) ``a``."""
        self.values.append(loopgen.Value(a.aval.dtype.name, tuple(a.aval.shape)))
        self.ids[a if type(a) is Var else id(a)] = len(self.values) - 1
        return len(self.values) - 1

    def ref(self, a) -> int:
        return self.ids[a if type(a) is Var else id(a)]


def plan_body(jaxpr, emitter: Emitter) -> tuple[list, list]:
    """The planned equations of a loop body (fused regions without staging, which the loop generator does not
    emit), and the literals that become loop-invariant inputs: operands of steps other than fused regions, array
    literals and literal outputs."""
    items = plan_groups(jaxpr, emitter, staged=False, scalars=True)
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
    for a in jaxpr.outvars:
        if type(a) is Literal:
            lits.setdefault(id(a), a)
    return items, list(lits.values())


def describe_steps(items: list, vals: BodyValues, emitter: Emitter) -> list:
    """The ``loopgen`` steps of a planned body (``plan_body``) whose inputs ``vals`` has bound; binds every value
    they compute. ``Unsupported`` for an equation the loop generator does not emit."""
    steps: list = []
    ref, out = vals.ref, vals.bind
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
        elif name == "concatenate":
            srcs = tuple(ref(a) for a in e.inputs)
            steps.append(loopgen.Concat(srcs, out(e.outputs[0]), int(e.params["dimension"])))
        else:
            raise Unsupported(f"primitive {name}")
    return steps


def _describe(body, p, emitter):
    """A scan's ``LoopSpec``: values numbered constants, then literals, carry and scanned slices, then steps."""
    j = body.jaxpr
    nc, ncar = p["num_consts"], p["num_carry"]
    items, lits = plan_body(j, emitter)
    vals = BodyValues()
    for v in list(j.constvars) + list(j.invars[:nc]):
        vals.bind(v)
    for a in lits:
        vals.bind(a)
    n_consts = len(vals.values)
    for v in j.invars[nc:]:
        vals.bind(v)
    n_in = len(vals.values)
    steps = describe_steps(items, vals, emitter)
    outs = [vals.ref(a) for a in j.outvars]
    spec = loopgen.LoopSpec(
        values=tuple(vals.values),
        n_consts=n_consts,
        n_carry=ncar,
        n_xs=n_in - n_consts - ncar,
        steps=tuple(steps),
        carry_out=tuple(outs[:ncar]),
        ys=tuple(outs[ncar:]),
        reverse=bool(p["reverse"]),
    )
    consts = [np.asarray(getattr(c, "_value", c)) for c in body.consts]
    return spec, consts, [np.asarray(a.val, dtype=a.aval.dtype) for a in lits]


def _describe_while(p, emitter):
    """A while loop's ``LoopSpec``: values numbered the predicate's constants, the body's constants, literals,
    then the carry (read by both); steps the predicate's, then the body's."""
    cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    c_items, c_lits = plan_body(cj.jaxpr, emitter)
    b_items, b_lits = plan_body(bj.jaxpr, emitter)
    vals = BodyValues()
    for v in list(cj.jaxpr.constvars) + list(cj.jaxpr.invars[:cn]):
        vals.bind(v)
    for v in list(bj.jaxpr.constvars) + list(bj.jaxpr.invars[:bn]):
        vals.bind(v)
    lits = c_lits + b_lits
    for a in lits:
        vals.bind(a)
    n_consts = len(vals.values)
    for cv, bv in zip(cj.jaxpr.invars[cn:], bj.jaxpr.invars[bn:]):
        vals.ids[bv] = vals.bind(cv)
    c_steps = describe_steps(c_items, vals, emitter)
    pred = vals.ref(cj.jaxpr.outvars[0])
    b_steps = describe_steps(b_items, vals, emitter)
    n_carry = len(bj.jaxpr.invars) - bn
    spec = loopgen.LoopSpec(
        values=tuple(vals.values),
        n_consts=n_consts,
        n_carry=n_carry,
        n_xs=0,
        steps=tuple(c_steps) + tuple(b_steps),
        carry_out=tuple(vals.ref(a) for a in bj.jaxpr.outvars),
        ys=(),
        reverse=False,
        cond=pred,
        n_cond_steps=len(c_steps),
    )
    cconsts = [np.asarray(getattr(c, "_value", c)) for c in cj.consts]
    bconsts = [np.asarray(getattr(c, "_value", c)) for c in bj.consts]
    return spec, cconsts, bconsts, [np.asarray(a.val, dtype=a.aval.dtype) for a in lits]


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
