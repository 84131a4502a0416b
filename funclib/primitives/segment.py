"""Segment reductions: ``segment_sum``, ``segment_max``, ``segment_min`` over axis 0, by integer segment ids.

``segment_sum(data, ids, num_segments)[s]`` is the sum of the rows ``data[i]`` with ``ids[i] == s``; ids outside
``[0, num_segments)`` are dropped (so padding rows can carry ``num_segments``), empty segments hold the identity
(0; ``-inf``/``+inf`` for max/min of floats, the integer extremes otherwise), as in ``jax.ops.segment_*``.
They are primitives for their kernels (``kernels.sparse.segment_reduce``: one pass, where a scatter-add
through ``np.add.at`` is several times slower) and their rules: ``segment_sum`` is linear (its transpose
gathers the cotangent rows back), max and min pass a segment's tangent through its maximal (minimal) rows,
averaged over ties as ``reduce_max`` does. Batching folds a batch of id vectors into one call by offsetting each
lane's ids by ``lane * num_segments``.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Zero, _wrap, aval_of, is_undefined
from ..errors import DTypeError, ShapeError
from ..kernels import sparse as K
from .elementwise import add, bitwise_and, convert, equal, greater_equal, less, multiply, safe_div
from .indexing import gather
from .shape import bdim_to_front, broadcast_in_dim, full, iota, reshape, select, transpose

_NUMERIC = frozenset(dtypes.NUMERIC + dtypes.LOW_PRECISION) - frozenset(dtypes.COMPLEX)
_INT_IDS = frozenset(dtypes.INTEGER)


def _abstract_for(name, ok):
    def rule(data, ids, *, num_segments):
        if data.ndim < 1:
            raise ShapeError(f"{name}: data must have at least one axis (the segmented one), got a scalar")
        if data.dtype not in ok:
            raise DTypeError(f"{name}: unsupported data dtype {data.dtype.name}; expected a real numeric dtype")
        if ids.dtype not in _INT_IDS or ids.shape != (data.shape[0],):
            raise ShapeError(
                f"{name}: segment_ids must be integers of shape ({data.shape[0]},), one per row of data "
                f"{data.str_short()}; got {ids.str_short()}"
            )
        if not isinstance(num_segments, int) or num_segments < 0:
            raise ValueError(f"{name}: num_segments must be a non-negative Python int, got {num_segments!r}")
        return ShapedArray((num_segments,) + tuple(data.shape[1:]), data.dtype)

    return rule


def _vmap_for(p):
    def rule(args, dims, *, num_segments):
        (data, ids), (dd, di) = args, dims
        if di is None:
            # one segmentation for every lane: the batch rides along as an extra column axis
            data = bdim_to_front(data, dd)
            perm = (1, 0) + tuple(range(2, data.ndim))
            return p.bind(transpose(data, perm), ids, num_segments=num_segments), 1
        ids = bdim_to_front(ids, di)
        b, n = ids.shape
        if dd is None:
            data = broadcast_in_dim(data, (b,) + tuple(data.shape), tuple(range(1, data.ndim + 1)))
        else:
            data = bdim_to_front(data, dd)
        ids = convert(ids, np.int64) if ids.dtype != np.int64 else ids
        lane = multiply(iota(np.int64, (b, n), 0), _wrap(np.asarray(num_segments, np.int64)))
        valid = bitwise_and(greater_equal(ids, _wrap(np.asarray(0, np.int64))),
                            less(ids, _wrap(np.asarray(num_segments, np.int64))))
        flat_ids = reshape(select(valid, add(ids, lane), _wrap(np.asarray(-1, np.int64))), (b * n,))
        out = p.bind(reshape(data, (b * n,) + tuple(data.shape[2:])), flat_ids, num_segments=b * num_segments)
        return reshape(out, (b, num_segments) + tuple(out.shape[1:])), 0

    return rule


def _segment(name, kind, ok):
    p = Primitive(name)
    p.family = "segment"
    abstract = _abstract_for(name, ok)

    @p.def_impl
    def _impl(data, ids, *, num_segments):
        data, ids = np.asarray(data), np.asarray(ids)
        abstract(aval_of(data), aval_of(ids), num_segments=num_segments)  # the kernel trusts its shapes
        return K.segment_reduce(kind, data, ids, num_segments)

    p.def_abstract_eval(abstract)
    p.def_vmap(_vmap_for(p))
    return p


segment_sum_p = _segment("segment_sum", "sum", _NUMERIC)
segment_sum_p.linear = True
segment_max_p = _segment("segment_max", "max", _NUMERIC)
segment_min_p = _segment("segment_min", "min", _NUMERIC)
for _p in (segment_max_p, segment_min_p):
    _p.no_rule["transpose"] = "not linear"


def _take_rows(x, ids, num_segments):
    """``x[ids]`` along axis 0, with zero rows where ``ids`` is out of range (the transpose of segment_sum), and
    the mask of the in-range rows, broadcast to the result's shape."""
    if num_segments == 0:  # every id is out of range
        shape = (ids.shape[0],) + tuple(x.shape[1:])
        return full(shape, 0, x.dtype), full(shape, False, np.bool_)
    valid = bitwise_and(greater_equal(ids, _zero_like(ids)), less(ids, _wrap(np.asarray(num_segments, ids.dtype))))
    safe = select(valid, ids, _zero_like(ids))
    rows = gather(x, reshape(safe, (ids.shape[0], 1)), (0,))
    mask = broadcast_in_dim(valid, tuple(rows.shape), (0,))
    return select(mask, rows, _wrap(np.zeros((), rows.dtype))), mask


def _zero_like(ids):
    return _wrap(np.zeros((), ids.dtype))


@segment_sum_p.def_jvp
def _sum_jvp(primals, tangents, *, num_segments):
    data, ids = primals
    out = segment_sum_p.bind(data, ids, num_segments=num_segments)
    t = tangents[0]
    if type(t) is Zero or out.dtype not in dtypes.INEXACT:
        return out, Zero(aval_of(out))
    return out, segment_sum_p.bind(t, ids, num_segments=num_segments)


@segment_sum_p.def_transpose
def _sum_transpose(ct, data, ids, *, num_segments):
    if is_undefined(ids):
        raise TypeError("segment_sum: the segment ids are not differentiable")
    return [_take_rows(ct, ids, num_segments)[0], None]


def _extremum_jvp(p):
    def rule(primals, tangents, *, num_segments):
        data, ids = primals
        out = p.bind(data, ids, num_segments=num_segments)
        t = tangents[0]
        if type(t) is Zero or out.dtype not in dtypes.INEXACT:
            return out, Zero(aval_of(out))
        # the rows attaining their segment's extremum share its tangent equally (ties as in reduce_max)
        rows, valid = _take_rows(out, ids, num_segments)
        hit = convert(bitwise_and(equal(data, rows), valid), data.dtype)
        count = segment_sum_p.bind(hit, ids, num_segments=num_segments)
        return out, safe_div(segment_sum_p.bind(t * hit, ids, num_segments=num_segments), count)

    return rule


segment_max_p.def_jvp(_extremum_jvp(segment_max_p))
segment_min_p.def_jvp(_extremum_jvp(segment_min_p))
