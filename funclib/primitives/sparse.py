"""Sparse-dense products: ``spmm`` (sparse @ dense) and ``sddmm`` (dense @ dense sampled at a sparsity pattern).

A sparse matrix of static ``shape = (m, k)`` enters as operands ``values (nse,)``, ``idx0`` and ``cols (nse,)``:
``idx0`` holds the row of each entry (``layout="coo"``) or the row pointers ``(m + 1,)`` (``layout="csr"``).
Entries with an out-of-range index are padding and contribute nothing; repeated indices add up.

- ``spmm(values, idx0, cols, dense)`` is ``A @ dense`` (``(m, n)`` from ``(k, n)``), or with ``transpose=True``
  ``A.T @ dense`` (``(k, n)`` from ``(m, n)``).
- ``sddmm(x, y, idx0, cols)`` is ``(x @ y.T)[row[e], col[e]]`` for every stored entry ``e``.

Both are bilinear, and they transpose into each other: the cotangent of ``A @ dense`` with respect to the values
is ``sddmm(ct, dense)``, the gradient over the pattern only (never the dense ``ct @ dense.T``); with respect to
``dense`` it is ``spmm(..., transpose=not transpose)``. Batching: a batch of dense operands rides along as extra
columns; batched values (and COO indices) become one block-diagonal matrix, each lane's indices offset by its
block. The public API is ``funclib.sparse``.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Zero, _wrap, aval_of, concrete_or_none, is_undefined
from ..errors import DTypeError, ShapeError
from ..kernels import sparse as K
from .elementwise import add, bitwise_and, convert, greater_equal, less, multiply
from .reduce import cumsum
from .segment import segment_sum_p
from .shape import bdim_to_front, broadcast_in_dim, full, iota, reshape, select, slice_
from .shape import transpose as permute

_FLOAT = frozenset(dtypes.FLOATING + dtypes.FLOAT8)

spmm_p = Primitive("spmm", linear=True)  # bilinear: linear in the values and in the dense operand
spmm_p.family = "sparse"
sddmm_p = Primitive("sddmm", linear=True)  # bilinear in x and y
sddmm_p.family = "sparse"


def _check_pattern(op, idx0, cols, shape, layout, nse):
    m, k = shape
    if layout not in ("coo", "csr"):
        raise ValueError(f"{op}: layout must be 'coo' or 'csr', got {layout!r}")
    want0 = (m + 1,) if layout == "csr" else (nse,)
    for name, a, want in (("row pointers" if layout == "csr" else "rows", idx0, want0), ("columns", cols, (nse,))):
        if a.dtype not in dtypes.INTEGER or tuple(a.shape) != want:
            raise ShapeError(f"{op}: {name} must be integers of shape {want}, got {a.str_short()}")


@spmm_p.def_impl
def _spmm_impl(values, idx0, cols, dense, *, shape, layout, transpose):
    args = [np.asarray(a) for a in (values, idx0, cols, dense)]
    _spmm_abstract(*map(aval_of, args), shape=shape, layout=layout, transpose=transpose)  # the kernel trusts them
    return K.spmm(*args, shape, layout, transpose)


@spmm_p.def_abstract_eval
def _spmm_abstract(values, idx0, cols, dense, *, shape, layout, transpose):
    if values.ndim != 1:
        raise ShapeError(f"spmm: values must be 1-D (nse,), got {values.str_short()}")
    _check_pattern("spmm", idx0, cols, shape, layout, values.shape[0])
    if values.dtype not in _FLOAT or dense.dtype != values.dtype:
        raise DTypeError(
            f"spmm: values and the dense operand must share a floating dtype, got {values.dtype.name} and "
            f"{dense.dtype.name}"
        )
    rows_in = shape[0] if transpose else shape[1]
    if dense.ndim != 2 or dense.shape[0] != rows_in:
        what = "A.T @ dense" if transpose else "A @ dense"
        raise ShapeError(f"spmm: {what} for A of shape {tuple(shape)} needs dense of shape ({rows_in}, n), got "
                         f"{dense.str_short()}")
    return ShapedArray((shape[1] if transpose else shape[0], dense.shape[1]), dense.dtype)


@spmm_p.def_jvp
def _spmm_jvp(primals, tangents, *, shape, layout, transpose):
    values, idx0, cols, dense = primals
    tv, _, _, td = tangents
    params = dict(shape=shape, layout=layout, transpose=transpose)
    out = spmm_p.bind(values, idx0, cols, dense, **params)
    acc = None
    if type(tv) is not Zero:
        acc = spmm_p.bind(tv, idx0, cols, dense, **params)
    if type(td) is not Zero:
        t = spmm_p.bind(values, idx0, cols, td, **params)
        acc = t if acc is None else acc + t
    return out, Zero(aval_of(out)) if acc is None else acc


@spmm_p.def_transpose
def _spmm_transpose(ct, values, idx0, cols, dense, *, shape, layout, transpose):
    if is_undefined(idx0) or is_undefined(cols):
        raise TypeError("spmm: sparse indices are not differentiable")
    if is_undefined(values) and is_undefined(dense):
        raise TypeError("spmm is bilinear: only one of values and dense may be linear when transposing")
    if is_undefined(values):
        # the gradient over the pattern: ct @ dense.T (or dense @ ct.T) read at the stored entries only
        x, y = (dense, ct) if transpose else (ct, dense)
        return [sddmm_p.bind(x, y, idx0, cols, shape=shape, layout=layout), None, None, None]
    d = spmm_p.bind(values, idx0, cols, ct, shape=shape, layout=layout, transpose=not transpose)
    return [None, None, None, d]


@sddmm_p.def_impl
def _sddmm_impl(x, y, idx0, cols, *, shape, layout):
    args = [np.asarray(a) for a in (x, y, idx0, cols)]
    _sddmm_abstract(*map(aval_of, args), shape=shape, layout=layout)
    return K.sddmm(*args, layout)


@sddmm_p.def_abstract_eval
def _sddmm_abstract(x, y, idx0, cols, *, shape, layout):
    _check_pattern("sddmm", idx0, cols, shape, layout, cols.shape[0] if cols.ndim == 1 else -1)
    if x.dtype not in _FLOAT or y.dtype != x.dtype:
        raise DTypeError(f"sddmm: x and y must share a floating dtype, got {x.dtype.name} and {y.dtype.name}")
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != shape[0] or y.shape[0] != shape[1] or x.shape[1] != y.shape[1]:
        raise ShapeError(
            f"sddmm: for a pattern of shape {tuple(shape)} x must be ({shape[0]}, n) and y ({shape[1]}, n), got "
            f"{x.str_short()} and {y.str_short()}"
        )
    return ShapedArray((cols.shape[0],), x.dtype)


@sddmm_p.def_jvp
def _sddmm_jvp(primals, tangents, *, shape, layout):
    x, y, idx0, cols = primals
    tx, ty, _, _ = tangents
    out = sddmm_p.bind(x, y, idx0, cols, shape=shape, layout=layout)
    acc = None
    if type(tx) is not Zero:
        acc = sddmm_p.bind(tx, y, idx0, cols, shape=shape, layout=layout)
    if type(ty) is not Zero:
        t = sddmm_p.bind(x, ty, idx0, cols, shape=shape, layout=layout)
        acc = t if acc is None else acc + t
    return out, Zero(aval_of(out)) if acc is None else acc


@sddmm_p.def_transpose
def _sddmm_transpose(ct, x, y, idx0, cols, *, shape, layout):
    if is_undefined(idx0) or is_undefined(cols):
        raise TypeError("sddmm: sparse indices are not differentiable")
    if is_undefined(x) and is_undefined(y):
        raise TypeError("sddmm is bilinear: only one of x and y may be linear when transposing")
    if is_undefined(x):
        return [spmm_p.bind(ct, idx0, cols, y, shape=shape, layout=layout, transpose=False), None, None, None]
    return [None, spmm_p.bind(ct, idx0, cols, x, shape=shape, layout=layout, transpose=True), None, None]


# --- batching ---------------------------------------------------------------------------------------------------


def csr_rows(indptr, nse: int):
    """The row of each of the ``nse`` entries of a CSR pattern (``m`` for entries past ``indptr[-1]``); leading
    axes of ``indptr`` are batch axes."""
    c = concrete_or_none(indptr)
    if c is not None and c.ndim == 1:
        c = np.asarray(c._value, np.int64)
        rows = np.repeat(np.arange(c.shape[0] - 1), np.diff(c))
        return _wrap(np.concatenate([rows, np.full(nse - rows.shape[0], c.shape[0] - 1, np.int64)]))

    lead = tuple(indptr.shape[:-1])
    b, m = int(np.prod(lead, dtype=np.int64)), indptr.shape[-1] - 1
    starts = convert(slice_(reshape(indptr, (b, m + 1)), (0, 1), (b, m + 1)), np.int64)
    # each row start marks its position (in its lane's block); the running count of marks is the row
    starts = add(starts, multiply(iota(np.int64, (b, m), 0), _wrap(np.asarray(nse + 1, np.int64))))
    marks = segment_sum_p.bind(full((b * m,), 1, np.int64), reshape(starts, (b * m,)), num_segments=b * (nse + 1))
    rows = slice_(cumsum(reshape(marks, (b, nse + 1)), 1), (0, 0), (b, nse))
    return reshape(rows, lead + (nse,))


def _lanes(a, d, size):
    if d is not None:
        return bdim_to_front(a, d)
    return broadcast_in_dim(a, (size,) + tuple(a.shape), tuple(range(1, a.ndim + 1)))


def _offset(idx, valid, size, block: int, sentinel: int):
    """Each lane's indices shifted into its diagonal block; invalid (padding) entries to ``sentinel``."""

    idx = convert(idx, np.int64) if idx.dtype != np.int64 else idx
    lane = multiply(iota(np.int64, tuple(idx.shape), 0), _wrap(np.asarray(block, np.int64)))
    return select(valid, add(idx, lane), _wrap(np.asarray(sentinel, np.int64)))


def _coo_lanes(idx0, cols, dims, size, shape, layout):
    """Per-lane COO ``rows, cols`` of shape ``(size, nse)`` and the mask of in-range entries."""

    d0, dc = dims
    if layout == "csr":
        nse = cols.shape[0] if dc is None else cols.shape[1 - dc]
        idx0 = csr_rows(bdim_to_front(idx0, d0), nse) if d0 is not None else csr_rows(idx0, nse)
        d0 = 0 if d0 is not None else None
    rows, cols = _lanes(idx0, d0, size), _lanes(cols, dc, size)
    m, k = shape

    def inside(a, n):
        return bitwise_and(greater_equal(a, _wrap(np.asarray(0, a.dtype))), less(a, _wrap(np.asarray(n, a.dtype))))

    return rows, cols, bitwise_and(inside(rows, m), inside(cols, k))


@spmm_p.def_vmap
def _spmm_vmap(args, dims, *, shape, layout, transpose):
    values, idx0, cols, dense = args
    dv, d0, dc, dd = dims
    m, k = shape
    if dv is None and d0 is None and dc is None:
        # one matrix times a batch of dense operands: the batch becomes columns
        dense = bdim_to_front(dense, dd)
        b, r, n = dense.shape
        wide = reshape(permute(dense, (1, 0, 2)), (r, b * n))
        out = spmm_p.bind(values, idx0, cols, wide, shape=shape, layout=layout, transpose=transpose)
        return reshape(out, (out.shape[0], b, n)), 1
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    rows, cols, valid = _coo_lanes(idx0, cols, (d0, dc), size, shape, layout)
    values = _lanes(values, dv, size)
    # the index addressing the output moves to its lane's block; the one addressing dense only if dense is batched
    out_m = k if transpose else m
    dense_m = m if transpose else k
    out_idx, dense_idx = (cols, rows) if transpose else (rows, cols)
    out_idx = _offset(out_idx, valid, size, out_m, size * out_m)
    if dd is not None:
        dense = bdim_to_front(dense, dd)
        dense = reshape(dense, (size * dense_m, dense.shape[-1]))
        dense_idx = _offset(dense_idx, valid, size, dense_m, size * dense_m)
        new_dense_m = size * dense_m
    else:

        dense_idx = select(valid, convert(dense_idx, np.int64), _wrap(np.asarray(dense_m, np.int64)))
        new_dense_m = dense_m
    rows, cols = (dense_idx, out_idx) if transpose else (out_idx, dense_idx)
    new_shape = (new_dense_m, size * out_m) if transpose else (size * out_m, new_dense_m)
    flat = lambda a: reshape(a, (size * a.shape[1],))  # noqa: E731
    out = spmm_p.bind(flat(values), flat(rows), flat(cols), dense, shape=new_shape, layout="coo", transpose=transpose)
    return reshape(out, (size, out_m, out.shape[-1])), 0


@sddmm_p.def_vmap
def _sddmm_vmap(args, dims, *, shape, layout):
    x, y, idx0, cols = args
    dx, dy, d0, dc = dims
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    rows, cols, valid = _coo_lanes(idx0, cols, (d0, dc), size, shape, layout)
    m, k = shape

    def side(a, d, idx, n):
        if d is None:
            return a, select(valid, convert(idx, np.int64), _wrap(np.asarray(n, np.int64))), n
        a = bdim_to_front(a, d)
        a = reshape(a, (size * n, a.shape[-1]))
        return a, _offset(idx, valid, size, n, size * n), size * n

    x, rows, mm = side(x, dx, rows, m)
    y, cols, kk = side(y, dy, cols, k)
    nse = cols.shape[1]
    out = sddmm_p.bind(x, y, reshape(rows, (size * nse,)), reshape(cols, (size * nse,)), shape=(mm, kk), layout="coo")
    return reshape(out, (size, nse)), 0
