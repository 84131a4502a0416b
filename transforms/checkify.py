"""Runtime checks: ``fl.debug.check`` and ``fl.debug.checkify``.

A check is the effect ``check_p(pred, *payload)`` (``Primitive.effect``): it runs where the program reaches it, in
loops at every iteration, and does nothing while ``pred`` holds. When it fails it records the first failure in the
innermost *frame* that lists its site, or raises ``CheckError`` at once when no frame does (a check outside
``checkify`` is an assertion that also works inside ``jit``).

``checkify(f, errors)`` traces ``f`` and re-traces its jaxpr with checks inserted (after every equation for NaN and
Inf, before indexing for out-of-bounds indices, before integer division for zero divisors), in the bodies of
loops, branches, nested ``jit``\\ s and custom rules too (a sub-jaxpr keeps its signature: checks have no outputs).
The result is bound as ``checkify_p``, a call whose implementation opens a frame, runs the body and returns the
body's outputs followed by the error: the index of the first failed site (-1: none) and each site's payload
(runtime values for its message: the offending index, the user's format arguments). Frames are opened and closed
by the call itself, also when the body raises, so the error is an ordinary output: ``jit(checkify(f))`` returns it
from the compiled program and ``checkify(jit(f))`` checks inside the compiled program. Indices found out of bounds
are clamped after their check, so the program runs to the end and reports the error afterwards.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import Primitive, ShapedArray, Tensor, Zero, _state, _wrap, aval_of, set_trace
from funclib.errors import FunclibError
from funclib.jaxpr import (
    ClosedJaxpr,
    Jaxpr,
    JaxprTrace,
    Literal,
    eval_jaxpr,
    strip_effects,
    trace_to_jaxpr,
    user_source,
)
from funclib.ops.elementwise import clip, logical_not
from funclib.ops.indexing import take
from funclib.ops.reductions import all as all_
from funclib.ops.reductions import any as any_
from funclib.ops.reductions import argmax
from funclib.primitives.elementwise import convert, isfinite, isinf, isnan
from funclib.primitives.shape import bdim_to_front, broadcast_in_dim, concatenate, reshape

from ._api_util import as_tensor_leaf
from .control_flow._common import batch_jaxpr, call, closed, jvp_jaxpr, pe_jaxpr
from .jit import _call, _trace_new


class CheckError(FunclibError, ValueError):
    """A runtime check failed: a ``fl.debug.check`` predicate was false, or ``checkify`` found a NaN, an Inf, an
    out-of-bounds index or a division by zero."""


class ErrorKind(enum.Enum):
    """What a ``checkify`` check looks for; the sets ``fl.debug.nan_checks``, ``float_checks``, ... group them.

    >>> sorted(kind.value for kind in fl.debug.float_checks)
    ['div', 'inf', 'nan']
    """

    USER = "user"
    NAN = "nan"
    INF = "inf"
    DIV = "div"
    INDEX = "index"


user_checks = frozenset({ErrorKind.USER})
nan_checks = frozenset({ErrorKind.NAN})
inf_checks = frozenset({ErrorKind.INF})
div_checks = frozenset({ErrorKind.DIV})
index_checks = frozenset({ErrorKind.INDEX})
float_checks = nan_checks | inf_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


class Site:
    """One check in a program: what it looks for, where it is, and how to word its failure from its payload (the
    runtime values the message needs, ``payload_avals`` per lane)."""

    __slots__ = ("kind", "payload_avals", "_describe")

    def __init__(self, kind: ErrorKind, payload_avals: tuple, describe: Callable[[list], str]):
        self.kind = kind
        self.payload_avals = tuple(payload_avals)
        self._describe = describe

    def describe(self, payload: list) -> str:
        return self._describe([np.asarray(p) for p in payload])

    def __repr__(self):
        return f"Site({self.kind.value})"


# ---------------------------------------------------------------------------------------------------------------
# Frames: where failed checks are recorded at run time


class _Frames(threading.local):
    def __init__(self):
        self.stack: list[_Frame] = []


_frames = _Frames()


class _Frame:
    __slots__ = ("index", "first")

    def __init__(self, sites):
        self.index = {id(s): i for i, s in enumerate(sites)}
        self.first = None  # (site index, per-lane payload arrays) of the first failure

    def outputs(self, sites) -> list:
        """The error outputs of ``checkify_p``: the failed site's index (-1: none), then every site's payload."""
        code, payload = (-1, None) if self.first is None else self.first
        outs = [np.asarray(code, np.int32)]
        for i, s in enumerate(sites):
            for k, a in enumerate(s.payload_avals):
                outs.append(np.asarray(payload[k], a.dtype) if i == code else np.zeros(a.shape, a.dtype))
        return outs


def _error_avals(sites) -> list:
    return [ShapedArray((), np.dtype(np.int32))] + [a for s in sites for a in s.payload_avals]


# ---------------------------------------------------------------------------------------------------------------
# check_p: an effect


check_p = Primitive("check", multiple_results=True)
check_p.effect = True
check_p.runs_on_devices = True
check_p.family = "check"


def _host(v):
    return v if type(v) is np.ndarray else _wrap(v).to_device("cpu")._value


@check_p.def_impl
def _check_impl(pred, *payload, site, nbatch):
    # a check is a read of its predicate: on a device, the predicate and the values its message names come back
    pred = _host(pred)
    payload = [_host(p) for p in payload]
    if pred.all():
        return []
    if nbatch:
        lanes = int(np.prod(pred.shape[:nbatch]))
        lane = int(np.argmin(pred.reshape(lanes, -1).all(axis=1)))
        payload = [np.asarray(p).reshape((lanes,) + np.shape(p)[nbatch:])[lane] for p in payload]
    for frame in reversed(_frames.stack):
        i = frame.index.get(id(site))
        if i is not None:
            if frame.first is None:
                frame.first = (i, [np.array(p) for p in payload])
            return []
    raise CheckError(site.describe(list(payload)))


@check_p.def_abstract_eval
def _check_abstract(pred, *payload, site, nbatch):
    if pred.dtype != dtypes.bool_:
        raise TypeError(f"check: the predicate must be boolean, got {pred.str_short()}")
    return []


@check_p.def_jvp
def _check_jvp(primals, tangents, *, site, nbatch):
    check_p.bind(*primals, site=site, nbatch=nbatch)
    return [], []


@check_p.def_transpose
def _check_transpose(cts, *args, site, nbatch):
    return [None] * len(args)  # no outputs: nothing to transpose, and a linear input has no value to check


@check_p.def_vmap
def _check_vmap(args, dims, *, site, nbatch):
    # the new batch axis goes in front of those of enclosing vmaps' rules (which run later): lanes in order
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [
        bdim_to_front(a, d)
        if d is not None
        else broadcast_in_dim(a, (size,) + tuple(a.shape), tuple(range(1, a.ndim + 1)))
        for a, d in zip(args, dims)
    ]
    check_p.bind(*moved, site=site, nbatch=nbatch + 1)
    return [], []


def _source_suffix(source: str | None, where: str) -> str:
    if source:
        return f" at {source}"
    return f" ({where})" if where else ""


def check(pred: Any, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """Assert ``pred`` at run time, also inside ``jit``, ``vmap``, ``grad`` and loops.

    Inside ``fl.debug.checkify`` a failure is recorded and returned as the function's ``Error``; anywhere else it
    raises ``CheckError`` when reached (eagerly at once, under ``jit`` during the call). ``msg`` is a format
    string filled from ``fmt_args``/``fmt_kwargs``, which may be traced: their runtime values appear in the message.

    >>> def f(x):
    ...     fl.debug.check(fl.all(x > 0), "x must be positive, got {}", x)
    ...     return fl.log(x)
    >>> err, y = fl.debug.checkify(f)(fl.tensor([1.0, -2.0]))
    >>> err.get()  # doctest: +ELLIPSIS
    'x must be positive, got [ 1. -2.] (check failed at ...)'
    """
    if not isinstance(msg, str):
        raise TypeError(f"debug.check: msg must be a string, got {type(msg).__name__}")
    pred = as_tensor_leaf(pred, "debug.check (pred)")
    if pred.dtype != dtypes.bool_:
        raise TypeError(
            f"debug.check: pred must be a boolean tensor, got {pred.dtype.name}; compare explicitly (x > 0) and "
            "reduce with fl.all"
        )
    leaves, tree = tree_util.flatten((fmt_args, fmt_kwargs))
    is_op = [isinstance(x, Tensor) for x in leaves]
    operands = [x for x, m in zip(leaves, is_op) if m]
    source = user_source()

    def describe(payload):
        it = iter(payload)
        full = [_printable(next(it)) if m else x for x, m in zip(leaves, is_op)]
        a, kw = tree_util.unflatten(tree, full)
        try:
            text = msg.format(*a, **kw)
        except (IndexError, KeyError, ValueError) as e:
            text = f"{msg} (the message could not be formatted: {e})"
        return text + (f" (check failed at {source})" if source else "")

    site = Site(ErrorKind.USER, tuple(aval_of(x) for x in operands), describe)
    check_p.bind(pred, *operands, site=site, nbatch=0)


def _printable(a):
    a = np.asarray(a)
    return a[()] if a.ndim == 0 else a


# ---------------------------------------------------------------------------------------------------------------
# checkify_p: a call that opens a frame around its body and returns the error after its outputs


checkify_p = Primitive("checkify", multiple_results=True)
checkify_p.runs_on_devices = True  # its impl evaluates funclib operations
checkify_p.family = "call"
checkify_p.batch_named = True
checkify_p.no_rule["transpose"] = (
    "not linear: its partial evaluation keeps the checks on the known side and stages the linear part inline"
)


def _run_framed(run, args, sites) -> list:
    frame = _Frame(sites)
    stack = _frames.stack
    stack.append(frame)
    try:
        outs = run(args)
    finally:
        del stack[stack.index(frame) :]
    return list(outs) + frame.outputs(sites)


@checkify_p.def_impl
def _checkify_impl(*args, jaxpr, sites):
    def run(xs):
        with set_trace(None):
            outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *[_wrap(x) for x in xs])
        return [o._value for o in outs]

    return _run_framed(run, args, sites)


def _lower_checkify(eqn, body_program):
    prog = body_program(eqn.params["jaxpr"])
    if prog is None:
        return None
    sites = eqn.params["sites"]

    def run(*args):
        return _run_framed(lambda xs: prog.run(list(xs)), args, sites)

    return run


checkify_p.jit_step = _lower_checkify


@checkify_p.def_abstract_eval
def _checkify_abstract(*avals, jaxpr, sites):
    if len(avals) != len(jaxpr.in_avals):
        raise TypeError(f"checkify: the body takes {len(jaxpr.in_avals)} inputs, got {len(avals)}")
    return list(jaxpr.out_avals) + _error_avals(sites)


@checkify_p.def_jvp
def _checkify_jvp(primals, tangents, *, jaxpr, sites):
    n_out = len(jaxpr.out_avals)
    nz = [type(t) is not Zero for t in tangents]
    key = ("checkify_jvp", tuple(nz))
    cached = jaxpr.jaxpr.cache.get(key)
    if cached is None:
        cached = jaxpr.jaxpr.cache[key] = jvp_jaxpr(jaxpr, nz, [False] * n_out)
    jj, out_nz = cached
    outs = checkify_p.bind(*primals, *[t for t in tangents if type(t) is not Zero], jaxpr=jj, sites=sites)
    primal_outs, rest = outs[:n_out], outs[n_out:]
    t_outs, errs = rest[: sum(out_nz)], rest[sum(out_nz) :]
    it = iter(t_outs)
    tans = [next(it) if m else Zero(aval_of(o)) for o, m in zip(primal_outs, out_nz)]
    return list(primal_outs) + list(errs), tans + [Zero(aval_of(e)) for e in errs]


@checkify_p.def_vmap
def _checkify_vmap(args, dims, *, jaxpr, sites, axis=None, lanes=None):
    size = next((a.shape[d] for a, d in zip(args, dims) if d is not None), lanes)
    batched = [d is not None for d in dims]
    bj, out_b = batch_jaxpr(jaxpr, size, batched, [False] * len(jaxpr.out_avals), axis)
    moved = [a if d is None else bdim_to_front(a, d) for a, d in zip(args, dims)]
    outs = checkify_p.bind(*moved, jaxpr=bj, sites=sites)
    # the checks of every lane go to one frame: the error is the first failure over the lanes, not batched
    return outs, [0 if b else None for b in out_b] + [None] * (len(outs) - len(out_b))


@checkify_p.def_partial_eval
def _checkify_partial_eval(trace, args, params):
    jaxpr, sites = params["jaxpr"], params["sites"]
    n_out = len(jaxpr.out_avals)
    uk = [not trace.is_known(a) for a in args]
    sp = pe_jaxpr(jaxpr, uk, [False] * n_out)
    known_args = [a for a, u in zip(args, uk) if not u]
    with set_trace(trace.parent):
        kouts = checkify_p.bind(*known_args, jaxpr=sp.known, sites=sites)
    n_known = sp.out_unknowns.count(False)
    k_outs, res, errs = kouts[:n_known], kouts[n_known : n_known + sp.num_res], kouts[n_known + sp.num_res :]
    # checks read primal values, so they all ran on the known side; the unknown part is linear and staged inline
    unknown = ClosedJaxpr(strip_effects(sp.unknown.jaxpr), sp.unknown.consts)
    u_outs = call(unknown, *res, *[a for a, u in zip(args, uk) if u])
    ki, ui = iter(k_outs), iter(u_outs)
    return [next(ui) if u else next(ki) for u in sp.out_unknowns] + list(errs)


# ---------------------------------------------------------------------------------------------------------------
# The rewrite: evaluate a jaxpr at the current trace, binding checks around its equations


class _Ctx:
    def __init__(self, errors, where: str = ""):
        self.errors = errors
        self.where = where
        self.sites: list[Site] = []

    def sub(self, where: str) -> _Ctx:
        return _Ctx(self.errors, where)

    def add(self, site: Site) -> Site:
        self.sites.append(site)
        return site


def _bind_check(pred, payload, site):
    check_p.bind(pred, *payload, site=site, nbatch=0)


def _prim_site(ctx, eqn, kind: ErrorKind, template: str) -> Site:
    msg = template.format(f"'{eqn.prim.name}'") + _source_suffix(eqn.source, ctx.where)
    return ctx.add(Site(kind, (), lambda payload: msg))


def _float_outputs(outs):
    return [o for o in outs if o.dtype in dtypes.INEXACT]


def _post_checks(ctx, eqn, ins, outs):
    errors = ctx.errors
    fouts = _float_outputs(outs)
    if ErrorKind.NAN in errors and fouts:
        bad = any_(_stack_flags([any_(isnan(o)) for o in fouts]))
        _bind_check(logical_not(bad), [], _prim_site(ctx, eqn, ErrorKind.NAN, "NaN produced by primitive {}"))
    if ErrorKind.INF in errors and fouts:
        produced = any_(_stack_flags([any_(isinf(o)) for o in fouts]))
        finite = [all_(isfinite(x)) for x in ins if _is_float_operand(x)]
        literal_inf = any(
            type(a) is Literal and np.asarray(a.val).dtype.kind in "fc" and not np.all(np.isfinite(a.val))
            for a in eqn.inputs
        )
        if not literal_inf:
            bad = produced if not finite else _all_of([produced] + finite)
            site = _prim_site(ctx, eqn, ErrorKind.INF, "Inf produced from finite inputs by primitive {}")
            _bind_check(logical_not(bad), [], site)


def _is_float_operand(x) -> bool:
    return isinstance(x, Tensor) and x.dtype in dtypes.INEXACT


def _stack_flags(flags):
    return flags[0] if len(flags) == 1 else concatenate([reshape(f, (1,)) for f in flags], 0)


def _all_of(flags):
    return all_(_stack_flags(flags))


_INT_DIVISIONS = ("floor_divide", "rem")


def _div_check(ctx, eqn, ins):
    y = ins[1]
    if not isinstance(y, Tensor) or y.dtype not in dtypes.INTEGER:
        return
    site = _prim_site(ctx, eqn, ErrorKind.DIV, "integer division by zero in primitive {}")
    _bind_check(all_(y != 0), [], site)


def _bounds_check(ctx, eqn, vals, lo, hi, axes, what):
    """Check ``lo <= vals[..., i] <= hi[i]``; vals is an integer tensor whose last axis runs over ``axes``."""
    v = convert(vals, np.int64) if vals.dtype != np.int64 else vals
    lo_t, hi_t = _wrap(np.asarray(lo, np.int64)), _wrap(np.asarray(hi, np.int64))
    ok = (v >= lo_t) & (v <= hi_t)
    pos = argmax(convert(reshape(logical_not(ok), (-1,)), np.int32))  # the first bad entry
    k = len(axes)
    bad_val = take(reshape(v, (-1,)), pos)
    which = pos % k
    prim = eqn.prim.name
    where = _source_suffix(eqn.source, ctx.where)
    axes, lo, hi = tuple(axes), tuple(lo), tuple(hi)

    def describe(payload):
        val, j = int(payload[0]), int(payload[1])
        return (
            f"out-of-bounds {what} in primitive '{prim}'{where}: {val} along axis {axes[j]}, where the valid range "
            f"is [{lo[j]}, {hi[j]}]"
        )

    i64 = ShapedArray((), np.dtype(np.int64))
    site = ctx.add(Site(ErrorKind.INDEX, (i64, i64), describe))
    _bind_check(all_(ok), [bad_val, which], site)
    return v, lo_t, hi_t


def _index_checks(ctx, eqn, ins):
    """Check (and clamp, so the program can finish) the indices of an indexing equation; the new inputs."""
    name = eqn.prim.name
    ins = list(ins)
    if name == "gather" or name.startswith("scatter"):
        x, idx = ins[0], ins[1]
        axes = eqn.params["axes"]
        if not isinstance(idx, Tensor) or idx.size == 0:
            return ins
        sizes = [x.shape[a] for a in axes]
        if any(n == 0 for n in sizes):
            return ins
        v, lo_t, hi_t = _bounds_check(ctx, eqn, idx, [0] * len(axes), [n - 1 for n in sizes], axes, "index")
        ins[1] = convert(clip(v, lo_t, hi_t), idx.dtype)
        return ins
    if name in ("dynamic_slice", "dynamic_update_slice"):
        x = ins[0]
        k = 1 if name == "dynamic_slice" else 2
        starts = ins[k:]
        sizes = eqn.params["slice_sizes"] if name == "dynamic_slice" else tuple(ins[1].shape)
        vec = concatenate([reshape(convert(s, np.int64), (1,)) for s in starts], 0)
        hi = [n - z for n, z in zip(x.shape, sizes)]
        _bounds_check(ctx, eqn, vec, [0] * len(hi), hi, range(len(hi)), "start index")
    return ins


def _checked_closed(cj: ClosedJaxpr, ctx: _Ctx, where: str) -> ClosedJaxpr:
    key = ("checkify", ctx.errors, tuple(id(c) for c in cj.consts))
    hit = cj.jaxpr.cache.get(key)
    if hit is None:
        sub = ctx.sub(where)
        new = closed(lambda *xs: _eval_checked(cj.jaxpr, cj.consts, xs, sub), cj.in_avals, "checkify")
        hit = cj.jaxpr.cache[key] = (new, sub.sites)
    ctx.sites.extend(hit[1])
    return hit[0]


def _checked_param(v, ctx, where):
    if isinstance(v, ClosedJaxpr):
        return _checked_closed(v, ctx, where)
    if isinstance(v, tuple) and any(isinstance(w, ClosedJaxpr) for w in v):
        items = [_checked_param(w, ctx, where) for w in v]
        return type(v)(*items) if hasattr(v, "_fields") else tuple(items)
    return v


def _checked_fun(fun, avals, ctx, where):
    """A custom rule's primal function with checks: traced once here, so its sites are known now."""
    sub = ctx.sub(where)
    body = closed(lambda *xs: _eval_checked(*_traced(fun, avals), xs, sub), avals, "checkify")
    ctx.sites.extend(sub.sites)

    def checked(*xs):
        return call(body, *xs)

    return checked


def _traced(fun, avals):
    j, consts, _ = trace_to_jaxpr(fun, list(avals), name="checkify")
    return j, consts


def _bind_eqn(eqn, ins, ctx):
    """Bind ``eqn`` on ``ins`` at the current trace, its sub-programs checked too."""
    prim, params = eqn.prim, eqn.params
    name = prim.name
    if name == "jit":
        j = params["jaxpr"]
        consts = list(j.cache.get("consts", [])) if j.constvars else []
        key = ("checkify", ctx.errors)
        hit = j.cache.get(key)
        if hit is None:
            sub = ctx.sub(f"inside jit({params['name']})")
            opened = Jaxpr([], list(j.constvars) + list(j.invars), j.eqns, j.outvars)
            avals = [v.aval for v in j.invars]
            new = _trace_new(lambda *xs: _eval_checked(opened, [], list(consts) + list(xs), sub), avals,
                             params["name"])
            hit = j.cache[key] = (new, sub.sites)
        ctx.sites.extend(hit[1])
        return _call(hit[0], ins, params["name"])
    if name in ("custom_jvp_call", "custom_vjp_call"):
        avals = [aval_of(x) for x in ins]
        params = dict(params, fun=_checked_fun(params["fun"], avals, ctx, f"inside a {name[:-5]} function"))
        return prim.bind(*ins, **params)
    if any(isinstance(v, (ClosedJaxpr, tuple)) for v in params.values()):
        where = f"inside a {name} body" if not ctx.where else ctx.where
        params = {k: _checked_param(v, ctx, where) for k, v in params.items()}
    return prim.bind(*ins, **params)


def _eval_checked(jaxpr: Jaxpr, consts, args, ctx: _Ctx) -> list:
    env: dict = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    errors = ctx.errors
    for eqn in jaxpr.eqns:
        ins = [a.val if type(a) is Literal else env[a] for a in eqn.inputs]
        prim = eqn.prim
        if prim is check_p:
            site = eqn.params["site"]
            if site.kind in errors:
                ctx.add(site)
                prim.bind(*ins, **eqn.params)
            continue
        if ErrorKind.INDEX in errors and prim.family in ("indexing", "shape"):
            ins = _index_checks(ctx, eqn, ins)
        if ErrorKind.DIV in errors and prim.name in _INT_DIVISIONS:
            _div_check(ctx, eqn, ins)
        out = _bind_eqn(eqn, ins, ctx)
        outs = out if prim.multiple_results else [out]
        if prim.family not in ("call", "control", "check") and outs:
            _post_checks(ctx, eqn, ins, outs)
        for v, o in zip(eqn.outputs, outs):
            env[v] = o
    return [a.val if type(a) is Literal else env[a] for a in jaxpr.outvars]


# ---------------------------------------------------------------------------------------------------------------
# The public transform and its Error


class Error:
    """What ``checkify`` found: the first failed check, or none. A pytree (its arrays are leaves), so it passes
    through ``jit`` and ``vmap``; under ``vmap`` every lane holds the first failure over all lanes.

    >>> err, y = fl.debug.checkify(fl.log, errors=fl.debug.nan_checks)(fl.tensor(-1.0))
    >>> err.get()
    "NaN produced by primitive 'log' at ..."
    """

    def __init__(self, code, payloads, sites):
        self.code = code
        self.payloads = list(payloads)
        self.sites = tuple(sites)

    def _first(self):
        code = np.asarray(self.code)
        flat = code.reshape(-1)
        hits = np.nonzero(flat >= 0)[0]
        if not hits.size:
            return None
        lane = int(hits[0])
        i = int(flat[lane])
        start = sum(len(s.payload_avals) for s in self.sites[:i])
        site = self.sites[i]
        payload = [
            np.asarray(p).reshape((flat.size,) + tuple(a.shape))[lane]
            for p, a in zip(self.payloads[start : start + len(site.payload_avals)], site.payload_avals)
        ]
        return site.describe(payload)

    def get(self) -> str | None:
        """The message of the first failed check, or None."""
        if any(isinstance(x, Tensor) and type(x) is not Tensor for x in [self.code, *self.payloads]):
            raise TypeError(
                "Error.get: the error is still traced (inside jit/vmap/grad); return it from the transformed "
                "function and call .get() on the result"
            )
        return self._first()

    def get_exception(self) -> CheckError | None:
        """A ``CheckError`` for the first failed check, or None."""
        msg = self.get()
        return None if msg is None else CheckError(msg)

    def throw(self) -> None:
        """Raise ``CheckError`` if a check failed."""
        e = self.get_exception()
        if e is not None:
            raise e

    def __repr__(self):
        try:
            msg = self.get()
        except TypeError:
            return "Error(<traced>)"
        return "Error(no failure)" if msg is None else f"Error({msg!r})"


tree_util.register_pytree_node(
    Error,
    lambda e: ((e.code, *e.payloads), e.sites),
    lambda sites, ch: Error(ch[0], ch[1:], sites),
)


def _check_errors(errors) -> frozenset:
    try:
        errs = frozenset(errors)
    except TypeError:
        errs = None
    if errs is None or not all(isinstance(e, ErrorKind) for e in errs):
        raise TypeError(
            f"checkify: errors must be a set of fl.debug error kinds, such as fl.debug.user_checks | "
            f"fl.debug.nan_checks (or fl.debug.all_checks); got {errors!r}"
        )
    return errs


def checkify(fun: Callable, errors: frozenset = user_checks) -> Callable:
    """``fun`` returning ``(error, result)``: runtime checks are recorded instead of raised, and reported after.

    Args:
      fun: a function of pytrees of tensors, possibly containing ``fl.debug.check`` calls, jitted functions,
        loops and branches (checks are inserted in their bodies too).
      errors: which checks to run, a union of ``fl.debug.user_checks`` (``fl.debug.check``, the default),
        ``nan_checks`` (an operation produced a NaN), ``inf_checks`` (an operation produced an infinity from
        finite inputs), ``div_checks`` (integer division by zero), ``index_checks`` (an out-of-bounds index in
        ``gather``/``scatter``, or a ``dynamic_slice`` start that would be clamped); ``float_checks`` is
        NaN, Inf and division, ``all_checks`` everything.

    Returns:
      A function returning ``(err, out)``; ``err.get()`` is the message of the first failure in program order
      (naming the primitive and the source line, or the user's message) or None, ``err.throw()`` raises it as
      ``CheckError``. Out-of-bounds indices are clamped after their check, so the call completes.

    ``jit(checkify(f))`` and ``checkify(jit(f))`` both check inside the compiled program, loops included; under
    ``vmap`` the error is the first failure over all lanes. Python control flow on traced values is not
    available inside ``fun`` (it is traced once, as under ``jit``). Custom derivative rules (``jvp``, ``fwd``,
    ``bwd``) are not instrumented, their primal functions are.

    >>> def f(x):
    ...     return fl.scan(lambda c, v: (c * fl.log(v), c), fl.tensor(1.0), x)[0]
    >>> err, y = fl.jit(fl.debug.checkify(f, errors=fl.debug.nan_checks))(fl.tensor([2.0, -1.0, 3.0]))
    >>> err.get()  # doctest: +ELLIPSIS
    "NaN produced by primitive 'log' at ..."
    """
    check_callable(fun, "checkify")
    errs = _check_errors(errors)

    def checked(*args, **kwargs):
        leaves, in_tree = tree_util.flatten((args, kwargs))
        leaves = [as_tensor_leaf(x, "checkify") for x in leaves]
        trace = JaxprTrace(_state.trace, name="checkify")
        trace.record_source = True  # so that failures name the user's line
        ins = [trace.new_arg(aval_of(x)) for x in leaves]
        store = {}
        with set_trace(trace):
            a, kw = tree_util.unflatten(in_tree, ins)
            out = fun(*a, **kw)
            o_leaves, o_tree = tree_util.flatten(out)
            o_leaves = [as_tensor_leaf(o, "checkify (the function's output)") for o in o_leaves]
            store["tree"] = o_tree
        j, consts = trace.to_jaxpr(ins, o_leaves)
        body = Jaxpr([], list(j.constvars) + list(j.invars), j.eqns, j.outvars)
        hoisted = [_wrap(c) if isinstance(c, np.ndarray) else c for c in consts]
        ctx = _Ctx(errs)
        checked_body = closed(lambda *xs: _eval_checked(body, [], xs, ctx), [v.aval for v in body.invars],
                              "checkify")
        sites = tuple(ctx.sites)
        outs = checkify_p.bind(*hoisted, *leaves, jaxpr=checked_body, sites=sites)
        n = len(o_leaves)
        return Error(outs[n], outs[n + 1 :], sites), tree_util.unflatten(store["tree"], list(outs[:n]))

    checked.__name__ = f"checkify({getattr(fun, '__name__', 'fun')})"
    checked.__doc__ = getattr(fun, "__doc__", None)
    checked.__wrapped__ = fun
    return checked


__all__ = [
    "check",
    "checkify",
    "Error",
    "CheckError",
    "ErrorKind",
    "user_checks",
    "nan_checks",
    "inf_checks",
    "div_checks",
    "index_checks",
    "float_checks",
    "automatic_checks",
    "all_checks",
    "check_p",
    "checkify_p",
]
