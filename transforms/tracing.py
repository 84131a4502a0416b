"""``make_jaxpr`` and ``eval_shape``: trace a function with abstract inputs."""

from __future__ import annotations

from collections.abc import Callable

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import ShapedArray, aval_of
from funclib.jaxpr import ClosedJaxpr, trace_to_jaxpr

from ._api_util import as_tensor_leaf


def _leaf_aval(x):
    if isinstance(x, ShapedArray):
        return x
    if type(x) in (bool, int, float, complex):  # weakly typed, as under jit
        return ShapedArray((), dtypes.weak_dtype(x), weak_type=True)
    return aval_of(as_tensor_leaf(x, "make_jaxpr"))


def make_jaxpr(fun: Callable, static_argnums: tuple[int, ...] = ()) -> Callable[..., ClosedJaxpr]:
    """A function that traces ``fun`` at its arguments' shapes and dtypes and returns the jaxpr.

    Arguments may be tensors, pytrees of tensors, or ``fl.ShapeDtypeStruct``/``ShapedArray`` placeholders.

    >>> print(fl.make_jaxpr(lambda x: fl.sin(x) * 2.0)(fl.ones(3)))
    { lambda ; a:f32[3]. let
        b:f32[3] = sin a
        c:f32[3] = mul b 2.0:f32[]
      in (c,) }
    """
    check_callable(fun, "make_jaxpr")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    def traced(*args, **kwargs):
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_util.flatten((dyn, kwargs))
        avals = [_leaf_aval(x) for x in leaves]

        def flat(*xs):
            d, kw = tree_util.unflatten(in_tree, list(xs))
            it = iter(d)
            full = [args[i] if i in static else next(it) for i in range(len(args))]
            out = fun(*full, **kw)
            return [as_tensor_leaf(o, "make_jaxpr output") for o in tree_util.leaves(out)]

        jaxpr, consts, _ = trace_to_jaxpr(flat, avals, name="make_jaxpr")
        return ClosedJaxpr(jaxpr, consts)

    traced.__name__ = f"make_jaxpr({getattr(fun, '__name__', 'fun')})"
    return traced


def eval_shape(fun: Callable, *args, **kwargs):
    """The shapes and dtypes of ``fun(*args, **kwargs)`` (a pytree of ``ShapedArray``), computing nothing.

    >>> fl.eval_shape(lambda x: x.sum(0), fl.ones((3, 4)))
    ShapedArray(f32[4])
    """
    check_callable(fun, "eval_shape")
    leaves, in_tree = tree_util.flatten((args, kwargs))
    avals = [_leaf_aval(x) for x in leaves]
    store = {}

    def flat(*xs):
        a, kw = tree_util.unflatten(in_tree, list(xs))
        out = fun(*a, **kw)
        o, t = tree_util.flatten(out)
        store["tree"] = t
        return [as_tensor_leaf(v, "eval_shape output") for v in o]

    _, _, outs = trace_to_jaxpr(flat, avals, name="eval_shape")
    return tree_util.unflatten(store["tree"], [ShapedArray(tuple(o.shape), o.dtype) for o in outs])


ShapeDtypeStruct = ShapedArray
