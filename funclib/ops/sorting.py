"""Array API sorting functions: ``sort`` and ``argsort``, over the stable multi-operand ``sort`` primitive.

Sorting is always stable (``stable=False`` is accepted and gives the same, stable, order). A descending
sort is the stable ascending sort of the reversed axis, reversed back, so ties keep their original order.
NaN sorts after every number (first when descending); ``-0`` and ``+0`` are equal.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Tensor
from ..errors import DTypeError, ShapeError
from ..namespace import public
from ..primitives import shape as S
from ..primitives._util import normalize_axis
from ..primitives.elementwise import _to_tensor, subtract
from ..primitives.sort import sort as _sort_prim


def _prepare(x, axis, op):
    x = _to_tensor(x, op)
    if x.ndim == 0:
        raise ShapeError(f"{op}: needs at least one dimension, got a 0-d tensor; reshape it to (1,) first")
    if x.dtype in dtypes.COMPLEX:
        raise DTypeError(f"{op}: complex values have no order; sort by fl.real(x) and fl.imag(x) explicitly")
    return x, normalize_axis(axis, x.ndim, op)


@public
def sort(x, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """The values of ``x`` sorted along ``axis`` (differentiable: the tangent is permuted alike).

    Args:
        axis: the axis to sort along (default: the last).
        descending: largest first.
        stable: accepted for the standard; the sort is always stable.

    >>> fl.sort(fl.asarray([3.0, 1.0, 2.0]), descending=True)
    Tensor([3., 2., 1.], dtype=float32)
    """
    x, ax = _prepare(x, axis, "sort")
    if not descending:
        return _sort_prim([x], ax)[0]
    return S.rev(_sort_prim([S.rev(x, (ax,))], ax)[0], (ax,))


@public
def argsort(x, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """The int64 indices that sort ``x`` along ``axis`` (ties keep their original order).

    Args:
        axis: the axis to sort along (default: the last).
        descending: indices of the largest first.
        stable: accepted for the standard; the sort is always stable.

    >>> fl.argsort(fl.asarray([3.0, 1.0, 2.0]))
    Tensor([1, 2, 0], dtype=int64)
    """
    x, ax = _prepare(x, axis, "argsort")
    idx = S.iota(np.int64, tuple(x.shape), ax)
    if not descending:
        return _sort_prim([x, idx], ax, num_keys=1)[1]
    perm = _sort_prim([S.rev(x, (ax,)), idx], ax, num_keys=1)[1]
    # perm indexes the reversed axis; map back to original positions, then restore descending order
    n = x.shape[ax]
    return S.rev(subtract(S.full((), n - 1, np.int64), perm), (ax,))
