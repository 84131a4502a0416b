"""Array API set functions: ``unique_all``, ``unique_counts``, ``unique_inverse``, ``unique_values``.

The number of unique elements decides the output shape, so these run on concrete values only: eagerly,
or on the primal under ``grad``/``jvp`` (where ``values`` stays differentiable: it is gathered from
``x``). Under ``jit`` and ``vmap`` they raise ``DataDependentShapeError``. Each NaN is its own unique
element; ``-0`` and ``+0`` are one.
Values come out sorted (NaNs last).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core import Tensor, Tracer, _wrap
from ..namespace import public
from ..primitives import shape as S
from ..primitives.elementwise import _to_tensor
from ..primitives.indexing import gather
from .searching import require_concrete

_FIX = (
    "compute the unique values once outside the transform and pass them in; fl.sort gives a static-shaped "
    "sorted copy whose neighbours can be compared."
)


class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


def _unique(x, op):
    x = _to_tensor(x, op)
    c = require_concrete(x, op, _FIX)
    flat = c._value.reshape(-1)
    vals, first, inverse, counts = np.unique(
        flat, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    first = first.astype(np.int64, copy=False)
    if isinstance(x, Tracer):
        # keep the values on the tape: gather them from x at their first occurrences
        values = gather(S.reshape(x, (-1,)), _wrap(first.reshape(-1, 1)), (0,))
    else:
        values = _wrap(vals)
    inverse = _wrap(inverse.reshape(tuple(x.shape)).astype(np.int64, copy=False))
    return values, _wrap(first), inverse, _wrap(counts.astype(np.int64, copy=False))


@public
def unique_all(x, /) -> UniqueAllResult:
    """Unique values with first-occurrence indices, inverse indices (shaped like ``x``) and counts.

    >>> fl.unique_all(fl.asarray([2, 1, 2])).counts
    Tensor([1, 2], dtype=int64)
    """
    return UniqueAllResult(*_unique(x, "unique_all"))


@public
def unique_counts(x, /) -> UniqueCountsResult:
    """Unique values and how often each occurs.

    >>> fl.unique_counts(fl.asarray([2, 1, 2])).values
    Tensor([1, 2], dtype=int64)
    """
    values, _, _, counts = _unique(x, "unique_counts")
    return UniqueCountsResult(values, counts)


@public
def unique_inverse(x, /) -> UniqueInverseResult:
    """Unique values and, for each element of ``x``, the index of its value (so ``values[inverse] == x``).

    >>> fl.unique_inverse(fl.asarray([2, 1, 2])).inverse_indices
    Tensor([1, 0, 1], dtype=int64)
    """
    values, _, inverse, _ = _unique(x, "unique_inverse")
    return UniqueInverseResult(values, inverse)


@public
def unique_values(x, /) -> Tensor:
    """The sorted unique values of ``x`` (flattened).

    >>> fl.unique_values(fl.asarray([3, 1, 3]))
    Tensor([1, 3], dtype=int64)
    """
    return _unique(x, "unique_values")[0]
