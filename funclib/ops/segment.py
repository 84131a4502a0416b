"""Segment reductions (``segment_sum``, ``segment_mean``, ``segment_max``, ``segment_min``): reductions over
the rows of ``data`` grouped by an integer id per row, the message-passing step of graph networks.

Semantics follow ``jax.ops.segment_*``: ``out[s]`` reduces the rows with ``segment_ids == s``; ids outside
``[0, num_segments)`` are dropped; empty segments give 0 (sum, mean), ``-inf``/``+inf`` (max/min of floats; the
largest finite values for float8, whose casts saturate) or the integer extremes. ``num_segments`` is static; it
may be omitted only for concrete ids (then ``max + 1``). All four differentiate with respect to ``data``
(max/min share a segment's gradient among tied rows), batch under ``vmap`` (also over per-lane ids) and run
under ``jit``.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes
from ..core import Tensor, concrete_or_none
from ..errors import DTypeError
from ..namespace import public
from ..primitives.elementwise import _to_tensor, convert, maximum
from ..primitives.segment import segment_max_p, segment_min_p, segment_sum_p
from .creation import ones
from .elementwise import divide
from .manipulation import reshape


def _args(data, segment_ids, num_segments, op) -> tuple[Tensor, Tensor, int]:
    data, ids = _to_tensor(data, op), _to_tensor(segment_ids, op)
    if ids.dtype not in dtypes.INTEGER:
        raise DTypeError(f"{op}: segment_ids must be integers, got {ids.dtype.name}")
    if num_segments is None:
        c = concrete_or_none(ids)
        if c is None:
            raise ValueError(
                f"{op}: num_segments is required when segment_ids are traced (under jit or vmap), because it sets "
                "the output shape; pass num_segments=..."
            )
        v = np.asarray(c._value)
        num_segments = int(v.max()) + 1 if v.size else 0
    return data, ids, operator.index(num_segments)


@public
def segment_sum(data, segment_ids, num_segments: int | None = None) -> Tensor:
    """Sum of the rows of ``data`` in each segment.

    Args:
        data: ``(n, ...)``; the rows (axis 0) are reduced.
        segment_ids: ``(n,)`` integers, the segment of each row (out-of-range ids are dropped).
        num_segments: the number of segments (the output's first axis); default ``max(ids) + 1`` (concrete ids).

    Returns:
        ``(num_segments, ...)``.

    >>> fl.segment_sum(fl.tensor([1.0, 2.0, 3.0, 4.0]), fl.tensor([0, 0, 2, 2]), 3)
    Tensor([3., 0., 7.], dtype=float32)
    """
    data, ids, n = _args(data, segment_ids, num_segments, "segment_sum")
    return segment_sum_p.bind(data, ids, num_segments=n)


@public
def segment_max(data, segment_ids, num_segments: int | None = None) -> Tensor:
    """Maximum of the rows of ``data`` in each segment (``-inf`` for an empty one); see ``segment_sum``.

    >>> fl.segment_max(fl.tensor([1.0, 5.0, 3.0]), fl.tensor([0, 0, 1]))
    Tensor([5., 3.], dtype=float32)
    """
    data, ids, n = _args(data, segment_ids, num_segments, "segment_max")
    return segment_max_p.bind(data, ids, num_segments=n)


@public
def segment_min(data, segment_ids, num_segments: int | None = None) -> Tensor:
    """Minimum of the rows of ``data`` in each segment (``+inf`` for an empty one); see ``segment_sum``.

    >>> fl.segment_min(fl.tensor([1.0, 5.0, 3.0]), fl.tensor([0, 0, 1]))
    Tensor([1., 3.], dtype=float32)
    """
    data, ids, n = _args(data, segment_ids, num_segments, "segment_min")
    return segment_min_p.bind(data, ids, num_segments=n)


@public
def segment_mean(data, segment_ids, num_segments: int | None = None) -> Tensor:
    """Mean of the rows of ``data`` in each segment (0 for an empty one); integer data averages as float32.

    >>> fl.segment_mean(fl.tensor([1.0, 2.0, 6.0]), fl.tensor([0, 0, 1]))
    Tensor([1.5, 6. ], dtype=float32)
    """
    data, ids, n = _args(data, segment_ids, num_segments, "segment_mean")
    if data.dtype not in dtypes.INEXACT:
        data = convert(data, dtypes.default_float)
    total = segment_sum_p.bind(data, ids, num_segments=n)
    count = segment_sum_p.bind(ones((ids.shape[0],), dtype=data.dtype), ids, num_segments=n)
    count = reshape(maximum(count, 1.0), (n,) + (1,) * (data.ndim - 1))
    return divide(total, count)
