"""Custom derivative rules: ``custom_jvp`` and ``custom_vjp``.

Both bind a call primitive whose ``fun`` parameter is the flattened user function, so every transform sees them:
- ``custom_jvp_call``: the JVP rule runs the user's ``jvp``; vmap vectorizes ``fun`` and ``jvp``; staging traces
  ``fun`` for the output types.
- ``custom_vjp_call``: the JVP rule runs ``fwd`` and emits ``custom_lin``, a primitive linear in the tangents whose
  transpose is the user's ``bwd``. Evaluated *forwards* (plain ``jvp``, ``jacfwd``, ``hessian``), ``custom_lin``
  differentiates the primal function instead, so forward mode of a ``custom_vjp`` function works (JAX raises).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable, check_int
from funclib.core import Primitive, ShapedArray, Zero, _state, _wrap, aval_of, is_undefined, is_weak, set_trace
from funclib.errors import DTypeError, ShapeError
from funclib.jaxpr import JaxprTracer, has_effects, trace_to_jaxpr
from funclib.primitives.shape import bdim_to_front, broadcast_in_dim, instantiate, zeros

from ._api_util import as_tensor_leaf
from .autodiff import jvp as jvp_fn
from .batching import vmap


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


def _is_staged_tangent(t) -> bool:
    # reverse mode records the tangent map and transposes it, and so may any staged jaxpr (jit's JVP rule derives
    # one that grad transposes later): custom_lin must be recorded there for bwd to be used
    return type(t) is JaxprTracer


# ---------------------------------------------------------------------------------------------------------------
# custom_jvp

custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_jvp_call_p.family = "call"
custom_jvp_call_p.batch_named = True  # batching rules take the named axis (transforms/batching.py)
custom_jvp_call_p.no_rule["transpose"] = "its JVP is expressed with ordinary primitives, which are transposed instead"


@custom_jvp_call_p.def_impl
def _cjvp_impl(*args, fun, jvp, out_tree_store):
    with set_trace(None):
        return [x._value for x in fun(*[_wrap(a) for a in args])]


@custom_jvp_call_p.def_abstract_eval
def _cjvp_abstract(*avals, fun, jvp, out_tree_store):
    j, _, outs = trace_to_jaxpr(fun, list(avals), name="custom_jvp")
    out_tree_store["effects"] = has_effects(j)  # so the passes keep a call whose outputs are unused
    return [aval_of(o) for o in outs]


@custom_jvp_call_p.def_jvp
def _cjvp_jvp(primals, tangents, *, fun, jvp, out_tree_store):
    tangents = [instantiate(t) for t in tangents]
    outs, touts = jvp(primals, tangents)
    return outs, [Zero(aval_of(o)) if t is None else t for o, t in zip(outs, touts)]


@custom_jvp_call_p.def_vmap
def _cjvp_vmap(args, dims, *, fun, jvp, out_tree_store, axis=None, lanes=None):
    size = next((a.shape[d] for a, d in zip(args, dims) if d is not None), lanes)
    moved = [_to_front(a, d, size) for a, d in zip(args, dims)]
    bfun = vmap(lambda *xs: fun(*xs), axis_name=axis)
    n = len(args)

    def bjvp(primals, tangents):
        res = vmap(lambda *pt: tuple(map(list, jvp(list(pt[:n]), list(pt[n:])))), axis_name=axis)(
            *primals, *tangents
        )
        return res[0], res[1]

    outs = custom_jvp_call_p.bind(*moved, fun=bfun, jvp=bjvp, out_tree_store=out_tree_store)
    return outs, [0] * len(outs)


def _to_front(a, d, size):
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


def _nondiff_tuple(nums, op: str, what: str) -> tuple[int, ...]:
    nums = (nums,) if not isinstance(nums, (tuple, list)) else tuple(nums)
    return tuple(check_int(n, op, what, min=0) for n in nums)


def _check_nondiff(nums: tuple[int, ...], nargs: int, where: str, what: str) -> None:
    bad = [n for n in nums if n >= nargs]
    if bad:
        raise ValueError(
            f"{where}: {what}={nums} names argument(s) {bad}, but it was called with {nargs} positional "
            f"argument{'' if nargs == 1 else 's'}"
        )


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
        self.fun = check_callable(fun, "custom_jvp")
        self.nondiff_argnums = _nondiff_tuple(nondiff_argnums, "custom_jvp", "nondiff_argnums")
        self.jvp: Callable | None = None
        self.__name__ = getattr(fun, "__name__", "custom_jvp")
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the rule ``jvp(primals, tangents) -> (primal_out, tangent_out)`` (nondiff args come first)."""
        self.jvp = check_callable(jvp, f"custom_jvp({self.__name__}).defjvp", "jvp")
        return jvp

    def __call__(self, *args):
        _check_nondiff(self.nondiff_argnums, len(args), f"custom_jvp {self.__name__!r}", "nondiff_argnums")
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
custom_vjp_call_p.batch_named = True
custom_vjp_call_p.no_rule["transpose"] = "its JVP emits custom_lin, which carries the transpose (the bwd rule)"


@custom_vjp_call_p.def_impl
def _cvjp_impl(*args, fun, fwd, bwd, store):
    with set_trace(None):
        return [x._value for x in fun(*[_wrap(a) for a in args])]


@custom_vjp_call_p.def_abstract_eval
def _cvjp_abstract(*avals, fun, fwd, bwd, store):
    j, _, outs = trace_to_jaxpr(fun, list(avals), name="custom_vjp")
    store["effects"] = has_effects(j)
    return [aval_of(o) for o in outs]


@custom_vjp_call_p.def_jvp
def _cvjp_jvp(primals, tangents, *, fun, fwd, bwd, store):
    if not any(_is_staged_tangent(t) for t in tangents):
        # forward mode (jvp, jacfwd, hessian): differentiate the primal function itself
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
def _cvjp_vmap(args, dims, *, fun, fwd, bwd, store, axis=None, lanes=None):
    size = next((a.shape[d] for a, d in zip(args, dims) if d is not None), lanes)
    moved = [_to_front(a, d, size) for a, d in zip(args, dims)]
    bfun = vmap(lambda *xs: fun(*xs), axis_name=axis)

    def bfwd(*xs):
        outs, res = vmap(lambda *ys: tuple(map(list, fwd(*ys))), axis_name=axis)(*xs)
        return outs, res

    def bbwd(res, cts):
        return vmap(lambda r, c: list(bwd(list(r), list(c))), axis_name=axis)(list(res), list(cts))

    outs = custom_vjp_call_p.bind(*moved, fun=bfun, fwd=bfwd, bwd=bbwd, store=store)
    return outs, [0] * len(outs)


custom_lin_p = Primitive("custom_lin", multiple_results=True, linear=True)
custom_lin_p.family = "call"
custom_lin_p.batch_named = True


def _lin_split(args, n_res):
    res = list(args[:n_res])
    rest = list(args[n_res:])
    k = len(rest) // 2
    return res, rest[:k], rest[k:]


@custom_lin_p.def_impl
def _lin_impl(*args, fun, bwd, n_res, out_avals):
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
def _lin_vmap(args, dims, *, fun, bwd, n_res, out_avals, axis=None, lanes=None):
    size = next((a.shape[d] for a, d in zip(args, dims) if d is not None), lanes)
    moved = [_to_front(a, d, size) for a, d in zip(args, dims)]

    def bfun(*xs):
        return vmap(lambda *ys: fun(*ys), axis_name=axis)(*xs)

    def bbwd(res, cts):
        return vmap(lambda r, c: list(bwd(list(r), list(c))), axis_name=axis)(list(res), list(cts))

    out_b = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in out_avals)
    outs = custom_lin_p.bind(*moved, fun=bfun, bwd=bbwd, n_res=n_res, out_avals=out_b)
    return outs, [0] * len(outs)


class _BwdSpec:
    """What ``bwd`` must return for one call: per differentiable argument, its structure and its leaves' avals."""

    def __init__(self, name, fun, nondiff_argnums, dyn, leaves):
        self.name = name
        self.trees = [tree_util.structure(d) for d in dyn]
        self.avals = [aval_of(x) for x in leaves]
        try:
            params = list(inspect.signature(fun).parameters)
        except (TypeError, ValueError):
            params = []
        positions = [i for i in range(len(dyn) + len(nondiff_argnums)) if i not in nondiff_argnums]
        self.arg_names = [f"argument {i}" + (f" ({params[i]!r})" if i < len(params) else "") for i in positions]

    def _error(self, what):
        return TypeError(f"custom_vjp bwd of {self.name!r}: {what}")

    def check(self, out) -> list:
        """The flat input cotangents (None for zero), after checking ``out`` against the primal inputs."""
        n = len(self.trees)
        if not isinstance(out, (tuple, list)) or len(out) != n:
            got = type(out).__name__ + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
            raise self._error(
                f"must return a tuple with one cotangent per differentiable argument ({n}), got {got}"
                + (" (for one argument, return (g,))" if n == 1 and not isinstance(out, (tuple, list)) else "")
            )
        flat: list = []
        for k, (c, treedef) in enumerate(zip(out, self.trees)):
            avals = self.avals[len(flat) : len(flat) + treedef.num_leaves]
            flat.extend(self._leaves(k, c, treedef, avals))
        return flat

    def _leaves(self, k, c, treedef, avals):
        if c is None:  # None stands for a zero cotangent of the whole argument (or of any subtree, below)
            return [None] * treedef.num_leaves
        pairs, _ = tree_util.flatten_with_path(treedef.unflatten(list(range(treedef.num_leaves))))
        slots = treedef.unflatten([_Slot(i, p) for i, (p, _) in enumerate(pairs)])
        found: list = []

        def place(x, slot):
            if x is not None:
                found.append((x, slot))

        try:
            tree_util.map(place, c, slots, is_leaf=lambda x: x is None)
        except ValueError:
            raise self._error(
                f"the cotangent for {self.arg_names[k]} has structure {tree_util.structure(c)}, but the input has "
                f"{treedef}; return a cotangent with the input's structure (None for a zero subtree)"
            ) from None
        got: list = [None] * treedef.num_leaves
        for x, slot in found:
            if type(slot) is not _Slot:
                raise self._error(
                    f"the cotangent for {self.arg_names[k]} has a leaf ({_describe(x)}) where the input has the "
                    f"subtree {tree_util.structure(slot)}; return a cotangent shaped like the input"
                )
            got[slot.index] = self._leaf(k, slot.path, x, avals[slot.index])
        return got

    def _leaf(self, k, path, x, aval):
        where = self.arg_names[k] + tree_util.keystr(path)
        if aval.dtype not in dtypes.INEXACT:
            return None  # an integer or boolean input has no cotangent (JAX's float0); whatever bwd gave is unused
        if type(x) in (bool, int, float, complex) and aval.shape == ():
            return _wrap(np.asarray(x, aval.dtype))  # a Python scalar is weakly typed: it takes the input's dtype
        c = as_tensor_leaf(x, f"custom_vjp bwd of {self.name!r}")
        same_shape = tuple(c.shape) == tuple(aval.shape)
        if same_shape and c.dtype == aval.dtype:
            return c
        msg = (
            f"custom_vjp bwd of {self.name!r}: the cotangent for {where} is "
            f"{ShapedArray(tuple(c.shape), c.dtype).str_short()}, but that input is {aval.str_short()}; bwd must "
            "return, for each input, a cotangent of the input's shape and dtype (None for zero)"
        )
        if same_shape:
            raise DTypeError(f"{msg}; cast it with .astype(fl.{aval.dtype.name})")
        raise ShapeError(msg)


class _Slot:
    __slots__ = ("index", "path")

    def __init__(self, index, path):
        self.index = index
        self.path = path


def _describe(x) -> str:
    try:
        return aval_of(x).str_short()
    except TypeError:
        return type(x).__name__


class custom_vjp:
    """A function with a custom reverse-mode rule: ``fwd(*args) -> (out, residuals)`` and
    ``bwd(residuals, cotangent) -> tuple of input cotangents`` (nondiff args come first in both).

    Forward mode (``jvp``, ``jacfwd``, ``hessian``) differentiates the primal function instead of failing.

    >>> @fl.custom_vjp
    ... def clip_grad(x):
    ...     return x
    >>> clip_grad.defvjp(lambda x: (x, None), lambda _, g: (fl.clip(g, -1.0, 1.0),))
    """

    _argnums_label = "nondiff_argnums"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        self.fun = check_callable(fun, "custom_vjp")
        self.nondiff_argnums = _nondiff_tuple(nondiff_argnums, "custom_vjp", "nondiff_argnums")
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.__name__ = getattr(fun, "__name__", "custom_vjp")
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Set ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, cotangent) -> input cotangents``."""
        self.fwd = check_callable(fwd, f"custom_vjp({self.__name__}).defvjp", "fwd")
        self.bwd = check_callable(bwd, f"custom_vjp({self.__name__}).defvjp", "bwd")

    def __call__(self, *args):
        _check_nondiff(self.nondiff_argnums, len(args), f"custom_vjp {self.__name__!r}", self._argnums_label)
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

        spec = _BwdSpec(self.__name__, self.fun, nd, dyn, leaves)

        def bwd_flat(res, cts):
            r = tree_util.unflatten(store["res_tree"], list(res))
            ct = tree_util.unflatten(store["out_tree"], list(cts))
            return spec.check(self.bwd(*nd_vals, r, ct))

        outs = custom_vjp_call_p.bind(*leaves, fun=fun_flat, fwd=fwd_flat, bwd=bwd_flat, store=store)
        return tree_util.unflatten(store["out_tree"], list(outs))
