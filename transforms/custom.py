"""Custom derivative rules (``custom_jvp``, ``custom_vjp``) and rematerialization (``checkpoint``).

Both bind a call primitive whose ``fun`` parameter is the flattened user function, so every transform sees them:
- ``custom_jvp_call``: the JVP rule runs the user's ``jvp``; vmap vectorizes ``fun`` and ``jvp``; staging traces
  ``fun`` for the output types.
- ``custom_vjp_call``: the JVP rule runs ``fwd`` and emits ``custom_lin``, a primitive linear in the tangents whose
  transpose is the user's ``bwd``. Evaluated *forwards* (plain ``jvp``, ``jacfwd``, ``hessian``), ``custom_lin``
  differentiates the primal function instead, so forward mode of a ``custom_vjp`` function works (JAX raises).
``checkpoint(f)`` is a custom_vjp whose backward pass re-runs ``f``'s forward pass instead of storing it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from funclib import tree as tree_util
from funclib.core import Primitive, ShapedArray, Zero, _state, _wrap, aval_of, is_undefined, is_weak, set_trace
from funclib.jaxpr import JaxprTrace, JaxprTracer, trace_to_jaxpr
from funclib.primitives._util import instantiate, zeros

from ._api_util import as_tensor_leaf


def _flat_fun(fun, in_tree, store, key="out_tree"):
    def flat(*xs):
        out = fun(*tree_util.unflatten(in_tree, list(xs)))
        leaves, t = tree_util.flatten(out)
        prev = store.get(key)
        if prev is not None and prev != t:
            raise TypeError(f"custom rule: output structure changed between calls: {prev} vs {t}")
        store[key] = t
        return [as_tensor_leaf(x, "custom function output") for x in leaves]

    return flat


def _out_avals(flat_fun, args):
    _, _, outs = trace_to_jaxpr(flat_fun, [aval_of(a) for a in args], name="custom rule")
    return [aval_of(o) for o in outs]


def _is_linearize_tangent(t) -> bool:
    return type(t) is JaxprTracer and isinstance(t._trace, JaxprTrace) and t._trace.forward_known


# ---------------------------------------------------------------------------------------------------------------
# custom_jvp

custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_jvp_call_p.family = "call"
custom_jvp_call_p.no_rule["transpose"] = "its JVP is expressed with ordinary primitives, which are transposed instead"


@custom_jvp_call_p.def_impl
def _cjvp_impl(*args, fun, jvp, out_tree_store):
    with set_trace(None):
        return [x._value for x in fun(*[_wrap(a) for a in args])]


@custom_jvp_call_p.def_abstract_eval
def _cjvp_abstract(*avals, fun, jvp, out_tree_store):
    _, _, outs = trace_to_jaxpr(fun, list(avals), name="custom_jvp")
    return [aval_of(o) for o in outs]


@custom_jvp_call_p.def_jvp
def _cjvp_jvp(primals, tangents, *, fun, jvp, out_tree_store):
    tangents = [instantiate(t) for t in tangents]
    outs, touts = jvp(primals, tangents)
    return outs, [Zero(aval_of(o)) if t is None else t for o, t in zip(outs, touts)]


@custom_jvp_call_p.def_vmap
def _cjvp_vmap(args, dims, *, fun, jvp, out_tree_store):
    from .batching import vmap

    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [_to_front(a, d, size) for a, d in zip(args, dims)]
    bfun = vmap(lambda *xs: fun(*xs))
    n = len(args)

    def bjvp(primals, tangents):
        res = vmap(lambda *pt: tuple(map(list, jvp(list(pt[:n]), list(pt[n:])))))(*primals, *tangents)
        return res[0], res[1]

    outs = custom_jvp_call_p.bind(*moved, fun=bfun, jvp=bjvp, out_tree_store=out_tree_store)
    return outs, [0] * len(outs)


def _to_front(a, d, size):
    from funclib.primitives._util import bdim_to_front
    from funclib.primitives.shape import broadcast_in_dim

    if d is None:
        return broadcast_in_dim(a, (size,) + tuple(a.shape), tuple(range(1, a.ndim + 1)))
    return bdim_to_front(a, d)


def _split_args(args, nondiff_argnums, name):
    """Separate the non-differentiable arguments from the traced ones (flattened to Tensor leaves)."""
    static = {i: args[i] for i in nondiff_argnums}
    dyn = [a for i, a in enumerate(args) if i not in static]
    leaves, in_tree = tree_util.flatten(tuple(dyn))
    # a Python scalar traced by jit stays weak, so the function sees it at full precision as it does eagerly
    leaves = [x if is_weak(x) else as_tensor_leaf(x, name) for x in leaves]

    def full_args(d):
        it = iter(d)
        return [static[i] if i in static else next(it) for i in range(len(args))]

    return static, dyn, leaves, in_tree, full_args


class custom_jvp:
    """A function with a custom forward-mode derivative rule (reverse mode follows by transposition).

    >>> @fl.custom_jvp
    ... def f(x):
    ...     return fl.sin(x)
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return f(x), fl.cos(x) * t
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable | None = None
        self.__name__ = getattr(fun, "__name__", "custom_jvp")
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the rule ``jvp(primals, tangents) -> (primal_out, tangent_out)`` (nondiff args come first)."""
        self.jvp = jvp
        return jvp

    def __call__(self, *args):
        if self.jvp is None:
            raise TypeError(f"custom_jvp function {self.__name__!r} has no rule yet; define it with @f.defjvp")
        if _state.trace is None:
            return self.fun(*args)
        nd = self.nondiff_argnums
        static, dyn, leaves, in_tree, full_args = _split_args(args, nd, self.__name__)
        store: dict = {}

        def fun_flat(*xs):
            d = tree_util.unflatten(in_tree, list(xs))
            out = self.fun(*full_args(d))
            o, t = tree_util.flatten(out)
            store["out_tree"] = t
            return [as_tensor_leaf(v, self.__name__) for v in o]

        def jvp_flat(primals, tangents):
            p = tree_util.unflatten(in_tree, list(primals))
            t = tree_util.unflatten(in_tree, list(tangents))
            res = self.jvp(*[static[i] for i in nd], tuple(p), tuple(t)) if nd else self.jvp(tuple(p), tuple(t))
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(f"custom_jvp rule of {self.__name__!r} must return (primal_out, tangent_out)")
            po, to = res
            pl, pt = tree_util.flatten(po)
            tl, tt = tree_util.flatten(to)
            if pt != tt:
                raise TypeError(
                    f"custom_jvp rule of {self.__name__!r}: primal and tangent outputs differ in structure:\n"
                    f"  primal:  {pt}\n  tangent: {tt}"
                )
            store["out_tree"] = pt
            pl = [as_tensor_leaf(v, self.__name__) for v in pl]
            tl = [as_tensor_leaf(v, self.__name__) for v in tl]
            for i, (a, b) in enumerate(zip(pl, tl)):
                if tuple(a.shape) != tuple(b.shape):
                    raise ValueError(
                        f"custom_jvp rule of {self.__name__!r}: tangent output {i} has shape {tuple(b.shape)}, "
                        f"primal output has {tuple(a.shape)}"
                    )
            return pl, tl

        outs = custom_jvp_call_p.bind(*leaves, fun=fun_flat, jvp=jvp_flat, out_tree_store=store)
        return tree_util.unflatten(store["out_tree"], list(outs))


# ---------------------------------------------------------------------------------------------------------------
# custom_vjp

custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)
custom_vjp_call_p.family = "call"
custom_vjp_call_p.no_rule["transpose"] = "its JVP emits custom_lin, which carries the transpose (the bwd rule)"


@custom_vjp_call_p.def_impl
def _cvjp_impl(*args, fun, fwd, bwd, store):
    with set_trace(None):
        return [x._value for x in fun(*[_wrap(a) for a in args])]


@custom_vjp_call_p.def_abstract_eval
def _cvjp_abstract(*avals, fun, fwd, bwd, store):
    _, _, outs = trace_to_jaxpr(fun, list(avals), name="custom_vjp")
    return [aval_of(o) for o in outs]


@custom_vjp_call_p.def_jvp
def _cvjp_jvp(primals, tangents, *, fun, fwd, bwd, store):
    if not any(_is_linearize_tangent(t) for t in tangents):
        # forward mode (jvp, jacfwd, hessian): differentiate the primal function itself
        from .autodiff import jvp as jvp_fn

        ts = [instantiate(t) for t in tangents]
        outs, touts = jvp_fn(lambda *xs: fun(*xs), tuple(primals), tuple(ts))
        return list(outs), list(touts)
    outs, res = fwd(*primals)
    n_res = len(res)
    lin_tangents = [instantiate(t) for t in tangents]
    touts = custom_lin_p.bind(
        *res,
        *primals,
        *lin_tangents,
        fun=fun,
        bwd=bwd,
        n_res=n_res,
        out_avals=tuple(aval_of(o) for o in outs),
    )
    return outs, touts


@custom_vjp_call_p.def_vmap
def _cvjp_vmap(args, dims, *, fun, fwd, bwd, store):
    from .batching import vmap

    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [_to_front(a, d, size) for a, d in zip(args, dims)]
    bfun = vmap(lambda *xs: fun(*xs))

    def bfwd(*xs):
        outs, res = vmap(lambda *ys: tuple(map(list, fwd(*ys))))(*xs)
        return outs, res

    def bbwd(res, cts):
        return vmap(lambda r, c: list(bwd(list(r), list(c))))(list(res), list(cts))

    outs = custom_vjp_call_p.bind(*moved, fun=bfun, fwd=bfwd, bwd=bbwd, store=store)
    return outs, [0] * len(outs)


custom_lin_p = Primitive("custom_lin", multiple_results=True, linear=True)
custom_lin_p.family = "call"


def _lin_split(args, n_res):
    res = list(args[:n_res])
    rest = list(args[n_res:])
    k = len(rest) // 2
    return res, rest[:k], rest[k:]


@custom_lin_p.def_impl
def _lin_impl(*args, fun, bwd, n_res, out_avals):
    from .autodiff import jvp as jvp_fn

    _, primals, tangents = _lin_split([_wrap(a) for a in args], n_res)
    with set_trace(None):
        _, touts = jvp_fn(lambda *xs: fun(*xs), tuple(primals), tuple(tangents))
    return [t._value for t in touts]


@custom_lin_p.def_abstract_eval
def _lin_abstract(*avals, fun, bwd, n_res, out_avals):
    return list(out_avals)


@custom_lin_p.def_jvp
def _lin_jvp(primals, tangents, *, fun, bwd, n_res, out_avals):
    # custom_lin evaluated forwards is the JVP of the primal function; differentiate that composite
    from .autodiff import jvp as jvp_fn

    def composite(*args):
        _, p, t = _lin_split(list(args), n_res)
        return jvp_fn(lambda *xs: fun(*xs), tuple(p), tuple(t))[1]

    ts = [instantiate(t) for t in tangents]
    outs, touts = jvp_fn(composite, tuple(primals), tuple(ts))
    return list(outs), list(touts)


@custom_lin_p.def_transpose
def _lin_transpose(cts, *args, fun, bwd, n_res, out_avals):
    res, primals, tangents = _lin_split(list(args), n_res)
    if any(is_undefined(r) for r in res) or any(is_undefined(p) for p in primals):
        raise TypeError("custom_vjp: the residuals of fwd depend on the linear inputs; they must not")
    cts = [instantiate(c) if type(c) is not Zero else zeros(c.aval) for c in cts]
    in_cts = bwd(res, cts)
    out = [None] * (n_res + len(primals))
    out.extend(in_cts[: len(tangents)])
    return out


@custom_lin_p.def_vmap
def _lin_vmap(args, dims, *, fun, bwd, n_res, out_avals):
    from .batching import vmap

    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [_to_front(a, d, size) for a, d in zip(args, dims)]

    def bfun(*xs):
        return vmap(lambda *ys: fun(*ys))(*xs)

    def bbwd(res, cts):
        return vmap(lambda r, c: list(bwd(list(r), list(c))))(list(res), list(cts))

    out_b = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in out_avals)
    outs = custom_lin_p.bind(*moved, fun=bfun, bwd=bbwd, n_res=n_res, out_avals=out_b)
    return outs, [0] * len(outs)


class custom_vjp:
    """A function with a custom reverse-mode rule: ``fwd(*args) -> (out, residuals)`` and
    ``bwd(residuals, cotangent) -> tuple of input cotangents`` (nondiff args come first in both).

    Forward mode (``jvp``, ``jacfwd``, ``hessian``) differentiates the primal function instead of failing.

    >>> @fl.custom_vjp
    ... def clip_grad(x):
    ...     return x
    >>> clip_grad.defvjp(lambda x: (x, None), lambda _, g: (fl.clip(g, -1.0, 1.0),))
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.__name__ = getattr(fun, "__name__", "custom_vjp")
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        self.fwd = fwd
        self.bwd = bwd

    def __call__(self, *args):
        if self.fwd is None:
            raise TypeError(f"custom_vjp function {self.__name__!r} has no rule yet; call f.defvjp(fwd, bwd)")
        if _state.trace is None:
            return self.fun(*args)
        nd = self.nondiff_argnums
        static, dyn, leaves, in_tree, full_args = _split_args(args, nd, self.__name__)
        store: dict = {}
        nd_vals = [static[i] for i in nd]

        def fun_flat(*xs):
            out = self.fun(*full_args(tree_util.unflatten(in_tree, list(xs))))
            o, t = tree_util.flatten(out)
            store["out_tree"] = t
            return [as_tensor_leaf(v, self.__name__) for v in o]

        def fwd_flat(*xs):
            res = self.fwd(*full_args(tree_util.unflatten(in_tree, list(xs))))
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(f"custom_vjp fwd of {self.__name__!r} must return (output, residuals)")
            out, r = res
            o, t = tree_util.flatten(out)
            store["out_tree"] = t
            rl, rt = tree_util.flatten(r)
            store["res_tree"] = rt
            return [as_tensor_leaf(v, self.__name__) for v in o], [as_tensor_leaf(v, self.__name__) for v in rl]

        def bwd_flat(res, cts):
            r = tree_util.unflatten(store["res_tree"], list(res))
            ct = tree_util.unflatten(store["out_tree"], list(cts))
            out = self.bwd(*nd_vals, r, ct)
            if not isinstance(out, (tuple, list)) or len(out) != len(dyn):
                raise TypeError(
                    f"custom_vjp bwd of {self.__name__!r} must return a tuple with one cotangent per "
                    f"differentiable argument ({len(dyn)}), got {type(out).__name__}"
                    + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
                )
            flat = []
            for d, c in zip(dyn, out):
                dl = tree_util.leaves(d)
                if c is None:
                    flat.extend([None] * len(dl))
                else:
                    cl = tree_util.leaves(c)
                    if len(cl) != len(dl):
                        raise TypeError(f"custom_vjp bwd of {self.__name__!r}: cotangent structure does not match")
                    flat.extend(as_tensor_leaf(v, self.__name__) for v in cl)
            return flat

        outs = custom_vjp_call_p.bind(*leaves, fun=fun_flat, fwd=fwd_flat, bwd=bwd_flat, store=store)
        return tree_util.unflatten(store["out_tree"], list(outs))


def checkpoint(fun: Callable, *, static_argnums: Sequence[int] = ()) -> Callable:
    """Rematerialize ``fun`` in reverse mode: its intermediates are recomputed in the backward pass, not stored.

    >>> g = fl.grad(lambda x: fl.checkpoint(lambda y: fl.sin(fl.sin(y)))(x))
    """
    from .autodiff import vjp

    cv = custom_vjp(fun, nondiff_argnums=static_argnums)

    def fwd(*args):
        return fun(*args), [a for i, a in enumerate(args) if i not in static_argnums]

    def bwd(*rest):
        nd_vals, dyn, ct = rest[:-2], rest[-2], rest[-1]
        it = iter(nd_vals)
        dit = iter(dyn)
        n = len(nd_vals) + len(dyn)
        full = [next(it) if i in static_argnums else next(dit) for i in range(n)]

        def f_dyn(*d):
            dd = iter(d)
            return fun(*[full[i] if i in static_argnums else next(dd) for i in range(n)])

        _, f_vjp = vjp(f_dyn, *dyn)
        return tuple(f_vjp(ct))

    cv.defvjp(fwd, bwd)
    cv.__name__ = f"checkpoint({getattr(fun, '__name__', 'fun')})"
    return cv


remat = checkpoint
