"""Lookups by integer index: ``embedding`` and ``one_hot``."""

from __future__ import annotations

import funclib as fl
from funclib import dtypes
from funclib.core import Tensor, _state
from funclib.errors import DTypeError, ShapeError

from ._args import as_tensor


def embedding(input, weight, padding_idx: int | None = None) -> Tensor:
    """Rows of ``weight: (num_embeddings, dim)`` at integer indices ``input``; the row at ``padding_idx`` gets no
    gradient.

    Args:
        input: integer indices of any shape.
        weight: ``(num_embeddings, dim)``.
        padding_idx: a row that gets no gradient (default None).

    Returns:
        ``(*input.shape, dim)``.

    >>> F.embedding(fl.tensor([2, 0]), fl.arange(6.0).reshape(3, 2))
    Tensor([[4., 5.],
            [0., 1.]], dtype=float32)
    """
    idx = as_tensor(input, "embedding")
    if idx.dtype not in dtypes.INTEGER:
        raise DTypeError(f"embedding: indices must be integers, got {idx.dtype.name}; cast them with .astype(fl.int64)")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-d (num_embeddings, dim), got shape {tuple(weight.shape)}")
    if _state.trace is None and idx.size:
        lo, hi = int(fl.min(idx)), int(fl.max(idx))
        if lo < -weight.shape[0] or hi >= weight.shape[0]:
            raise IndexError(
                f"embedding: index {hi if hi >= weight.shape[0] else lo} is out of range for {weight.shape[0]} "
                f"embeddings; indices must lie in [-{weight.shape[0]}, {weight.shape[0]})"
            )
    out = fl.take(weight, idx, axis=0)
    if padding_idx is not None:
        pad_ = padding_idx % weight.shape[0]
        mask = fl.expand_dims(idx == pad_, axis=-1)
        out = fl.where(mask, fl.stop_gradient(out), out)
    return out


def one_hot(tensor, num_classes: int = -1) -> Tensor:
    """One-hot int64 encoding with a new last axis (PyTorch's).

    Args:
        tensor: integer class indices.
        num_classes: the classes (default -1: ``max + 1``).

    Returns:
        An int64 tensor ``(*tensor.shape, num_classes)``.

    >>> F.one_hot(fl.tensor([0, 2]), 3)
    Tensor([[1, 0, 0],
            [0, 0, 1]], dtype=int64)
    """
    x = as_tensor(tensor, "one_hot", "tensor")
    if x.dtype not in dtypes.INTEGER:
        raise DTypeError(
            f"one_hot: expected integer class indices, got {x.dtype.name};"
            " cast them with .astype(fl.int64)"
        )
    if num_classes == -1:
        num_classes = int(fl.max(x)) + 1 if x.size else 0
    return fl.one_hot(x, num_classes, dtype=fl.int64)
