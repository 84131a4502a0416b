"""Factorizations, triangular solves: ``cholesky``, ``triangular_solve``, ``lu``, ``qr``, ``eigh``, ``eig``, ``svd``.

Each acts on the trailing two axes and is batched over the leading ones, as numpy.linalg is. Everything else
in ``fl.linalg`` (solve, inv, det, slogdet, pinv, norms, ...) is a composition of these in
``funclib.ops.linalg``, so it needs no rules of its own. float16/bfloat16 inputs are computed in float32 and
rounded back (``eig``, whose outputs are complex, returns complex64 for them).

Derivatives follow the standard matrix-calculus formulas (Murray 2016 for Cholesky, Townsend's notes for QR
and SVD); each jvp is written with funclib primitives, so every order composes.
Complex cotangents follow the bilinear convention of ``conj``/``real`` in ``elementwise.py``.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Zero, _state, _wrap, aval_of, concrete_or_none, is_undefined
from ..errors import DTypeError, MissingRuleError, ShapeError
from .dot import dot_general
from .elementwise import (
    complex_from,
    conj,
    convert,
    equal,
    greater_equal,
    imag,
    less_equal,
    multiply,
    negative,
    real,
    reciprocal,
    subtract,
)
from .indexing import gather
from .reduce import argmax
from .shape import (
    bdim_to_front,
    broadcast_in_dim,
    concatenate,
    iota,
    pad,
    reduce_sum,
    reshape,
    select,
    slice_,
    transpose,
)

_FLOAT = frozenset(dtypes.FLOATING)
_LOW = (dtypes.float16, dtypes.bfloat16)
_NB = 64  # block size of the blocked LU and triangular solve: BLAS-3 sized, yet few Python loops

LinAlgError = np.linalg.LinAlgError


# ------------------------------------------------------------------------------------------------------------
# helpers on NumPy arrays


def _up(x):
    """``x`` as a LAPACK-ready array (float16/bfloat16 widened to float32) and its original dtype."""
    x = np.asarray(x)
    return (x.astype(np.float32) if x.dtype in _LOW else x), x.dtype


def _solve_lower_np(l, b, unit):
    """Solve ``l x = b`` for lower-triangular ``l`` (reading only that triangle) by blocked substitution.

    Each diagonal block is flipped to upper-triangular form so LAPACK's LU does no pivoting and reduces to
    exact back substitution. ``l``: (..., n, n), ``b``: (..., n, k) with equal batch shapes.
    """
    n = l.shape[-1]
    x = np.empty(np.broadcast_shapes(l.shape[:-2], b.shape[:-2]) + b.shape[-2:], np.result_type(l, b))
    eye = np.eye(min(n, _NB), dtype=x.dtype)
    for s in range(0, n, _NB):
        e = min(s + _NB, n)
        r = b[..., s:e, :] - l[..., s:e, :s] @ x[..., :s, :] if s else b[..., s:e, :]
        blk = np.tril(l[..., s:e, s:e], -1 if unit else 0)
        if unit:
            blk = blk + eye[: e - s, : e - s]
        try:
            x[..., s:e, :] = np.linalg.solve(blk[..., ::-1, ::-1], r[..., ::-1, :])[..., ::-1, :]
        except LinAlgError:
            x[..., s:e, :] = _substitute_lower(blk, r)
    return x


def _substitute_lower(l, b):
    """Row-by-row forward substitution: with a zero on the diagonal it gives inf/nan as BLAS trsm does."""
    x = np.empty(b.shape, np.result_type(l, b))
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(l.shape[-1]):
            r = b[..., i, :] - np.einsum("...j,...jk->...k", l[..., i, :i], x[..., :i, :])
            x[..., i, :] = r / l[..., i, i, None]
    return x


def _triangular_solve_np(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """Reduce every variant to ``_solve_lower_np``: transposes turn right solves into left ones and
    upper triangles into lower ones; flipping both axes turns an upper triangle into a lower one."""
    if conjugate_a:
        a = np.conj(a)
    if transpose_a:
        a, lower = np.swapaxes(a, -1, -2), not lower
    if not left_side:
        a, lower, b = np.swapaxes(a, -1, -2), not lower, np.swapaxes(b, -1, -2)
    if not lower:
        a, b = a[..., ::-1, ::-1], b[..., ::-1, :]
    x = _solve_lower_np(a, b, unit_diagonal)
    if not lower:
        x = x[..., ::-1, :]
    return np.swapaxes(x, -1, -2) if not left_side else x


def _lu_np(a):
    """LU with partial pivoting (the factorization LAPACK's getrf computes), batched over leading axes.

    Returns ``(lu, pivots, permutation)`` with ``a[..., permutation, :] == L @ U``. The m x k panel is
    factored recursively (Toledo's algorithm), so almost all the work is in matrix products.
    """
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    a = np.array(a.reshape((-1, m, n)), copy=True)
    k = min(m, n)
    piv = np.zeros((a.shape[0], k), np.int32)
    perm = _lu_recursive(a[:, :, :k], piv, 0)
    if n > k:  # wide: U's extra columns are L^-1 (P a) there
        a[:, :, k:] = _take_rows(a[:, :, k:], perm)
        a[:, :, k:] = _solve_lower_np(a[:, :, :k], a[:, :, k:], True)
    return a.reshape(batch + (m, n)), piv.reshape(batch + (k,)), perm.reshape(batch + (m,)).astype(np.int32)


def _take_rows(x, perm):
    return np.take_along_axis(x, perm[:, :, None], axis=1)


def _lu_recursive(p, piv, c0):
    """Factor the tall panel ``p`` (B, rows, w) in place; ``c0`` is its first row and column in the matrix.

    Records LAPACK-style interchanges in ``piv`` and returns the panel's row permutation (B, rows).
    """
    w = p.shape[-1]
    if w <= 16:
        return _lu_unblocked(p, piv, c0)
    h = w // 2
    perm = _lu_recursive(p[:, :, :h], piv, c0)
    p[:, :, h:] = _take_rows(p[:, :, h:], perm)
    p[:, :h, h:] = _solve_lower_np(p[:, :h, :h], p[:, :h, h:], True)
    p[:, h:, h:] -= p[:, h:, :h] @ p[:, :h, h:]
    perm2 = _lu_recursive(p[:, h:, h:], piv, c0 + h)
    p[:, h:, :h] = _take_rows(p[:, h:, :h], perm2)
    perm[:, h:] = np.take_along_axis(perm[:, h:], perm2, axis=1)
    return perm


def _lu_unblocked(p, piv, c0):
    nb, rows, w = p.shape
    perm = np.tile(np.arange(rows), (nb, 1))
    bi = np.arange(nb)
    # LAPACK picks the pivot by |re| + |im| for complex matrices
    mag = (lambda v: np.abs(v.real) + np.abs(v.imag)) if p.dtype.kind == "c" else np.abs
    for j in range(w):
        q = j + np.argmax(mag(p[:, j:, j]), axis=1)
        piv[:, c0 + j] = c0 + q
        if (q != j).any():
            p[bi, j], p[bi, q] = p[bi, q], p[bi, j].copy()
            perm[bi, j], perm[bi, q] = perm[bi, q], perm[bi, j].copy()
        d = p[:, j, j]
        # a zero pivot means the column below is zero too: leave it (getrf reports it through info)
        p[:, j + 1 :, j] /= np.where(d == 0, 1, d)[:, None]
        p[:, j + 1 :, j + 1 :] -= p[:, j + 1 :, j : j + 1] * p[:, j : j + 1, j + 1 :]
    return perm


# ------------------------------------------------------------------------------------------------------------
# helpers on funclib values (used by the jvp rules; every one is linear or built from primitives with rules)


def _mm(a, b):
    """Batched matrix product of operands with equal leading axes."""
    nd = a.ndim
    batch = tuple(range(nd - 2))
    return dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _T(x):
    nd = x.ndim
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _H(x):
    return conj(_T(x)) if x.dtype.kind == "c" else _T(x)


def _const(v, dtype, like=None):
    """``v`` as a tensor of ``dtype``; with ``like``, on its device (rules' constants follow the data)."""
    out = _wrap(np.asarray(v, dtype=dtype))
    c = concrete_or_none(like) if like is not None else None
    return out.to_device(c.device) if c is not None and c.device != "cpu" else out


def _tri(x, k=0, lower=True, like=None):
    """The lower (``tril(x, k)``) or upper (``triu(x, k)``) triangle of the trailing two axes. The mask is made
    on the device of ``like`` (a concrete primal, where ``x`` is a tangent), else of ``x``."""
    m, n = x.shape[-2:]
    ref = x if like is None else like
    diff = subtract(iota(np.int64, (m, n), 1, like=ref), iota(np.int64, (m, n), 0, like=ref))
    keep = (less_equal if lower else greater_equal)(diff, _const(k, np.int64))
    return select(keep, x, _const(0, x.dtype))


def _eye(n, m, dtype, like=None):
    return _const(np.eye(n, m), dtype, like)


def _diag(x, like=None):
    """The main diagonal of square trailing matrices, as a new last axis."""
    n = x.shape[-1]
    return reduce_sum(multiply(x, _eye(n, n, x.dtype, x if like is None else like)), (x.ndim - 1,))


def _diag_embed(d, dtype, like=None):
    """Square matrices with ``d`` (last axis) on the diagonal."""
    n = d.shape[-1]
    d = convert(d, dtype) if d.dtype != dtype else d
    eye = _eye(n, n, dtype, d if like is None else like)
    return multiply(broadcast_in_dim(d, d.shape[:-1] + (n, n), tuple(range(d.ndim - 1)) + (d.ndim,)), eye)


def _hermitian_from_lower(t, like=None):
    """The Hermitian matrix LAPACK reads from the lower triangle of ``t`` (a complex diagonal's real part)."""
    low = _tri(t, -1, like=like)
    d = multiply(t, _eye(t.shape[-1], t.shape[-1], t.dtype, t if like is None else like))
    if t.dtype.kind == "c":
        d = complex_from(real(d), _const(0, dtypes.real_dtype(t.dtype)))
    return low + _H(low) + d


def _pad_last2(x, rows, cols):
    cfg = ((0, 0, 0),) * (x.ndim - 2) + ((0, rows, 0), (0, cols, 0))
    return pad(x, _const(0, x.dtype), cfg)


def _slice_last2(x, rows, cols):
    lead = x.shape[:-2]
    return slice_(x, (0,) * x.ndim, lead + (rows, cols))


def _check_matrix(op, x, square=True):
    if x.dtype not in _FLOAT:
        raise DTypeError(
            f"{op}: expected a floating-point or complex matrix, got {x.dtype.name}; cast with "
            "x.astype(fl.float32)"
        )
    if x.ndim < 2:
        raise ShapeError(f"{op}: expected a matrix (at least 2 dimensions), got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(
            f"{op}: expected square matrices, got shape {x.shape} ({x.shape[-2]}x{x.shape[-1]} in the last "
            "two axes)"
        )


def _unary_vmap(p):
    def rule(args, dims, **params):
        out = p.bind(bdim_to_front(args[0], dims[0]), **params)
        return out, ([0] * len(out) if p.multiple_results else 0)

    return rule


def _bind(p, *args, **params):
    """``p.bind``, with the shape/dtype checks run first in eager mode too (eager evaluation skips them)."""
    if _state.trace is None:
        p.abstract_eval(*(aval_of(a) for a in args), **params)
    return p.bind(*args, **params)


def _new(name, multiple_results=False, linear=False):
    p = Primitive(name, multiple_results=multiple_results, linear=linear)
    p.family = "linalg"
    if not linear:
        p.no_rule["transpose"] = "not linear"
    return p


# ------------------------------------------------------------------------------------------------------------
# cholesky

cholesky_p = _new("cholesky")


@cholesky_p.def_impl
def _cholesky_impl(x):
    a, dt = _up(x)
    try:
        return np.linalg.cholesky(a).astype(dt, copy=False)
    except LinAlgError:
        raise LinAlgError(
            f"cholesky: a matrix of the {a.shape} input is not positive definite (only its lower triangle is "
            "read); check symmetry and conditioning, or add a small multiple of the identity"
        ) from None


@cholesky_p.def_abstract_eval
def _cholesky_abstract(x):
    _check_matrix("cholesky", x)
    return ShapedArray(x.shape, x.dtype)


@cholesky_p.def_jvp
def _cholesky_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    L = cholesky_p.bind(x)
    if type(t) is Zero:
        return L, Zero(aval_of(L))
    # dL = L phi(L^-1 dA L^-H), phi = lower triangle with the diagonal halved (Murray 2016)
    dA = _hermitian_from_lower(t, like=L)
    tmp = triangular_solve(L, dA, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    X = triangular_solve(L, tmp, left_side=True, lower=True)
    n = x.shape[-1]
    phi = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    return L, _mm(L, multiply(X, _const(phi, X.dtype, L)))


cholesky_p.def_vmap(_unary_vmap(cholesky_p))


def cholesky(x):
    """The lower Cholesky factor ``L`` with ``x = L @ L^H``; reads only the lower triangle of ``x``."""
    return _bind(cholesky_p, x)


# ------------------------------------------------------------------------------------------------------------
# triangular_solve: op(a) x = b (left_side) or x op(a) = b; op = identity, transpose, or conjugate transpose.
# Linear in b, so it has a transpose rule; only the triangle named by ``lower`` of a is read. A zero on the
# diagonal gives inf/nan (no error), as BLAS trsm: the check would be data-dependent under jit.

triangular_solve_p = _new("triangular_solve", linear=True)


@triangular_solve_p.def_impl
def _triangular_solve_impl(a, b, **params):
    (a, dt), (b, _) = _up(a), _up(b)
    return _triangular_solve_np(a, b, **params).astype(dt, copy=False)


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    _check_matrix("triangular_solve", a)
    if b.dtype != a.dtype:
        raise DTypeError(
            f"triangular_solve: a and b must share a dtype, got {a.dtype.name} and {b.dtype.name}"
        )
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2]:
        raise ShapeError(
            f"triangular_solve: a {a.str_short()} and b {b.str_short()} must have the same leading (batch) "
            "axes; broadcast them first"
        )
    m = a.shape[-1]
    axis = -2 if left_side else -1
    if b.shape[axis] != m:
        side = "rows" if left_side else "columns"
        raise ShapeError(
            f"triangular_solve: b {b.str_short()} must have {m} {side} to match a {a.str_short()} "
            f"(left_side={left_side})"
        )
    return ShapedArray(b.shape, b.dtype)


@triangular_solve_p.def_jvp
def _triangular_solve_jvp(primals, tangents, **params):
    a, b = primals
    ta, tb = tangents
    x = triangular_solve_p.bind(a, b, **params)
    rhs = None if type(tb) is Zero else tb
    if type(ta) is not Zero:
        # d(op(A)^-1 B) = -op(A)^-1 op(dA) X (left), and -X op(dA) op(A)^-1 (right)
        k = 1 if params["unit_diagonal"] else 0
        g = _tri(ta, -k, lower=True, like=a) if params["lower"] else _tri(ta, k, lower=False, like=a)
        if params["transpose_a"]:
            g = _T(g)
        if params["conjugate_a"] and g.dtype.kind == "c":
            g = conj(g)
        gx = negative(_mm(g, x) if params["left_side"] else _mm(x, g))
        rhs = gx if rhs is None else rhs + gx
    if rhs is None:
        return x, Zero(aval_of(x))
    return x, triangular_solve_p.bind(a, rhs, **params)


@triangular_solve_p.def_transpose
def _triangular_solve_transpose(ct, a, b, **params):
    if is_undefined(a):
        raise TypeError("triangular_solve is linear in b only; the matrix a cannot be a linear input")
    return [None, triangular_solve_p.bind(a, ct, **dict(params, transpose_a=not params["transpose_a"]))]


@triangular_solve_p.def_vmap
def _triangular_solve_vmap(args, dims, **params):
    (a, b), (da, db) = args, dims
    if da is None:
        # one matrix for all lanes: fold the lanes into b's columns (left) or rows (right), a single solve
        b = bdim_to_front(b, db)
        size, nd = b.shape[0], b.ndim
        if params["left_side"]:
            bt = transpose(b, tuple(range(1, nd)) + (0,))
            m, k = bt.shape[-3:-1]
            x = triangular_solve_p.bind(a, reshape(bt, bt.shape[:-3] + (m, k * size)), **params)
            return reshape(x, bt.shape), nd - 1
        bt = transpose(b, tuple(range(1, nd - 2)) + (0, nd - 2, nd - 1))
        k, m = bt.shape[-2:]
        x = triangular_solve_p.bind(a, reshape(bt, bt.shape[:-3] + (size * k, m)), **params)
        return reshape(x, bt.shape), nd - 3
    a = bdim_to_front(a, da)
    if db is None:
        b = broadcast_in_dim(b, (a.shape[0],) + b.shape, tuple(range(1, b.ndim + 1)))
    else:
        b = bdim_to_front(b, db)
    return triangular_solve_p.bind(a, b, **params), 0


def triangular_solve(
    a,
    b,
    *,
    left_side: bool = False,
    lower: bool = False,
    transpose_a: bool = False,
    conjugate_a: bool = False,
    unit_diagonal: bool = False,
):
    """Solve ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for triangular ``a``.

    ``op(a)`` is ``a``, ``a.T`` (``transpose_a``), or ``a.conj().T`` (with ``conjugate_a`` too); only the
    triangle named by ``lower`` is read, and with ``unit_diagonal`` the diagonal is taken as ones.
    """
    return _bind(
        triangular_solve_p,
        a,
        b,
        left_side=bool(left_side),
        lower=bool(lower),
        transpose_a=bool(transpose_a),
        conjugate_a=bool(conjugate_a),
        unit_diagonal=bool(unit_diagonal),
    )


# ------------------------------------------------------------------------------------------------------------
# lu: (lu, pivots, permutation) with a[..., permutation, :] = L @ U; L unit lower (m x k), U upper (k x n)

lu_p = _new("lu", multiple_results=True)


@lu_p.def_impl
def _lu_impl(x):
    a, dt = _up(x)
    lu, piv, perm = _lu_np(a)
    return [lu.astype(dt, copy=False), piv, perm]


@lu_p.def_abstract_eval
def _lu_abstract(x):
    _check_matrix("lu", x, square=False)
    *batch, m, n = x.shape
    batch = tuple(batch)
    return [
        ShapedArray(x.shape, x.dtype),
        ShapedArray(batch + (min(m, n),), dtypes.int32),
        ShapedArray(batch + (m,), dtypes.int32),
    ]


def _permute_rows(x, perm):
    """``x[..., perm, :]`` for a permutation ``perm`` (..., m) with the leading axes of ``x`` (..., m, k)."""
    shape, nd = tuple(x.shape), x.ndim
    rows = broadcast_in_dim(convert(perm, np.int64), shape, tuple(range(nd - 1)))
    cols = [rows if d == nd - 2 else iota(np.int64, shape, d, like=perm) for d in range(nd)]
    idx = concatenate([reshape(c, shape + (1,)) for c in cols], nd)
    return gather(x, idx, tuple(range(nd)))


@lu_p.def_jvp
def _lu_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    lu, piv, perm = lu_p.bind(x)
    zeros = [Zero(aval_of(piv)), Zero(aval_of(perm))]
    if type(t) is Zero:
        return [lu, piv, perm], [Zero(aval_of(lu))] + zeros
    m, n = x.shape[-2:]
    k = min(m, n)
    # square the factors (identity padding), then dLU = L tril(F, -1) + triu(F) U with F = L^-1 P dA U^-1
    l_sq = _pad_last2(_tri(_slice_last2(lu, m, k), -1), 0, m - k) + _eye(m, m, lu.dtype, lu)
    u_sq = _pad_last2(_tri(_slice_last2(lu, k, n), 0, lower=False), n - k, 0)
    if n > k:
        u_sq = u_sq + _const(np.pad(np.eye(n - k), ((k, 0), (k, 0))), lu.dtype, lu)
    pa = _permute_rows(t, perm)
    la = triangular_solve(l_sq, pa, left_side=True, lower=True, unit_diagonal=True)
    f = triangular_solve(u_sq, la, left_side=False, lower=False)
    dlu = _mm(l_sq, _tri(f, -1, like=lu)) + _mm(_tri(f, 0, lower=False, like=lu), u_sq)
    return [lu, piv, perm], [dlu] + zeros


lu_p.def_vmap(_unary_vmap(lu_p))


def lu(x):
    """``(lu, pivots, permutation)``: packed L\\U factors (L unit lower), LAPACK's row interchanges (0-based,
    int32) and the permutation they amount to, so that ``x[..., permutation, :] == L @ U``."""
    return _bind(lu_p, x)


# ------------------------------------------------------------------------------------------------------------
# qr

qr_p = _new("qr", multiple_results=True)
qr_p.no_rule["jvp"] = (
    "defined except for full_matrices=True with m > n: the extra columns of Q are any orthonormal basis "
    "of the complement of range(a), so they have no derivative; use mode='reduced'"
)


@qr_p.def_impl
def _qr_impl(x, *, full_matrices):
    a, dt = _up(x)
    q, r = np.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return [q.astype(dt, copy=False), r.astype(dt, copy=False)]


@qr_p.def_abstract_eval
def _qr_abstract(x, *, full_matrices):
    _check_matrix("qr", x, square=False)
    *batch, m, n = x.shape
    batch = tuple(batch)
    k = m if full_matrices else min(m, n)
    return [ShapedArray(batch + (m, k), x.dtype), ShapedArray(batch + (k, n), x.dtype)]


def _qr_jvp_tall(q, r, dx):
    """Reduced QR, m >= n (Townsend / JAX): returns (dq, dr)."""
    dx_rinv = triangular_solve(r, dx, left_side=False, lower=False)
    qt_dx_rinv = _mm(_H(q), dx_rinv)
    low = _tri(qt_dx_rinv, -1, like=q)
    do = low - _H(low)  # skew-Hermitian
    if do.dtype.kind == "c":
        # the diagonal of Q^H dQ is imaginary for complex inputs
        n = do.shape[-1]
        do = do + multiply(_eye(n, n, do.dtype, q), qt_dx_rinv - convert(real(qt_dx_rinv), do.dtype))
    dq = _mm(q, do - qt_dx_rinv) + dx_rinv
    dr = _mm(qt_dx_rinv - do, r)
    return dq, dr


@qr_p.def_jvp
def _qr_jvp(primals, tangents, *, full_matrices):
    (x,), (t,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    if type(t) is Zero:
        return [q, r], [Zero(aval_of(q)), Zero(aval_of(r))]
    m, n = x.shape[-2:]
    if full_matrices and m > n:
        raise MissingRuleError(
            f"qr: no derivative for mode='complete' with m > n (input shape {x.shape}): the extra columns "
            "of Q are any orthonormal basis of the complement of range(a); use mode='reduced'"
        )
    if m >= n:
        dq, dr = _qr_jvp_tall(q, r, t)
        return [q, r], [dq, dr]
    # wide: x = [x1 | y] with x1 square; q r1 = qr(x1), r2 = q^H y
    lead = x.shape[:-2]
    r1 = _slice_last2(r, m, m)
    dq, dr1 = _qr_jvp_tall(q, r1, _slice_last2(t, m, m))
    y = slice_(x, (0,) * (x.ndim - 1) + (m,), lead + (m, n))
    dy = slice_(t, (0,) * (x.ndim - 1) + (m,), lead + (m, n))
    dr2 = _mm(_H(dq), y) + _mm(_H(q), dy)
    return [q, r], [dq, concatenate([dr1, dr2], x.ndim - 1)]


qr_p.def_vmap(_unary_vmap(qr_p))


def qr(x, full_matrices: bool = False):
    """``[q, r]``, ``x = q @ r``; reduced: q is m x k, r is k x n (k = min(m, n)); complete: q is m x m."""
    return _bind(qr_p, x, full_matrices=bool(full_matrices))


# ------------------------------------------------------------------------------------------------------------
# eigh

eigh_p = _new("eigh", multiple_results=True)


@eigh_p.def_impl
def _eigh_impl(x):
    a, dt = _up(x)
    w, v = np.linalg.eigh(a)
    return [w.astype(dtypes.real_dtype(dt), copy=False), v.astype(dt, copy=False)]


@eigh_p.def_abstract_eval
def _eigh_abstract(x):
    _check_matrix("eigh", x)
    return [ShapedArray(x.shape[:-1], dtypes.real_dtype(x.dtype)), ShapedArray(x.shape, x.dtype)]


def _inv_gaps(w, dtype):
    """``F[i, j] = 1 / (w[j] - w[i])`` off the diagonal; 0 on it and wherever ``w[i] == w[j]`` exactly."""
    n = w.shape[-1]
    lead = tuple(range(w.ndim - 1))
    wj = broadcast_in_dim(w, w.shape[:-1] + (n, n), lead + (w.ndim,))
    wi = broadcast_in_dim(w, w.shape[:-1] + (n, n), lead + (w.ndim - 1,))
    gap = subtract(wj, wi)
    tied = equal(gap, _const(0, w.dtype))
    f = select(tied, _const(0, w.dtype), reciprocal(select(tied, _const(1, w.dtype), gap)))
    return convert(f, dtype) if f.dtype != dtype else f


@eigh_p.def_jvp
def _eigh_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    w, v = eigh_p.bind(x)
    if type(t) is Zero:
        return [w, v], [Zero(aval_of(w)), Zero(aval_of(v))]
    # dw = diag(V^H dA V); dV = V (F * V^H dA V) with F the inverse eigenvalue gaps (zero where tied)
    vav = _mm(_mm(_H(v), _hermitian_from_lower(t, like=v)), v)
    dw = _diag(vav, like=v)
    if dw.dtype.kind == "c":
        dw = real(dw)
    dv = _mm(v, multiply(_inv_gaps(w, v.dtype), vav))
    return [w, v], [dw, dv]


eigh_p.def_vmap(_unary_vmap(eigh_p))


def eigh(x):
    """``[w, v]``: ascending eigenvalues and orthonormal eigenvectors of the Hermitian matrix whose lower
    triangle is ``x``'s (as numpy.linalg.eigh)."""
    return _bind(eigh_p, x)


# ------------------------------------------------------------------------------------------------------------
# eig: a primitive for its own kernel (LAPACK geev). Outputs are always complex (a real matrix may have complex
# eigenvalues, and a static dtype cannot depend on which). Eigenvectors come as LAPACK normalizes them: unit
# 2-norm with the largest-modulus component real; the jvp keeps both, so it differentiates the values returned.

eig_p = _new("eig", multiple_results=True)


@eig_p.def_impl
def _eig_impl(x):
    a, dt = _up(x)
    w, v = np.linalg.eig(a)
    c = dtypes.complex_dtype(np.dtype(a.dtype))
    return [w.astype(c, copy=False), v.astype(c, copy=False)]


@eig_p.def_abstract_eval
def _eig_abstract(x):
    _check_matrix("eig", x)
    c = dtypes.complex_dtype(dtypes.float32 if x.dtype in _LOW else x.dtype)
    return [ShapedArray(x.shape[:-1], c), ShapedArray(x.shape, c)]


def _solve_square(a, b):
    """``a^-1 b`` through LU with partial pivoting (batched)."""
    lu_, _, perm = lu_p.bind(a)
    y = triangular_solve(lu_, _permute_rows(b, perm), left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, y, left_side=True, lower=False)


def _inv_gaps_complex(w):
    """``F[i, j] = 1 / (w[j] - w[i])``; 0 on the diagonal and wherever two eigenvalues coincide exactly."""
    n = w.shape[-1]
    lead = tuple(range(w.ndim - 1))
    wj = broadcast_in_dim(w, w.shape[:-1] + (n, n), lead + (w.ndim,))
    wi = broadcast_in_dim(w, w.shape[:-1] + (n, n), lead + (w.ndim - 1,))
    gap = subtract(wj, wi)
    tied = equal(gap, _const(0, w.dtype))
    return select(tied, _const(0, w.dtype), reciprocal(select(tied, _const(1, w.dtype), gap)))


@eig_p.def_jvp
def _eig_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    w, v = eig_p.bind(x)
    if type(t) is Zero:
        return [w, v], [Zero(aval_of(w)), Zero(aval_of(v))]
    c = w.dtype
    t = convert(t, c) if t.dtype != c else t
    # A V = V diag(w): V^-1 dA V = diag(dw) + (terms that rotate V); dV = V (F * V^-1 dA V) + gauge terms
    m = _solve_square(v, _mm(t, v))
    dw = _diag(m, like=v)
    dv = _mm(v, multiply(_inv_gaps_complex(w), m))
    # keep each column at unit norm: remove Re(v^H dv) v
    rdot = real(reduce_sum(multiply(conj(v), dv), (v.ndim - 2,)))
    dv = dv - multiply(v, broadcast_in_dim(convert(rdot, c), v.shape, tuple(range(v.ndim - 2)) + (v.ndim - 1,)))
    # and its largest component real: rotate by -i theta, theta = Im(dv_k) / v_k at that (real) component
    k = argmax(real(multiply(v, conj(v))), v.ndim - 2)  # the first maximum, as LAPACK's idamax
    vk = real(_pick_rows(v, k))
    zero = equal(vk, _const(0, vk.dtype))
    theta = select(zero, _const(0, vk.dtype), imag(_pick_rows(dv, k)) / select(zero, _const(1, vk.dtype), vk))
    rot = complex_from(_const(0, theta.dtype), theta)
    dv = dv - multiply(v, broadcast_in_dim(rot, v.shape, tuple(range(v.ndim - 2)) + (v.ndim - 1,)))
    return [w, v], [dw, dv]


def _pick_rows(x, k):
    """``x[..., k[..., j], j]`` for every column j."""
    nd = x.ndim
    shape = k.shape
    cols = [iota(np.int64, shape, d, like=k) for d in range(nd - 2)] + [convert(k, np.int64),
                                                                        iota(np.int64, shape, nd - 2, like=k)]
    idx = concatenate([reshape(cidx, shape + (1,)) for cidx in cols], nd - 1)
    return gather(x, idx, tuple(range(nd)))


eig_p.def_vmap(_unary_vmap(eig_p))


def eig(x):
    """``[w, v]``: eigenvalues and right eigenvectors (columns) of square matrices, complex, in LAPACK's order
    and normalization (unit norm, largest component real), so that ``x @ v = v * w``."""
    return _bind(eig_p, x)


# ------------------------------------------------------------------------------------------------------------
# svd

svd_p = _new("svd", multiple_results=True)
svd_p.no_rule["jvp"] = (
    "defined except for full_matrices=True with m != n and compute_uv: the extra singular vectors are any "
    "orthonormal basis of a complement, so they have no derivative; use full_matrices=False"
)


@svd_p.def_impl
def _svd_impl(x, *, full_matrices, compute_uv):
    a, dt = _up(x)
    if not compute_uv:
        return [np.linalg.svd(a, compute_uv=False).astype(dtypes.real_dtype(dt), copy=False)]
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return [u.astype(dt, copy=False), s.astype(dtypes.real_dtype(dt), copy=False), vh.astype(dt, copy=False)]


@svd_p.def_abstract_eval
def _svd_abstract(x, *, full_matrices, compute_uv):
    _check_matrix("svd", x, square=False)
    *batch, m, n = x.shape
    batch = tuple(batch)
    k = min(m, n)
    s = ShapedArray(batch + (k,), dtypes.real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [ShapedArray(batch + (m, ku), x.dtype), s, ShapedArray(batch + (kv, n), x.dtype)]


@svd_p.def_jvp
def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    (x,), (t,) = primals, tangents
    outs = svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if type(t) is Zero:
        return outs, [Zero(aval_of(o)) for o in outs]
    m, n = x.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise MissingRuleError(
            f"svd: no derivative for full_matrices=True with a non-square input of shape {x.shape}: the "
            "extra singular vectors are any orthonormal basis of a complement; use full_matrices=False"
        )
    u, s, vh = outs if compute_uv else svd_p.bind(x, full_matrices=False, compute_uv=True)
    dt = x.dtype
    v = _H(vh)
    ds_mat = _mm(_mm(_H(u), t), v)
    ds = _diag(ds_mat, like=u)
    if ds.dtype.kind == "c":
        ds = real(ds)
    if not compute_uv:
        return outs, [ds]
    k = s.shape[-1]
    lead = tuple(range(s.ndim - 1))
    s_row = broadcast_in_dim(s, s.shape[:-1] + (k, k), lead + (s.ndim,))  # s_row[i, j] = s[j]
    s_col = _T(s_row)
    # F[i, j] = 1 / (s_j^2 - s_i^2) off the diagonal and where distinct
    diff = (s_row + s_col) * (s_row - s_col)
    tied = equal(diff, _const(0, s.dtype))
    f = convert(select(tied, _const(0, s.dtype), reciprocal(select(tied, _const(1, s.dtype), diff))), dt)
    s_row_c, s_col_c = convert(s_row, dt), convert(s_col, dt)
    dss = multiply(s_row_c, ds_mat)  # dS diag(s)
    sds = multiply(s_col_c, ds_mat)  # diag(s) dS
    zero_s = equal(s, _const(0, s.dtype))
    s_inv = select(zero_s, _const(0, s.dtype), reciprocal(select(zero_s, _const(1, s.dtype), s)))
    # the imaginary diagonal of U^H dU: fixes the phase gauge (zero for real inputs)
    du_dv_diag = multiply(0.5 * (ds_mat - _H(ds_mat)), _diag_embed(s_inv, dt, like=u))
    du = _mm(u, multiply(f, dss + _H(dss)) + du_dv_diag)
    dv = _mm(v, multiply(f, sds + _H(sds)))
    s_inv_row = broadcast_in_dim(convert(s_inv, dt), u.shape[:-2] + (1, k), lead + (s.ndim,))
    if m > n:
        dav = _mm(t, v)
        du = du + multiply(dav - _mm(u, _mm(_H(u), dav)), s_inv_row)
    if n > m:
        dahu = _mm(_H(t), u)
        dv = dv + multiply(dahu - _mm(v, _mm(vh, dahu)), s_inv_row)
    return outs, [du, ds, _H(dv)]


svd_p.def_vmap(_unary_vmap(svd_p))


def svd(x, full_matrices: bool = False, compute_uv: bool = True):
    """``[u, s, vh]`` (or ``[s]`` without ``compute_uv``) with ``x = u @ diag(s) @ vh``, ``s`` descending."""
    return _bind(svd_p, x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
