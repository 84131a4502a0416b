"""Sparse matrix products and segment reductions on NumPy arrays (numba, compiled once and cached).

A sparse matrix of shape ``(m, k)`` with ``nse`` stored entries comes as ``values (nse,)`` with either COO
indices ``rows, cols (nse,)`` or CSR ones ``indptr (m + 1,), cols (nse,)``. Entries whose row or column is out of
range (JAX's convention for padding: the index equals the dimension) are skipped; repeated indices add up.

- ``spmm(values, idx0, cols, dense, m, layout, transpose)``: ``A @ dense`` (``(m, n)``) or ``A.T @ dense``
  (``(k, n)``) for ``dense`` of shape ``(k, n)`` (``(m, n)`` transposed). Each stored entry adds a scaled row
  of ``dense`` to a row of the output, so the inner loop runs over ``n`` contiguous columns.
- ``sddmm(x, y, idx0, cols, m, layout)``: the sampled product ``out[e] = x[row[e]] . y[col[e]]``, the dense
  ``x @ y.T`` read only at the stored entries (the gradient of ``A @ dense`` with respect to ``A``'s values).
- ``segment_reduce(kind, data, ids, num_segments)``: ``out[s] = sum/max/min of data[i] with ids[i] == s``
  over axis 0; ids outside ``[0, num_segments)`` are dropped. Empty segments hold the identity (0, -inf/+inf,
  or the integer extremes), as in JAX.

Example:
    >>> import numpy as np
    >>> from funclib.kernels import sparse
    >>> v, r, c = np.array([1.0, 2.0]), np.array([0, 1]), np.array([1, 1])
    >>> sparse.spmm(v, r, c, np.ones((2, 3)), 2, "coo", False)
    array([[1., 1., 1.],
           [2., 2., 2.]])
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import diskcache, lowp

__all__ = ["add_rows", "sddmm", "segment_reduce", "spmm"]


# inlined into the kernels below (numba IR inlining), so each loop compiles under its caller's fastmath flags
@diskcache.njit(nogil=True, error_model="numpy", inline="always")
def _add_scaled_row(out, dense, r, c, v, transpose, n):  # pragma: no cover - compiled
    """``out[r] += v * dense[c]`` (``transpose``: ``out[c] += v * dense[r]``) over the first ``n`` columns."""
    dst, src = (c, r) if transpose else (r, c)
    for j in range(n):
        out[dst, j] += v * dense[src, j]


@diskcache.njit(nogil=True, error_model="numpy", inline="always")
def _row_dot(x, y, r, c, acc, n):  # pragma: no cover - compiled
    """``acc + x[r] . y[c]`` over the first ``n`` columns."""
    for j in range(n):
        acc += x[r, j] * y[c, j]
    return acc


@diskcache.njit(nogil=True, error_model="numpy", fastmath={"contract"})
def _spmm_coo(values, rows, cols, dense, out, transpose):  # pragma: no cover - compiled
    m, k = (out.shape[0], dense.shape[0]) if not transpose else (dense.shape[0], out.shape[0])
    n = dense.shape[1]
    for e in range(values.shape[0]):
        r, c = rows[e], cols[e]
        if r < 0 or r >= m or c < 0 or c >= k:
            continue
        _add_scaled_row(out, dense, r, c, values[e], transpose, n)


@diskcache.njit(nogil=True, error_model="numpy", fastmath={"contract"})
def _spmm_csr(values, indptr, cols, dense, out, transpose):  # pragma: no cover - compiled
    m = indptr.shape[0] - 1
    k = dense.shape[0] if not transpose else out.shape[0]
    n = dense.shape[1]
    nse = values.shape[0]
    for r in range(m):
        # row pointers are clamped to the entries, so malformed ones cannot read out of bounds
        for e in range(max(indptr[r], 0), min(indptr[r + 1], nse)):
            c = cols[e]
            if c < 0 or c >= k:
                continue
            _add_scaled_row(out, dense, r, c, values[e], transpose, n)


@diskcache.njit(nogil=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _sddmm_coo(x, y, rows, cols, out):  # pragma: no cover - compiled
    m, k, n = x.shape[0], y.shape[0], x.shape[1]
    for e in range(out.shape[0]):
        r, c = rows[e], cols[e]
        zero = out[e] * 0
        out[e] = _row_dot(x, y, r, c, zero, n) if 0 <= r < m and 0 <= c < k else zero


@diskcache.njit(nogil=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _sddmm_csr(x, y, indptr, cols, out):  # pragma: no cover - compiled
    k, n = y.shape[0], x.shape[1]
    out[:] = 0
    nse = out.shape[0]
    for r in range(indptr.shape[0] - 1):
        for e in range(max(indptr[r], 0), min(indptr[r + 1], nse)):
            c = cols[e]
            if 0 <= c < k:
                out[e] = _row_dot(x, y, r, c, out[e] * 0, n)


_NATIVE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def _wide(*arrays):
    """float16/bfloat16/float8 operands compute in float32 (numba cannot); returns the arrays and the dtype."""
    d = arrays[0].dtype
    if d in _NATIVE:
        return [np.ascontiguousarray(a) for a in arrays], d
    return [np.ascontiguousarray(lowp.astype(a, np.float32)) for a in arrays], d


def _index(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def spmm(values, idx0, cols, dense, shape: tuple[int, int], layout: str, transpose: bool) -> np.ndarray:
    """``A @ dense`` (``transpose``: ``A.T @ dense``) for the sparse ``A`` of ``shape`` given by values and indices."""
    (values, dense), d = _wide(values, dense)
    out = np.zeros((shape[1] if transpose else shape[0], dense.shape[1]), values.dtype)
    (_spmm_csr if layout == "csr" else _spmm_coo)(values, _index(idx0), _index(cols), dense, out, transpose)
    return out if out.dtype == d else lowp.astype(out, d)


def sddmm(x, y, idx0, cols, layout: str) -> np.ndarray:
    """``(x @ y.T)`` at the stored entries: ``out[e] = x[row[e]] . y[col[e]]`` (0 for padding entries)."""
    (x, y), d = _wide(x, y)
    out = np.zeros(cols.shape[0], x.dtype)
    (_sddmm_csr if layout == "csr" else _sddmm_coo)(x, y, _index(idx0), _index(cols), out)
    return out if out.dtype == d else lowp.astype(out, d)


@diskcache.njit(nogil=True, error_model="numpy")
def _seg_sum(data, ids, out):  # pragma: no cover - compiled
    num, n = out.shape
    for i in range(data.shape[0]):
        s = ids[i]
        if 0 <= s < num:
            for j in range(n):
                out[s, j] += data[i, j]


# inlined with a constant ``take_max``, so each of _seg_max and _seg_min compiles without the branch
@diskcache.njit(nogil=True, error_model="numpy", inline="always")
def _seg_extreme(data, ids, out, take_max):  # pragma: no cover - compiled
    num, n = out.shape
    for i in range(data.shape[0]):
        s = ids[i]
        if 0 <= s < num:
            for j in range(n):
                v, a = data[i, j], out[s, j]
                wins = v > a if take_max else v < a
                out[s, j] = v if (wins or v != v) else a  # NaN wins, as in np.maximum / np.minimum


@diskcache.njit(nogil=True, error_model="numpy")
def _seg_max(data, ids, out):  # pragma: no cover - compiled
    _seg_extreme(data, ids, out, True)


@diskcache.njit(nogil=True, error_model="numpy")
def _seg_min(data, ids, out):  # pragma: no cover - compiled
    _seg_extreme(data, ids, out, False)


_SEGMENT = {"sum": _seg_sum, "max": _seg_max, "min": _seg_min}
_NUMBA_INTS = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                              np.uint64))


def _identity(kind: str, d: np.dtype):
    """The empty segment's value for data of dtype ``d`` (int4's extremes, which its int8 compute holds)."""
    if kind == "sum":
        return 0
    if d not in _NUMBA_INTS and d not in lowp.INT4:
        return -np.inf if kind == "max" else np.inf
    info = ml_dtypes.iinfo(d) if d in lowp.INT4 else np.iinfo(d)
    return info.min if kind == "max" else info.max


def add_rows(out: np.ndarray, ids: np.ndarray, updates) -> bool:
    """``out[ids[i]] += updates[i]`` in place, repeated ids accumulating (``np.add.at`` along axis 0, several times
    faster); returns False, doing nothing, unless ``out`` is C-contiguous of a numba dtype and every id is in
    range, so the caller can fall back to NumPy (which raises on a bad index)."""
    if out.dtype not in _NATIVE and out.dtype not in _NUMBA_INTS or not out.flags.c_contiguous or out.ndim == 0:
        return False
    ids = _index(ids).reshape(-1)
    n = out.shape[0]
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        return False
    cols = int(np.prod(out.shape[1:], dtype=np.int64))
    upd = np.ascontiguousarray(np.asarray(updates, out.dtype).reshape((ids.size,) + out.shape[1:]))
    _seg_sum(upd.reshape(ids.size, cols), ids, out.reshape(n, cols))
    return True


def segment_reduce(kind: str, data, ids, num_segments: int) -> np.ndarray:
    """Sum, max or min of the rows of ``data`` (axis 0) that share a segment id; see the module docstring."""
    data = np.asarray(data)
    d = data.dtype
    wide = d if d in _NATIVE or d in _NUMBA_INTS else (lowp.wide_dtype(d) if d in lowp.INT4 else np.dtype(np.float32))
    rest = data.shape[1:]
    cols = int(np.prod(rest, dtype=np.int64))
    flat = np.ascontiguousarray(lowp.astype(data, wide) if wide != d else data).reshape(data.shape[0], cols)
    out = np.full((num_segments, flat.shape[1]), _identity(kind, d), wide)
    _SEGMENT[kind](flat, _index(ids), out)
    out = out.reshape((num_segments,) + rest)
    return out if wide == d else lowp.astype(out, d)
