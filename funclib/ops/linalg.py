"""The Array API ``linalg`` extension (``fl.linalg``) over six primitives: cholesky, triangular_solve, lu,
qr, eigh and svd. ``solve``/``inv``/``det``/``slogdet`` are LU compositions, ``pinv``/``matrix_rank``/the
spectral norms are SVD compositions, and the rest are plain array code, so every function here differentiates
and vectorizes through the primitives' rules.

With no transform active, ``solve``, ``inv``, ``det`` and ``slogdet`` call LAPACK through numpy.linalg
directly (one call instead of a factorization plus solves); under any transform they run the composition.

>>> a = fl.tensor([[4.0, 1.0], [1.0, 3.0]])
>>> fl.linalg.solve(a, fl.tensor([1.0, 2.0]))
Tensor([0.09090909, 0.6363636 ], dtype=float32)
"""

from __future__ import annotations

import builtins
import math
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..checks import check_number
from ..core import Tensor, _state, _wrap
from ..errors import DTypeError, ShapeError
from ..primitives import linalg as P
from ..primitives import shape as S
from ..primitives._util import broadcast_shapes, normalize_axis
from ..primitives.elementwise import _to_tensor, convert, greater, promote_pair, remainder
from . import elementwise as E
from . import reductions as R
from .linalg_basic import diagonal, matmul, outer, tensordot, vecdot
from .manipulation import matrix_transpose, moveaxis
from .searching import where

_LAPACK = frozenset((dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128))


class EighResult(NamedTuple):
    """What ``fl.linalg.eigh`` returns: the eigenvalues, ascending, and the eigenvectors as columns.

    >>> fl.linalg.eigh(fl.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
    Tensor([1., 3.], dtype=float32)
    """

    eigenvalues: Tensor
    eigenvectors: Tensor


class QRResult(NamedTuple):
    """What ``fl.linalg.qr`` returns: ``Q`` with orthonormal columns and upper-triangular ``R``.

    >>> fl.linalg.qr(fl.tensor([[3.0, 0.0], [4.0, 5.0]])).R
    Tensor([[-5., -4.],
            [ 0.,  3.]], dtype=float32)
    """

    Q: Tensor
    R: Tensor


class SVDResult(NamedTuple):
    """What ``fl.linalg.svd`` returns: ``x = U @ diag(S) @ Vh`` with ``S`` descending.

    >>> fl.linalg.svd(fl.tensor([[3.0, 0.0], [0.0, -4.0]])).S
    Tensor([4., 3.], dtype=float32)
    """

    U: Tensor
    S: Tensor
    Vh: Tensor


class SlogdetResult(NamedTuple):
    """What ``fl.linalg.slogdet`` returns: ``det(x) = sign * exp(logabsdet)``.

    >>> fl.linalg.slogdet(fl.tensor([[0.0, 2.0], [3.0, 0.0]])).sign
    Tensor(-1., dtype=float32)
    """

    sign: Tensor
    logabsdet: Tensor


class LUResult(NamedTuple):
    """What ``fl.linalg.lu`` returns: ``L`` and ``U`` packed in ``lu``, LAPACK's row swaps ``pivots`` and the
    row ``permutation`` they amount to.

    >>> fl.linalg.lu(fl.tensor([[1.0, 2.0], [3.0, 4.0]])).permutation
    Tensor([1, 0], dtype=int32)
    """

    lu: Tensor
    pivots: Tensor
    permutation: Tensor


def _float(x, op):
    x = _to_tensor(x, op)
    if x.dtype not in dtypes.INEXACT:
        x = convert(x, dtypes.float_default())
    return x


def _mat(x, op, square=True):
    x = _float(x, op)
    if x.ndim < 2:
        raise ShapeError(f"{op}: expected a matrix (at least 2 dimensions), got shape {tuple(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{op}: expected square matrices in the last two axes, got shape {tuple(x.shape)}")
    return x


def _eager(*xs) -> bool:
    return _state.trace is None and builtins.all(type(x) is Tensor and x.dtype in _LAPACK for x in xs)


def _H(x):
    return P._H(x)


def _hermitian_part(x):
    return E.multiply(E.add(x, _H(x)), 0.5)


# ------------------------------------------------------------------------------------------------------------
# factorizations


def cholesky(x, /, *, upper: bool = False) -> Tensor:
    """The Cholesky factor of Hermitian positive-definite matrices: lower ``L`` with ``x = L @ L^H`` (or the
    upper ``U = L^H`` with ``upper=True``).

    Only the Hermitian part ``(x + x^H) / 2`` is used, so gradients are Hermitian. A matrix that is not
    positive definite raises ``numpy.linalg.LinAlgError``.

    >>> fl.linalg.cholesky(fl.tensor([[4.0, 2.0], [2.0, 5.0]]))
    Tensor([[2., 0.],
           [1., 2.]], dtype=float32)
    """
    L = P.cholesky(_hermitian_part(_mat(x, "cholesky")))
    return _H(L) if upper else L


def eigh(x, /) -> EighResult:
    """Eigenvalues (ascending) and orthonormal eigenvectors of Hermitian matrices.

    Only the Hermitian part of ``x`` is used. Eigenvectors are defined up to sign (phase). At exactly repeated
    eigenvalues the derivative leaves out the undefined rotation inside each eigenspace (the 1 / (w_j - w_i)
    terms of tied pairs are taken as 0): it is exact for losses invariant under that rotation, such as
    symmetric functions of the tied eigenvalues (their sum) or projectors onto whole eigenspaces, and finite
    for all others.

    >>> fl.linalg.eigh(fl.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
    Tensor([1., 3.], dtype=float32)
    """
    w, v = P.eigh(_hermitian_part(_mat(x, "eigh")))
    return EighResult(w, v)


def eigvalsh(x, /) -> Tensor:
    """The eigenvalues (ascending) of Hermitian matrices; see ``eigh``.

    >>> fl.linalg.eigvalsh(fl.tensor([[2.0, 1.0], [1.0, 2.0]]))
    Tensor([1., 3.], dtype=float32)
    """
    return eigh(_mat(x, "eigvalsh")).eigenvalues


def qr(x, /, *, mode: str = "reduced") -> QRResult:
    """The QR factorization ``x = Q @ R``; ``mode`` is "reduced" (Q is m x k, k = min(m, n)) or "complete"
    (Q is m x m). Differentiable except in complete mode with m > n, whose extra columns of Q are arbitrary.

    >>> q, r = fl.linalg.qr(fl.tensor([[3.0, 0.0], [4.0, 1.0]]))
    """
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    q, r = P.qr(_mat(x, "qr", square=False), full_matrices=mode == "complete")
    return QRResult(q, r)


def svd(x, /, *, full_matrices: bool = True) -> SVDResult:
    """The singular value decomposition ``x = U @ diag(S) @ Vh``, ``S`` descending.

    With ``full_matrices=True`` (the default) U and Vh are square; pass ``full_matrices=False`` to
    differentiate through U or Vh of a non-square input (the extra singular vectors are an arbitrary basis).
    Singular vectors are defined up to sign (phase). Where singular values coincide (or are zero) the
    derivative of the singular vectors leaves out the undefined terms, as ``eigh`` does at repeated
    eigenvalues.

    >>> fl.linalg.svd(fl.tensor([[3.0, 0.0], [0.0, 4.0]])).S
    Tensor([4., 3.], dtype=float32)
    """
    u, s, vh = P.svd(_mat(x, "svd", square=False), full_matrices=bool(full_matrices))
    return SVDResult(u, s, vh)


def svdvals(x, /) -> Tensor:
    """The singular values, descending.

    >>> fl.linalg.svdvals(fl.tensor([[3.0, 0.0], [0.0, -4.0]]))
    Tensor([4., 3.], dtype=float32)
    """
    return P.svd(_mat(x, "svdvals", square=False), compute_uv=False)[0]


def lu(x, /) -> LUResult:
    """The LU factorization with partial pivoting: ``lu`` packs unit-lower L (below the diagonal) and upper U,
    ``pivots`` are LAPACK's 0-based row interchanges and ``x[..., permutation, :] == L @ U``.

    >>> f = fl.linalg.lu(fl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> f.permutation
    Tensor([1, 0], dtype=int32)
    """
    lu_, piv, perm = P.lu(_mat(x, "lu", square=False))
    return LUResult(lu_, piv, perm)


def solve_triangular(
    a,
    b,
    /,
    *,
    lower: bool = False,
    left_side: bool = True,
    transpose_a: bool = False,
    conjugate_a: bool = False,
    unit_diagonal: bool = False,
) -> Tensor:
    """Solve ``op(a) @ x = b`` (or ``x @ op(a) = b`` with ``left_side=False``) for triangular ``a``.

    ``op`` transposes with ``transpose_a`` (conjugate-transposes with ``conjugate_a`` too); only the triangle
    named by ``lower`` is read. Leading axes broadcast; a 1-D ``b`` is a single right-hand side. A zero on
    the diagonal gives inf/nan, as BLAS does.

    >>> fl.linalg.solve_triangular(fl.tensor([[2.0, 0.0], [1.0, 1.0]]), fl.tensor([2.0, 3.0]), lower=True)
    Tensor([1., 2.], dtype=float32)
    """
    a, b = promote_pair("solve_triangular", _mat(a, "solve_triangular"), _float(b, "solve_triangular"))
    b_shape = tuple(b.shape)
    vec = b.ndim == 1
    if vec:
        b = S.reshape(b, (-1, 1) if left_side else (1, -1))
    if b.ndim < 2 or b.shape[-2 if left_side else -1] != a.shape[-1]:
        raise ShapeError(
            f"solve_triangular: a has shape {tuple(a.shape)} but b has shape {b_shape}; b needs {a.shape[-1]} "
            f"{'rows' if left_side else 'columns'} (left_side={left_side})"
        )
    a, b = _broadcast_batch(a, b, "solve_triangular")
    x = P.triangular_solve(
        a,
        b,
        left_side=left_side,
        lower=lower,
        transpose_a=transpose_a,
        conjugate_a=conjugate_a,
        unit_diagonal=unit_diagonal,
    )
    return S.reshape(x, x.shape[:-2] + (-1,)) if vec else x


def _broadcast_batch(a, b, op):
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), op=op)
    a = S.broadcast_to(a, batch + tuple(a.shape[-2:]))
    b = S.broadcast_to(b, batch + tuple(b.shape[-2:]))
    return a, b


# ------------------------------------------------------------------------------------------------------------
# LU compositions


def _lu_solve(lu_, perm, b):
    pb = P._permute_rows(b, perm)
    y = P.triangular_solve(lu_, pb, left_side=True, lower=True, unit_diagonal=True)
    return P.triangular_solve(lu_, y, left_side=True, lower=False)


def solve(x1, x2, /) -> Tensor:
    """Solve ``x1 @ x = x2`` for square ``x1``. ``x2`` is a vector when 1-D (shape (M,)), else a stack of
    matrices (..., M, K); leading axes broadcast. A singular ``x1`` raises ``numpy.linalg.LinAlgError`` when
    called eagerly; under a transform (where that check would depend on data) the result holds inf/nan.

    >>> fl.linalg.solve(fl.tensor([[2.0, 0.0], [0.0, 4.0]]), fl.tensor([2.0, 2.0]))
    Tensor([1. , 0.5], dtype=float32)
    """
    a, b = promote_pair("solve", _mat(x1, "solve"), _float(x2, "solve"))
    vec = b.ndim == 1
    if b.ndim == 0 or b.shape[-1 if vec else -2] != a.shape[-1]:
        raise ShapeError(
            f"solve: x2 of shape {tuple(b.shape)} does not match x1 of shape {tuple(a.shape)}; x2 must be "
            f"(M,) or (..., M, K) with M = {a.shape[-1]}"
        )
    if vec:
        b = S.reshape(b, (-1, 1))
    if _eager(a, b):
        bb = np.broadcast_to(b._value, broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:])
        x = _wrap(np.linalg.solve(a._value, bb))
    else:
        a, b = _broadcast_batch(a, b, "solve")
        lu_, _, perm = P.lu(a)
        x = _lu_solve(lu_, perm, b)
    return S.reshape(x, x.shape[:-1]) if vec else x


def inv(x, /) -> Tensor:
    """The inverse of square matrices (batched). A singular matrix raises ``numpy.linalg.LinAlgError`` when
    called eagerly and gives inf/nan under a transform (as ``solve``).

    >>> fl.linalg.inv(fl.tensor([[2.0, 0.0], [0.0, 4.0]]))
    Tensor([[0.5 , 0.  ],
           [0.  , 0.25]], dtype=float32)
    """
    a = _mat(x, "inv")
    if _eager(a):
        return _wrap(np.linalg.inv(a._value))
    lu_, _, perm = P.lu(a)
    n = a.shape[-1]
    eye = S.broadcast_to(_wrap(np.eye(n, dtype=a.dtype)), tuple(a.shape))
    return _lu_solve(lu_, perm, eye)


def _perm_sign(piv, dtype):
    """(-1) ** (number of row interchanges) as ``dtype``."""
    k = piv.shape[-1]
    swaps = R.sum(convert(E.not_equal(piv, S.iota(piv.dtype, (k,), 0, like=piv)), dtypes.int32), axis=-1)
    odd = E.equal(remainder(swaps, 2), 1)
    return where(odd, _wrap(np.asarray(-1, dtype)), _wrap(np.asarray(1, dtype)))


def det(x, /) -> Tensor:
    """The determinant of square matrices (batched), from the LU factorization.

    Its derivative is finite only where ``x`` is invertible (it runs through triangular solves with U).

    >>> fl.linalg.det(fl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    Tensor(-2., dtype=float32)
    """
    a = _mat(x, "det")
    if _eager(a):
        return _wrap(np.asarray(np.linalg.det(a._value)))
    lu_, piv, _ = P.lu(a)
    return E.multiply(_perm_sign(piv, a.dtype), R.prod(P._diag(lu_), axis=-1))


def slogdet(x, /) -> SlogdetResult:
    """``(sign, logabsdet)`` with ``det(x) = sign * exp(logabsdet)``, stable where det over/underflows.

    For a singular matrix: sign 0 and logabsdet -inf. ``sign`` has x's dtype (a unit complex number for
    complex inputs); ``logabsdet`` is real.

    >>> sign, logabsdet = fl.linalg.slogdet(fl.tensor([[0.0, 2.0], [3.0, 0.0]]))
    >>> sign, fl.exp(logabsdet)
    (Tensor(-1., dtype=float32), Tensor(6., dtype=float32))
    """
    a = _mat(x, "slogdet")
    if _eager(a):
        s, ld = np.linalg.slogdet(a._value)
        return SlogdetResult(_wrap(np.asarray(s)), _wrap(np.asarray(ld)))
    lu_, piv, _ = P.lu(a)
    d = P._diag(lu_)
    ad = E.abs(d)
    logabs = R.sum(E.log(ad), axis=-1)
    if a.dtype in dtypes.COMPLEX:
        is0 = E.equal(ad, 0.0)
        unit = where(is0, 0.0, E.divide(d, convert(where(is0, 1.0, ad), a.dtype)))
    else:
        unit = E.sign(d)
    sign = E.multiply(_perm_sign(piv, a.dtype), R.prod(unit, axis=-1))
    return SlogdetResult(sign, logabs)


# ------------------------------------------------------------------------------------------------------------
# SVD compositions


def _cutoff(s, rtol, shape, op):
    """``rtol * max(s)``, with the Array API default ``rtol = max(M, N) * eps``; shape (..., 1)."""
    if rtol is None:
        rtol = max(shape[-2:]) * float(np.finfo(s.dtype).eps)
    elif isinstance(rtol, Tensor):
        rtol = _float(rtol, op)
        rtol = S.reshape(rtol, tuple(rtol.shape) + (1,))
    smax = R.max(s, axis=-1, keepdims=True) if s.shape[-1] else S.full(tuple(s.shape[:-1]) + (1,), 0, s.dtype)
    return E.multiply(smax, rtol)


def pinv(x, /, *, rtol: float | Tensor | None = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse, from the SVD; singular values at or below ``rtol * max(s)`` count as
    zero (default ``rtol = max(M, N) * eps``).

    >>> fl.linalg.pinv(fl.tensor([[2.0, 0.0], [0.0, 0.0]]))
    Tensor([[0.5, 0. ],
           [0. , 0. ]], dtype=float32)
    """
    a = _mat(x, "pinv", square=False)
    u, s, vh = P.svd(a, full_matrices=False)
    keep = greater(s, _cutoff(s, rtol, a.shape, "pinv"))
    s_inv = where(keep, E.divide(1.0, where(keep, s, 1.0)), 0.0)
    s_inv = convert(s_inv, a.dtype) if a.dtype in dtypes.COMPLEX else s_inv
    return matmul(_H(vh), E.multiply(S.expand_dims(s_inv, (s_inv.ndim,)), _H(u)))


def matrix_rank(x, /, *, rtol: float | Tensor | None = None) -> Tensor:
    """The number of singular values above ``rtol * max(s)`` (default ``rtol = max(M, N) * eps``), as
    int64.

    >>> fl.linalg.matrix_rank(fl.tensor([[1.0, 2.0], [2.0, 4.0]]))
    Tensor(1, dtype=int64)
    """
    a = _mat(x, "matrix_rank", square=False)
    s = svdvals(a)
    return R.sum(convert(greater(s, _cutoff(s, rtol, a.shape, "matrix_rank")), dtypes.int64), axis=-1)


# ------------------------------------------------------------------------------------------------------------
# products, powers, norms


def matrix_power(x, n: int, /) -> Tensor:
    """``x`` multiplied by itself ``n`` times (by repeated squaring); ``n = 0`` gives the identity, ``n < 0``
    powers of the inverse.

    >>> fl.linalg.matrix_power(fl.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    Tensor([[1., 3.],
           [0., 1.]], dtype=float32)
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: n must be a Python int, got {type(n).__name__}")
    a = _mat(x, "matrix_power")
    if n == 0:
        return S.broadcast_to(_wrap(np.eye(a.shape[-1], dtype=a.dtype)), tuple(a.shape))
    if n < 0:
        a, n = inv(a), -int(n)
    result = None
    while True:
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if not n:
            return result
        a = matmul(a, a)


def _norm_axes(x, axis, op):
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(normalize_axis(a, x.ndim, op) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return axes


def _safe_root(s, p: float):
    """``s ** (1/p)`` with derivative 0 where ``s == 0`` (the subgradient convention at the zero vector)."""
    is0 = E.equal(s, 0.0)
    safe = where(is0, 1.0, s)
    root = E.sqrt(safe) if p == 2 else E.pow(safe, 1.0 / p)
    return where(is0, 0.0, root)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord: float = 2) -> Tensor:
    """The vector p-norm over ``axis`` (all axes by default): ``sum(|x|**ord) ** (1/ord)``; ``ord`` may also
    be ``inf`` (max |x|), ``-inf`` (min |x|) or 0 (the number of nonzeros). The result is real.

    At ``x = 0`` the norm is not differentiable; its gradient there is 0, the minimum-norm subgradient (for
    every ``ord``). For ``ord < 1`` the gradient is also undefined where some entries are zero.

    >>> fl.linalg.vector_norm(fl.tensor([3.0, 4.0]))
    Tensor(5., dtype=float32)
    """
    x = _float(x, "vector_norm")
    axes = _norm_axes(x, axis, "vector_norm")
    ord = float(check_number(ord, "vector_norm", "ord"))
    if x.dtype in dtypes.COMPLEX:
        a = E.abs(x)
        sq = E.add(E.square(E.real(x)), E.square(E.imag(x)))
    else:
        a = E.abs(x)
        sq = E.square(x)
    if ord == math.inf:
        out = R.max(a, axis=axes, keepdims=keepdims)
    elif ord == -math.inf:
        out = R.min(a, axis=axes, keepdims=keepdims)
    elif ord == 0:
        out = convert(R.sum(E.not_equal(a, 0.0), axis=axes, keepdims=keepdims), a.dtype)
    elif ord == 1:
        out = R.sum(a, axis=axes, keepdims=keepdims)
    elif ord == 2:
        out = _safe_root(R.sum(sq, axis=axes, keepdims=keepdims), 2)
    else:
        out = _safe_root(R.sum(E.pow(a, ord), axis=axes, keepdims=keepdims), ord)
    return out


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def matrix_norm(x, /, *, keepdims: bool = False, ord: str | float = "fro") -> Tensor:
    """A matrix norm of the last two axes: ``ord`` is "fro" (Frobenius), "nuc" (sum of singular values), 2 /
    -2 (largest / smallest singular value), 1 / -1 (max / min column abs-sum) or inf / -inf (max / min row
    abs-sum).

    The Frobenius norm's gradient at the zero matrix is 0 (as ``vector_norm``).

    >>> fl.linalg.matrix_norm(fl.tensor([[3.0, 0.0], [0.0, 4.0]]), ord=2)
    Tensor(4., dtype=float32)
    """
    if ord not in _MATRIX_ORDS:
        raise ValueError(
            f"matrix_norm: ord must be one of 'fro', 'nuc', 1, -1, 2, -2, inf, -inf; got {ord!r}"
        )
    a = _mat(x, "matrix_norm", square=False)
    if ord == "fro":
        return vector_norm(a, axis=(-2, -1), keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        s = svdvals(a)
        out = R.sum(s, axis=-1) if ord == "nuc" else R.max(s, axis=-1) if ord == 2 else R.min(s, axis=-1)
    else:
        sum_axis = -2 if abs(ord) == 1 else -1
        sums = R.sum(E.abs(a), axis=sum_axis)
        out = R.max(sums, axis=-1) if ord > 0 else R.min(sums, axis=-1)
    return S.reshape(out, tuple(out.shape) + (1, 1)) if keepdims else out


def cross(x1, x2, /, *, axis: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``axis`` (leading axes broadcast).

    >>> fl.linalg.cross(fl.tensor([1.0, 0.0, 0.0]), fl.tensor([0.0, 1.0, 0.0]))
    Tensor([0., 0., 1.], dtype=float32)
    """
    a, b = promote_pair("cross", x1, x2)
    if a.dtype == dtypes.bool_:
        raise DTypeError("cross: boolean inputs are not supported; cast to a numeric dtype")
    shape = broadcast_shapes(tuple(a.shape), tuple(b.shape), op="cross")
    ax = normalize_axis(axis, len(shape), "cross")
    if shape[ax] != 3:
        raise ShapeError(
            f"cross: axis {axis} must have size 3 in both inputs, got shapes {tuple(a.shape)} and "
            f"{tuple(b.shape)}"
        )
    a = moveaxis(S.broadcast_to(a, shape), ax, -1)
    b = moveaxis(S.broadcast_to(b, shape), ax, -1)

    def comp(v, i):
        return S.slice_(v, (0,) * (v.ndim - 1) + (i,), tuple(v.shape[:-1]) + (i + 1,))

    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    c = S.concatenate([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], len(shape) - 1)
    return moveaxis(c, -1, ax)


def trace(x, /, *, offset: int = 0, dtype=None) -> Tensor:
    """The sum of diagonal ``offset`` of the last two axes.

    >>> fl.linalg.trace(fl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    Tensor(5., dtype=float32)
    """
    x = _to_tensor(x, "trace")
    if x.ndim < 2:
        raise ShapeError(f"trace: expected at least 2 dimensions, got shape {tuple(x.shape)}")
    return R.sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


__all__ = [
    "EighResult",
    "LUResult",
    "QRResult",
    "SVDResult",
    "SlogdetResult",
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "inv",
    "lu",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "vecdot",
]
