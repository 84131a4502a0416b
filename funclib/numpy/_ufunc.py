"""The ``ufunc`` object: an elementwise function with NumPy's call signature and its ``reduce``,
``accumulate``, ``outer``, ``reduceat`` and (functional) ``at`` methods.

Reductions and scans of associative ufuncs run as balanced trees (log2(n) vectorized steps); the others
(``subtract``, ``divide``, ``power``, ...) fold left to right as NumPy does, with ``fl.scan`` (one traced
step, looped in compiled code under ``jit``). Everything is built from funclib operations, so it
differentiates and vectorizes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np

from .. import dtypes
from ..core import Tensor, Tracer, concrete_or_none
from ..errors import DataDependentShapeError
from ..ops import creation as C
from ..ops.elementwise import negative
from ..ops.manipulation import moveaxis, stack
from ..ops.searching import where as _where
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ..primitives.reduce import cumulative
from ..transforms import scan
from ._util import NoValue, asarray, axes_tuple, check_ufunc_kw, is_python_scalar, no_out

__all__ = ["ufunc"]


def _cast_inputs(name, xs, dtype, casting):
    d = dtypes.canonicalize(dtype)
    out = []
    for x in xs:
        if is_python_scalar(x):
            out.append(C.asarray(x, dtype=d))
            continue
        x = asarray(x, name)
        if x.dtype != d:
            if not np.can_cast(x.dtype, d, casting=casting):
                raise TypeError(
                    f"numpy.{name}: cannot cast input from {x.dtype.name} to {d.name} with casting={casting!r}; "
                    "pass casting='unsafe' to allow it"
                )
            x = convert(x, d)
        out.append(x)
    return out


def prepare(name, xs, out, where, casting, order, dtype, signature):
    """Validate NumPy's ufunc keywords (off the fast path) and apply ``dtype``."""
    no_out(out, name)
    check_ufunc_kw(name, where, casting, order, signature)
    return _cast_inputs(name, xs, dtype, casting) if dtype is not None else list(xs)


def unary(name: str, impl: Callable, doc: str) -> Callable:
    def f(x, /, out=None, *, where=True, casting="same_kind", order="K", dtype=None, subok=True, signature=None):
        if out is not None or where is not True or dtype is not None or signature is not None or (
            casting != "same_kind" or order != "K"
        ):
            (x,) = prepare(name, (x,), out, where, casting, order, dtype, signature)
        return impl(x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def binary(name: str, impl: Callable, doc: str) -> Callable:
    def f(x1, x2, /, out=None, *, where=True, casting="same_kind", order="K", dtype=None, subok=True,
          signature=None):
        if out is not None or where is not True or dtype is not None or signature is not None or (
            casting != "same_kind" or order != "K"
        ):
            x1, x2 = prepare(name, (x1, x2), out, where, casting, order, dtype, signature)
        return impl(x1, x2)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def unary2(name: str, impl: Callable, doc: str) -> Callable:
    """A unary function with two outputs (``frexp``, ``modf``)."""

    def f(x, /, out=(None, None), *, where=True, casting="same_kind", order="K", dtype=None, subok=True,
          signature=None):
        (x,) = prepare(name, (x,), out, where, casting, order, dtype, signature)
        return impl(x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def binary2(name: str, impl: Callable, doc: str) -> Callable:
    """A binary function with two outputs (``divmod``)."""

    def f(x1, x2, /, out=(None, None), *, where=True, casting="same_kind", order="K", dtype=None, subok=True,
          signature=None):
        x1, x2 = prepare(name, (x1, x2), out, where, casting, order, dtype, signature)
        return impl(x1, x2)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def _moveaxis_front(x, axis):
    return x if axis == 0 else S.transpose(x, (axis,) + tuple(i for i in range(x.ndim) if i != axis))


def _take_axis0(x, lo, hi, step=1):
    return S.slice_(x, (lo,) + (0,) * (x.ndim - 1), (hi,) + tuple(x.shape[1:]), (step,) + (1,) * (x.ndim - 1))


def _tree_reduce(fn, x):
    """Reduce axis 0 of ``x`` with an associative ``fn`` by pairing neighbours: log2(n) vectorized steps."""
    while x.shape[0] > 1:
        n = x.shape[0]
        even, odd = _take_axis0(x, 0, n - n % 2, 2), _take_axis0(x, 1, n, 2)
        y = fn(even, odd)
        x = S.concatenate([y, _take_axis0(x, n - 1, n)], 0) if n % 2 else y
    return S.squeeze(x, (0,))


def _fold(fn, x, init):
    """Left fold over axis 0: ``fn(...fn(fn(init, x[0]), x[1])..., x[-1])``, with ``fl.scan``."""

    if x.shape[0] == 0:
        return init
    carry, _ = scan(lambda c, xi: (fn(c, xi), None), init, x)
    return carry


class ufunc:
    """NumPy's universal function: ``f(x1, x2)`` elementwise with broadcasting, plus ``f.reduce``,
    ``f.accumulate``, ``f.outer``, ``f.reduceat`` and ``f.at`` (which returns a new array: pass
    ``inplace=False``).

    >>> fnp.add.outer(fnp.arange(2), fnp.arange(3))
    Tensor([[0, 1, 2],
           [1, 2, 3]], dtype=int64)
    """

    def __init__(self, fn: Callable, nin: int, nout: int = 1, *, identity=None, associative: bool = False,
                 reducer: Callable | None = None):
        self._fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__signature__ = inspect.signature(fn)
        self.nin, self.nout, self.nargs = nin, nout, nin + nout
        self.identity = identity
        self._associative = associative
        self._reducer = reducer

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<ufunc '{self.__name__}'>"

    def _binary_only(self, method):
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"numpy.{self.__name__}.{method}: only binary ufuncs with one output support it")

    def reduce(self, array, /, axis=0, dtype=None, out=None, keepdims=False, initial=NoValue, where=True):
        """Apply the ufunc along ``axis``: ``add.reduce`` is ``sum``. ``initial`` starts the reduction;
        ``where`` (a mask) leaves elements out, which needs an identity or ``initial``.

        >>> fnp.multiply.reduce(fnp.array([1, 2, 3, 4]))
        Tensor(24, dtype=int64)
        """
        self._binary_only("reduce")
        name = f"{self.__name__}.reduce"
        no_out(out, name)
        x = asarray(array, name)
        if dtype is not None:
            x = _cast_inputs(name, (x,), dtype, "unsafe")[0]
        axes = axes_tuple(axis, x.ndim, name)
        if len(axes) > 1 and not self._associative:
            raise ValueError(f"numpy.{name}: reducing over several axes needs an associative ufunc")
        given = initial is not NoValue
        fill = self.identity if self.identity is not None else (initial if given else None)
        if where is not True:
            if fill is None:
                raise ValueError(f"numpy.{name}: where= needs an identity or initial= to fill the masked elements")

            mask = S.broadcast_to(asarray(where, name), tuple(x.shape))
            x = _where(mask, x, C.asarray(fill, dtype=x.dtype))
        moved = S.transpose(x, axes + tuple(i for i in range(x.ndim) if i not in axes))
        rest = tuple(moved.shape[len(axes):])
        flat = S.reshape(moved, (-1,) + rest)
        if flat.shape[0] == 0:
            if fill is None:
                raise ValueError(f"numpy.{name}: zero-size reduction with no identity; pass initial=")
            res = S.full(rest, fill, x.dtype)
            if given and self.identity is not None:
                res = self._fn(initial, res)
        elif not self._associative:
            start = flat[0] if not given else S.broadcast_to(C.asarray(initial, dtype=x.dtype), rest)
            res = _fold(self._fn, flat if given else flat[1:], start)
        else:
            res = self._reducer(x, axes) if self._reducer is not None else _tree_reduce(self._fn, flat)
            if given:
                res = self._fn(initial, res)
        if keepdims:
            res = S.reshape(res, tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
        return res

    def accumulate(self, array, /, axis=0, dtype=None, out=None):
        """Running results along ``axis``: ``add.accumulate`` is ``cumsum``.

        >>> fnp.maximum.accumulate(fnp.array([1, 3, 2, 5]))
        Tensor([1, 3, 3, 5], dtype=int64)
        """
        self._binary_only("accumulate")
        name = f"{self.__name__}.accumulate"
        no_out(out, name)
        x = asarray(array, name)
        if dtype is not None:
            x = _cast_inputs(name, (x,), dtype, "unsafe")[0]
        if x.ndim == 0:
            raise ValueError(f"numpy.{name}: cannot accumulate a 0-d array")
        ax = axes_tuple(axis, x.ndim, name, allow_none=False)[0]
        if x.shape[ax] == 0:
            return x
        if self._associative:
            return cumulative(self._fn, x, ax)

        moved = _moveaxis_front(x, ax)

        def step(c, xi):
            y = self._fn(c, xi)
            return y, y

        _, ys = scan(step, moved[0], moved[1:])
        ys = S.concatenate([S.expand_dims(moved[0], [0]), ys], 0)

        return moveaxis(ys, 0, ax)

    def outer(self, A, B, /, **kwargs):
        """``f(a, b)`` for every pair: the result has shape ``A.shape + B.shape``.

        >>> fnp.multiply.outer([1, 2], [1, 10]).shape
        (2, 2)
        """
        self._binary_only("outer")
        a, b = asarray(A, f"{self.__name__}.outer"), asarray(B, f"{self.__name__}.outer")
        a = S.reshape(a, tuple(a.shape) + (1,) * b.ndim)
        return self._fn(a, b, **kwargs)

    def reduceat(self, array, /, indices, axis=0, dtype=None, out=None):
        """Reductions over the slices ``[indices[i]:indices[i+1]]`` along ``axis`` (the single element at
        ``indices[i]`` where the next index is not larger), as NumPy defines them.

        >>> fnp.add.reduceat(fnp.arange(8), [0, 4, 1, 5])
        Tensor([ 6,  4, 10, 18], dtype=int64)
        """
        self._binary_only("reduceat")
        name = f"{self.__name__}.reduceat"
        no_out(out, name)
        x = asarray(array, name)
        if dtype is not None:
            x = _cast_inputs(name, (x,), dtype, "unsafe")[0]
        ax = axes_tuple(axis, x.ndim, name, allow_none=False)[0]
        idx = np.asarray(_concrete_indices(indices, name)).reshape(-1)
        n = x.shape[ax]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"numpy.{name}: indices must lie in [0, {n}) along axis {ax}")
        moved = _moveaxis_front(x, ax)
        pieces = []
        for i, lo in enumerate(idx):
            hi = int(idx[i + 1]) if i + 1 < idx.size else n
            pieces.append(self.reduce(moved[int(lo):hi], axis=0) if hi > lo else moved[int(lo)])

        return moveaxis(stack(pieces, axis=0), 0, ax)

    def at(self, a, indices, b=None, /, *, inplace=True):
        """``a`` with the ufunc applied at ``indices`` (with ``b`` as second operand), unbuffered as in NumPy:
        repeated indices accumulate for ``add`` and ``subtract``. NumPy changes ``a`` in place; here the result
        is returned, so pass ``inplace=False``.

        >>> fnp.add.at(fnp.zeros(3), fnp.array([0, 0, 2]), 1.0, inplace=False)
        Tensor([2., 0., 1.], dtype=float32)
        """
        name = f"{self.__name__}.at"
        if inplace:
            raise ValueError(
                f"numpy.{name}: funclib tensors are immutable, so the update cannot happen in place; pass "
                f"inplace=False and use the returned array (a = fnp.{name}(a, idx, b, inplace=False))"
            )
        x = asarray(a, name)
        ref = x.at[indices]
        if self.nin == 2 and b is None:
            raise TypeError(f"numpy.{name}: a binary ufunc needs the second operand b")
        if self.__name__ == "add":
            return ref.add(b)
        if self.__name__ == "subtract":
            return ref.add(negative(asarray(b, name)))
        _require_unique(indices, x, name)
        cur = ref.get()
        new = self._fn(cur) if self.nin == 1 else self._fn(cur, b)
        return ref.set(new)


def _concrete_indices(indices, name):
    if isinstance(indices, Tracer):
        c = concrete_or_none(indices)
        if c is None:
            raise DataDependentShapeError(f"numpy.{name}: indices decide the output shape and must be concrete")
        indices = c
    return indices.numpy() if isinstance(indices, Tensor) else np.asarray(indices)


def _require_unique(indices, x, name):
    """Repeated indices would apply the ufunc several times; a gather-then-scatter applies it once."""
    if isinstance(indices, Tracer) and concrete_or_none(indices) is None:
        raise ValueError(
            f"numpy.{name}: with traced indices repeats cannot be ruled out, and only add and subtract accumulate "
            "repeats; use x.at[idx].add(...) or make the indices concrete"
        )
    key = indices if isinstance(indices, tuple) else (indices,)
    flat = []
    for k in key:
        if isinstance(k, (Tensor, np.ndarray, list)):
            flat.append(np.asarray(_concrete_indices(k, name)))
    if flat:
        b = np.broadcast_arrays(*flat)
        rows = np.stack([np.where(v < 0, v + x.shape[i], v).reshape(-1) for i, v in enumerate(b)], 1)
        if len(np.unique(rows, axis=0)) != rows.shape[0]:
            raise ValueError(
                f"numpy.{name}: repeated indices apply the ufunc several times, which only add and subtract "
                "support here; combine the repeats first (e.g. with a reduction) or use unique indices"
            )

