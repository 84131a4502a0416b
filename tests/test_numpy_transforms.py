"""funclib.numpy under the transforms: derivatives of the differentiable functions against finite differences
(float64), jit and vmap against eager on a representative sample, data-dependent shapes raising
DataDependentShapeError under jit and vmap, and Hypothesis properties of the statistics against NumPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
import funclib.numpy as fnp
from funclib.errors import DataDependentShapeError
from funclib.testing import assert_allclose, check_grads

rng = np.random.default_rng(1)


def t(x):
    return fl.asarray(np.asarray(x, dtype=np.float64) if np.asarray(x).dtype.kind in "iuf" else x)


A = t(rng.standard_normal((3, 4)))
B = t(rng.standard_normal((4, 3)))
V = t(rng.standard_normal(5))
W = t(rng.standard_normal(5))
V3, W3 = t(rng.standard_normal(3)), t(rng.standard_normal(3))
POS = t(rng.uniform(0.5, 2.0, (3, 4)))
UNIT = t(rng.uniform(-0.8, 0.8, (3, 4)))
AWAY = t(np.sign(rng.standard_normal((3, 4))) * rng.uniform(0.3, 2.0, (3, 4)))  # no entry near 0
SQ = t(rng.standard_normal((3, 3)) + 3 * np.eye(3))
SPD = t(np.asarray(SQ) @ np.asarray(SQ).T + np.eye(3))
SEP = t(np.array([[2.0, 0.3, 0.1], [0.2, -1.0, 0.4], [0.1, 0.5, 4.0]]))  # well separated real eigenvalues
CPX = fl.asarray(rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4)))
DISTINCT = t(rng.permutation(12).reshape(3, 4) * 0.37 + 0.1)  # no ties: sorts and order statistics are smooth
X3 = t(rng.standard_normal((2, 3, 4)))
TALL = t(rng.standard_normal((5, 3)))

# (id, function, arguments, order)
GRADS = [
    # elementwise (one function of all the unary ufuncs, each on its smooth domain)
    ("unary", lambda x, p, u, a: sum(fnp.sum(f(v)) for f, v in [
        (fnp.sqrt, p), (fnp.cbrt, p), (fnp.exp, x), (fnp.exp2, x), (fnp.expm1, x), (fnp.log, p), (fnp.log2, p),
        (fnp.log10, p), (fnp.log1p, p), (fnp.sin, x), (fnp.cos, x), (fnp.tan, u), (fnp.arcsin, u),
        (fnp.arccos, u), (fnp.arctan, x), (fnp.sinh, x), (fnp.cosh, x), (fnp.tanh, x), (fnp.arcsinh, x),
        (fnp.arccosh, p + 1), (fnp.arctanh, u), (fnp.deg2rad, x), (fnp.rad2deg, x), (fnp.square, x),
        (fnp.reciprocal, p), (fnp.absolute, a), (fnp.fabs, a), (fnp.negative, x), (fnp.positive, x),
        (fnp.sign, x), (fnp.rint, x), (fnp.floor, x), (fnp.spacing, a)]), (A, POS, UNIT, AWAY), 2),
    ("binary", lambda x, y, p: sum(fnp.sum(f(a, b)) for f, a, b in [
        (fnp.add, x, y), (fnp.subtract, x, y), (fnp.multiply, x, y), (fnp.divide, x, p), (fnp.true_divide, y, p),
        (fnp.power, p, x), (fnp.float_power, p, y), (fnp.arctan2, x, p), (fnp.hypot, x, y), (fnp.logaddexp, x, y),
        (fnp.logaddexp2, x, y), (fnp.maximum, x, y), (fnp.minimum, x, y), (fnp.fmax, x, y), (fnp.fmin, x, y),
        (fnp.copysign, p, x), (fnp.heaviside, x, y), (fnp.ldexp, x, fl.asarray([[2, -1, 0, 3]])),
        (fnp.fmod, x * 3, p), (fnp.remainder, x * 3, p), (fnp.mod, y, p)]), (A, B.T, POS), 2),
    ("divmod-frexp-modf", lambda x, p: fnp.sum(fnp.divmod(x * 3, p)[1]) + fnp.sum(fnp.frexp(p * 7)[0])
     + fnp.sum(fnp.modf(x * 5)[0]), (A, POS), 2),
    ("sinc", lambda x: fnp.sinc(x), (t([0.0, 1e-4, -0.3, 2.5]),), 2),
    ("i0-series", lambda x: fnp.i0(x), (t([0.0, -1.5, 3.0, 7.0]),), 2),
    ("i0-both-branches", lambda x: fnp.i0(x) * fnp.exp(-x), (t([15.0, 19.9, 20.1, 40.0]),), 2),
    ("angle-real-imag-conj", lambda z: fnp.angle(z) + fnp.real(fnp.conjugate(z) * z) + fnp.imag(z * z), (CPX,), 2),
    ("clip-nan_to_num-round", lambda x: fnp.clip(x, -0.5, 1.2) * fnp.nan_to_num(x) + fnp.round(x, 2), (AWAY,), 1),
    # reductions and statistics
    ("sum-prod-mean", lambda x: fnp.sum(x, 1) + fnp.prod(x, axis=1) + fnp.mean(x, 1, where=x > 0), (A,), 2),
    ("var-std", lambda x: fnp.var(x, 0, ddof=1) + fnp.std(x, axis=1, keepdims=True).sum() + fnp.var(x), (A,), 2),
    ("max-min-ptp", lambda x: fnp.max(x, 0) + fnp.min(x, axis=0) + fnp.ptp(x, 0) + fnp.amax(x, 0, initial=-9.0),
     (DISTINCT,), 1),
    ("nan-reductions", lambda x: fnp.nansum(x, 0) + fnp.nanmean(x, 0) + fnp.nanvar(x, 0, ddof=1)
     + fnp.nanstd(x, 0) + fnp.nanmax(x, 0) + fnp.nanmin(x, 0) + fnp.nanprod(x, 0),
     (t(np.where(np.arange(12).reshape(3, 4) % 5 == 0, np.nan, np.asarray(DISTINCT))),), 1),
    ("cumulative", lambda x: fnp.cumsum(x, 1) + fnp.cumprod(x, axis=1) + fnp.cumulative_sum(x, axis=1)
     + fnp.nancumsum(x, 1), (A,), 2),
    ("median-quantile", lambda x: fnp.median(x, 1) + fnp.nanmedian(x, 1) + fnp.quantile(x, 0.3, 1)
     + fnp.percentile(x, 65, 1, method="hazen") + fnp.nanquantile(x, 0.9, 1, method="median_unbiased")
     + fnp.quantile(x, 0.5, 1, method="lower"), (DISTINCT,), 1),
    ("quantile-in-q", lambda q: fnp.quantile(DISTINCT, q, 1), (t([0.15, 0.6]),), 1),
    ("average-weights", lambda x, w: fnp.average(x, 1, weights=w), (A, POS[0]), 2),
    ("cov-corrcoef", lambda x: fnp.sum(fnp.cov(x)) + fnp.sum(fnp.corrcoef(x, rowvar=False) ** 2)
     + fnp.sum(fnp.cov(x, aweights=fnp.arange(1.0, 5.0))), (A,), 1),
    ("histogram-bincount-weights", lambda w: fnp.histogram(A.ravel(), bins=3, weights=w)[0]
     + fnp.bincount(fl.asarray([0, 2, 1, 0, 2, 2, 1, 0, 0, 1, 1, 2]), weights=w), (POS.ravel(),), 2),
    # products
    ("products", lambda x, y, v: fnp.sum(fnp.dot(x, y)) + fnp.vdot(v, v) + fnp.sum(fnp.inner(x, x))
     + fnp.sum(fnp.outer(v, v)) + fnp.sum(fnp.tensordot(x, y, 1)) + fnp.sum(fnp.matmul(x, y))
     + fnp.sum(fnp.kron(x, y)) + fnp.trace(fnp.dot(x, y)) + fnp.sum(fnp.diagonal(x, 1)), (A, B, V), 2),
    ("einsum", lambda x, y: fnp.einsum(x, [0, 1], y, [1, 2], [2, 0]) + fnp.einsum("ij,jk->ki", x, y), (A, B), 2),
    ("matvec-vecmat-vecdot-cross", lambda x, v, w: fnp.sum(fnp.matvec(x, v)) + fnp.sum(fnp.vecmat(v[:3], x))
     + fnp.sum(fnp.vecdot(x, x)) + fnp.sum(fnp.cross(v[:3], w[:3])), (A, V[:4], W), 2),
    # signal and polynomials
    ("diff-gradient-trapezoid", lambda x, c: fnp.sum(fnp.diff(x, 2, axis=1)) + fnp.sum(fnp.ediff1d(x))
     + fnp.sum(fnp.gradient(x, 0.5, c, edge_order=2)[1]) + fnp.sum(fnp.trapezoid(x, c)), (A, t([0.0, 0.4, 1.1, 1.5])),
     2),
    ("gradient-spacing", lambda c: fnp.sum(fnp.gradient(V, c, edge_order=2)) + fnp.sum(fnp.gradient(V, c)),
     (t([0.0, 0.5, 1.4, 2.0, 3.1]),), 2),
    ("interp", lambda x, xp, fp: fnp.interp(x, xp, fp), (t([-0.5, 0.3, 1.7, 2.2, 9.0]), t([0.0, 1.0, 2.0, 3.0]),
                                                        t([1.0, -1.0, 0.5, 2.0])), 2),
    ("interp-period", lambda x, fp: fnp.interp(x, t([10.0, 100.0, 250.0]), fp, period=360.0),
     (t([-20.0, 50.0, 300.0]), t([1.0, 2.0, -1.0])), 2),
    ("convolve-correlate", lambda a, v: fnp.sum(fnp.convolve(a, v) ** 2) + fnp.sum(fnp.correlate(a, v, "same"))
     + fnp.sum(fnp.convolve(v, a, "valid")), (V, V3), 2),
    ("convolve-long", lambda a, v: fnp.convolve(a, v, "same"), (t(rng.standard_normal(80)),
                                                                t(rng.standard_normal(70))), 1),
    ("unwrap", lambda p: fnp.unwrap(p), (t(np.cumsum(rng.uniform(0.2, 2.0, 8))),), 2),
    ("polynomials", lambda p, x: fnp.sum(fnp.polyval(p, x)) + fnp.sum(fnp.polyder(p, 2)) + fnp.sum(fnp.polyint(p))
     + fnp.sum(fnp.polymul(p, p)) + fnp.sum(fnp.polyadd(p, p[:2])) + fnp.sum(fnp.polysub(p[1:], p)), (V3, A), 2),
    ("polydiv-poly", lambda u, v: fnp.sum(fnp.polydiv(u, v)[0]) + fnp.sum(fnp.polydiv(u, v)[1])
     + fnp.sum(fnp.poly(v)), (V, V3), 1),
    ("polyfit", lambda y: fnp.polyfit(V, y, 2), (W,), 1),
    ("roots", lambda p: fnp.real(fnp.roots(p)), (t([1.0, -6.0, 11.0, -6.0]),), 1),
    ("vander", lambda x: fnp.vander(x, 4), (V3,), 2),
    # creation with differentiable endpoints
    ("linspace-logspace-geomspace", lambda a, b: fnp.sum(fnp.linspace(a, b, 5)) + fnp.sum(fnp.logspace(a, b, 4))
     + fnp.sum(fnp.geomspace(fnp.exp(a), fnp.exp(b), 4)) + fnp.sum(fnp.linspace(V3, W3, 3, axis=1)),
     (t(0.3), t(1.7)), 2),
    # manipulation and indexing
    ("pad-modes", lambda x: sum(fnp.sum(fnp.pad(x, ((2, 5), (1, 3)), mode=m) ** 2) for m in (
        "constant", "edge", "reflect", "symmetric", "wrap", "mean", "maximum", "median", "linear_ramp"))
     + fnp.sum(fnp.pad(x, 4, mode="reflect", reflect_type="odd") ** 2), (DISTINCT,), 1),
    ("stack-split-insert", lambda x, v: fnp.sum(fnp.vstack([x, x[:1]]) ** 2) + fnp.sum(fnp.hstack([x, x]))
     + fnp.sum(fnp.concatenate([x, x], axis=None)) + fnp.sum(fnp.column_stack([v[:3], v[:3]]))
     + fnp.sum(fnp.array_split(x, 3, axis=1)[1]) + fnp.sum(fnp.insert(x, [1, 2], v[:1], axis=1) ** 2)
     + fnp.sum(fnp.delete(x, 1, axis=0) ** 2) + fnp.sum(fnp.append(x, v) ** 2) + fnp.sum(fnp.block([[x, x]]))
     + fnp.sum(fnp.r_[v, 0.0, v] ** 2) + fnp.sum(fnp.c_[v, v] ** 3), (A, V), 2),
    ("rearrange", lambda x: fnp.sum(fnp.rot90(x) * fnp.rot90(x, 3)) + fnp.sum(fnp.roll(x, (1, 2), (0, 1)) * x)
     + fnp.sum(fnp.tile(x, 2) ** 2) + fnp.sum(fnp.repeat(x, [1, 0, 2], axis=0) ** 2) + fnp.sum(fnp.resize(x, 7) ** 2)
     + fnp.sum(fnp.flipud(x) * x) + fnp.sum(fnp.reshape(x, (4, 3), order="F") ** 2), (A,), 2),
    ("take-put-place", lambda x, v: fnp.sum(fnp.take(x, [[0, 5], [11, 2]]) ** 2)
     + fnp.sum(fnp.take_along_axis(x, fnp.argsort(x, 1), 1) * x)
     + fnp.sum(fnp.put(x, [1, 7], v[:2], inplace=False) ** 2)
     + fnp.sum(fnp.place(x, x > 0, v, inplace=False) ** 2)
     + fnp.sum(fnp.fill_diagonal(x, v[0], inplace=False) ** 2)
     + fnp.sum(fnp.put_along_axis(x, fl.asarray([[1], [0], [3]]), v[:1], 1, inplace=False) ** 2), (DISTINCT, V), 2),
    ("select-choose-piecewise-where", lambda x: fnp.sum(fnp.select([x < -0.5, x > 0.5], [x ** 2, x ** 3], 0.1 * x))
     + fnp.sum(fnp.choose(fl.asarray([[0, 1, 0, 1]] * 3), [x, x * x]))
     + fnp.sum(fnp.piecewise(x, [x < 0], [lambda v: v ** 2, lambda v: fnp.sin(v)]))
     + fnp.sum(fnp.where(x > 0, x, -x)), (AWAY,), 2),
    ("sort-topk-unique", lambda x: fnp.sum(fnp.sort(x, 0) * fnp.arange(4.0)) + fnp.sum(fnp.top_k(x, 2)[0] ** 2)
     + fnp.sum(fnp.partition(x.ravel(), 3)[:3]) + fnp.sum(fnp.unique(fnp.round(x * 0) + x) ** 2), (DISTINCT,), 1),
    ("meshgrid-ix", lambda a, b: fnp.sum(fnp.meshgrid(a, b)[0] * fnp.meshgrid(a, b)[1] ** 2), (V3, W3), 2),
    ("ufunc-methods", lambda x: fnp.sum(fnp.add.reduce(x, 1)) + fnp.sum(fnp.multiply.reduce(x, 0))
     + fnp.sum(fnp.logaddexp.reduce(x, axis=1)) + fnp.sum(fnp.subtract.reduce(x, 1)) + fnp.sum(fnp.divide.reduce(x, 1))
     + fnp.sum(fnp.maximum.accumulate(x, 1)) + fnp.sum(fnp.subtract.accumulate(x, 1)) + fnp.sum(fnp.hypot.outer(
         x[0], x[1])) + fnp.sum(fnp.add.at(x, (0, [1, 1, 2]), x[1, :3], inplace=False) ** 2)
     + fnp.sum(fnp.add.reduceat(x, [0, 2, 1], axis=1) ** 2), (DISTINCT,), 2),
    ("vectorize-apply", lambda x: fnp.sum(fnp.vectorize(lambda a, b: a * fnp.sin(b))(x, x[0]))
     + fnp.sum(fnp.vectorize(lambda r: fnp.dot(r, r), signature="(n)->()")(x))
     + fnp.sum(fnp.apply_along_axis(lambda r: r * fnp.sum(r), 1, x))
     + fnp.sum(fnp.apply_over_axes(fnp.sum, x, [0, 1])), (A,), 2),
    # linalg
    ("linalg-basic", lambda a, s: fnp.linalg.det(a) + fnp.linalg.slogdet(a)[1] + fnp.sum(fnp.linalg.inv(a))
     + fnp.sum(fnp.linalg.solve(a, a[0])) + fnp.sum(fnp.linalg.matrix_power(a, 3))
     + fnp.sum(fnp.linalg.cholesky(s)) + fnp.sum(fnp.linalg.eigvalsh(s, "U")) + fnp.linalg.cond(a)
     + fnp.linalg.cond(a, 1) + fnp.sum(fnp.linalg.tensorinv(fnp.reshape(a, (3, 1, 3)), 2)), (SQ, SPD), 2),
    ("linalg-norms", lambda x: sum(fnp.linalg.norm(x, o) for o in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf))
     + fnp.sum(fnp.linalg.norm(x, 3, axis=1)) + fnp.sum(fnp.linalg.norm(x, -1.5, axis=0))
     + fnp.linalg.norm(x[0], 0.5), (AWAY,), 1),
    ("linalg-lstsq-pinv", lambda a, b: fnp.sum(fnp.linalg.lstsq(a, b)[0]) + fnp.sum(fnp.linalg.lstsq(a, b)[1])
     + fnp.sum(fnp.linalg.pinv(a)) + fnp.sum(fnp.linalg.multi_dot([b, a, a.T])), (TALL, V), 1),
    ("linalg-svd-qr-eigh", lambda a, s: fnp.sum(fnp.linalg.svd(a, compute_uv=False))
     + fnp.sum(fnp.linalg.svd(a, full_matrices=False)[0] ** 2 * fnp.arange(3.0))
     + fnp.sum(fnp.abs(fnp.linalg.qr(a)[1])) + fnp.sum(fnp.linalg.qr(a, "r") ** 2)
     + fnp.sum(fnp.linalg.eigh(s)[1] ** 2 * fnp.arange(3.0)) + fnp.sum(fnp.linalg.svdvals(a)), (TALL, SPD), 1),
    ("linalg-eig", lambda a: fnp.sum(fnp.real(fnp.linalg.eigvals(a)) ** 2)
     + fnp.sum(fnp.abs(fnp.linalg.eig(a)[1]) ** 2 * fnp.arange(3.0)[:, None]), (SEP,), 2),
    ("linalg-tensorsolve", lambda a, b: fnp.linalg.tensorsolve(a, b), (t(np.eye(4).reshape(2, 2, 4)
                                                                         + 0.1 * rng.standard_normal((2, 2, 4))), t(
        rng.standard_normal((2, 2)))), 1),
    # fft
    ("fft", lambda x: sum(fnp.sum(fnp.abs(f) ** 2) for f in (
        fnp.fft.fft(x, 6), fnp.fft.ifft(x, axis=0), fnp.fft.rfft(x, 5), fnp.fft.fft2(x), fnp.fft.rfft2(x, (4, 6)),
        fnp.fft.fftn(x, axes=(1,)), fnp.fft.ihfft(x))) + fnp.sum(fnp.fft.irfft(fnp.fft.rfft(x), 4))
     + fnp.sum(fnp.fft.hfft(x[0], 6)) + fnp.sum(fnp.fft.irfft2(fnp.fft.rfft2(x))) + fnp.sum(fnp.fft.fftshift(x) * x),
     (A,), 1),
]


@pytest.mark.parametrize("name,f,args,order", GRADS, ids=[g[0] for g in GRADS])
def test_derivatives_match_finite_differences(name, f, args, order):
    check_grads(f, args, order=order, atol=1e-5, rtol=1e-5)


def test_i0_derivative_is_i1_far_out():
    from scipy.special import i1

    x = np.array([-35.0, 30.0, 300.0, 700.0])
    g = fl.vmap(fl.grad(fnp.i0))(fl.asarray(x))
    np.testing.assert_allclose(np.asarray(g), i1(x), rtol=1e-13)


def test_unique_is_differentiable_under_grad():
    x = t([3.0, 1.0, 3.0, 2.0])
    g = fl.grad(lambda v: fnp.sum(fnp.unique(v) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), [6.0, 2.0, 0.0, 4.0])


# ---------------------------------------------------------------------------------------------------------------
# jit and vmap against eager

SAMPLE = [
    ("var-ddof", lambda x: fnp.var(x, 1, ddof=1)),
    ("median", lambda x: fnp.median(x, axis=0)),
    ("nanquantile", lambda x: fnp.nanquantile(fnp.where(x > 1.0, fnp.nan, x), [0.2, 0.7], axis=1)),
    ("percentile-methods", lambda x: fnp.stack([fnp.percentile(x, 30, method=m) for m in (
        "inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf", "hazen",
        "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher", "midpoint", "nearest")])),
    ("cov", lambda x: fnp.cov(x)),
    ("corrcoef", lambda x: fnp.corrcoef(x, rowvar=False)),
    ("histogram", lambda x: fnp.histogram(x, bins=4)[0]),
    ("histogramdd", lambda x: fnp.histogramdd(fnp.reshape(x, (-1, 2)), bins=3)[0]),
    ("bincount-length", lambda x: fnp.bincount(fnp.astype(fnp.abs(x) * 3, fnp.int64).ravel(), length=8)),
    ("digitize", lambda x: fnp.digitize(x, fnp.array([-1.0, 0.0, 1.0]))),
    ("gradient", lambda x: fnp.gradient(x, axis=1, edge_order=2)),
    ("interp", lambda x: fnp.interp(x, fnp.array([-1.0, 0.0, 2.0]), fnp.array([0.0, 1.0, -1.0]))),
    ("convolve", lambda x: fnp.convolve(x.ravel(), fnp.array([1.0, -2.0, 0.5]), "same")),
    ("unwrap", lambda x: fnp.unwrap(x * 4, axis=1)),
    ("pad-reflect", lambda x: fnp.pad(x, ((3, 1), (5, 2)), mode="reflect", reflect_type="odd")),
    ("pad-wrap-edge", lambda x: fnp.pad(fnp.pad(x, 6, mode="wrap"), 1, mode="edge")),
    ("pad-stat", lambda x: fnp.pad(x, 2, mode="median", stat_length=2)),
    ("einsum", lambda x: fnp.einsum(x, [0, 1], x, [0, 2], [1, 2])),
    ("linalg", lambda x: fnp.linalg.norm(x, "nuc") + fnp.linalg.det(fnp.dot(x, x.T)) + fnp.trace(fnp.linalg.pinv(x))),
    ("eig", lambda x: fnp.linalg.eigvals(fnp.dot(x, x.T) + fnp.eye(3))),
    ("lstsq", lambda x: fnp.linalg.lstsq(x.T, fnp.ones(4))[0]),
    ("fft", lambda x: fnp.fft.rfft2(x, s=(4, 6))),
    ("sort-complex-lexsort", lambda x: fnp.lexsort((x[0], x[1]))),
    ("isin", lambda x: fnp.isin(fnp.round(x * 2), fnp.array([0.0, 1.0]))),
    ("nonzero-size", lambda x: fnp.nonzero(x > 0, size=6, fill_value=-1)),
    ("argwhere-size", lambda x: fnp.argwhere(x > 0, size=4)),
    ("ufunc-reduce-fold", lambda x: fnp.subtract.reduce(x, axis=1) + fnp.power.reduce(fnp.abs(x) + 1.0, axis=1)),
    ("ufunc-accumulate", lambda x: fnp.minimum.accumulate(x, axis=1) + fnp.divide.accumulate(x + 3.0, axis=1)),
    ("gcd-lcm", lambda x: fnp.gcd(fnp.astype(x * 10, fnp.int64), 6) + fnp.lcm(fnp.astype(x * 10, fnp.int64), 4)),
    ("float-ops", lambda x: fnp.floor_divide(x, 0.3) + fnp.fmod(x, 0.7) + fnp.spacing(x) + fnp.frexp(x)[0]
     + fnp.ldexp(x, 3) + fnp.i0(x * 10) + fnp.sinc(x)),
    ("bits", lambda x: fnp.unpackbits(fnp.packbits(x > 0, axis=1), axis=1, count=4)),
    ("vectorize", lambda x: fnp.vectorize(lambda r, c: fnp.outer(r, c), signature="(n),(m)->(n,m)")(x, x[:, :2])),
    ("apply_along_axis", lambda x: fnp.apply_along_axis(fnp.cumsum, 0, x)),
    ("polyfit", lambda x: fnp.polyfit(fnp.arange(4.0), x[0], 2)),
    ("roots-no-strip", lambda x: fnp.roots(fnp.concatenate([fnp.ones(1), x[0, :3]]), strip_zeros=False)),
    ("r_-c_", lambda x: fnp.r_["1,2,0", x[0], x[1]] * fnp.c_[x[0], x[1]].T[:, :, None][..., 0].T),
    ("put-place", lambda x: fnp.place(fnp.put(x, [0, 5], [9.0, 8.0], inplace=False), x > 0, [1.0, 2.0],
                                      inplace=False)),
    ("linspace-traced", lambda x: fnp.linspace(x[0], x[1], 5, axis=1)),
    ("nan_to_num-isclose", lambda x: fnp.nan_to_num(fnp.exp(x * 400)) + fnp.isclose(x, 0.5)),
]


def _batched(x):
    return fl.asarray(np.stack([np.asarray(x) * s + o for s, o in ((1.0, 0.0), (-0.5, 0.3), (2.0, -0.1))]))


@pytest.mark.parametrize("name,f", SAMPLE, ids=[s[0] for s in SAMPLE])
def test_jit_and_vmap_match_eager(name, f):
    x = A
    want = f(x)
    fl.tree.map(lambda a, b: assert_allclose(a, b, rtol=1e-10, atol=1e-10), fl.jit(f)(x), want)
    xs = _batched(x)
    got = fl.vmap(f)(xs)
    lanes = [f(xs[i]) for i in range(xs.shape[0])]
    fl.tree.map(lambda g, *ls: assert_allclose(g, fl.stack(list(ls)), rtol=1e-10, atol=1e-10), got, *lanes)


DATA_DEPENDENT = [
    ("nonzero", lambda x: fnp.nonzero(x > 0)),
    ("flatnonzero", lambda x: fnp.flatnonzero(x)),
    ("argwhere", lambda x: fnp.argwhere(x > 0)),
    ("where-1arg", lambda x: fnp.where(x > 0)),
    ("unique", lambda x: fnp.unique(x)),
    ("unique_counts", lambda x: fnp.unique_counts(x)),
    ("intersect1d", lambda x: fnp.intersect1d(x, x)),
    ("union1d", lambda x: fnp.union1d(x, x)),
    ("setdiff1d", lambda x: fnp.setdiff1d(x, x)),
    ("setxor1d", lambda x: fnp.setxor1d(x, x)),
    ("compress", lambda x: fnp.compress(x[:, 0] > 0, x, axis=0)),
    ("extract", lambda x: fnp.extract(x > 0, x)),
    ("trim_zeros", lambda x: fnp.trim_zeros(x[0])),
    ("bincount", lambda x: fnp.bincount(fnp.astype(fnp.abs(x[0]) * 3, fnp.int64))),
    ("repeat-traced", lambda x: fnp.repeat(x[0], fnp.astype(fnp.abs(x[0]) + 1, fnp.int64))),
    ("histogram-auto", lambda x: fnp.histogram(x, bins="auto")),
    ("roots-strip", lambda x: fnp.roots(x[0])),
    ("polydiv", lambda x: fnp.polydiv(x[0], x[1, :2])),
    ("delete-mask", lambda x: fnp.delete(x[0], x[0] > 0)),
]


@pytest.mark.parametrize("name,f", DATA_DEPENDENT, ids=[d[0] for d in DATA_DEPENDENT])
def test_data_dependent_shapes_raise_under_jit_and_vmap(name, f):
    f(A)  # eagerly fine
    with pytest.raises(DataDependentShapeError):
        fl.jit(f)(A)
    with pytest.raises(DataDependentShapeError):
        fl.vmap(f)(_batched(A))


# ---------------------------------------------------------------------------------------------------------------
# Properties against NumPy over drawn inputs

finite = st.floats(-100, 100, allow_nan=False, allow_subnormal=False)
arrays = hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), elements=finite)
METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf", "hazen",
           "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher", "midpoint", "nearest"]


@given(x=arrays, data=st.data())
def test_statistics_match_numpy(x, data):
    axis = data.draw(st.none() | st.integers(0, x.ndim - 1))
    ddof = data.draw(st.integers(0, 2))
    q = data.draw(st.lists(st.floats(0, 1), min_size=1, max_size=3))
    method = data.draw(st.sampled_from(METHODS))
    xt = fl.asarray(x)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy notes ddof >= N
        pairs = [
            (fnp.var(xt, axis, ddof=ddof), np.var(x, axis, ddof=ddof)),
            (fnp.std(xt, axis=axis, ddof=ddof, keepdims=True), np.std(x, axis=axis, ddof=ddof, keepdims=True)),
            (fnp.median(xt, axis), np.median(x, axis)),
            (fnp.quantile(xt, q, axis, method=method), np.quantile(x, q, axis, method=method)),
            (fnp.percentile(xt, np.multiply(q, 100), axis=axis, method=method),
             np.percentile(x, np.multiply(q, 100), axis=axis, method=method)),
            (fnp.ptp(xt, axis), np.ptp(x, axis)),
        ]
    for got, want in pairs:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9, atol=1e-9)


@given(x=hnp.arrays(np.float64, st.integers(1, 12), elements=finite | st.just(np.nan)), q=st.floats(0, 1),
       method=st.sampled_from(METHODS))
def test_nan_statistics_match_numpy(x, q, method):
    xt = fl.asarray(x)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices warn, in NumPy as here (0 / 0)
        want = [np.nanquantile(x, q, method=method), np.nanmedian(x), np.nanmean(x), np.nanmax(x)]
        got = [fnp.nanquantile(xt, q, method=method), fnp.nanmedian(xt), fnp.nanmean(xt), fnp.nanmax(xt)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-9, atol=1e-9)


@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4), elements=finite),
       data=st.data())
def test_pad_matches_numpy(x, data):
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap", "mean", "median",
                                      "maximum", "minimum", "linear_ramp", "empty"]))
    widths = data.draw(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=x.ndim, max_size=x.ndim))
    kw = {}
    if mode in ("reflect", "symmetric"):
        kw["reflect_type"] = data.draw(st.sampled_from(["even", "odd"]))
    if mode in ("mean", "median", "maximum", "minimum"):
        kw["stat_length"] = data.draw(st.none() | st.integers(1, 4))
    if mode == "constant":
        kw["constant_values"] = data.draw(st.tuples(finite, finite))
    if mode == "linear_ramp":
        kw["end_values"] = data.draw(st.tuples(finite, finite))
    want = np.pad(x, widths, mode=mode, **kw)
    got = np.asarray(fnp.pad(fl.asarray(x), widths, mode=mode, **kw))
    if mode == "empty":
        assert got.shape == want.shape
        return
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


CONTINUOUS = ["linear", "hazen", "weibull", "median_unbiased", "normal_unbiased", "interpolated_inverted_cdf"]


@settings(max_examples=10)
@given(perm=st.permutations(range(8)), data=st.data())
def test_statistics_derivatives_over_drawn_inputs(perm, data):
    """Order statistics are smooth where values are distinct: their derivatives match finite differences."""
    x = fl.asarray(np.asarray(perm, np.float64) * 0.3 + data.draw(st.floats(-1, 1)))
    q = data.draw(st.floats(0.05, 0.95))
    method = data.draw(st.sampled_from(CONTINUOUS))
    ddof = data.draw(st.integers(0, 2))

    def f(v):
        return fnp.quantile(v, q, method=method) + fnp.var(v, ddof=ddof) + fnp.median(v) * fnp.std(v)

    check_grads(f, (x,), order=1, atol=1e-6, rtol=1e-6)
