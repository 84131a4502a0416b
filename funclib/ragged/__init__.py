"""Ragged batches: variable-length sequences stored flat with their lengths, and the padded view with a mask.

A ragged batch is ``values`` of shape ``(N, ...)`` (the sequences one after another) and ``lengths (B,)`` with
``sum(lengths) == N``. ``pad`` turns it into ``(B, max_len, ...)`` and a ``(B, max_len)`` mask, ``unpad`` goes
back; ``segment_ids`` gives each flat row its sequence, so the ``fl.segment_*`` reductions pool per sequence
without padding; ``mask`` is the padding mask alone. All are gathers, so gradients flow through both directions,
and all work under ``jit`` and ``vmap`` given static sizes (``max_len``, ``total``).

**Why two views and no NestedTensor type.** funclib compiles by shape: ``jit`` traces once per input shape and
``vmap``, ``scan`` and every kernel assume rectangular operands. A nested tensor's shape changes with every batch
(its lengths), so each batch would retrace and recompile, and every op would need a ragged version (PyTorch's
nested tensors cover a subset of ops for this reason; JAX has no ragged type at all). The two views instead give
each op the form it is efficient in: token-wise layers and per-sequence reductions run on the flat rows
(``segment_mean`` pools a sequence, with no padding cost and exact gradients), and recurrences and attention run on
the padded view with its mask (``nn.MultiheadAttention(key_padding_mask=~mask)``; in a ``scan`` over time,
``h = fl.where(mask[:, t, None], h_new, h)`` keeps each sequence's state past its end). Padding to a few bucketed
``max_len`` values keeps the number of compiled shapes small. The conversions cost one gather each.

Example:
    >>> values, lengths = fl.arange(5.0), fl.tensor([2, 3])
    >>> padded, mask = fl.ragged.pad(values, lengths)
    >>> padded
    Tensor([[0., 1., 0.],
           [2., 3., 4.]], dtype=float32)
    >>> fl.ragged.unpad(padded, lengths)
    Tensor([0., 1., 2., 3., 4.], dtype=float32)
    >>> fl.segment_mean(values, fl.ragged.segment_ids(lengths), 2)
    Tensor([0.5, 3. ], dtype=float32)
"""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes
from ..core import Tensor, _wrap, concrete_or_none
from ..errors import DTypeError, ShapeError
from ..ops.creation import arange, asarray
from ..ops.manipulation import concat, expand_dims, reshape, stack
from ..ops.reductions import cumulative_sum
from ..ops.searching import where
from ..primitives.elementwise import convert, less, minimum, subtract
from ..primitives.indexing import gather
from ..primitives.sparse import csr_rows

__all__ = ["from_list", "mask", "pad", "segment_ids", "unpad"]


def _lengths(lengths, op) -> Tensor:
    t = asarray(lengths)
    if t.ndim != 1 or t.dtype not in dtypes.INTEGER:
        raise DTypeError(f"{op}: lengths must be a 1-D integer tensor (one length per sequence), got {t.aval}")
    c = concrete_or_none(t)
    if c is not None and np.any(np.asarray(c._value) < 0):
        raise ValueError(f"{op}: lengths must be non-negative, got {np.asarray(c._value)}")
    return convert(t, dtypes.int64) if t.dtype != dtypes.int64 else t


def _static(value, default_from, what, op) -> int:
    if value is not None:
        return operator.index(value)
    c = concrete_or_none(default_from[0])
    if c is None:
        raise ValueError(f"{op}: {what} is required when the lengths are traced (under jit or vmap); pass {what}=...")
    return int(default_from[1](np.asarray(c._value)))


def _starts(lengths):
    """Where each sequence starts in the flat rows: the exclusive cumulative sum of the lengths."""
    return cumulative_sum(lengths, include_initial=True)


def mask(lengths, max_len: int | None = None) -> Tensor:
    """``(B, max_len)`` boolean: True at the positions a sequence of each length fills.

    >>> fl.ragged.mask(fl.tensor([1, 3]))
    Tensor([[ True, False, False],
           [ True,  True,  True]], dtype=bool)
    """
    lengths = _lengths(lengths, "ragged.mask")
    n = _static(max_len, (lengths, lambda a: a.max(initial=0)), "max_len", "ragged.mask")
    return less(expand_dims(arange(n, dtype=dtypes.int64), axis=0), expand_dims(lengths, axis=1))


def segment_ids(lengths, total: int | None = None) -> Tensor:
    """``(total,)``: the sequence each flat row belongs to (``total = sum(lengths)``; rows past it get ``B``).

    >>> fl.ragged.segment_ids(fl.tensor([2, 0, 1]))
    Tensor([0, 0, 2], dtype=int64)
    """
    lengths = _lengths(lengths, "ragged.segment_ids")
    n = _static(total, (lengths, lambda a: a.sum()), "total", "ragged.segment_ids")
    return csr_rows(_starts(lengths), n)


def pad(values, lengths, max_len: int | None = None, *, fill=0) -> tuple[Tensor, Tensor]:
    """The padded view of a ragged batch: ``(B, max_len, ...)`` values and the ``(B, max_len)`` mask.

    Args:
        values: ``(N, ...)``, the sequences one after another.
        lengths: ``(B,)`` sequence lengths summing to ``N``.
        max_len: the padded length (static); default the longest sequence (concrete lengths). Longer sequences
            are cut to it.
        fill: the value at padded positions.

    Returns:
        ``(padded, mask)``.

    >>> p, m = fl.ragged.pad(fl.tensor([1.0, 2.0, 3.0]), fl.tensor([1, 2]), max_len=3, fill=-1.0)
    >>> p
    Tensor([[ 1., -1., -1.],
           [ 2.,  3., -1.]], dtype=float32)
    """
    values = asarray(values)
    lengths = _lengths(lengths, "ragged.pad")
    if values.ndim == 0:
        raise ShapeError("ragged.pad: values must have a first axis of rows, got a scalar")
    n = _static(max_len, (lengths, lambda a: a.max(initial=0)), "max_len", "ragged.pad")
    m = mask(lengths, n)
    rows = int(values.shape[0])
    b = int(lengths.shape[0])
    if rows == 0 or n == 0 or b == 0:
        shape = (b, n) + tuple(values.shape[1:])
        return _wrap(np.full(shape, fill, values.dtype)) if not isinstance(fill, Tensor) else fill, m
    src = expand_dims(_starts(lengths)[:b], axis=1) + expand_dims(arange(n, dtype=dtypes.int64), axis=0)
    src = minimum(src, rows - 1)  # padded positions read any row; the mask discards it
    picked = gather(values, reshape(src, (b * n, 1)), (0,))
    picked = reshape(picked, (b, n) + tuple(values.shape[1:]))
    keep = reshape(m, (b, n) + (1,) * (values.ndim - 1))
    return where(keep, picked, fill), m


def unpad(padded, lengths, total: int | None = None) -> Tensor:
    """The flat rows of a padded batch: ``(B, L, ...)`` to ``(total, ...)`` (``total = sum(lengths)``, static).

    >>> fl.ragged.unpad(fl.tensor([[1.0, 0.0], [2.0, 3.0]]), fl.tensor([1, 2]))
    Tensor([1., 2., 3.], dtype=float32)
    """
    padded = asarray(padded)
    lengths = _lengths(lengths, "ragged.unpad")
    if padded.ndim < 2 or padded.shape[0] != lengths.shape[0]:
        raise ShapeError(
            f"ragged.unpad: padded must be (B, L, ...) with B = {lengths.shape[0]} sequences, got {tuple(padded.shape)}"
        )
    n = _static(total, (lengths, lambda a: a.sum()), "total", "ragged.unpad")
    b, max_len = int(padded.shape[0]), int(padded.shape[1])
    c = concrete_or_none(lengths)
    if c is not None and np.any(np.asarray(c._value) > max_len):
        raise ShapeError(f"ragged.unpad: a length exceeds the padded length {max_len}: {np.asarray(c._value)}")
    if n == 0:
        return _wrap(np.zeros((0,) + tuple(padded.shape[2:]), padded.dtype))
    seq = segment_ids(lengths, n)
    starts = _starts(lengths)
    seq_safe = minimum(seq, b - 1)
    pos = subtract(arange(n, dtype=dtypes.int64), gather(starts, reshape(seq_safe, (n, 1)), (0,)))
    idx = stack([seq_safe, minimum(pos, max_len - 1)], axis=-1)
    return gather(padded, idx, (0, 1))


def from_list(seqs) -> tuple[Tensor, Tensor]:
    """A ragged batch ``(values, lengths)`` from a list of ``(len_i, ...)`` tensors.

    >>> fl.ragged.from_list([fl.ones(2), fl.zeros(1)])
    (Tensor([1., 1., 0.], dtype=float32), Tensor([2, 1], dtype=int64))
    """
    if not seqs:
        raise ValueError("ragged.from_list: needs at least one sequence (the row shape and dtype come from them)")
    seqs = [asarray(s) for s in seqs]
    return concat(seqs, axis=0), _wrap(np.asarray([int(s.shape[0]) for s in seqs], np.int64))
