"""Array API searching functions: argmax, argmin, nonzero, where, searchsorted, count_nonzero.

``nonzero`` has a data-dependent output shape: it runs on concrete values (eagerly, or on the primal
under ``grad``) and raises ``DataDependentShapeError`` under ``jit``/``vmap``. The others have static
shapes and trace.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Tensor, _state, _wrap, concrete_or_none, current_trace
from ..errors import DataDependentShapeError, DTypeError, ShapeError
from ..namespace import public
from ..primitives import elementwise as E
from ..primitives import shape as S
from ..primitives.elementwise import _to_tensor, convert, promote_pair
from .indexing import take
from .reductions import _axes, sum


def require_concrete(x: Tensor, op: str, fix: str) -> Tensor:
    """The concrete tensor behind ``x``, or a ``DataDependentShapeError`` naming ``op`` and the fix."""
    c = concrete_or_none(x)
    if c is None:
        trace = getattr(current_trace(), "name", "a transform")
        raise DataDependentShapeError(
            f"{op}: the output shape depends on the values of the traced {x.aval.str_short()} argument, "
            f"which are unknown inside {trace}. Call {op} outside the transform (eagerly), or {fix}"
        )
    return c


@public
def where(condition, x1, x2, /) -> Tensor:
    """Elements of ``x1`` where ``condition`` holds, else of ``x2`` (broadcasting, promotion).

    >>> fl.where(fl.asarray([True, False]), 1.0, 0.0)
    Tensor([1., 0.], dtype=float32)
    """
    c = _to_tensor(condition, "where")
    if c.dtype != dtypes.bool_:
        raise DTypeError(
            f"where: the condition must be boolean, got {c.dtype.name}; compare it first (e.g. x > 0)"
        )
    x1, x2 = promote_pair("where", x1, x2)
    return S.select(c, x1, x2)


@public
def nonzero(x, /) -> tuple[Tensor, ...]:
    """The indices of the nonzero elements, one int64 tensor per axis (C order).

    Eager only: the number of nonzero elements decides the output shape.

    >>> fl.nonzero(fl.asarray([0, 3, 0, 5]))
    (Tensor([1, 3], dtype=int64),)
    """
    x = _to_tensor(x, "nonzero")
    if x.ndim == 0:
        raise ShapeError("nonzero: 0-d tensors are not supported; reshape to 1-D first (fl.reshape(x, (1,)))")
    c = require_concrete(
        x, "nonzero", "use fl.where(x != 0, a, b) or fl.count_nonzero, whose shapes do not depend on data."
    )
    return tuple(_wrap(i.astype(np.int64, copy=False)) for i in np.nonzero(c._value))


@public
def count_nonzero(x, /, *, axis=None, keepdims: bool = False) -> Tensor:
    """Number of nonzero elements over ``axis`` (all axes by default), as int64.

    >>> fl.count_nonzero(fl.asarray([[0, 1], [2, 3]]), axis=1)
    Tensor([1, 2], dtype=int64)
    """
    x = _to_tensor(x, "count_nonzero")
    _axes(x, axis, "count_nonzero")
    return sum(E.not_equal(x, 0), axis=axis, keepdims=keepdims)


@public
def searchsorted(x1, x2, /, *, side: str = "left", sorter=None) -> Tensor:
    """Indices where the elements of ``x2`` would be inserted into the sorted 1-D ``x1`` to keep it sorted.

    ``side='left'`` gives the first suitable index, ``'right'`` the last. NaN sorts after every number, as in
    ``fl.sort``. ``sorter`` is an index tensor that sorts ``x1`` (e.g. from ``fl.argsort``).

    >>> fl.searchsorted(fl.asarray([1.0, 2.0, 3.0]), fl.asarray([2.0, 2.5]))
    Tensor([1, 2], dtype=int64)
    """
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    x1, x2 = _to_tensor(x1, "searchsorted"), _to_tensor(x2, "searchsorted")
    if x1.ndim != 1:
        raise ShapeError(f"searchsorted: x1 must be 1-D, got shape {tuple(x1.shape)}")
    if x1.dtype in dtypes.COMPLEX or x2.dtype in dtypes.COMPLEX:
        raise DTypeError(
            "searchsorted: complex values have no order; search real and imaginary parts separately"
        )
    if sorter is not None:
        x1 = take(x1, _to_tensor(sorter, "searchsorted"), axis=0)
    if x1.dtype != x2.dtype:
        d = dtypes.result_type(x1, x2)
        x1, x2 = convert(x1, d), convert(x2, d)
    if _state.trace is None and type(x1) is Tensor and type(x2) is Tensor:
        return _wrap(np.searchsorted(x1._value, x2._value, side=side).astype(np.int64, copy=False))
    return _searchsorted_traced(x1, x2, side)


def _searchsorted_traced(x1, x2, side):
    """Count the elements of ``x1`` that sort before each query: O(n m), but static-shaped and traceable."""
    a = S.reshape(x1, (1,) * x2.ndim + (x1.shape[0],))
    v = S.reshape(x2, tuple(x2.shape) + (1,))
    if side == "left":
        before = E.less(a, v)
        if x1.dtype in dtypes.INEXACT:
            before = E.bitwise_or(before, E.bitwise_and(E.isnan(v), E.bitwise_invert(E.isnan(a))))
    else:
        before = E.less_equal(a, v)
        if x1.dtype in dtypes.INEXACT:
            before = E.bitwise_or(before, E.isnan(v))
    return sum(before, axis=-1)
