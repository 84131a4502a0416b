"""Polynomials as coefficient arrays, highest power first (NumPy's legacy ``poly*`` functions): evaluation,
arithmetic, calculus, fitting and roots. All differentiable in the coefficients."""

from __future__ import annotations

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, _wrap
from ..ops import reductions as R
from ..ops.linalg_basic import matmul
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ._creation import vander
from ._signal import convolve
from ._util import asarray, concrete, inexact, static_int
from .linalg import eigvals, inv, lstsq

__all__ = ["poly", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint", "polyfit", "polyval", "roots"]


def _coefs(p, op):
    x = asarray(p, op)
    if x.ndim == 0:
        x = S.reshape(x, (1,))
    if x.ndim != 1:
        raise ValueError(f"numpy.{op}: coefficients must be a 1-D array, got shape {tuple(x.shape)}")
    return x


def polyval(p, x) -> Tensor:
    """The polynomial with coefficients ``p`` (highest power first) at ``x``, by Horner's rule.

    >>> fnp.polyval(fnp.array([1.0, 0.0, -1.0]), fnp.array([2.0, 3.0]))
    Tensor([3., 8.], dtype=float32)
    """
    c = _coefs(p, "polyval")
    xv = asarray(x, "polyval")
    y = ops.multiply(xv, 0) if c.shape[0] == 0 else None
    for i in range(c.shape[0]):
        y = S.broadcast_to(c[i], tuple(xv.shape)) if y is None else ops.add(ops.multiply(y, xv), c[i])
    return y


def _align(a, b):
    n = max(a.shape[0], b.shape[0])
    d = dtypes.result_type(a, b)
    pad = lambda v: S.pad(convert(v, d) if v.dtype != d else v, _wrap(np.zeros((), d)),
                          ((n - v.shape[0], 0, 0),))
    return pad(a), pad(b)


def polyadd(a1, a2) -> Tensor:
    """The sum of two polynomials.

    >>> fnp.polyadd(fnp.array([1, 2]), fnp.array([1, 0, 0]))
    Tensor([1, 1, 2], dtype=int64)
    """
    a, b = _align(_coefs(a1, "polyadd"), _coefs(a2, "polyadd"))
    return ops.add(a, b)


def polysub(a1, a2) -> Tensor:
    """The difference of two polynomials."""
    a, b = _align(_coefs(a1, "polysub"), _coefs(a2, "polysub"))
    return ops.subtract(a, b)


def polymul(a1, a2) -> Tensor:
    """The product of two polynomials (the convolution of their coefficients).

    >>> fnp.polymul(fnp.array([1, 1]), fnp.array([1, -1]))
    Tensor([ 1,  0, -1], dtype=int64)
    """

    return convolve(_coefs(a1, "polymul"), _coefs(a2, "polymul"))


def polydiv(u, v):
    """Quotient and remainder of polynomial division (leading zeros of the remainder dropped, which needs
    concrete values).

    >>> q, r = fnp.polydiv(fnp.array([1.0, 0.0, -1.0]), fnp.array([1.0, 1.0]))
    >>> q
    Tensor([ 1., -1.], dtype=float32)
    """
    a, b = inexact(_coefs(u, "polydiv")), inexact(_coefs(v, "polydiv"))
    d = dtypes.result_type(a, b)
    a, b = convert(a, d) if a.dtype != d else a, convert(b, d) if b.dtype != d else b
    m, n = a.shape[0] - 1, b.shape[0] - 1
    scale = ops.divide(1.0, b[0])
    r = a
    q = []
    for k in range(m - n + 1):
        dk = ops.multiply(scale, r[k])
        q.append(dk)
        upd = ops.subtract(r[k: k + n + 1], ops.multiply(dk, b))
        r = S.concatenate([r[:k], upd, r[k + n + 1:]], 0)
    qv = S.concatenate([S.reshape(t, (1,)) for t in q], 0) if q else S.full((1,), 0, d)
    rv = concrete(r, "polydiv", "compute it eagerly (the remainder's length depends on its values)")
    start = 0
    while start < rv.shape[0] - 1 and np.allclose(rv[start], 0, rtol=1e-14):
        start += 1
    return qv, r[start:]


def polyder(p, m=1) -> Tensor:
    """The ``m``-th derivative of a polynomial.

    >>> fnp.polyder(fnp.array([1, 1, 1]))
    Tensor([2, 1], dtype=int64)
    """
    c = _coefs(p, "polyder")
    m = static_int(m, "polyder", "m")
    if m < 0:
        raise ValueError("numpy.polyder: order of derivative must be positive")
    for _ in range(m):
        n = c.shape[0] - 1
        if n <= 0:
            return S.full((1,), 0, c.dtype)
        c = ops.multiply(c[:n], _wrap(np.arange(n, 0, -1)))
    return c


def polyint(p, m=1, k=None) -> Tensor:
    """The ``m``-th antiderivative, with integration constants ``k`` (a scalar or ``m`` values, default 0).

    >>> fnp.polyint(fnp.array([3.0, 2.0]))
    Tensor([1.5, 2. , 0. ], dtype=float32)
    """
    c = inexact(_coefs(p, "polyint"))
    m = static_int(m, "polyint", "m")
    if m < 0:
        raise ValueError("numpy.polyint: order of integral must be positive")
    ks = [0] * m if k is None else ([k] * m if np.ndim(k) == 0 else list(k))
    if len(ks) != m:
        raise ValueError("numpy.polyint: k must be a scalar or a sequence of length m")
    for i in range(m):
        n = c.shape[0]
        c = ops.divide(c, _wrap(np.arange(n, 0, -1).astype(c.dtype)))
        kc = asarray(ks[i], "polyint")
        c = S.concatenate([c, S.reshape(convert(kc, c.dtype) if kc.dtype != c.dtype else kc, (1,))], 0)
    return c


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree ``deg`` through the points ``(x, y)`` (``y`` may hold several
    columns), coefficients highest power first; ``w`` weights the residuals. ``full`` also returns
    ``(residuals, rank, singular values, rcond)``; ``cov`` the coefficients' covariance.

    >>> fnp.round(fnp.polyfit(fnp.array([0.0, 1.0, 2.0]), fnp.array([1.0, 3.0, 5.0]), 1), 4)
    Tensor([2., 1.], dtype=float32)
    """

    order = static_int(deg, "polyfit", "deg") + 1
    if order < 1:
        raise ValueError("numpy.polyfit: expected deg >= 0")
    xv, yv = inexact(asarray(x, "polyfit")), inexact(asarray(y, "polyfit"))
    if xv.ndim != 1 or xv.shape[0] == 0:
        raise TypeError("numpy.polyfit: expected a non-empty 1-D x")
    if yv.ndim not in (1, 2) or yv.shape[0] != xv.shape[0]:
        raise TypeError("numpy.polyfit: expected a 1-D or 2-D y with as many rows as x")
    d = dtypes.result_type(xv, yv)
    xv, yv = convert(xv, d) if xv.dtype != d else xv, convert(yv, d) if yv.dtype != d else yv
    if rcond is None:
        rcond = xv.shape[0] * float(np.finfo(dtypes.real_dtype(d)).eps)
    lhs, rhs = vander(xv, order), yv
    if w is not None:
        wv = inexact(asarray(w, "polyfit"))
        if wv.ndim != 1 or wv.shape[0] != xv.shape[0]:
            raise TypeError("numpy.polyfit: expected w as a 1-D array with the length of x")
        lhs = ops.multiply(lhs, S.reshape(wv, (-1, 1)))
        rhs = ops.multiply(rhs, S.reshape(wv, (-1, 1)) if rhs.ndim == 2 else wv)
    scale = ops.sqrt(R.sum(ops.real(ops.multiply(lhs, ops.conj(lhs))), axis=0))
    scale_c = convert(scale, lhs.dtype) if scale.dtype != lhs.dtype else scale
    c, resids, rank, s = lstsq(ops.divide(lhs, scale_c), rhs, rcond)
    c = ops.divide(c, S.reshape(scale_c, (-1,) + (1,) * (c.ndim - 1)))
    if full:
        return c, resids, rank, s, rcond
    if cov:
        lhs_s = ops.divide(lhs, scale_c)

        base = ops.divide(inv(matmul(S.transpose(ops.conj(lhs_s), (1, 0)), lhs_s)),
                        ops.multiply(S.reshape(scale_c, (-1, 1)), S.reshape(scale_c, (1, -1))))
        if cov == "unscaled":
            fac = 1.0
        else:
            if xv.shape[0] <= order:
                raise ValueError("numpy.polyfit: the number of data points must exceed order to scale the covariance")
            fac = ops.divide(resids, float(xv.shape[0] - order))
        if c.ndim == 1:
            return c, ops.multiply(base, fac)
        return c, ops.multiply(S.expand_dims(base, [2]), fac)
    return c


def poly(seq_of_zeros) -> Tensor:
    """The coefficients of the monic polynomial with the given roots (or, for a square matrix, of its
    characteristic polynomial). Complex conjugate roots give real coefficients.

    >>> fnp.poly(fnp.array([1.0, 2.0]))
    Tensor([ 1., -3.,  2.], dtype=float32)
    """
    r = asarray(seq_of_zeros, "poly")
    if r.ndim == 2 and r.shape[0] == r.shape[1] and r.shape[0] != 0:
        r = eigvals(r)
    elif r.ndim == 0 or r.ndim == 1:
        r = S.reshape(r, (-1,))
    else:
        raise ValueError("numpy.poly: input must be 1-D or a non-empty square 2-D array")
    if r.shape[0] == 0:
        return _wrap(np.ones((), dtypes.default_float))
    r = inexact(r)

    a = _wrap(np.ones((1,), r.dtype))
    for i in range(r.shape[0]):
        a = convolve(a, S.concatenate([_wrap(np.ones((1,), r.dtype)), S.reshape(ops.negative(r[i]), (1,))], 0))
    if a.dtype in dtypes.COMPLEX and type(r) is Tensor:
        v = r.numpy()
        if np.all(np.sort(v) == np.sort(np.conj(v))):
            a = ops.real(a)
    return a


def roots(p, *, strip_zeros=True) -> Tensor:
    """The roots of the polynomial with coefficients ``p``: the eigenvalues of its companion matrix (complex).
    Leading and trailing zero coefficients are stripped, which needs concrete values; pass
    ``strip_zeros=False`` under ``jit`` (the leading coefficient must then be nonzero).

    >>> fnp.roots(fnp.array([1.0, -3.0, 2.0]))
    Tensor([2.+0.j, 1.+0.j], dtype=complex64)
    """
    c = inexact(_coefs(p, "roots"))
    trailing = 0
    if strip_zeros:
        v = concrete(c, "roots", "pass strip_zeros=False (with a nonzero leading coefficient)")
        nz = np.flatnonzero(v)
        if nz.size == 0:
            return _wrap(np.zeros(0, dtypes.complex_dtype(c.dtype)))
        trailing = v.shape[0] - nz[-1] - 1
        c = c[nz[0]: nz[-1] + 1]
    n = c.shape[0] - 1
    cd = dtypes.complex_dtype(c.dtype if c.dtype in dtypes.REAL_FLOATING else dtypes.real_dtype(c.dtype))
    if n < 1:
        return S.full((trailing,), 0, cd)

    top = S.reshape(ops.divide(ops.negative(c[1:]), c[0]), (1, n))
    below = _wrap(np.eye(n - 1, n, dtype=c.dtype)) if n > 1 else None
    comp = S.concatenate([top, below], 0) if below is not None else top
    w = eigvals(comp)
    if trailing:
        w = S.concatenate([w, S.full((trailing,), 0, w.dtype)], 0)
    return w
