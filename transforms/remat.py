"""Rematerialization: ``checkpoint(fun, policy=...)`` trades memory for recomputation in reverse mode.

``checkpoint_p`` is a call primitive holding ``fun``'s jaxpr and a *policy*. Evaluated, differentiated forwards or
batched it is just its body. Its partial-evaluation rule (reverse mode) splits the body's JVP into the part known
now and the linear part, as every call does, and then asks the policy which of the known values the linear part
reads (the residuals) may be kept: ``policy(prim, *input_avals, **params)`` of the equation producing each one.
The kept ones, and the inputs, are the residuals of the staged ``checkpoint_p`` equation; the others are
recomputed inside it from those, so its transpose (the backward pass) re-runs that part of the forward pass when
it reaches the equation: memory holds one checkpointed block's intermediates at a time. Under ``jit`` the
transposed body is bound as ``checkpoint_p`` again, so common-subexpression elimination never merges the
recomputation with the forward pass it repeats. Effects in the body (debug prints, checks) run once, forwards.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import Primitive, ShapedArray, Tracer, Zero, _state, _wrap, aval_of, is_undefined, set_trace
from funclib.jaxpr import (
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    JaxprTrace,
    JaxprTracer,
    Var,
    eqn_has_effects,
    eval_jaxpr,
    partial_eval_jaxpr,
)
from funclib.primitives.shape import bdim_to_front, zeros

from ._api_util import as_tensor_leaf
from .autodiff import linearize_flat
from .control_flow._common import batch_jaxpr, closed, dce, jvp_jaxpr, trace_user_body, transpose_call
from .custom import _check_nondiff, _nondiff_tuple

# ---------------------------------------------------------------------------------------------------------------
# Policies: which values computed forwards the backward pass may keep


def everything_saveable(prim, *avals, **params) -> bool:
    """Keep every residual: no recomputation (as without ``checkpoint``)."""
    return True


def nothing_saveable(prim, *avals, **params) -> bool:
    """Keep only the checkpointed function's inputs; recompute everything else (the default)."""
    return False


def dots_saveable(prim, *avals, **params) -> bool:
    """Keep the results of matrix products (``dot_general``, which convolutions use too); recompute the rest."""
    return prim.name == "dot_general"


checkpoint_dots = dots_saveable


def dots_with_no_batch_dims_saveable(prim, *avals, **params) -> bool:
    """Keep the results of matrix products without batch dimensions (not per-example products)."""
    return prim.name == "dot_general" and not params["dimension_numbers"][1][0]


def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
    """A policy that keeps what either policy keeps."""

    def policy(prim, *avals, **params):
        return policy_1(prim, *avals, **params) or policy_2(prim, *avals, **params)

    return policy


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=checkpoint_dots,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    save_from_both_policies=save_from_both_policies,
)
checkpoint_policies.__doc__ = (
    "Policies for ``fl.checkpoint(policy=...)``: ``policy(prim, *input_avals, **params) -> bool`` says whether the "
    "output of one equation may be kept for the backward pass."
)


# ---------------------------------------------------------------------------------------------------------------
# The primitive

checkpoint_p = Primitive("checkpoint", multiple_results=True, linear=True)  # linear where its body is
checkpoint_p.family = "call"
checkpoint_p.batch_named = True


@checkpoint_p.def_impl
def _remat_impl(*args, jaxpr, policy):
    with set_trace(None):
        outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *[_wrap(a) for a in args])
    return [o._value for o in outs]


def _lower_remat(eqn, body_program):
    prog = body_program(eqn.params["jaxpr"])
    if prog is None:
        return None
    return lambda *args: prog.run(list(args))


checkpoint_p.jit_step = _lower_remat


@checkpoint_p.def_abstract_eval
def _remat_abstract(*avals, jaxpr, policy):
    if len(avals) != len(jaxpr.in_avals):
        raise TypeError(f"checkpoint: the body takes {len(jaxpr.in_avals)} inputs, got {len(avals)}")
    return list(jaxpr.out_avals)


def _cached(cj: ClosedJaxpr, key, build):
    hit = cj.jaxpr.cache.get(key)
    if hit is None:
        hit = cj.jaxpr.cache[key] = build()
    return hit


@checkpoint_p.def_jvp
def _remat_jvp(primals, tangents, *, jaxpr, policy):
    n_out = len(jaxpr.out_avals)
    nz = tuple(type(t) is not Zero for t in tangents)
    jj, out_nz = _cached(jaxpr, ("remat_jvp", nz), lambda: jvp_jaxpr(jaxpr, nz, [False] * n_out))
    outs = checkpoint_p.bind(*primals, *[t for t in tangents if type(t) is not Zero], jaxpr=jj, policy=policy)
    primal_outs, t_outs = outs[:n_out], iter(outs[n_out:])
    return list(primal_outs), [next(t_outs) if m else Zero(aval_of(o)) for o, m in zip(primal_outs, out_nz)]


@checkpoint_p.def_vmap
def _remat_vmap(args, dims, *, jaxpr, policy, axis=None, lanes=None):
    size = next((a.shape[d] for a, d in zip(args, dims) if d is not None), lanes)
    batched = tuple(d is not None for d in dims)
    bj, out_b = batch_jaxpr(jaxpr, size, batched, [False] * len(jaxpr.out_avals), axis)
    moved = [a if d is None else bdim_to_front(a, d) for a, d in zip(args, dims)]
    outs = checkpoint_p.bind(*moved, jaxpr=bj, policy=policy)
    return outs, [0 if b else None for b in out_b]


class RematSplit:
    """``known``: known inputs -> known outputs + saved values; ``unknown``: saved values + unknown inputs ->
    unknown outputs, recomputing from the saved values what the policy did not let it keep."""

    __slots__ = ("known", "unknown", "out_unknowns", "n_saved")

    def __init__(self, known, unknown, out_unknowns, n_saved):
        self.known = known
        self.unknown = unknown
        self.out_unknowns = out_unknowns
        self.n_saved = n_saved


def remat_split(cj: ClosedJaxpr, unknowns: Sequence[bool], policy: Callable) -> RematSplit:
    """Split ``cj`` into a known and an unknown part whose residuals follow ``policy`` (see the module doc)."""
    kj, uj, out_uk, num_res = partial_eval_jaxpr(cj.jaxpr, list(unknowns))
    n_known = len(kj.outvars) - num_res
    res_vars = kj.outvars[n_known:]
    producer = {v: e for e in kj.eqns for v in e.outputs}
    free = set(kj.invars) | set(kj.constvars)
    saved: list = []
    recompute: set = set()
    seen: set = set()

    def visit(v):
        if type(v) is not Var or v in seen:
            return
        seen.add(v)
        e = producer.get(v)
        if v in free or e is None:
            saved.append(v)
            return
        # an effect is not repeated, so what it computes is kept
        if eqn_has_effects(e) or policy(e.prim, *[a.aval for a in e.inputs], **e.params):
            saved.append(v)
            return
        recompute.add(id(e))
        for a in e.inputs:
            visit(a)

    for r in res_vars:
        visit(r)
    m: dict = {v: Var(v.aval) for v in saved}
    eqns = []
    for e in kj.eqns:
        if id(e) in recompute:
            outs = [Var(o.aval) for o in e.outputs]
            eqns.append(Eqn(e.prim, [m.get(a, a) if type(a) is Var else a for a in e.inputs], e.params, outs, e.source))
            m.update(zip(e.outputs, outs))
    binder = {b: m[r] if type(r) is Var else r for b, r in zip(uj.invars[:num_res], res_vars)}

    def r_(a):
        return binder.get(a, a) if type(a) is Var else a

    eqns += [Eqn(e.prim, [r_(a) for a in e.inputs], e.params, e.outputs, e.source) for e in uj.eqns]
    unknown = Jaxpr([], [m[v] for v in saved] + list(uj.invars[num_res:]), eqns, [r_(a) for a in uj.outvars])
    known = Jaxpr(kj.constvars, kj.invars, kj.eqns, list(kj.outvars[:n_known]) + saved)
    known = dce(known, [True] * len(known.outvars))
    return RematSplit(ClosedJaxpr(known, cj.consts), ClosedJaxpr(unknown, []), out_uk, len(saved))


@checkpoint_p.def_partial_eval
def _remat_partial_eval(trace, args, params):
    cj, policy = params["jaxpr"], params["policy"]
    uk = tuple(not trace.is_known(a) for a in args)
    sp = _cached(cj, ("remat_pe", uk, policy), lambda: remat_split(cj, uk, policy))
    # the known part is a call of its own: its constants stay inside it (the known side of a traced partial
    # evaluation must not capture any)
    with set_trace(trace.parent):
        kouts = checkpoint_p.bind(*[a for a, u in zip(args, uk) if not u], jaxpr=sp.known, policy=policy)
    n_known = len(kouts) - sp.n_saved
    k_outs, saved = kouts[:n_known], kouts[n_known:]
    u_outs = trace.stage(
        checkpoint_p,
        [*saved, *[a for a, u in zip(args, uk) if u]],
        dict(jaxpr=sp.unknown, policy=policy),
        sp.unknown.out_avals,
    )
    ki, ui = iter(k_outs), iter(u_outs)
    return [next(ui) if u else next(ki) for u in sp.out_unknowns]


@checkpoint_p.def_transpose
def _remat_transpose(cts, *args, jaxpr, policy):
    lin = tuple(is_undefined(a) for a in args)
    res = [a for a, u in zip(args, lin) if not u]
    cts = [zeros(a) if type(c) is Zero else c for c, a in zip(cts, jaxpr.out_avals)]
    if _state.trace is None:
        # eagerly: recompute and transpose right here, one checkpointed block at a time
        lin_cts = transpose_call(jaxpr, lin, res, cts)
    else:
        # staged: the recomputation stays inside a call of its own, opaque to the passes over the outer program
        def build():
            k = len(res)
            return closed(
                lambda *xs: transpose_call(jaxpr, lin, xs[:k], xs[k:]),
                [aval_of(r) for r in res] + list(jaxpr.out_avals),
                "transpose of checkpoint",
            )

        tj = _cached(jaxpr, ("remat_transpose", lin, tuple(aval_of(r) for r in res)), build)
        lin_cts = checkpoint_p.bind(*res, *cts, jaxpr=tj, policy=policy)
    it = iter(lin_cts)
    return [next(it) if u else None for u in lin]


# ---------------------------------------------------------------------------------------------------------------
# The public API


def checkpoint(
    fun: Callable | None = None,
    *,
    policy: Callable | None = None,
    static_argnums: int | Sequence[int] = (),
    prevent_cse: bool = True,
) -> Callable:
    """Rematerialize ``fun`` in reverse mode: the backward pass recomputes its intermediates instead of storing them.

    Args:
      fun: a function of pytrees of tensors. Without it, ``checkpoint`` returns a decorator.
      policy: which intermediates the backward pass may keep, as ``policy(prim, *input_avals, **params) -> bool``
        for the equation computing each one; ``fl.checkpoint_policies`` has ``nothing_saveable`` (the default:
        only the inputs are kept), ``dots_saveable`` (alias ``checkpoint_dots``: matrix products are kept),
        ``dots_with_no_batch_dims_saveable`` and ``everything_saveable`` (no recomputation).
      static_argnums: positional arguments that are not arrays (passed through unchanged, not differentiated).
      prevent_cse: accepted for JAX compatibility; the recomputation is never merged with the forward pass.

    The result and its derivatives are those of ``fun`` whatever the policy; only memory and time change
    (``fl.saved_residuals`` lists what the backward pass keeps).

    >>> layer = fl.checkpoint(lambda w, x: fl.tanh(x @ w), policy=fl.checkpoint_policies.dots_saveable)
    >>> fl.grad(lambda w, x: layer(w, x).sum())(fl.ones((2, 2)), fl.ones((1, 2))).shape
    (2, 2)
    """
    if fun is None:
        return functools.partial(checkpoint, policy=policy, static_argnums=static_argnums, prevent_cse=prevent_cse)
    check_callable(fun, "checkpoint")
    if policy is None:
        policy = nothing_saveable
    check_callable(policy, "checkpoint", "policy")
    static = _nondiff_tuple(static_argnums, "checkpoint", "static_argnums")
    name = getattr(fun, "__name__", "fun")

    def remat(*args, **kwargs):
        _check_nondiff(static, len(args), f"checkpoint({name})", "static_argnums")
        if _state.trace is None:
            return fun(*args, **kwargs)  # nothing is being differentiated or staged: there is nothing to save
        dyn = tuple(a for i, a in enumerate(args) if i not in static)
        leaves, in_tree = tree_util.flatten((dyn, kwargs))
        leaves = [as_tensor_leaf(x, f"checkpoint({name})") for x in leaves]
        store: dict = {}

        def flat(*xs):
            d, kw = tree_util.unflatten(in_tree, list(xs))
            it = iter(d)
            full = [args[i] if i in static else next(it) for i in range(len(args))]
            o, t = tree_util.flatten(fun(*full, **kw))
            store["tree"] = t
            return [as_tensor_leaf(v, f"checkpoint({name}) output") for v in o]

        body, hoisted, _ = trace_user_body(flat, [aval_of(x) for x in leaves], f"checkpoint({name})")
        outs = checkpoint_p.bind(*hoisted, *leaves, jaxpr=body, policy=policy)
        return tree_util.unflatten(store["tree"], list(outs))

    remat.__name__ = f"checkpoint({name})"
    remat.__doc__ = getattr(fun, "__doc__", None)
    remat.__wrapped__ = fun
    return remat


remat = checkpoint


def saved_residuals(fun: Callable, *args) -> list[tuple[ShapedArray, str]]:
    """What reverse mode keeps from the forward pass of ``fun(*args)`` for its backward pass.

    Returns one ``(aval, description)`` per residual array: ``"argument <path>"`` for an input kept as it is,
    else ``"output of <primitive> at <file:line>"``. 0-d values (kept as literals) are not listed.

    >>> f = fl.checkpoint(lambda x: fl.sin(fl.sin(x)))
    >>> fl.saved_residuals(f, fl.ones(3))
    [(ShapedArray(f32[3]), 'argument [0]')]
    """
    check_callable(fun, "saved_residuals")
    leaves, in_tree = tree_util.flatten(tuple(args))
    leaves = [as_tensor_leaf(x, "saved_residuals") for x in leaves]
    paths = [tree_util.keystr(p) for p, _ in tree_util.flatten_with_path(tuple(args))[0]]
    outer = JaxprTrace(_state.trace, name="saved_residuals")
    outer.record_source = True
    ins = [outer.new_arg(aval_of(x)) for x in leaves]
    mask = [x.dtype in dtypes.INEXACT for x in leaves]

    def flat(*xs):
        return tree_util.leaves(fun(*tree_util.unflatten(in_tree, list(xs)))), None

    with set_trace(outer):
        _, lin, _ = linearize_flat(flat, ins, mask, name="saved_residuals")
    top = Jaxpr([], [t.jvar for t in ins], outer.eqns, [])
    out = []
    for c in lin.consts:
        a = aval_of(c)
        if type(c) is JaxprTracer and c._trace is outer:
            out.append((a, _origin(top, c.jvar, lambda i: f"argument {paths[i]}")))
        else:
            out.append((a, "a constant" if not isinstance(c, Tracer) else "a value of an enclosing transform"))
    return out


def _origin(jaxpr: Jaxpr, v, of_input: Callable[[int], str]) -> str:
    """Where ``v`` comes from: an input of ``jaxpr`` (``of_input`` names it) or the equation computing it, looked
    for inside the checkpoint calls that hold the known part of a checkpointed block."""
    if v in jaxpr.invars:
        return of_input(jaxpr.invars.index(v))
    e = next((e for e in jaxpr.eqns if v in e.outputs), None)
    if e is None:
        return "a constant"
    if e.prim is checkpoint_p:
        body = e.params["jaxpr"].jaxpr
        inner = body.outvars[e.outputs.index(v)]
        if type(inner) is not Var:
            return "a constant"

        def outer_input(i):
            a = e.inputs[i]
            return _origin(jaxpr, a, of_input) if type(a) is Var else "a constant"

        return _origin(body, inner, outer_input)
    return f"output of {e.prim.name}" + (f" at {e.source}" if e.source else "")


__all__ = [
    "checkpoint",
    "remat",
    "checkpoint_policies",
    "saved_residuals",
    "checkpoint_p",
    "everything_saveable",
    "nothing_saveable",
    "dots_saveable",
    "checkpoint_dots",
    "dots_with_no_batch_dims_saveable",
    "save_from_both_policies",
]
