"""Reductions (max, min, prod, and, or), argmax/argmin, cumsum, and associative scans.

``reduce_sum`` is in ``shape.py``, beside broadcast_in_dim, its transpose. Only ``cumsum`` of the cumulative family
is a primitive (it is linear, with its own kernel); cumprod, cummax, cummin and logcumsumexp are associative scans
(``cumulative``) over primitives, so their derivatives are exact (also at zeros and ties) with no rules of their
own.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Zero, aval_of
from ..errors import DTypeError, ShapeError
from ..kernels import lowp
from ._util import check_axes, drop_axes
from .elementwise import convert, divide, equal, multiply, safe_mul
from .shape import (
    bdim_to_front,
    concatenate,
    full,
    keepdims_broadcast,
    reduce_sum_p,
    reduce_vmap,
    reshape,
    rev,
    slice_,
    transpose,
)


def reduction(name, np_fn, ok, *, needs_identity=False):
    """Define a reduction primitive over static ``axes``; ``np_fn(x, axes)`` keeps the dtype."""
    p = Primitive(name)
    p.family = "reduction"
    p.kernel = name

    @p.def_impl
    def _impl(x, *, axes):
        x = np.asarray(x)
        if x.dtype in LOWP:  # accumulate in float32 (int8 for int4) and round back
            return np.asarray(lowp.compute(lambda w: np.asarray(np_fn(w, axes)), x))
        return np.asarray(np_fn(x, axes))

    @p.def_abstract_eval
    def _abstract(x, *, axes):
        if x.dtype not in ok:
            raise DTypeError(f"{name}: unsupported dtype {x.dtype.name}")
        check_axes(name, x, axes)
        if needs_identity and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{name}: a zero-size axis in shape {x.shape} has no identity; pass a non-empty array")
        return ShapedArray(drop_axes(x.shape, axes), x.dtype)

    p.def_vmap(reduce_vmap(p))
    return p


LOWP = frozenset(dtypes.LOW_PRECISION)
FLOAT = frozenset(dtypes.FLOATING + dtypes.FLOAT8)
NUMERIC = frozenset(dtypes.NUMERIC) | LOWP
REAL = frozenset(dtypes.INTEGER + dtypes.REAL_FLOATING) | LOWP

# the ufuncs' reduce methods directly: what np.max/np.prod/... call, without their Python dispatch layer
reduce_max_p = reduction(
    "reduce_max", lambda x, a: np.maximum.reduce(x, axis=a), REAL | {dtypes.bool_}, needs_identity=True
)
reduce_min_p = reduction(
    "reduce_min", lambda x, a: np.minimum.reduce(x, axis=a), REAL | {dtypes.bool_}, needs_identity=True
)
reduce_prod_p = reduction("reduce_prod", lambda x, a: np.multiply.reduce(x, axis=a, dtype=x.dtype), NUMERIC)
reduce_and_p = reduction("reduce_and", lambda x, a: np.logical_and.reduce(x, axis=a), frozenset(dtypes.BOOL))
reduce_or_p = reduction("reduce_or", lambda x, a: np.logical_or.reduce(x, axis=a), frozenset(dtypes.BOOL))
for _p in (reduce_max_p, reduce_min_p, reduce_prod_p, reduce_and_p, reduce_or_p):
    _p.no_rule["transpose"] = "not linear"


def reduce_max(x, axes):
    return reduce_max_p.bind(x, axes=tuple(sorted(map(int, axes))))


def reduce_min(x, axes):
    return reduce_min_p.bind(x, axes=tuple(sorted(map(int, axes))))


def reduce_prod(x, axes):
    return reduce_prod_p.bind(x, axes=tuple(sorted(map(int, axes))))


def reduce_and(x, axes):
    return reduce_and_p.bind(x, axes=tuple(sorted(map(int, axes))))


def reduce_or(x, axes):
    return reduce_or_p.bind(x, axes=tuple(sorted(map(int, axes))))


def _minmax_jvp(p):
    def rule(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        out = p.bind(x, axes=axes)
        if type(t) is Zero or out.dtype not in FLOAT:
            return out, Zero(aval_of(out))
        # the tangent of the extremum is the mean tangent over the tied positions
        mask = convert(equal(x, keepdims_broadcast(out, x.shape, axes)), x.dtype)
        num = reduce_sum_p.bind(t * mask, axes=axes)
        return out, divide(num, reduce_sum_p.bind(mask, axes=axes))

    return rule


reduce_max_p.def_jvp(_minmax_jvp(reduce_max_p))
reduce_min_p.def_jvp(_minmax_jvp(reduce_min_p))


@reduce_prod_p.def_jvp
def _prod_jvp(primals, tangents, *, axes):
    (x,), (t,) = primals, tangents
    out = reduce_prod_p.bind(x, axes=axes)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if type(t) is Zero or out.dtype not in FLOAT or n == 0:
        return out, Zero(aval_of(out))
    # d prod / d x_i is the product of the others: exclusive cumulative products from both ends. Exact at zeros
    # and built from multiplications, so every higher order is exact too (dividing by x_i is not, at zeros)
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    lead = tuple(x.shape[i] for i in kept)
    last = len(lead)

    def flat(v):
        return reshape(transpose(v, kept + tuple(axes)), lead + (n,))

    def exclusive(v):
        c = cumulative(multiply, v, last)
        return concatenate([full(lead + (1,), 1, x.dtype), slice_(c, (0,) * v.ndim, lead + (n - 1,))], last)

    xf = flat(x)
    others = multiply(exclusive(xf), rev(exclusive(rev(xf, (last,))), (last,)))
    return out, reduce_sum_p.bind(safe_mul(flat(t), others), axes=(last,))  # others may overflow to inf


def _bool_jvp(p):
    def rule(primals, tangents, *, axes):
        out = p.bind(primals[0], axes=axes)
        return out, Zero(aval_of(out))

    return rule


reduce_and_p.def_jvp(_bool_jvp(reduce_and_p))
reduce_or_p.def_jvp(_bool_jvp(reduce_or_p))
reduce_and_p.no_rule["jvp"] = reduce_or_p.no_rule["jvp"] = "boolean output"


# --- argmax / argmin ----------------------------------------------------------------------------------------------


def _arg_prim(name, np_fn):
    p = Primitive(name)
    p.family = "reduction"
    p.kernel = name
    p.no_rule["jvp"] = "integer output"
    p.no_rule["transpose"] = "not linear"

    @p.def_impl
    def _impl(x, *, axis, index_dtype):
        return np.asarray(np_fn(x, axis=axis)).astype(index_dtype)

    @p.def_abstract_eval
    def _abstract(x, *, axis, index_dtype):
        if x.dtype not in REAL:
            raise DTypeError(f"{name}: unsupported dtype {x.dtype.name}; expected a real numeric dtype")
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"{name}: axis {axis} out of range for shape {x.shape}")
        if x.shape[axis] == 0:
            raise ShapeError(f"{name}: axis {axis} of shape {x.shape} is empty")
        return ShapedArray(drop_axes(x.shape, (axis,)), index_dtype)

    @p.def_jvp
    def _jvp(primals, tangents, **params):
        out = p.bind(primals[0], **params)
        return out, Zero(aval_of(out))

    @p.def_vmap
    def _vmap(args, dims, *, axis, index_dtype):
        x = bdim_to_front(args[0], dims[0])
        return p.bind(x, axis=axis + 1, index_dtype=index_dtype), 0

    return p


argmax_p = _arg_prim("argmax", np.argmax)
argmin_p = _arg_prim("argmin", np.argmin)


def argmax(x, axis: int, index_dtype=dtypes.int64):
    return argmax_p.bind(x, axis=int(axis), index_dtype=dtypes.canonicalize(index_dtype))


def argmin(x, axis: int, index_dtype=dtypes.int64):
    return argmin_p.bind(x, axis=int(axis), index_dtype=dtypes.canonicalize(index_dtype))


# --- cumsum -----------------------------------------------------------------------------------------------------------

cumsum_p = Primitive("cumsum", linear=True)
cumsum_p.family = "cumulative"
cumsum_p.kernel = "cumsum"


@cumsum_p.def_impl
def _cumsum_impl(x, *, axis, reverse):
    x = np.asarray(x)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return np.cumsum(x, axis=axis, dtype=x.dtype)


@cumsum_p.def_abstract_eval
def _cumsum_abstract(x, *, axis, reverse):
    if x.dtype not in NUMERIC:
        raise DTypeError(f"cumsum: unsupported dtype {x.dtype.name}")
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"cumsum: axis {axis} out of range for shape {x.shape}")
    return ShapedArray(x.shape, x.dtype)


@cumsum_p.def_jvp
def _cumsum_jvp(primals, tangents, *, axis, reverse):
    out = cumsum_p.bind(primals[0], axis=axis, reverse=reverse)
    t = tangents[0]
    if type(t) is Zero:
        return out, Zero(aval_of(out))
    return out, cumsum_p.bind(t, axis=axis, reverse=reverse)


cumsum_p.def_transpose(lambda ct, x, *, axis, reverse: [cumsum_p.bind(ct, axis=axis, reverse=not reverse)])


@cumsum_p.def_vmap
def _cumsum_vmap(args, dims, *, axis, reverse):
    x = bdim_to_front(args[0], dims[0])
    return cumsum_p.bind(x, axis=axis + 1, reverse=reverse), 0


def cumsum(x, axis: int, reverse: bool = False):
    return cumsum_p.bind(x, axis=int(axis), reverse=bool(reverse))


def cumulative(fn, x, axis: int):
    """Inclusive scan of an associative ``fn`` along ``axis`` by recursive doubling (log2(n) steps).

    Built from slices, concatenations and ``fn``, so it differentiates exactly wherever ``fn`` does.
    """
    n = x.shape[axis]
    shift = 1
    while shift < n:
        lo, hi = [0] * x.ndim, list(x.shape)
        hi[axis] = n - shift
        head = slice_(x, lo, hi)
        lo2 = [0] * x.ndim
        lo2[axis] = shift
        tail = slice_(x, lo2, list(x.shape))
        combined = fn(head, tail)
        keep_hi = list(x.shape)
        keep_hi[axis] = shift
        x = concatenate([slice_(x, [0] * x.ndim, keep_hi), combined], axis)
        shift *= 2
    return x
