"""``funclib.numpy.linalg``: NumPy's ``numpy.linalg`` over funclib's factorizations, differentiable and
batched over leading axes.

As in NumPy, ``cholesky`` reads the lower triangle and ``eigh``/``eigvalsh`` the triangle ``UPLO`` names, so
their derivatives flow to that triangle only. ``eig``/``eigvals`` always return complex arrays (NumPy returns
real ones when every eigenvalue happens to be real; a traced function needs one dtype). Under ``jit``,
``lstsq`` returns residuals whenever M > N, as NaN when ``a`` turns out rank deficient (NumPy returns an empty
array then).

>>> import funclib.numpy as fnp
>>> fnp.linalg.norm(fnp.array([[3.0, 0.0], [0.0, 4.0]]), 2)
Tensor(4., dtype=float32)
"""

from __future__ import annotations

import builtins
import math
from typing import NamedTuple

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, Tracer, _wrap, concrete_or_none
from ..ops import linalg as L
from ..ops import reductions as R
from ..ops.indexing import take_along_axis
from ..ops.manipulation import moveaxis
from ..ops.searching import where as _where
from ..ops.sorting import argsort, sort
from ..primitives import linalg as P
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ._products import tensordot as _td
from ._util import NoValue, asarray, axis_int, inexact, no_out, static_int

__all__ = [
    "LinAlgError",
    "EigResult",
    "EighResult",
    "QRResult",
    "SVDResult",
    "SlogdetResult",
    "cholesky",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "lstsq",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "multi_dot",
    "norm",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "tensorinv",
    "tensorsolve",
    "trace",
    "vecdot",
    "vector_norm",
]

LinAlgError = np.linalg.LinAlgError
EighResult, QRResult, SVDResult, SlogdetResult = L.EighResult, L.QRResult, L.SVDResult, L.SlogdetResult


class EigResult(NamedTuple):
    """What ``fnp.linalg.eig`` returns: the eigenvalues and the eigenvectors as columns (complex).

    >>> fnp.linalg.eig(fnp.array([[2.0, 0.0], [0.0, 3.0]])).eigenvalues
    Tensor([2.+0.j, 3.+0.j], dtype=complex64)
    """

    eigenvalues: Tensor
    eigenvectors: Tensor


def _mat(a, op, square=True):
    x = inexact(asarray(a, op))
    if x.ndim < 2:
        raise LinAlgError(f"numpy.linalg.{op}: {x.ndim}-dimensional array given; array must be at least "
                          "two-dimensional")
    if square and x.shape[-1] != x.shape[-2]:
        raise LinAlgError(f"numpy.linalg.{op}: last 2 dimensions of the array must be square, got {tuple(x.shape)}")
    return x


def _upper_as_lower(x):
    """The matrix whose lower triangle holds ``x``'s upper triangle, conjugated (so both read one Hermitian)."""
    return P._H(x)


def cholesky(a, /, *, upper=False) -> Tensor:
    """The Cholesky factor of a Hermitian positive-definite matrix from its lower triangle: ``L`` with
    ``a = L @ L^H``, or ``U = L^H`` with ``upper``. Not positive definite: ``LinAlgError``.

    >>> fnp.linalg.cholesky(fnp.array([[4.0, 2.0], [2.0, 5.0]]))
    Tensor([[2., 0.],
           [1., 2.]], dtype=float32)
    """
    L_ = P.cholesky(_mat(a, "cholesky"))
    return P._H(L_) if upper else L_


def eig(a) -> EigResult:
    """Eigenvalues and right eigenvectors (columns, unit norm, largest component real) of square matrices,
    both complex: ``a @ v == v * w``. Differentiable where the eigenvalues are distinct.

    On a CUDA device the eigenvalues come in the order of the complex Schur form's diagonal, which is LAPACK's
    for most matrices but not all (real ones with several complex pairs may differ): compare them as a multiset.
    Each vector's largest component is real and positive there, where LAPACK may leave a real vector negative.

    >>> w, v = fnp.linalg.eig(fnp.array([[2.0, 0.0], [0.0, 3.0]]))
    >>> w
    Tensor([2.+0.j, 3.+0.j], dtype=complex64)
    """
    w, v = P.eig(_mat(a, "eig"))
    return EigResult(w, v)


def eigvals(a) -> Tensor:
    """The (complex) eigenvalues of square matrices, in LAPACK's order (on a CUDA device, usually: see ``eig``).

    >>> fnp.linalg.eigvals(fnp.array([[2.0, 0.0], [0.0, 3.0]]))
    Tensor([2.+0.j, 3.+0.j], dtype=complex64)
    """
    return eig(a).eigenvalues


def _uplo(a, UPLO, op):
    if UPLO not in ("L", "U"):
        raise ValueError(f"numpy.linalg.{op}: UPLO must be 'L' or 'U', got {UPLO!r}")
    x = _mat(a, op)
    return x if UPLO == "L" else _upper_as_lower(x)


def eigh(a, UPLO="L") -> EighResult:
    """Ascending eigenvalues and orthonormal eigenvectors of the Hermitian matrix given by the ``UPLO``
    ('L' lower or 'U' upper) triangle of ``a``.

    >>> fnp.linalg.eigh(fnp.array([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
    Tensor([1., 3.], dtype=float32)
    """
    w, v = P.eigh(_uplo(a, UPLO, "eigh"))
    return EighResult(w, v)


def eigvalsh(a, UPLO="L") -> Tensor:
    """The ascending eigenvalues of the Hermitian matrix given by one triangle of ``a`` (see ``eigh``).

    >>> fnp.linalg.eigvalsh(fnp.array([[2.0, 1.0], [1.0, 2.0]]))
    Tensor([1., 3.], dtype=float32)
    """
    return P.eigh(_uplo(a, UPLO, "eigvalsh"))[0]


def qr(a, mode="reduced"):
    """The QR factorization ``a = Q @ R``: ``mode`` 'reduced' (Q is M x K), 'complete' (Q is M x M) or 'r'
    (R alone). NumPy's 'raw' (LAPACK's Householder reflectors) is not available.

    >>> fnp.linalg.qr(fnp.array([[3.0, 0.0], [4.0, 1.0]]), mode="r").shape
    (2, 2)
    """
    if mode == "raw":
        raise ValueError("numpy.linalg.qr: mode='raw' (LAPACK's Householder reflectors) is not available; use "
                         "'reduced', 'complete' or 'r'")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"numpy.linalg.qr: unrecognized mode {mode!r}")
    x = _mat(a, "qr", square=False)
    if mode == "r":
        return P.qr(x, full_matrices=False)[1]
    q, r = P.qr(x, full_matrices=mode == "complete")
    return QRResult(q, r)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """The singular value decomposition ``a = U @ diag(S) @ Vh`` (``S`` descending), or ``S`` alone. With
    ``hermitian`` it comes from ``eigh`` as NumPy computes it. Use ``full_matrices=False`` to differentiate
    U or Vh of a non-square matrix.

    >>> fnp.linalg.svd(fnp.array([[3.0, 0.0], [0.0, 4.0]]), compute_uv=False)
    Tensor([4., 3.], dtype=float32)
    """
    x = _mat(a, "svd", square=hermitian)
    if hermitian:
        if not compute_uv:
            s = ops.abs(P.eigh(x)[0])
            return S.rev(_sort_last(s), (s.ndim - 1,))
        w, u = P.eigh(x)
        sgn, s = ops.sign(w), ops.abs(w)
        order = S.rev(_argsort_last(s), (s.ndim - 1,))
        sgn, s = take_along_axis(sgn, order, axis=-1), take_along_axis(s, order, axis=-1)
        u = take_along_axis(u, S.broadcast_to(S.expand_dims(order, [order.ndim - 1]), tuple(u.shape)), axis=-1)
        vt = P._H(ops.multiply(u, convert(S.expand_dims(sgn, [sgn.ndim - 1]), u.dtype)))
        return SVDResult(u, s, vt)
    if not compute_uv:
        return L.svdvals(x)
    return L.svd(x, full_matrices=bool(full_matrices))


def _sort_last(x):
    return sort(x, axis=-1)


def _argsort_last(x):
    return argsort(x, axis=-1)


def svdvals(x, /) -> Tensor:
    """The singular values, descending.

    >>> fnp.linalg.svdvals(fnp.array([[3.0, 0.0], [0.0, 4.0]]))
    Tensor([4., 3.], dtype=float32)
    """
    return L.svdvals(_mat(x, "svdvals", square=False))


def det(a) -> Tensor:
    """The determinant of square matrices.

    >>> fnp.linalg.det(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    Tensor(-2., dtype=float32)
    """
    return L.det(_mat(a, "det"))


def slogdet(a) -> SlogdetResult:
    """``(sign, logabsdet)`` with ``det = sign * exp(logabsdet)``.

    >>> fnp.linalg.slogdet(fnp.array([[-2.0, 0.0], [0.0, 3.0]]))
    SlogdetResult(sign=Tensor(-1., dtype=float32), logabsdet=Tensor(1.7917595, dtype=float32))
    """
    return L.slogdet(_mat(a, "slogdet"))


def inv(a) -> Tensor:
    """The inverse of square matrices (a singular one raises ``LinAlgError`` eagerly).

    >>> fnp.linalg.inv(fnp.array([[2.0, 0.0], [0.0, 4.0]]))
    Tensor([[0.5 , 0.  ],
            [0.  , 0.25]], dtype=float32)
    """
    return L.inv(_mat(a, "inv"))


def solve(a, b) -> Tensor:
    """The solution of ``a @ x = b``: ``b`` is a vector when 1-D, else a stack of matrices (..., M, K).

    >>> fnp.linalg.solve(fnp.array([[2.0, 0.0], [0.0, 4.0]]), fnp.array([2.0, 2.0]))
    Tensor([1. , 0.5], dtype=float32)
    """
    return L.solve(_mat(a, "solve"), inexact(asarray(b, "solve")))


def _rcond_default(x):
    return max(x.shape[-2:]) * float(np.finfo(dtypes.real_dtype(x.dtype)).eps)


def lstsq(a, b, rcond=None):
    """The least-squares solution of ``a @ x = b`` from the SVD, singular values at or below ``rcond * s[0]``
    treated as zero (default ``rcond = eps * max(M, N)``). Returns ``(x, residuals, rank, s)``: residuals are
    the squared norms of ``b - a @ x`` per column when ``a`` has full column rank and M > N.

    >>> x, res, rank, s = fnp.linalg.lstsq(fnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
    ...                                    fnp.array([1.0, 1.0, 2.0]))
    >>> fnp.round(x, 4)
    Tensor([1., 1.], dtype=float32)
    """
    A = _mat(a, "lstsq", square=False)
    if A.ndim != 2:
        raise LinAlgError(f"numpy.linalg.lstsq: a must be 2-D, got shape {tuple(A.shape)}")
    B = inexact(asarray(b, "lstsq"))
    d = dtypes.result_type(A, B)
    A, B = convert(A, d) if A.dtype != d else A, convert(B, d) if B.dtype != d else B
    vec = B.ndim == 1
    Bm = S.reshape(B, (-1, 1)) if vec else B
    m, n = A.shape
    if Bm.shape[0] != m:
        raise LinAlgError(f"numpy.linalg.lstsq: incompatible dimensions {tuple(A.shape)} and {tuple(B.shape)}")
    rc = _rcond_default(A) if rcond is None else rcond
    u, s, vh = P.svd(A, full_matrices=False)
    keep = ops.greater(s, ops.multiply(R.max(s), rc)) if s.shape[0] else s
    s_inv = _where(keep, ops.divide(1.0, _where(keep, s, _wrap(np.ones((), s.dtype)))), _wrap(np.zeros((), s.dtype)))
    s_inv = convert(s_inv, d) if d in dtypes.COMPLEX else s_inv
    x = L.matmul(P._H(vh), ops.multiply(S.reshape(s_inv, (-1, 1)), L.matmul(P._H(u), Bm)))
    rank = R.sum(convert(keep, dtypes.int32), dtype=dtypes.int32) if s.shape[0] else _wrap(np.asarray(0, np.int32))
    k = Bm.shape[1]
    if m > n:
        r = ops.subtract(Bm, L.matmul(A, x))
        resid = R.sum(ops.real(ops.multiply(r, ops.conj(r))), axis=0)
        known = concrete_or_none(rank)
        if known is None:
            resid = _where(ops.equal(rank, n), resid, _wrap(np.full((), np.nan, resid.dtype)))
        elif int(known) != n:
            resid = S.full((0,), 0, resid.dtype)
    else:
        resid = S.full((0,), 0, dtypes.real_dtype(d))
    if vec:
        x = S.reshape(x, (n,))
    elif k == 0:
        x = S.reshape(x, (n, 0))
    return x, resid, rank, s


def pinv(a, rcond=None, hermitian=False, *, rtol=NoValue) -> Tensor:
    """The Moore-Penrose pseudo-inverse; singular values at or below ``rcond * max(s)`` count as zero
    (NumPy's defaults: ``rcond=1e-15``, or ``rtol``; ``rtol=None`` means ``eps * max(M, N)``).

    >>> fnp.linalg.pinv(fnp.array([[2.0, 0.0], [0.0, 0.0]]))
    Tensor([[0.5, 0. ],
           [0. , 0. ]], dtype=float32)
    """
    x = _mat(a, "pinv", square=False)
    if rcond is None:
        if rtol is NoValue:
            rcond = 1e-15
        elif rtol is None:
            rcond = _rcond_default(x)
        else:
            rcond = rtol
    elif rtol is not NoValue:
        raise ValueError("numpy.linalg.pinv: rtol and rcond can't be both set")
    if isinstance(rcond, Tensor) and rcond.ndim == 0:
        rcond = rcond if isinstance(rcond, Tracer) else float(rcond)
    return L.pinv(x, rtol=rcond)


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None) -> Tensor:
    """The number of singular values above ``tol`` (default ``rtol * max(s)`` with ``rtol = eps * max(M,
    N)``); for a 0-d or 1-D input, 1 unless all zero.

    >>> fnp.linalg.matrix_rank(fnp.array([[1.0, 2.0], [2.0, 4.0]]))
    Tensor(1, dtype=int64)
    """
    x = asarray(A, "matrix_rank")
    if x.ndim < 2:
        return convert(R.any(ops.not_equal(x, 0)), dtypes.int64)
    x = inexact(x)
    if tol is not None and rtol is not None:
        raise ValueError("numpy.linalg.matrix_rank: tol and rtol can't be both set")
    s = ops.abs(P.eigh(x)[0]) if hermitian else L.svdvals(x)
    if tol is None:
        r = _rcond_default(x) if rtol is None else rtol
        r = S.expand_dims(asarray(r, "matrix_rank"), [-1]) if isinstance(r, Tensor) else r
        cut = ops.multiply(R.max(s, axis=-1, keepdims=True), r)
    else:
        t = asarray(tol, "matrix_rank")
        cut = S.expand_dims(t, [t.ndim]) if t.ndim else t
    return R.sum(convert(ops.greater(s, cut), dtypes.int64), axis=-1)


def cond(x, p=None) -> Tensor:
    """The condition number in the norm ``p`` (None or 2: largest / smallest singular value; -2: the
    reverse; 'fro', 'nuc', 1, -1, inf, -inf: ``norm(x) * norm(inv(x))``).

    >>> fnp.linalg.cond(fnp.array([[2.0, 0.0], [0.0, 1.0]]))
    Tensor(2., dtype=float32)
    """
    a = _mat(x, "cond", square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = L.svdvals(a)
        k = s.shape[-1]
        hi, lo = s[..., 0], s[..., k - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            return ops.divide(hi, lo) if p != -2 else ops.divide(lo, hi)
    return ops.multiply(norm(a, p, axis=(-2, -1)), norm(inv(a), p, axis=(-2, -1)))


def norm(x, ord=None, axis=None, keepdims=False) -> Tensor:
    """A vector norm (``axis`` an int, or a 1-D input) or a matrix norm (``axis`` a pair, or a 2-D input)
    with NumPy's ``ord`` choices; with neither ``ord`` nor ``axis``, the 2-norm of the flattened array.

    >>> fnp.linalg.norm(fnp.array([3.0, 4.0]))
    Tensor(5., dtype=float32)
    """
    v = inexact(asarray(x, "norm"))
    if axis is None:
        if ord is None:
            out = L.vector_norm(v, axis=None, keepdims=False)
            return S.reshape(out, (1,) * v.ndim) if keepdims else out
        if v.ndim == 1:
            axis = (0,)
        elif v.ndim == 2:
            axis = (0, 1)
        else:
            raise ValueError("numpy.linalg.norm: improper number of dimensions to norm (give axis)")
    axes = (axis,) if isinstance(axis, (builtins.int, np.integer)) else tuple(axis)
    axes = tuple(axis_int(a, v.ndim, "norm") for a in axes)
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ValueError(f"numpy.linalg.norm: invalid norm order {ord!r} for vectors")
        return L.vector_norm(v, axis=axes[0], keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) != 2 or axes[0] == axes[1]:
        raise ValueError("numpy.linalg.norm: axis must name one or two distinct axes")
    ordm = "fro" if ord is None else ord
    if ordm not in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        raise ValueError(f"numpy.linalg.norm: invalid norm order {ord!r} for matrices")
    moved = moveaxis(v, axes, (-2, -1))
    out = L.matrix_norm(moved, ord=ordm)
    if keepdims:
        out = S.reshape(out, tuple(1 if i in axes else n for i, n in enumerate(v.shape)))
    return out


def matrix_norm(x, /, *, keepdims=False, ord="fro") -> Tensor:
    """A matrix norm of the last two axes (see ``norm``).

    >>> fnp.linalg.matrix_norm(fnp.array([[3.0, 0.0], [0.0, 4.0]]))
    Tensor(5., dtype=float32)
    """
    return L.matrix_norm(inexact(asarray(x, "matrix_norm")), keepdims=keepdims, ord=ord)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2) -> Tensor:
    """A vector norm over ``axis`` (all axes by default).

    >>> fnp.linalg.vector_norm(fnp.array([3.0, 4.0]))
    Tensor(5., dtype=float32)
    """
    return L.vector_norm(inexact(asarray(x, "vector_norm")), axis=axis, keepdims=keepdims, ord=ord)


def matrix_power(a, n) -> Tensor:
    """``a`` multiplied by itself ``n`` times (``n = 0``: the identity; ``n < 0``: powers of the inverse).

    >>> fnp.linalg.matrix_power(fnp.array([[1, 1], [0, 1]]), 3)
    Tensor([[1., 3.],
            [0., 1.]], dtype=float32)
    """
    x = asarray(a, "matrix_power")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise LinAlgError(f"numpy.linalg.matrix_power: expected square matrices, got shape {tuple(x.shape)}")
    return L.matrix_power(x, static_int(n, "matrix_power", "n"))


def _chain_order(dims):
    """The cheapest parenthesization of a matrix chain with shapes ``dims[i] x dims[i + 1]``."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(arrays, *, out=None) -> Tensor:
    """The product of a chain of matrices in the cheapest order (the first and last may be 1-D vectors).

    >>> fnp.linalg.multi_dot([fnp.ones((2, 3)), fnp.ones((3, 4)), fnp.ones(4)])
    Tensor([12., 12.], dtype=float32)
    """
    no_out(out, "linalg.multi_dot")
    xs = [asarray(a, "multi_dot") for a in arrays]
    if len(xs) < 2:
        raise ValueError("numpy.linalg.multi_dot: expecting at least two arrays")
    first_vec, last_vec = xs[0].ndim == 1, xs[-1].ndim == 1
    if first_vec:
        xs[0] = S.reshape(xs[0], (1, -1))
    if last_vec:
        xs[-1] = S.reshape(xs[-1], (-1, 1))
    for x in xs:
        if x.ndim != 2:
            raise ValueError(f"numpy.linalg.multi_dot: {x.ndim}-dimensional array given; arrays must be 2-D "
                             "(the first and last may be 1-D)")
    split = _chain_order([xs[0].shape[0]] + [x.shape[1] for x in xs])

    def prod(i, j):
        if i == j:
            return xs[i]
        k = split[i][j]
        return L.matmul(prod(i, k), prod(k + 1, j))

    res = prod(0, len(xs) - 1)
    if first_vec and last_vec:
        return S.reshape(res, ())
    if first_vec:
        return S.reshape(res, (res.shape[1],))
    if last_vec:
        return S.reshape(res, (res.shape[0],))
    return res


def tensorinv(a, ind=2) -> Tensor:
    """The inverse of ``a`` as a linear map from its last axes to its first ``ind`` axes.

    >>> fnp.linalg.tensorinv(fnp.eye(4).reshape(4, 2, 2), ind=1).shape
    (2, 2, 4)
    """
    x = inexact(asarray(a, "tensorinv"))
    ind = static_int(ind, "tensorinv", "ind")
    if ind <= 0:
        raise ValueError("numpy.linalg.tensorinv: invalid ind argument (must be positive)")
    inv_shape = tuple(x.shape[ind:]) + tuple(x.shape[:ind])
    rows = int(np.prod(x.shape[ind:], dtype=np.int64))
    return S.reshape(inv(S.reshape(x, (rows, -1))), inv_shape)


def tensorsolve(a, b, axes=None) -> Tensor:
    """The ``x`` with ``tensordot(a, x, x.ndim) == b``, where ``a``'s axes after the first ``b.ndim`` are
    ``x``'s (``axes`` moves axes of ``a`` to the end first).

    >>> fnp.linalg.tensorsolve(fnp.eye(4).reshape(2, 2, 4), fnp.ones((2, 2))).shape
    (4,)
    """
    x = inexact(asarray(a, "tensorsolve"))
    y = inexact(asarray(b, "tensorsolve"))
    if axes is not None:
        order = [i for i in range(x.ndim) if i not in [axis_int(k, x.ndim, "tensorsolve") for k in axes]]
        order += [axis_int(k, x.ndim, "tensorsolve") for k in axes]
        x = S.transpose(x, tuple(order))
    old = tuple(x.shape[y.ndim:])
    n = int(np.prod(old, dtype=np.int64))
    if x.size != n * n:
        raise LinAlgError("numpy.linalg.tensorsolve: input arrays must satisfy prod(a.shape[b.ndim:]) == "
                          "prod(a.shape[:b.ndim])")
    return S.reshape(solve(S.reshape(x, (n, n)), S.reshape(y, (-1,))), old)


def diagonal(x, /, *, offset=0) -> Tensor:
    """The diagonal ``offset`` of the last two axes.

    >>> fnp.linalg.diagonal(fnp.array([[1, 2], [3, 4]]))
    Tensor([1, 4], dtype=int64)
    """
    return L.diagonal(asarray(x, "diagonal"), offset=int(offset))


def trace(x, /, *, offset=0, dtype=None) -> Tensor:
    """The sum of the diagonal ``offset`` of the last two axes.

    >>> fnp.linalg.trace(fnp.array([[1, 2], [3, 4]]))
    Tensor(5, dtype=int64)
    """
    return L.trace(asarray(x, "trace"), offset=int(offset), dtype=dtype)


def matmul(x1, x2, /) -> Tensor:
    """The matrix product (see ``fnp.matmul``).

    >>> fnp.linalg.matmul(fnp.array([[1, 2], [3, 4]]), fnp.array([1, 1]))
    Tensor([3, 7], dtype=int64)
    """
    return L.matmul(asarray(x1, "matmul"), asarray(x2, "matmul"))


def matrix_transpose(x, /) -> Tensor:
    """Swap the last two axes.

    >>> fnp.linalg.matrix_transpose(fnp.zeros((5, 2, 3))).shape
    (5, 3, 2)
    """
    return L.matrix_transpose(asarray(x, "matrix_transpose"))


def outer(x1, x2, /) -> Tensor:
    """The outer product of two 1-D arrays.

    >>> fnp.linalg.outer(fnp.array([1, 2]), fnp.array([1, 10]))
    Tensor([[ 1, 10],
            [ 2, 20]], dtype=int64)
    """
    a, b = asarray(x1, "outer"), asarray(x2, "outer")
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"numpy.linalg.outer: inputs must be 1-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return L.outer(a, b)


def tensordot(x1, x2, /, *, axes=2) -> Tensor:
    """The sum product over ``axes`` (see ``fnp.tensordot``).

    >>> fnp.linalg.tensordot(fnp.ones((2, 3)), fnp.ones((3, 4)), axes=1).shape
    (2, 4)
    """

    return _td(x1, x2, axes)


def vecdot(x1, x2, /, *, axis=-1) -> Tensor:
    """``sum(conj(x1) * x2)`` over ``axis``.

    >>> fnp.linalg.vecdot(fnp.array([1.0, 2.0]), fnp.array([3.0, 4.0]))
    Tensor(11., dtype=float32)
    """
    return L.vecdot(asarray(x1, "vecdot"), asarray(x2, "vecdot"), axis=axis)


def cross(x1, x2, /, *, axis=-1) -> Tensor:
    """The cross product of 3-vectors along ``axis``.

    >>> fnp.linalg.cross(fnp.array([1.0, 0.0, 0.0]), fnp.array([0.0, 1.0, 0.0]))
    Tensor([0., 0., 1.], dtype=float32)
    """
    return L.cross(asarray(x1, "cross"), asarray(x2, "cross"), axis=axis)

