"""Helpers shared by the primitive families: broadcasting, unbroadcasting, batch-axis moves, zeros."""

from __future__ import annotations

import numpy as np

from ..checks import check_int
from ..core import ShapedArray, Zero, _wrap, aval_of
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


def unbroadcast(ct, aval: ShapedArray):
    """Sum ``ct`` down to ``aval.shape`` (the cotangent of an implicit broadcast)."""
    shape = aval.shape
    if ct.shape == shape:
        return ct
    from .reduce import reduce_sum
    from .shape import reshape

    lead = ct.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and ct.shape[lead + i] != 1
    )
    out = reduce_sum(ct, axes) if axes else ct
    return reshape(out, shape) if out.shape != shape else out


def zeros(aval: ShapedArray):
    if not aval.shape:
        # a scalar constant is the same under every transform; larger zeros broadcast one, so that jit does not
        # capture an array of them
        return _wrap(np.zeros((), aval.dtype))
    from .shape import full

    return full(aval.shape, 0, aval.dtype)


def instantiate(t, primal=None):
    """Turn a symbolic ``Zero`` into an array of zeros."""
    if type(t) is Zero:
        return zeros(t.aval)
    return t


def zero_like(x) -> Zero:
    a = aval_of(x)
    return Zero(ShapedArray(a.shape, a.dtype))


def moveaxis(x, src: int, dst: int):
    from .shape import transpose

    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def bdim_to_front(x, d):
    """Move batch axis ``d`` (or None) to axis 0."""
    return x if d is None or d == 0 else moveaxis(x, d, 0)


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if type(axis) is not int:
        axis = check_int(axis, op, "axis")
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def np_dtype(x):
    return np.asarray(x).dtype
