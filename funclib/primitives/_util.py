"""Arithmetic on shapes and axes shared by the primitive families (no primitives: the lowest file)."""

from __future__ import annotations

import numpy as np

from ..checks import check_int
from ..core import ShapedArray, Zero, aval_of
from ..errors import ShapeError


def broadcast_shapes(*shapes, op: str = "operation") -> tuple[int, ...]:
    first = shapes[0]
    if len(shapes) == 2:
        second = shapes[1]
        if first == second or not second:
            return tuple(first)
        if not first:
            return tuple(second)
        # one shape ends with the other (a bias against a batch): the longer one
        n1, n2 = len(first), len(second)
        if n1 > n2 and tuple(first[n1 - n2 :]) == tuple(second):
            return tuple(first)
        if n2 > n1 and tuple(second[n2 - n1 :]) == tuple(first):
            return tuple(second)
    elif all(s == first for s in shapes):
        return tuple(first)
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d == 1:
                continue
            if size not in (1, d):
                raise ShapeError(
                    f"{op}: shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together "
                    f"(axis {i - ndim} has sizes {size} and {d}); reshape or use fl.expand_dims so that each "
                    "axis matches or is 1"
                )
            size = d
        out.append(size)
    return tuple(out)


def zero_like(x) -> Zero:
    a = aval_of(x)
    return Zero(ShapedArray(a.shape, a.dtype))


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if type(axis) is not int:
        axis = check_int(axis, op, "axis")
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def np_dtype(x):
    return np.asarray(x).dtype


def check_axes(op: str, x, axes) -> None:
    """Raise unless ``axes`` are distinct axes of the abstract value ``x``."""
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise ShapeError(f"{op}: axes {axes} invalid for an operand of rank {x.ndim} (shape {x.shape})")


def drop_axes(shape, axes) -> tuple[int, ...]:
    return tuple(d for i, d in enumerate(shape) if i not in axes)
