"""Sparse matrices: ``COO`` and ``CSR`` with differentiable values, products with dense tensors, and conversions.

A sparse matrix of shape ``(m, k)`` stores ``nse`` entries: ``values`` and their positions (COO: ``row`` and
``col``; CSR: ``indices`` (columns) and row pointers ``indptr``, as ``scipy.sparse``). Repeated positions add up
in every operation. An entry whose row or column equals the dimension (``m`` or ``k``) is padding and counts for
nothing: ``fromdense(x, nse=...)`` pads with such entries when ``x`` has fewer nonzeros.

**Pytrees: indices are static, values are the leaves.** A matrix whose indices are concrete flattens to its
values alone, the pattern riding in the tree structure. So ``fl.grad(loss)(A)`` returns a matrix of the same
pattern holding the gradient with respect to the stored values (computed as a sampled dense-dense product,
never a dense ``(m, k)`` gradient), ``fl.vmap`` maps over a batch of values (``values`` of shape ``(B, nse)``)
sharing one pattern, and ``fl.jit`` compiles once per pattern. Indices computed under a transform (``fromdense``
of a traced matrix under ``jit``/``vmap``, which needs a static ``nse``) are leaves instead.

Operations: ``A @ x`` and ``x @ A`` (``x`` dense, any leading/trailing axes), ``A * x`` (elementwise with a dense
tensor or scalar: the pattern is kept), ``A.sum(axis)``, ``A.T``, ``A.todense()``, ``COO.fromdense``/
``CSR.fromdense``, ``A.tocsr()``/``A.tocoo()``, and ``to_scipy``/``from_scipy`` when SciPy is installed
(it is never required).

Example:
    >>> A = fl.sparse.COO.fromdense(fl.tensor([[0.0, 2.0], [3.0, 0.0]]))
    >>> A.nse, (A @ fl.ones((2, 3))).shape
    (2, (2, 3))
    >>> fl.grad(lambda A: fl.sum(A @ fl.ones((2, 3))))(A).values
    Tensor([3., 3.], dtype=float32)
"""

from __future__ import annotations

import hashlib
import operator

import numpy as np

from .. import dtypes
from ..core import Tensor, Tracer, _wrap, concrete_or_none
from ..errors import DTypeError, ShapeError
from ..ops.creation import asarray, zeros
from ..ops.elementwise import logical_not
from ..ops.manipulation import broadcast_to, permute_dims, reshape, stack
from ..ops.reductions import cumulative_sum
from ..ops.reductions import sum as _sum
from ..ops.searching import where
from ..ops.segment import segment_sum
from ..ops.sorting import argsort
from ..primitives.elementwise import (
    bitwise_and,
    convert,
    floor_divide,
    greater_equal,
    less,
    minimum,
    not_equal,
    remainder,
)
from ..primitives.indexing import gather
from ..primitives.sparse import csr_rows, spmm_p
from ..tree import register_pytree_node

__all__ = ["COO", "CSR", "from_scipy", "fromdense", "matmul", "multiply", "to_scipy", "todense"]

_INDEX = dtypes.int64


class _Pattern:
    """Concrete index arrays as static tree data: hashable (by content) and compared by value."""

    __slots__ = ("arrays", "_hash")

    def __init__(self, arrays):
        self.arrays = tuple(np.asarray(a) for a in arrays)
        h = hashlib.blake2b(digest_size=8)
        for a in self.arrays:
            h.update(str(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        self._hash = int.from_bytes(h.digest(), "little")

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (
            type(other) is _Pattern
            and self._hash == other._hash
            and all(np.array_equal(a, b) for a, b in zip(self.arrays, other.arrays))
        )


def _index_tensor(a, what: str, op: str) -> Tensor:
    t = asarray(a)
    if t.dtype not in dtypes.INTEGER:
        raise DTypeError(f"{op}: {what} must be integers, got {t.dtype.name}")
    if t.ndim != 1:
        raise ShapeError(f"{op}: {what} must be 1-D, got shape {tuple(t.shape)}")
    return t


def _shape(shape, op) -> tuple[int, int]:
    try:
        m, k = (operator.index(d) for d in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"{op}: shape must be a pair of ints (m, k), got {shape!r}") from None
    if m < 0 or k < 0:
        raise ShapeError(f"{op}: negative dimensions in shape {(m, k)}")
    return m, k


def _check_range(op, what, t, hi):
    c = concrete_or_none(t)
    if c is None:
        return
    a = np.asarray(c._value)
    if a.size and (a.min() < 0 or a.max() > hi):
        bad = a[(a < 0) | (a > hi)][0]
        raise IndexError(f"{op}: {what} {int(bad)} is out of range [0, {hi}] ({hi} marks a padding entry)")


class _Sparse:
    _fl_sparse = True  # Tensor's @ leaves a sparse right operand to __rmatmul__
    shape: tuple[int, int]
    values: Tensor

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def nse(self) -> int:
        """The number of stored entries (padding included)."""
        return int(self.values.shape[-1])

    @property
    def T(self):
        return self.transpose()

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __mul__(self, other):
        return multiply(self, other)

    __rmul__ = __mul__

    def __neg__(self):
        return self._with_values(-self.values)

    def astype(self, dtype):
        return self._with_values(convert(self.values, dtypes.canonicalize(dtype)))

    def todense(self) -> Tensor:
        """The dense ``(m, k)`` tensor (repeated entries added, padding dropped); differentiable in the values."""
        return todense(self)

    def sum(self, axis: int | None = None) -> Tensor:
        """Sum of all entries (a scalar), or over ``axis`` 0 or 1 (a dense vector)."""
        m, k = self.shape
        rows, cols, valid = self._coo()
        v = self._values_1d("sum")
        if axis is None:
            return _sum(where(valid, v, 0.0 if v.dtype in dtypes.INEXACT else 0))
        ax = operator.index(axis) % 2 if -2 <= operator.index(axis) < 2 else None
        if ax is None:
            raise ShapeError(f"sum: axis {axis} is out of range for a 2-D sparse matrix")
        ids = where(valid, cols if ax == 0 else rows, -1)
        return segment_sum(v, ids, k if ax == 0 else m)

    def _values_1d(self, op):
        if self.values.ndim != 1:
            raise ShapeError(
                f"{op}: the values carry batch axes, shape {tuple(self.values.shape)}; map the operation over them "
                "with fl.vmap (the pattern is shared)"
            )
        return self.values

    def _mask(self, rows, cols):
        m, k = self.shape
        return bitwise_and(
            bitwise_and(greater_equal(rows, 0), less(rows, m)), bitwise_and(greater_equal(cols, 0), less(cols, k))
        )

    def __repr__(self):
        return f"{type(self).__name__}(shape={self.shape}, nse={self.nse}, dtype={self.dtype.name})"


class COO(_Sparse):
    """A sparse ``(m, k)`` matrix in coordinate form: ``A[row[e], col[e]] += values[e]``.

    Args:
        values: ``(nse,)`` stored values (or ``(B, nse)``: a batch sharing the pattern, for ``fl.vmap``).
        row, col: ``(nse,)`` integer positions; ``m``/``k`` mark padding entries.
        shape: ``(m, k)``.

    >>> A = fl.sparse.COO(fl.tensor([1.0, 2.0]), fl.tensor([0, 1]), fl.tensor([1, 1]), (2, 2))
    >>> A.todense()
    Tensor([[0., 1.],
           [0., 2.]], dtype=float32)
    """

    def __init__(self, values, row, col, shape):
        self.shape = _shape(shape, "COO")
        self.values = asarray(values)
        self.row = _index_tensor(row, "row", "COO")
        self.col = _index_tensor(col, "col", "COO")
        nse = self.values.shape[-1] if self.values.ndim else -1
        if self.row.shape != (nse,) or self.col.shape != (nse,):
            raise ShapeError(
                f"COO: values {tuple(self.values.shape)}, row {tuple(self.row.shape)} and col "
                f"{tuple(self.col.shape)} must have one entry per stored element"
            )
        _check_range("COO", "row", self.row, self.shape[0])
        _check_range("COO", "col", self.col, self.shape[1])

    @classmethod
    def fromdense(cls, x, nse: int | None = None) -> COO:
        """The nonzeros of the 2-D ``x`` in row-major order, padded to ``nse`` entries (static; required under
        ``jit``/``vmap``, where a matrix with more nonzeros than ``nse`` keeps the first ``nse``). The values are
        differentiable with respect to ``x``.

        >>> fl.sparse.COO.fromdense(fl.tensor([[0.0, 5.0]]), nse=2).row
        Tensor([0, 1], dtype=int64)
        """
        values, row, col, shape = _fromdense(x, nse, "COO.fromdense")
        return _new(COO, values, shape, row=row, col=col)

    def _with_values(self, values):
        return _same_pattern(self, _new(COO, values, self.shape, row=self.row, col=self.col))

    def _coo(self):
        return self.row, self.col, self._mask(self.row, self.col)

    def _operands(self):
        return self.row, self.col, "coo"

    def transpose(self) -> COO:
        """``A.T``: the same entries with rows and columns swapped."""
        return _new(COO, self.values, self.shape[::-1], row=self.col, col=self.row)

    def tocsr(self) -> CSR:
        """The CSR form (entries sorted by row, stable; padding last)."""
        m, k = self.shape
        rows, cols, valid = self._coo()
        key = where(valid, rows, m)
        perm = _argsort(key)
        values = _take(self.values, perm) if self.values.ndim == 1 else self.values[..., perm]
        return _csr_from_sorted(values, _take(key, perm), _take(where(valid, cols, k), perm), self.shape)

    def tocoo(self) -> COO:
        return self


class CSR(_Sparse):
    """A sparse ``(m, k)`` matrix in compressed-row form: row ``i`` holds the entries
    ``indptr[i]:indptr[i + 1]``, in columns ``indices``.

    Args:
        values: ``(nse,)`` stored values (or ``(B, nse)`` for ``fl.vmap``).
        indices: ``(nse,)`` column of each entry (``k`` marks padding).
        indptr: ``(m + 1,)`` non-decreasing row pointers from 0; entries past ``indptr[m]`` are padding.
        shape: ``(m, k)``.

    >>> A = fl.sparse.CSR(fl.tensor([1.0, 2.0]), fl.tensor([1, 0]), fl.tensor([0, 1, 2]), (2, 2))
    >>> A.todense()
    Tensor([[0., 1.],
           [2., 0.]], dtype=float32)
    """

    def __init__(self, values, indices, indptr, shape):
        self.shape = _shape(shape, "CSR")
        self.values = asarray(values)
        self.indices = _index_tensor(indices, "indices", "CSR")
        self.indptr = _index_tensor(indptr, "indptr", "CSR")
        nse = self.values.shape[-1] if self.values.ndim else -1
        if self.indices.shape != (nse,) or self.indptr.shape != (self.shape[0] + 1,):
            raise ShapeError(
                f"CSR: values {tuple(self.values.shape)} and indices {tuple(self.indices.shape)} must have one entry "
                f"per stored element, and indptr {tuple(self.indptr.shape)} must have m + 1 = {self.shape[0] + 1}"
            )
        _check_range("CSR", "column", self.indices, self.shape[1])
        c = concrete_or_none(self.indptr)
        if c is not None:
            p = np.asarray(c._value)
            if p[0] != 0 or np.any(np.diff(p) < 0) or p[-1] > nse:
                raise ValueError(f"CSR: indptr must start at 0, never decrease and end at most at nse={nse}; got {p}")

    @classmethod
    def fromdense(cls, x, nse: int | None = None) -> CSR:
        """As ``COO.fromdense``, in CSR form."""
        values, row, col, shape = _fromdense(x, nse, "CSR.fromdense")
        return _csr_from_sorted(values, row, col, shape)

    def _with_values(self, values):
        return _same_pattern(self, _new(CSR, values, self.shape, indices=self.indices, indptr=self.indptr))

    def _rows(self):
        return csr_rows(self.indptr, self.indices.shape[0])

    def _coo(self):
        rows = self._rows()
        return rows, self.indices, self._mask(rows, self.indices)

    def _operands(self):
        return self.indptr, self.indices, "csr"

    def transpose(self) -> CSR:
        """``A.T`` as a CSR matrix (entries re-sorted by column; the values follow, differentiably)."""
        return self.tocoo().transpose().tocsr()

    def tocoo(self) -> COO:
        rows, cols, _ = self._coo()
        return _new(COO, self.values, self.shape, row=rows, col=cols)

    def tocsr(self) -> CSR:
        return self


def _new(cls, values, shape, **indices):
    obj = object.__new__(cls)
    obj.values, obj.shape = values, shape
    for k, v in indices.items():
        setattr(obj, k, v)
    return obj


def _same_pattern(src, obj):
    pattern = src.__dict__.get("_pattern")
    if pattern is not None:
        obj._pattern = pattern
    return obj


def _take(a, perm):
    return gather(a, reshape(perm, (-1, 1)), (0,))


def _argsort(key):
    c = concrete_or_none(key)
    if c is not None:
        return _wrap(np.argsort(np.asarray(c._value), kind="stable").astype(np.int64))
    return convert(argsort(key, stable=True), _INDEX)


def _csr_from_sorted(values, rows, cols, shape):
    """A CSR matrix from entries sorted by row (rows ``m`` last: padding)."""
    m, _ = shape
    c = concrete_or_none(rows)
    if c is not None:
        counts = np.bincount(np.asarray(c._value), minlength=m + 1)[:m]
        indptr = _wrap(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
    else:
        counts = segment_sum(zeros(rows.shape, dtype=_INDEX) + 1, rows, m)
        indptr = cumulative_sum(counts, include_initial=True)
    return _new(CSR, values, shape, indices=cols, indptr=indptr)


def _fromdense(x, nse, op):
    x = asarray(x)
    if x.ndim != 2:
        raise ShapeError(f"{op}: expected a 2-D tensor, got shape {tuple(x.shape)}")
    m, k = (int(d) for d in x.shape)
    c = concrete_or_none(x)
    if c is not None:
        r, col = np.nonzero(np.asarray(c._value))
        n = r.shape[0]
        nse = n if nse is None else operator.index(nse)
        if nse < n:
            raise ValueError(f"{op}: the matrix has {n} nonzeros, more than nse={nse}")
        r = np.concatenate([r, np.full(nse - n, m)]).astype(np.int64)
        col = np.concatenate([col, np.full(nse - n, k)]).astype(np.int64)
        row_t, col_t = _wrap(r), _wrap(col)
        safe = _wrap(np.stack([np.minimum(r, max(m - 1, 0)), np.minimum(col, max(k - 1, 0))], -1))
        valid = _wrap(np.arange(nse) < n)
    else:
        if nse is None:
            raise ValueError(
                f"{op}: under jit or vmap the number of stored entries sets the output shape; pass nse=... (a static "
                "int, at least the number of nonzeros)"
            )
        nse = operator.index(nse)
        if not 0 <= nse <= m * k:
            raise ValueError(f"{op}: nse={nse} must lie in [0, {m * k}] for a {m}x{k} matrix")
        flat = reshape(x, (m * k,))
        nz = not_equal(flat, 0)
        first = _take(convert(argsort(convert(logical_not(nz), dtypes.int8), stable=True), _INDEX),
                      _wrap(np.arange(nse)))
        valid = _take(nz, first)
        row_t = where(valid, floor_divide(first, k), m)
        col_t = where(valid, remainder(first, k), k)
        safe = stack([minimum(row_t, max(m - 1, 0)), minimum(col_t, max(k - 1, 0))], axis=-1)
    if m == 0 or k == 0:
        values = zeros((nse,), dtype=x.dtype)
    else:
        values = where(valid, gather(x, safe, (0, 1)), 0.0 if x.dtype in dtypes.INEXACT else 0)
    return values, row_t, col_t, (m, k)


def fromdense(x, nse: int | None = None, format: str = "coo"):
    """``COO.fromdense`` (``format="coo"``) or ``CSR.fromdense`` (``"csr"``)."""
    if format not in ("coo", "csr"):
        raise ValueError(f"fromdense: format must be 'coo' or 'csr', got {format!r}")
    return (COO if format == "coo" else CSR).fromdense(x, nse)


def todense(a) -> Tensor:
    """The dense tensor of a sparse matrix (repeated entries added, padding dropped); dense tensors pass through."""
    if not isinstance(a, _Sparse):
        return asarray(a)
    m, k = a.shape
    rows, cols, valid = a._coo()
    flat = where(valid, rows * k + cols, -1)
    return reshape(segment_sum(a._values_1d("todense"), flat, m * k), (m, k))


def _dense_2d(x, lead: int, op: str):
    x = asarray(x)
    if x.ndim == 0 or x.shape[0] != lead:
        raise ShapeError(f"{op}: a dense operand with first axis {lead} is needed, got shape {tuple(x.shape)}")
    rest = tuple(x.shape[1:])
    return reshape(x, (lead, int(np.prod(rest, dtype=np.int64)))) if x.ndim != 2 else x, rest


def matmul(a, b) -> Tensor:
    """``a @ b`` with one sparse operand: sparse @ dense ``(k, ...)`` or dense ``(..., m)`` @ sparse.

    >>> A = fl.sparse.CSR.fromdense(fl.eye(3) * 2.0)
    >>> fl.sparse.matmul(fl.ones((4, 3)), A).shape
    (4, 3)
    """
    sa, sb = isinstance(a, _Sparse), isinstance(b, _Sparse)
    if sa and sb:
        raise TypeError("sparse.matmul: sparse @ sparse is not supported; convert one operand with .todense()")
    if not (sa or sb):
        raise TypeError("sparse.matmul: one operand must be a fl.sparse matrix")
    if sa:
        m, k = a.shape
        d, rest = _dense_2d(b, k, f"sparse {a.shape} @ dense")
        _check_dtypes(a, d)
        idx0, cols, layout = a._operands()
        out = spmm_p.bind(a._values_1d("matmul"), idx0, cols, d, shape=a.shape, layout=layout, transpose=False)
        return reshape(out, (m,) + rest)
    m, k = b.shape
    x = asarray(a)
    if x.ndim == 0 or x.shape[-1] != m:
        raise ShapeError(f"sparse.matmul: dense {tuple(x.shape)} @ sparse {b.shape}: the last axis must be {m}")
    lead = tuple(x.shape[:-1])
    p = int(np.prod(lead, dtype=np.int64))
    xt = permute_dims(reshape(x, (p, m)), (1, 0))  # (m, p): x @ B = (B.T @ x.T).T
    _check_dtypes(b, xt)
    idx0, cols, layout = b._operands()
    out = spmm_p.bind(b._values_1d("matmul"), idx0, cols, xt, shape=b.shape, layout=layout, transpose=True)
    return reshape(permute_dims(out, (1, 0)), lead + (k,))


def _check_dtypes(s, d):
    if s.dtype != d.dtype:
        raise DTypeError(
            f"sparse.matmul: the sparse values ({s.dtype.name}) and the dense operand ({d.dtype.name}) must share a "
            "dtype; cast one with .astype"
        )


def multiply(a, b):
    """``a * b`` for a sparse ``a`` and a dense tensor or scalar ``b`` broadcasting against ``(m, k)``: the result
    keeps ``a``'s pattern (``b`` is read only at the stored entries).

    >>> A = fl.sparse.COO.fromdense(fl.eye(2))
    >>> fl.sparse.multiply(A, fl.tensor([[2.0, 5.0], [7.0, 3.0]])).values
    Tensor([2., 3.], dtype=float32)
    """
    if isinstance(b, _Sparse):
        a, b = b, a
    if isinstance(b, _Sparse) or not isinstance(a, _Sparse):
        raise TypeError("sparse.multiply: one operand must be sparse and the other dense (or a scalar)")
    if not isinstance(b, (Tensor, np.ndarray)) or np.ndim(b) == 0:
        return a._with_values(a.values * b)
    m, k = a.shape
    d = broadcast_to(asarray(b), (m, k))
    rows, cols, _ = a._coo()
    safe = stack([minimum(rows, max(m - 1, 0)), minimum(cols, max(k - 1, 0))], axis=-1)
    return a._with_values(a._values_1d("multiply") * gather(d, safe, (0, 1)))


def to_scipy(a):
    """The ``scipy.sparse`` matrix (``coo_matrix`` or ``csr_matrix``) of a concrete sparse matrix."""
    try:
        import scipy.sparse as sp  # optional: only for the exchange with SciPy
    except ImportError:
        raise ImportError("fl.sparse.to_scipy needs SciPy: pip install scipy") from None
    v = np.asarray(a._values_1d("to_scipy").numpy())
    if isinstance(a, COO):
        r, c, valid = (np.asarray(t.numpy()) for t in a._coo())
        return sp.coo_matrix((v[valid], (r[valid], c[valid])), shape=a.shape)
    return sp.csr_matrix((v, a.indices.numpy(), a.indptr.numpy()), shape=a.shape)


def from_scipy(m):
    """A ``COO`` or ``CSR`` (for ``csr_matrix``/``csr_array``) from a ``scipy.sparse`` matrix."""
    fmt = getattr(m, "format", None)
    if fmt == "csr":
        return CSR(np.asarray(m.data), np.asarray(m.indices, np.int64), np.asarray(m.indptr, np.int64), m.shape)
    if fmt is None:
        raise TypeError(f"from_scipy: expected a scipy.sparse matrix, got {type(m).__name__}")
    c = m.tocoo()
    return COO(np.asarray(c.data), np.asarray(c.row, np.int64), np.asarray(c.col, np.int64), c.shape)


# --- pytrees: static (concrete) indices ride in the tree structure ------------------------------------------------


def _concrete(*ts):
    out = []
    for t in ts:
        if isinstance(t, Tracer):
            return None
        out.append(np.asarray(t._value))
    return out


def _flatten_for(cls, names):
    def flatten(s):
        pattern = s.__dict__.get("_pattern")
        if pattern is None:
            idx = [getattr(s, n) for n in names]
            c = _concrete(*idx)
            if c is None:
                return (s.values, *idx), (cls, s.shape, None), ("values", *names)
            # hashed once per matrix: the pattern object travels with its values (see _with_values)
            pattern = s._pattern = _Pattern(c)
        return (s.values,), (cls, s.shape, pattern), ("values",)

    def unflatten(aux, children):
        _, shape, pattern = aux
        children = list(children)
        idx = [_wrap(a) for a in pattern.arrays] if pattern is not None else children[1:]
        obj = _new(cls, children[0], shape, **dict(zip(names, idx)))
        if pattern is not None:
            obj._pattern = pattern
        return obj

    return flatten, unflatten


register_pytree_node(COO, *_flatten_for(COO, ("row", "col")))
register_pytree_node(CSR, *_flatten_for(CSR, ("indices", "indptr")))
