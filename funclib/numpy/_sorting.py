"""Sorting, searching and set functions with NumPy's signatures.

Sorts are stable whatever ``kind`` says; complex values sort by real part, then imaginary part, as in NumPy.
``partition`` returns a full sort (a valid partition: NumPy leaves the order within each side unspecified).
The set functions decide their output length from the data, so they need concrete values (eagerly or
under ``grad``); their values are gathered from the inputs and stay differentiable.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, _wrap
from ..errors import DTypeError
from ..ops import reductions as R
from ..ops import sets as _sets
from ..ops.indexing import take, take_along_axis
from ..ops.manipulation import broadcast_arrays
from ..ops.searching import searchsorted as _searchsorted
from ..ops.sorting import argsort as _argsort
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ..primitives.sort import sort as _sort_prim
from ._manipulation import concatenate
from ._util import asarray, axis_int, concrete, static_int

__all__ = [
    "sort",
    "argsort",
    "lexsort",
    "partition",
    "argpartition",
    "sort_complex",
    "searchsorted",
    "unique",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    "intersect1d",
    "union1d",
    "setdiff1d",
    "setxor1d",
    "isin",
    "top_k",
]

_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable", "introselect")
_FIX = "compute it outside the transform, or use fnp.sort / fnp.isin, whose shapes do not depend on values"


def _prep(a, axis, kind, order, op):
    if kind not in _KINDS:
        raise ValueError(f"numpy.{op}: unknown kind {kind!r}")
    if order is not None:
        raise ValueError(f"numpy.{op}: order= sorts structured arrays by field, which funclib does not have")
    x = asarray(a, op)
    if axis is None:
        x, axis = S.reshape(x, (-1,)), 0
    if x.ndim == 0:
        raise ValueError(f"numpy.{op}: cannot sort a 0-d array; use fnp.atleast_1d first")
    return x, axis_int(axis, x.ndim, op)


def _keys(x):
    if x.dtype in dtypes.COMPLEX:
        return [ops.real(x), ops.imag(x)]
    return [convert(x, dtypes.int8) if x.dtype == dtypes.bool_ else x]


def sort(a, axis=-1, kind=None, order=None, *, stable=None) -> Tensor:
    """A sorted copy of ``a`` along ``axis`` (of the flattened array when None); NaN sorts last; the
    derivative moves with the values.

    >>> fnp.sort(fnp.array([3, 1, 2]))
    Tensor([1, 2, 3], dtype=int64)
    """
    x, ax = _prep(a, axis, kind, order, "sort")
    keys = _keys(x)
    return _sort_prim(keys + [x], ax, num_keys=len(keys))[-1]


def argsort(a, axis=-1, kind=None, order=None, *, stable=None) -> Tensor:
    """The int64 indices that sort ``a`` along ``axis`` (ties keep their order).

    >>> fnp.argsort(fnp.array([3, 1, 2]))
    Tensor([1, 2, 0], dtype=int64)
    """
    x, ax = _prep(a, axis, kind, order, "argsort")
    keys = _keys(x)
    idx = S.iota(dtypes.int64, tuple(x.shape), ax)
    return _sort_prim(keys + [idx], ax, num_keys=len(keys))[-1]


def lexsort(keys, axis=-1) -> Tensor:
    """The indices that sort by several keys, the last key primary (as NumPy's ``lexsort``).

    >>> fnp.lexsort((fnp.array([1, 0, 1]), fnp.array([0, 0, 1])))
    Tensor([1, 0, 2], dtype=int64)
    """
    ks = list(keys) if not isinstance(keys, Tensor) else [keys[i] for i in range(keys.shape[0])]
    if isinstance(keys, np.ndarray):
        ks = [keys[i] for i in range(keys.shape[0])]
    ks = [asarray(k, "lexsort") for k in ks]
    if not ks:
        raise TypeError("numpy.lexsort: need at least one key")

    ks = broadcast_arrays(*ks)
    if ks[0].ndim == 0:
        raise ValueError("numpy.lexsort: keys must be at least 1-D")
    ax = axis_int(axis, ks[0].ndim, "lexsort")
    flat = [k2 for k in reversed(ks) for k2 in _keys(k)]
    idx = S.iota(dtypes.int64, tuple(ks[0].shape), ax)
    return _sort_prim(flat + [idx], ax, num_keys=len(flat))[-1]


def _check_kth(kth, n, op):
    for k in np.atleast_1d(np.asarray(concrete(asarray(kth, op), op, "pass kth as an int"))):
        if not -n <= int(k) < n:
            raise ValueError(f"numpy.{op}: kth(={int(k)}) out of bounds ({n})")


def partition(a, kth, axis=-1, kind="introselect", order=None) -> Tensor:
    """A copy of ``a`` whose ``kth`` element is where sorting would put it, smaller ones before and larger
    after. Here the whole axis comes back sorted, which satisfies that.

    >>> fnp.partition(fnp.array([3, 4, 2, 1]), 2)[2]
    Tensor(3, dtype=int64)
    """
    x, ax = _prep(a, axis, kind, order, "partition")
    _check_kth(kth, x.shape[ax], "partition")
    return sort(x, ax)


def argpartition(a, kth, axis=-1, kind="introselect", order=None) -> Tensor:
    """Indices that partition ``a`` (see ``partition``: a full argsort here).

    >>> int(fnp.argpartition(fnp.array([3, 4, 2, 1]), 0)[0])
    3
    """
    x, ax = _prep(a, axis, kind, order, "argpartition")
    _check_kth(kth, x.shape[ax], "argpartition")
    return argsort(x, ax)


def sort_complex(a) -> Tensor:
    """``a`` sorted by real part, then imaginary part, as a complex array.

    >>> fnp.sort_complex(fnp.array([2.0, 1.0]))
    Tensor([1.+0.j, 2.+0.j], dtype=complex64)
    """
    x = sort(a)
    return x if x.dtype in dtypes.COMPLEX else convert(x, dtypes.complex_dtype(x.dtype) if x.dtype in
                                                       dtypes.INEXACT else dtypes.default_complex)


def searchsorted(a, v, side="left", sorter=None) -> Tensor:
    """The indices at which inserting ``v`` into the sorted 1-D ``a`` keeps it sorted (``side='right'``:
    after equal elements); ``sorter`` sorts ``a`` first.

    >>> fnp.searchsorted(fnp.array([1, 2, 3]), fnp.array([2, 5]))
    Tensor([1, 3], dtype=int64)
    """
    return _searchsorted(asarray(a, "searchsorted"), asarray(v, "searchsorted"), side=side, sorter=sorter)


def _gather_flat(x, idx):
    return take(S.reshape(x, (-1,)), _wrap(np.asarray(idx, np.int64)), axis=0)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           sorted=True):
    """The sorted unique elements of ``ar`` (or unique slices along ``axis``), with the first-occurrence
    indices, the inverse and the counts on request (as NumPy returns them). The number of unique values
    depends on the data, so ``ar`` must be concrete; the values are gathered from ``ar`` and stay
    differentiable.

    >>> fnp.unique(fnp.array([3, 1, 3, 2]))
    Tensor([1, 2, 3], dtype=int64)
    """
    x = asarray(ar, "unique")
    v = concrete(x, "unique", _FIX)
    res = np.unique(v, return_index=True, return_inverse=return_inverse, return_counts=return_counts, axis=axis,
                    equal_nan=equal_nan)
    first = res[1].astype(np.int64)
    if axis is None:
        values = _gather_flat(x, first)
    else:
        values = take(x, _wrap(first), axis=axis_int(axis, x.ndim, "unique"))
    out = [values]
    if return_index:
        out.append(_wrap(first))
    rest = list(res[2:])
    if return_inverse:
        out.append(_wrap(rest.pop(0).astype(np.int64)))
    if return_counts:
        out.append(_wrap(rest.pop(0).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def unique_all(x):
    """Unique values with first-occurrence indices, inverse indices and counts (each NaN distinct).

    >>> fnp.unique_all(fnp.array([2, 1, 2])).counts
    Tensor([1, 2], dtype=int64)
    """
    return _sets.unique_all(asarray(x, "unique_all"))


def unique_counts(x):
    """Unique values and how often each occurs."""
    return _sets.unique_counts(asarray(x, "unique_counts"))


def unique_inverse(x):
    """Unique values and the index of each element's value (shaped like ``x``)."""
    return _sets.unique_inverse(asarray(x, "unique_inverse"))


def unique_values(x):
    """The sorted unique values."""
    return _sets.unique_values(asarray(x, "unique_values"))


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """The sorted values in both arrays (with the indices of their first occurrences in each on request).

    >>> fnp.intersect1d(fnp.array([1, 3, 4]), fnp.array([3, 1, 2]))
    Tensor([1, 3], dtype=int64)
    """
    x1, x2 = asarray(ar1, "intersect1d"), asarray(ar2, "intersect1d")
    v1, v2 = concrete(x1, "intersect1d", _FIX), concrete(x2, "intersect1d", _FIX)
    _, i1, i2 = np.intersect1d(v1, v2, assume_unique=assume_unique, return_indices=True)
    values = _gather_flat(x1, i1)
    if return_indices:
        return values, _wrap(i1.astype(np.int64)), _wrap(i2.astype(np.int64))
    return values


def union1d(ar1, ar2) -> Tensor:
    """The sorted values in either array.

    >>> fnp.union1d(fnp.array([1, 3]), fnp.array([2, 3]))
    Tensor([1, 2, 3], dtype=int64)
    """

    both = concatenate((S.reshape(asarray(ar1, "union1d"), (-1,)), S.reshape(asarray(ar2, "union1d"), (-1,))))
    return unique(both)


def setdiff1d(ar1, ar2, assume_unique=False) -> Tensor:
    """The values of ``ar1`` not in ``ar2`` (sorted and unique unless ``assume_unique``).

    >>> fnp.setdiff1d(fnp.array([1, 2, 3, 4]), fnp.array([2, 4]))
    Tensor([1, 3], dtype=int64)
    """
    x1 = S.reshape(asarray(ar1, "setdiff1d"), (-1,))
    v1 = concrete(x1, "setdiff1d", _FIX)
    v2 = concrete(asarray(ar2, "setdiff1d"), "setdiff1d", _FIX)
    if assume_unique:
        pos = np.flatnonzero(~np.isin(v1, v2))
    else:
        u, first = np.unique(v1, return_index=True)
        pos = first[~np.isin(u, v2)]
    return _gather_flat(x1, pos)


def setxor1d(ar1, ar2, assume_unique=False) -> Tensor:
    """The sorted values in exactly one of the arrays.

    >>> fnp.setxor1d(fnp.array([1, 2, 3]), fnp.array([2, 3, 4]))
    Tensor([1, 4], dtype=int64)
    """

    both = concatenate((S.reshape(asarray(ar1, "setxor1d"), (-1,)), S.reshape(asarray(ar2, "setxor1d"), (-1,))))
    v = concrete(both, "setxor1d", _FIX)
    n1 = int(np.prod(np.shape(concrete(asarray(ar1, "setxor1d"), "setxor1d", _FIX)), dtype=np.int64))
    values = np.setxor1d(v[:n1], v[n1:], assume_unique=assume_unique)
    u, first = np.unique(v, return_index=True)
    return _gather_flat(both, first[np.searchsorted(u, values)])


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None) -> Tensor:
    """Whether each element of ``element`` occurs in ``test_elements`` (shape of ``element``); traced
    inputs compare every pair.

    >>> fnp.isin(fnp.array([1, 2, 3]), [2, 4])
    Tensor([False,  True, False], dtype=bool)
    """
    if kind not in (None, "sort", "table"):
        raise ValueError(f"numpy.isin: kind must be None, 'sort' or 'table', got {kind!r}")
    x, t = asarray(element, "isin"), S.reshape(asarray(test_elements, "isin"), (-1,))
    if type(x) is Tensor and type(t) is Tensor:
        return _wrap(np.isin(x.numpy(), t.numpy(), invert=invert))
    hit = R.any(ops.equal(S.expand_dims(x, [x.ndim]), t), axis=-1) if t.shape[0] else S.full(
        tuple(x.shape), False, dtypes.bool_)
    return ops.logical_not(hit) if invert else hit


def top_k(operand, k):
    """The ``k`` largest values along the last axis, largest first, and their indices (JAX's ``top_k``).

    >>> fnp.top_k(fnp.array([3.0, 1.0, 4.0, 1.5]), 2)[0]
    Tensor([4., 3.], dtype=float32)
    """
    x = asarray(operand, "top_k")
    if x.dtype in dtypes.COMPLEX:
        raise DTypeError("numpy.top_k: complex values have no order")
    k = static_int(k, "top_k", "k")
    n = x.shape[-1]
    if not 0 <= k <= n:
        raise ValueError(f"numpy.top_k: k={k} must lie in [0, {n}]")

    idx = _argsort(x, axis=-1, descending=True)[..., :k]

    return take_along_axis(x, idx, axis=-1), idx

