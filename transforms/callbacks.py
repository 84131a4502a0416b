"""Host callbacks: Python code run with concrete values from inside traced code.

- ``debug_callback`` is an *effect* (``Primitive.effect``): it has no outputs and runs for what it does (printing,
  logging), so the passes never drop, merge, fold or reorder it. Under ``jit`` it runs at every call, in program
  order; under ``grad`` it sees primal values (its JVP rule binds it on the primals, which reverse mode computes
  in the forward pass); under ``vmap`` it runs once per lane, lanes in order (nested vmaps: outer lanes first).
- ``pure_callback`` is a pure function of its inputs with declared result shapes and dtypes: NumPy or SciPy code
  called from traced code. It may be dropped when its result is unused or merged with an identical call. It has
  no derivative of its own (wrap the function that calls it in ``custom_jvp``/``custom_vjp``); its ``vmap`` rule
  loops over lanes or calls once on the batch, as ``vmap_method`` says.

Callbacks receive NumPy arrays (read-only views; copy one to modify it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from funclib import tree as tree_util
from funclib.checks import check_callable, check_choice
from funclib.core import Primitive, ShapedArray, Tensor, _wrap
from funclib.errors import DTypeError, FunclibError, ShapeError
from funclib.primitives.shape import bdim_to_front, broadcast_in_dim, reshape

from ._api_util import as_tensor_leaf


class CallbackError(FunclibError, TypeError):
    """A ``pure_callback`` returned something other than the declared results."""


def _readonly(a) -> np.ndarray:
    # a callback is host code: a device operand is copied to the host for it, as the caller asked
    a = np.asarray(a) if type(a) is np.ndarray or getattr(a, "device", "cpu") == "cpu" else \
        _wrap(a).to_device("cpu")._value
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def _split_operands(args, kwargs):
    """Tensor leaves (traced or not) become operands; every other leaf is static, kept in the callback."""
    leaves, tree = tree_util.flatten((args, kwargs))
    is_op = [isinstance(x, Tensor) for x in leaves]
    operands = [x for x, m in zip(leaves, is_op) if m]

    def rebuild(arrays):
        it = iter(arrays)
        full = [next(it) if m else x for x, m in zip(leaves, is_op)]
        return tree_util.unflatten(tree, full)

    return operands, rebuild


class _HostFn:
    """A flat host function, shown by name in printed jaxprs."""

    __slots__ = ("fn", "label", "__name__")

    def __init__(self, fn, label: str, name: str):
        self.fn = fn
        self.label = label
        self.__name__ = name

    def __call__(self, *arrays):
        return self.fn(*arrays)

    def __repr__(self):
        return self.label



# ---------------------------------------------------------------------------------------------------------------
# debug_callback: an effect with no outputs


debug_callback_p = Primitive("debug_callback", multiple_results=True)
debug_callback_p.effect = True
debug_callback_p.runs_on_devices = True  # host code: operands come to the host for it (results go back)
debug_callback_p.family = "callback"


@debug_callback_p.def_impl
def _debug_impl(*args, callback):
    callback(*[_readonly(a) for a in args])
    return []


@debug_callback_p.def_abstract_eval
def _debug_abstract(*avals, callback):
    return []


@debug_callback_p.def_jvp
def _debug_jvp(primals, tangents, *, callback):
    debug_callback_p.bind(*primals, callback=callback)
    return [], []


@debug_callback_p.def_transpose
def _debug_transpose(cts, *args, callback):
    # no outputs, so no cotangent flows through it; a linear input has no value to show
    return [None] * len(args)


class _PerLane:
    """A callback run once per lane of a batch (the batch axis in front, ``None`` marks an unbatched operand)."""

    __slots__ = ("callback", "batched", "size")

    def __init__(self, callback, batched, size):
        self.callback = callback
        self.batched = tuple(batched)
        self.size = size

    def __call__(self, *arrays):
        for i in range(self.size):
            self.callback(*[a[i] if b else a for a, b in zip(arrays, self.batched)])

    def __repr__(self):
        return f"per_lane({self.callback!r})"


@debug_callback_p.def_vmap
def _debug_vmap(args, dims, *, callback):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [a if d is None else bdim_to_front(a, d) for a, d in zip(args, dims)]
    debug_callback_p.bind(*moved, callback=_PerLane(callback, [d is not None for d in dims], size))
    return [], []


def debug_callback(callback: Callable[..., Any], *args, ordered: bool = False, **kwargs) -> None:
    """Call ``callback(*args, **kwargs)`` on the host with concrete values, also inside ``jit``/``vmap``/``grad``.

    Tensor leaves of ``args``/``kwargs`` reach ``callback`` as read-only NumPy arrays; other leaves as given. The
    return value is ignored. Callbacks run in program order, at every call of a jitted function; under ``grad``
    they see primal values; under ``vmap`` ``callback`` runs once per lane, lanes in order. ``ordered`` is
    accepted for JAX compatibility: funclib always runs callbacks in program order.

    >>> seen = []
    >>> f = fl.jit(lambda x: (fl.debug.callback(seen.append, x * 2), x + 1)[1])
    >>> f(fl.tensor(1.0))
    Tensor(2., dtype=float32)
    >>> seen
    [array(2., dtype=float32)]
    """
    check_callable(callback, "debug.callback", "callback")
    _bind_debug(callback, None, args, kwargs)


def _bind_debug(callback, label, args, kwargs) -> None:
    operands, rebuild = _split_operands(args, kwargs)
    name = getattr(callback, "__name__", type(callback).__name__)

    def flat(*arrays):
        a, kw = rebuild(arrays)
        try:
            callback(*a, **kw)
        except Exception as e:
            e.add_note(f"raised by the host callback {name!r} run by fl.debug.callback")
            raise

    debug_callback_p.bind(*operands, callback=_HostFn(flat, label or name, name))


def _printable(a):
    return a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a


def debug_print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:
    """Print ``fmt.format(*args, **kwargs)`` with concrete values, also inside ``jit``/``vmap``/``grad``.

    Tensors are formatted as NumPy arrays (0-d ones as NumPy scalars, so format specs such as ``{x:.3f}``
    work). Prints happen in program order, at every call of a jitted function; under ``grad`` they show primal
    values; under ``vmap`` each print runs once per lane, lanes in order (nested vmaps: outer lanes first). A
    print in a branch of ``fl.cond`` runs when its branch does; under ``vmap`` with a batched predicate both
    branches run, for every lane. A ``vmap`` that runs a collective over chunks runs the function once per
    collective, and its prints with it.

    >>> f = fl.jit(lambda x: (fl.debug.print("x = {x}", x=x), x * 2)[1])
    >>> f(fl.tensor([1.0, 2.0]))
    x = [1. 2.]
    Tensor([2., 4.], dtype=float32)
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: fmt must be a format string, got {type(fmt).__name__}")

    def show(*a, **kw):
        a = [_printable(v) for v in a]
        kw = {k: _printable(v) for k, v in kw.items()}
        sys.stdout.write(fmt.format(*a, **kw) + "\n")

    show.__name__ = "debug.print"
    _bind_debug(show, f"print({fmt!r})", args, kwargs)


# ---------------------------------------------------------------------------------------------------------------
# pure_callback: a pure function with declared results

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")

pure_callback_p = Primitive("pure_callback", multiple_results=True)
pure_callback_p.family = "callback"
pure_callback_p.runs_on_devices = True  # host code: operands come to the host for it, results go back
pure_callback_p.no_rule["jvp"] = (
    "a pure_callback runs opaque host code: give the function that calls it a derivative with fl.custom_jvp or "
    "fl.custom_vjp (see the docstring of fl.pure_callback)"
)
pure_callback_p.no_rule["transpose"] = "not linear (host code is opaque)"


@pure_callback_p.def_impl
def _pure_impl(*args, callback, result_avals, vmap_method):
    res = callback(*[_readonly(a) for a in args])
    who = repr(getattr(callback, "__name__", "callback"))
    return [_checked_result(r, a, i, who) for i, (r, a) in enumerate(zip(res, result_avals))]


@pure_callback_p.def_abstract_eval
def _pure_abstract(*avals, callback, result_avals, vmap_method):
    return list(result_avals)


def _stacked(avals, size):
    return tuple(ShapedArray((size,) + a.shape, a.dtype) for a in avals)


class _Sequential:
    """A pure callback looped over the lanes of a batch; the lanes' results are stacked."""

    __slots__ = ("callback", "batched", "size", "avals", "__name__")

    def __init__(self, callback, batched, size, avals):
        self.callback = callback
        self.batched = tuple(batched)
        self.size = size
        self.avals = avals
        self.__name__ = getattr(callback, "__name__", "callback")

    def __call__(self, *arrays):
        outs = [np.empty((self.size,) + a.shape, a.dtype) for a in self.avals]
        who = f"{self.__name__!r} (vmap_method='sequential')"
        for i in range(self.size):
            res = self.callback(*[a[i] if b else a for a, b in zip(arrays, self.batched)])
            for k, (buf, r, a) in enumerate(zip(outs, res, self.avals)):
                buf[i] = _checked_result(r, a, k, who)
        return outs

    def __repr__(self):
        return f"sequential({self.callback!r})"


@pure_callback_p.def_vmap
def _pure_vmap(args, dims, *, callback, result_avals, vmap_method):
    if vmap_method is None:
        raise NotImplementedError(
            "pure_callback under vmap needs vmap_method: 'sequential' calls the callback once per lane, "
            "'expand_dims' once with the batch axis in front of every argument (size 1 where an argument is not "
            "batched), 'broadcast_all' once with every argument broadcast to the batch; pass "
            "fl.pure_callback(f, shapes, *args, vmap_method='sequential') (or one of the others)"
        )
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    avals = _stacked(result_avals, size)
    batched = [d is not None for d in dims]
    moved = [a if d is None else bdim_to_front(a, d) for a, d in zip(args, dims)]
    if vmap_method in ("sequential", "sequential_unrolled"):
        cb = _Sequential(callback, batched, size, result_avals)
    else:
        if vmap_method == "expand_dims":
            moved = [a if b else reshape(a, (1,) + tuple(a.shape)) for a, b in zip(moved, batched)]
        else:
            moved = [
                a if b else broadcast_in_dim(a, (size,) + tuple(a.shape), tuple(range(1, a.ndim + 1)))
                for a, b in zip(moved, batched)
            ]
        cb = callback  # called on the whole batch: its results must carry the batch axis in front
    outs = pure_callback_p.bind(*moved, callback=cb, result_avals=avals, vmap_method=vmap_method)
    return outs, [0] * len(outs)


def _checked_result(r, aval: ShapedArray, i: int, who: str) -> np.ndarray:
    a = np.asarray(r)
    if a.shape != aval.shape:
        raise ShapeError(
            f"pure_callback: {who} returned result {i} of shape {a.shape}, but result_shape_dtypes declares "
            f"{aval.str_short()}; return arrays of the declared shapes (or fix result_shape_dtypes)"
        )
    if a.dtype != aval.dtype:
        raise DTypeError(
            f"pure_callback: {who} returned result {i} of dtype {a.dtype.name}, but result_shape_dtypes declares "
            f"{aval.str_short()}; cast it in the callback (np.asarray(r, np.{aval.dtype.name})) or declare "
            f"{a.dtype.name}"
        )
    return a


def _result_aval(x, i) -> ShapedArray:
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(
            f"pure_callback: result_shape_dtypes leaf {i} is {type(x).__name__}; give objects with .shape and "
            ".dtype, such as fl.ShapeDtypeStruct((3,), fl.float32) or an example array"
        )
    return ShapedArray(tuple(int(s) for s in shape), np.dtype(dtype))


def pure_callback(
    callback: Callable[..., Any],
    result_shape_dtypes: Any,
    *args,
    vmap_method: str | None = None,
    **kwargs,
) -> Any:
    """Call a pure host function (NumPy or SciPy code) from traced code: ``jit``, ``vmap``, control flow.

    Args:
      callback: ``callback(*args, **kwargs)`` on read-only NumPy arrays (Tensor leaves; other leaves as given),
        returning arrays with the structure, shapes and dtypes of ``result_shape_dtypes``. It must be pure: it
        may run more than once, or not at all when its result is unused.
      result_shape_dtypes: a pytree of ``fl.ShapeDtypeStruct`` (or anything with ``.shape``/``.dtype``).
      vmap_method: how ``vmap`` batches it: ``"sequential"`` (one call per lane, results stacked),
        ``"expand_dims"`` (one call, batched arguments with the batch axis in front and the others with a
        size-1 axis there; results must have the batch axis in front), ``"broadcast_all"`` (one call, every
        argument broadcast to the batch). ``None``: ``vmap`` raises.

    Returns:
      A pytree of tensors like ``result_shape_dtypes``.

    A pure callback has no derivative; give the function that calls it one with ``fl.custom_jvp`` or
    ``fl.custom_vjp`` (whose rules may use pure callbacks too)::

        @fl.custom_jvp
        def bessel(x):
            return fl.pure_callback(scipy.special.j0, fl.ShapeDtypeStruct(x.shape, x.dtype), x,
                                    vmap_method="expand_dims")

        @bessel.defjvp
        def _(primals, tangents):
            (x,), (t,) = primals, tangents
            d = fl.pure_callback(lambda v: -scipy.special.j1(v), fl.ShapeDtypeStruct(x.shape, x.dtype), x,
                                 vmap_method="expand_dims")
            return bessel(x), d * t

    >>> f = fl.jit(lambda x: fl.pure_callback(np.cumsum, fl.ShapeDtypeStruct((3,), fl.float32), x))
    >>> f(fl.ones(3))
    Tensor([1., 2., 3.], dtype=float32)
    """
    check_callable(callback, "pure_callback", "callback")
    if vmap_method is not None:
        check_choice(vmap_method, "pure_callback", "vmap_method", VMAP_METHODS)
    r_leaves, r_tree = tree_util.flatten(result_shape_dtypes, is_leaf=lambda x: isinstance(x, ShapedArray))
    avals = tuple(_result_aval(x, i) for i, x in enumerate(r_leaves))
    operands, rebuild = _split_operands(args, kwargs)
    operands = [as_tensor_leaf(x, "pure_callback") for x in operands]
    name = getattr(callback, "__name__", type(callback).__name__)

    def flat(*arrays):
        a, kw = rebuild(arrays)
        try:
            res = callback(*a, **kw)
        except Exception as e:
            e.add_note(f"raised by the host function {name!r} run by fl.pure_callback")
            raise
        leaves, tree = tree_util.flatten(res)
        if tree != r_tree:
            raise CallbackError(
                f"pure_callback: {name!r} returned a result of structure {tree}, but result_shape_dtypes has "
                f"structure {r_tree}"
            )
        return leaves

    outs = pure_callback_p.bind(
        *operands, callback=_HostFn(flat, name, name), result_avals=avals, vmap_method=vmap_method
    )
    return tree_util.unflatten(r_tree, list(outs))


__all__ = ["debug_callback", "debug_print", "pure_callback", "CallbackError", "debug_callback_p", "pure_callback_p"]
