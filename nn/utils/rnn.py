"""Variable-length sequences for ``nn.RNN``/``LSTM``/``GRU``: ``pad_sequence``, ``pack_padded_sequence``,
``pad_packed_sequence``, ``pack_sequence`` and ``PackedSequence``, PyTorch's names, layout and semantics.

Why packed sequences rather than a ``lengths=`` argument: PyTorch code already writes ``pack_padded_sequence ->
LSTM -> pad_packed_sequence``, and it ports unchanged. A ``PackedSequence`` keeps PyTorch's time-major packed
``data`` (the only tensor, so ``fl.grad``/``fl.jit`` see it as one leaf) and its ``batch_sizes`` and orderings as
static structure: lengths are shapes, so they must be concrete (PyTorch also keeps them on the host), and a new
set of lengths retraces a jitted function, as a new shape does. The recurrent layers run a packed batch padded in
its original order, with a mask that holds each sequence's state once it has ended, so ``h_n`` is every
sequence's state at its own last step and the reverse direction starts at each sequence's own end.

>>> import funclib as fl, funclib.nn as nn
>>> from funclib.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
>>> x = fl.ones((3, 2, 4))                      # (T, N, features), the second sequence 2 steps long
>>> packed = pack_padded_sequence(x, [3, 2])
>>> out, h = nn.GRU(4, 5)(packed)
>>> padded, lengths = pad_packed_sequence(out)
>>> padded.shape, lengths
((3, 2, 5), Tensor([3, 2], dtype=int64))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import funclib as fl
from funclib import tree
from funclib.checks import describe
from funclib.core import Tensor, Tracer
from funclib.errors import ShapeError

from ..module import as_tensor

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence"]


class PackedSequence:
    """A batch of variable-length sequences in PyTorch's packed layout: the steps of every sequence still running at
    time ``t``, for ``t = 0, 1, ...``, stacked in ``data``.

    Args:
        data: ``(sum(lengths), *)``, time-major, each time step's rows in ``sorted_indices`` order.
        batch_sizes: the sequences still running at each step (int64, non-increasing).
        sorted_indices: the batch order of ``data`` (longest first), or None when the batch was already sorted.
        unsorted_indices: its inverse permutation (None with ``sorted_indices``).

    Returns:
        The packed batch; build it with ``pack_padded_sequence`` or ``pack_sequence``.

    >>> p = nn.utils.rnn.pack_sequence([fl.tensor([1.0, 2.0]), fl.tensor([3.0])])
    >>> p.data, p.batch_sizes
    (Tensor([1., 3., 2.], dtype=float32), Tensor([2, 1], dtype=int64))
    """

    __slots__ = ("data", "_sizes", "_sorted")

    def __init__(self, data, batch_sizes, sorted_indices=None, unsorted_indices=None):
        self.data = data
        self._sizes = _host_ints(batch_sizes, "PackedSequence", "batch_sizes")
        if sorted_indices is not None:
            sorted_indices = _host_ints(sorted_indices, "PackedSequence", "sorted_indices")
        self._sorted = sorted_indices
        if any(a < b for a, b in zip(self._sizes, self._sizes[1:])) or (self._sizes and self._sizes[-1] < 1):
            raise ValueError(f"PackedSequence: batch_sizes must be positive and non-increasing, got {self._sizes}")
        if sum(self._sizes) != data.shape[0]:
            raise ShapeError(
                f"PackedSequence: data has {data.shape[0]} rows but batch_sizes {self._sizes} add up to "
                f"{sum(self._sizes)}; build it with pack_padded_sequence"
            )

    @property
    def batch_sizes(self) -> Tensor:
        return fl.asarray(np.asarray(self._sizes, np.int64))

    @property
    def sorted_indices(self) -> Tensor | None:
        return None if self._sorted is None else fl.asarray(np.asarray(self._sorted, np.int64))

    @property
    def unsorted_indices(self) -> Tensor | None:
        return None if self._sorted is None else fl.asarray(np.argsort(self._sorted).astype(np.int64))

    def lengths(self) -> np.ndarray:
        """Each sequence's length, in the original batch order (a NumPy array: lengths are static)."""
        sizes = np.asarray(self._sizes)
        by_rank = (sizes[None, :] > np.arange(sizes[0])[:, None]).sum(axis=1) if len(sizes) else np.zeros(0, int)
        out = by_rank.copy()
        if self._sorted is not None:
            out[np.asarray(self._sorted)] = by_rank
        return out.astype(np.int64)

    def __iter__(self):
        # PyTorch's PackedSequence is a namedtuple; unpacking it works the same way
        return iter((self.data, self.batch_sizes, self.sorted_indices, self.unsorted_indices))

    def __repr__(self):
        return (
            f"PackedSequence(data={self.data!r}, batch_sizes={self.batch_sizes!r}, "
            f"sorted_indices={self.sorted_indices!r}, unsorted_indices={self.unsorted_indices!r})"
        )


tree.register_pytree_node(
    PackedSequence,
    lambda p: ((p.data,), (p._sizes, p._sorted), ("data",)),
    lambda aux, ch: PackedSequence(ch[0], aux[0], aux[1]),
)


def _host_ints(v, op: str, what: str) -> tuple[int, ...]:
    if isinstance(v, Tracer):
        raise TypeError(
            f"{op}: {what} must be concrete (lengths are shapes); got a traced value. Compute the lengths outside "
            "fl.jit/fl.vmap and pass them as a list or a NumPy array"
        )
    try:
        a = np.asarray(v.numpy() if isinstance(v, Tensor) else v)
    except (TypeError, ValueError):
        a = None
    if a is None or a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise TypeError(f"{op}: {what} must be a 1-d list or tensor of ints, got {describe(v)}")
    return tuple(int(i) for i in a)


def _pack_index(lengths: np.ndarray, order: np.ndarray, batch: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Rows of a flattened time-major ``(T * B, *)`` padded batch that make up the packed data, and batch_sizes."""
    sizes = tuple(int((lengths > t).sum()) for t in range(int(lengths.max())))
    rows = [t * batch + int(b) for t, n in enumerate(sizes) for b in order[:n]]
    return np.asarray(rows, np.int64), sizes


def pad_sequence(
    sequences: Sequence, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> Tensor:
    """Stack tensors of shapes ``(L_i, *)`` into ``(L_max, N, *)`` (``(N, L_max, *)`` with ``batch_first``),
    filling with ``padding_value``.

    Args:
        sequences: tensors with equal trailing shapes.
        batch_first: put the batch axis first (default False).
        padding_value: the fill (default 0).
        padding_side: ``"right"`` (default) or ``"left"``.

    Returns:
        The padded batch.

    >>> nn.utils.rnn.pad_sequence([fl.tensor([1.0, 2.0]), fl.tensor([3.0])], batch_first=True)
    Tensor([[1., 2.],
            [3., 0.]], dtype=float32)
    """
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'right' or 'left', got {padding_side!r}")
    seqs = [as_tensor(s, "pad_sequence", "sequences") for s in sequences]
    if not seqs:
        raise ValueError("pad_sequence: got no sequences; pass a non-empty list of (L_i, *) tensors")
    trail = {tuple(s.shape[1:]) for s in seqs}
    if any(s.ndim == 0 for s in seqs) or len(trail) > 1:
        raise ShapeError(
            f"pad_sequence: sequences must be (L_i, *) with equal trailing shapes, got shapes "
            f"{[tuple(s.shape) for s in seqs]}"
        )
    longest = max(s.shape[0] for s in seqs)
    dtype = fl.result_type(*seqs)
    padded = []
    for s in seqs:
        extra = longest - s.shape[0]
        width = [(0, extra) if padding_side == "right" else (extra, 0)] + [(0, 0)] * (s.ndim - 1)
        padded.append(fl.pad(s.astype(dtype), width, constant_values=padding_value))
    return fl.stack(padded, axis=0 if batch_first else 1)


def pack_padded_sequence(input, lengths, batch_first: bool = False, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``(T, N, *)`` (``(N, T, *)`` with ``batch_first``) of sequences of the given lengths.

    Args:
        input: the padded batch.
        lengths: each sequence's length (concrete ints: a list, NumPy array or tensor), each in ``1..T``.
        batch_first: the batch axis comes first (default False).
        enforce_sorted: require lengths in decreasing order; False sorts them and records the order (default True).

    Returns:
        A ``PackedSequence``.

    >>> p = nn.utils.rnn.pack_padded_sequence(fl.tensor([[1.0, 3.0], [2.0, 0.0]]), [2, 1])
    >>> p.data
    Tensor([1., 3., 2.], dtype=float32)
    """
    x = as_tensor(input, "pack_padded_sequence")
    if x.ndim < 2:
        raise ShapeError(f"pack_padded_sequence: expected a padded batch (T, N, *), got shape {tuple(x.shape)}")
    if batch_first:
        x = fl.moveaxis(x, 0, 1)
    steps, batch = x.shape[0], x.shape[1]
    lens = np.asarray(_host_ints(lengths, "pack_padded_sequence", "lengths"), np.int64)
    if len(lens) != batch or (lens.size and (lens.min() < 1 or lens.max() > steps)):
        raise ValueError(
            f"pack_padded_sequence: expected {batch} lengths between 1 and {steps} for input of shape "
            f"{tuple(input.shape)}, got {lens.tolist()}"
        )
    if enforce_sorted:
        if np.any(lens[1:] > lens[:-1]):
            raise ValueError(
                f"pack_padded_sequence: lengths {lens.tolist()} must be sorted in decreasing order when "
                "enforce_sorted=True; pass enforce_sorted=False to sort them (the order is kept for unpacking)"
            )
        order, sorted_indices = np.arange(batch), None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = order
    rows, sizes = _pack_index(lens, order, batch)
    flat = fl.reshape(x, (steps * batch, *x.shape[2:]))
    return PackedSequence(fl.take(flat, fl.asarray(rows), axis=0), sizes, sorted_indices)


def pad_packed_sequence(
    sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0, total_length: int | None = None
) -> tuple[Tensor, Tensor]:
    """Undo ``pack_padded_sequence``: the padded batch in the original order, and the lengths.

    Args:
        sequence: a ``PackedSequence``.
        batch_first: return ``(N, T, *)`` (default False: ``(T, N, *)``).
        padding_value: the fill (default 0).
        total_length: pad to this many steps (at least the longest sequence; default: the longest).

    Returns:
        ``(padded, lengths)``; the lengths are an int64 tensor.

    >>> p = nn.utils.rnn.pack_sequence([fl.tensor([1.0, 2.0]), fl.tensor([3.0])])
    >>> nn.utils.rnn.pad_packed_sequence(p, batch_first=True)[0]
    Tensor([[1., 2.],
            [3., 0.]], dtype=float32)
    """
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got {describe(sequence)}")
    lens = sequence.lengths()
    batch, longest = len(lens), int(lens.max())
    steps = longest if total_length is None else total_length
    if steps < longest:
        raise ValueError(
            f"pad_packed_sequence: total_length={total_length} is shorter than the longest sequence ({longest})"
        )
    order = np.arange(batch) if sequence._sorted is None else np.asarray(sequence._sorted)
    rows, _ = _pack_index(lens[order], order, batch)
    # every padded position reads its packed row, or the extra row of padding values appended to the data
    src = np.full(steps * batch, len(rows), np.int64)
    src[rows] = np.arange(len(rows))
    data = sequence.data
    fill = fl.full((1, *data.shape[1:]), padding_value, dtype=data.dtype)
    out = fl.take(fl.concat([data, fill], axis=0), fl.asarray(src), axis=0)
    out = fl.reshape(out, (steps, batch, *data.shape[1:]))
    return (fl.moveaxis(out, 0, 1) if batch_first else out), fl.asarray(lens)


def pack_sequence(sequences: Sequence, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors ``(L_i, *)`` (``pad_sequence`` then ``pack_padded_sequence``).

    Args:
        sequences: the sequences.
        enforce_sorted: require them longest first; False sorts them (default True).

    Returns:
        A ``PackedSequence``.

    >>> nn.utils.rnn.pack_sequence([fl.tensor([1.0]), fl.tensor([2.0, 3.0])], enforce_sorted=False).data
    Tensor([2., 1., 3.], dtype=float32)
    """
    seqs = [as_tensor(s, "pack_sequence", "sequences") for s in sequences]
    return pack_padded_sequence(pad_sequence(seqs), [s.shape[0] for s in seqs], enforce_sorted=enforce_sorted)


def _repack(padded: Tensor, like: PackedSequence) -> PackedSequence:
    """Pack a time-major padded batch in the original order with ``like``'s lengths and ordering (the recurrent
    layers' outputs for a packed input)."""
    lens = like.lengths()
    batch = len(lens)
    order = np.arange(batch) if like._sorted is None else np.asarray(like._sorted)
    rows, sizes = _pack_index(lens[order], order, batch)
    flat = fl.reshape(padded, (padded.shape[0] * batch, *padded.shape[2:]))
    return PackedSequence(fl.take(flat, fl.asarray(rows), axis=0), sizes, like._sorted)
