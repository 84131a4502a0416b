"""Special functions in funclib.kernels.special against 60-digit Decimal references, math, and identities."""

import math
import warnings
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import cache

import ml_dtypes
import numpy as np
import pytest
from funclib.kernels import special

EPS = np.finfo(np.float64).eps
EULER_GAMMA = 0.5772156649015329
ZETA3 = 1.2020569031595942
ALL_DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
FUNCS = {
    "erf": special.erf,
    "erfinv": special.erfinv,
    "lgamma": special.lgamma,
    "digamma": special.digamma,
    "trigamma": lambda x: special.polygamma(1, x),
    "polygamma3": lambda x: special.polygamma(3, x),
}

# ------------------------------------------------------------------ high-precision references (Decimal)

PREC = 60
PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899863")


@cache
def _bernoulli(m):
    if m == 0:
        return Fraction(1)
    return -sum(math.comb(m + 1, k) * _bernoulli(k) for k in range(m)) / (m + 1)


def _dec(fr):
    return Decimal(fr.numerator) / Decimal(fr.denominator)


def _shift_count(x):
    # for negative x the shifted sum cancels, so reach past |x| to keep the tail small relative to the result
    return max(0, math.ceil(60 - x), math.ceil(2 * -x + 60))


def ref_zeta(s, x):
    """Hurwitz zeta(s, x) for integer s >= 2: direct sum, then Euler-Maclaurin at a >= 60."""
    with localcontext() as ctx:
        ctx.prec = PREC
        x = Decimal(x)
        n = _shift_count(x)
        acc = sum(((x + k) ** -s for k in range(n)), Decimal(0))
        a = x + n
        acc += a ** (1 - s) / (s - 1) + a**-s / 2
        rising = Decimal(s)
        for j in range(1, 21):
            acc += _dec(_bernoulli(2 * j) / math.factorial(2 * j)) * rising * a ** (-s - 2 * j + 1)
            rising *= (s + 2 * j - 1) * (s + 2 * j)
        return +acc


def ref_polygamma(n, x):
    with localcontext() as ctx:
        ctx.prec = PREC
        if n > 0:
            return (-1) ** (n + 1) * math.factorial(n) * ref_zeta(n + 1, x)
        x = Decimal(x)
        n = _shift_count(x)
        acc = -sum((1 / (x + k) for k in range(n)), Decimal(0))
        a = x + n
        acc += a.ln() - 1 / (2 * a)
        for j in range(1, 21):
            acc -= _dec(_bernoulli(2 * j)) / (2 * j * a ** (2 * j))
        return +acc


def _sinpi(f):
    z = PI * f
    term, acc, k = z, z, 1
    while abs(term) > Decimal(10) ** (-PREC - 5):
        term = -term * z * z / ((2 * k) * (2 * k + 1))
        acc += term
        k += 1
    return acc


def ref_lgamma(x):
    with localcontext() as ctx:
        ctx.prec = PREC
        x = Decimal(x)
        if x < Decimal("0.5"):
            return (PI / abs(_sinpi(x - x.to_integral_value()))).ln() - ref_lgamma(1 - x)
        n = max(0, math.ceil(60 - x))
        z = x + n
        acc = (z - Decimal("0.5")) * z.ln() - z + (2 * PI).ln() / 2
        for j in range(1, 21):
            acc += _dec(_bernoulli(2 * j)) / (2 * j * (2 * j - 1) * z ** (2 * j - 1))
        return +(acc - sum(((x + k).ln() for k in range(n)), Decimal(0)))


def ref_erf(x):
    with localcontext() as ctx:
        ctx.prec = PREC + 25  # the Taylor series cancels by up to exp(x^2) ~ 1e16 for |x| <= 6
        x = Decimal(x)
        term, acc, k = x, x, 0
        while abs(term) > Decimal(10) ** (-PREC - 20):
            k += 1
            term = -term * x * x / k
            acc += term / (2 * k + 1)
        return +(acc * 2 / PI.sqrt())


def ref_erfinv_from(y, v):
    """erfinv(y) to far beyond double precision: one Newton step from a close estimate v."""
    with localcontext() as ctx:
        ctx.prec = PREC + 25
        v, y = Decimal(v), Decimal(y)
        return +(v - (ref_erf(v) - y) * PI.sqrt() / 2 / (-(v * v)).exp())


def ulp_error(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return np.abs(got - ref) / np.spacing(np.abs(ref))


def _refs(fn, xs):
    return np.array([float(fn(float(x))) for x in xs])


# ------------------------------------------------------------------ erf


def test_erf_matches_math_erf():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.uniform(-6.5, 6.5, 5000),
            np.logspace(-320, 1.5, 400),
            -np.logspace(-320, 1.5, 400),
            [0.0, -0.0, 5e-324, 1e-16, 0.5, 0.84375, 1.25, 2.857, 5.9, 6.0, 27.0, 1e300, -1e300],
        ]
    )
    got = special.erf(x)
    ref = np.array([math.erf(v) for v in x])
    assert ulp_error(got, ref).max() <= 1
    assert np.array_equal(np.signbit(got), np.signbit(ref))


def test_erf_against_decimal():
    x = np.concatenate([np.linspace(-5.8, 5.8, 41), [1e-300, 3e-8, 0.47, 0.91, 2.3]])
    assert ulp_error(special.erf(x), _refs(ref_erf, x)).max() <= 1


# ------------------------------------------------------------------ erfinv


def test_erfinv_against_decimal():
    rng = np.random.default_rng(1)
    y = np.concatenate(
        [
            rng.uniform(-1, 1, 150),
            1 - np.logspace(-16, -0.31, 40),
            -(1 - np.logspace(-16, -0.31, 40)),
            np.logspace(-300, -0.31, 30),
            [1 - 2**-53, -1 + 2**-53, 0.5, np.nextafter(0.5, 1), np.nextafter(0.5, 0), 5e-324, 1e-9, 2e-9],
        ]
    )
    got = special.erfinv(y)
    ref = np.array([float(ref_erfinv_from(a, b)) for a, b in zip(y, got)])
    assert ulp_error(got, ref).max() <= 3


def test_erfinv_inverts_erf():
    y = np.linspace(-0.999999, 0.999999, 2001)
    assert np.abs(special.erf(special.erfinv(y)) - y).max() <= 2 * EPS
    x = np.linspace(-2.5, 2.5, 2001)
    back = special.erfinv(special.erf(x))
    # erf rounds to 1 ulp of erf(x); erfinv stretches that by its slope sqrt(pi)/2 exp(x^2)
    tol = 4 * EPS * (np.abs(x) + np.exp(x * x))
    assert np.all(np.abs(back - x) <= tol)


# ------------------------------------------------------------------ lgamma


def test_lgamma_against_decimal():
    rng = np.random.default_rng(2)
    pos = np.concatenate(
        [
            rng.uniform(0, 40, 120),
            np.logspace(-300, 300, 40),
            1 + np.logspace(-15, -1, 8),
            2 - np.logspace(-15, -1, 8),
        ]
    )
    assert ulp_error(special.lgamma(pos), _refs(ref_lgamma, pos)).max() <= 4
    neg = -rng.uniform(0, 40, 80)
    ref = _refs(ref_lgamma, neg)
    # near its negative zeros lgamma is ill-conditioned: allow a few ulp of x times the slope digamma(x)
    slope = special.digamma(neg)
    assert np.all(np.abs(special.lgamma(neg) - ref) <= 4 * EPS * (np.abs(ref) + np.abs(neg * slope)))


def test_lgamma_matches_math_lgamma():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-60, 60, 3000), np.logspace(-300, 305, 300)])
    ref = np.array([math.lgamma(v) for v in x])
    np.testing.assert_allclose(special.lgamma(x), ref, rtol=1e-14, atol=1e-14)


# ------------------------------------------------------------------ digamma and polygamma


def test_known_values():
    one = np.array([1.0])
    np.testing.assert_allclose(special.digamma(one), [-EULER_GAMMA], rtol=EPS)
    np.testing.assert_allclose(special.polygamma(0, one), [-EULER_GAMMA], rtol=EPS)
    np.testing.assert_allclose(
        special.digamma(np.array([0.5])), [-EULER_GAMMA - 2 * math.log(2)], rtol=2 * EPS
    )
    np.testing.assert_allclose(special.polygamma(1, one), [math.pi**2 / 6], rtol=2 * EPS)
    np.testing.assert_allclose(special.polygamma(1, np.array([0.5])), [math.pi**2 / 2], rtol=2 * EPS)
    np.testing.assert_allclose(special.polygamma(2, one), [-2 * ZETA3], rtol=2 * EPS)
    np.testing.assert_allclose(special.polygamma(3, one), [math.pi**4 / 15], rtol=2 * EPS)
    np.testing.assert_allclose(special.polygamma(1, np.array([2.0])), [math.pi**2 / 6 - 1], rtol=2 * EPS)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_polygamma_positive_against_decimal(n):
    rng = np.random.default_rng(10 + n)
    x = np.concatenate(
        [
            rng.uniform(0, 12, 60),
            np.logspace(-6, 8, 15),
            [0.5, 1.0, 1.9616321449683622, 0.9616321449683622, 10.0],
        ]
    )
    assert ulp_error(special.polygamma(n, x), _refs(lambda v: ref_polygamma(n, v), x)).max() <= 8


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_polygamma_negative_against_decimal(n):
    rng = np.random.default_rng(20 + n)
    x = np.concatenate([-rng.uniform(0, 30, 50), [-0.5, -2.5, -1e-8, -0.999999, -7.25]])
    got = special.polygamma(n, x)
    ref = _refs(lambda v: ref_polygamma(n, v), x)
    slope = _refs(lambda v: ref_polygamma(n + 1, v), x)
    # relative accuracy is impossible next to the zeros on the negative axis; the result must be as good as
    # the exact function of an input within a few ulp
    assert np.all(np.abs(got - ref) <= 4 * EPS * (np.abs(ref) + np.abs(x * slope)))


def test_digamma_near_its_positive_zero():
    x0 = 1.4616321449683622
    x = x0 + np.arange(-50, 51) * 2.0**-52
    x = np.concatenate([x, x0 + np.array([1e-12, -1e-9, 1e-6, -3e-4, 0.1, -0.3, 0.49, -0.49])])
    assert ulp_error(special.digamma(x), _refs(ref_digamma_float, x)).max() <= 2


def ref_digamma_float(x):
    return ref_polygamma(0, x)


def test_root_constants_match_decimal():
    with localcontext() as ctx:
        ctx.prec = PREC
        r = Decimal("1.4616321449683623")
        for _ in range(5):
            r -= ref_polygamma(0, r) / ref_polygamma(1, r)
        assert special._ROOT_HI == float(r)
        assert special._ROOT_LO == float(r - Decimal(special._ROOT_HI))
        for k, c in enumerate(special._ROOT_TAYLOR, 1):
            assert c == float((-1) ** (k + 1) * ref_zeta(k + 1, r)), k


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma_recurrence(n):
    x = np.concatenate([np.linspace(0.05, 30, 300), -np.linspace(0.05, 20, 200) + 0.013])
    lhs = special.polygamma(n, x + 1)
    term = (-1) ** n * math.factorial(n) / x ** (n + 1)
    rhs = special.polygamma(n, x) + term
    scale = np.abs(lhs) + np.abs(term) + np.abs(special.polygamma(n, x))
    scale += np.abs(x * special.polygamma(n + 1, x))
    assert np.all(np.abs(lhs - rhs) <= 8 * EPS * scale)


@pytest.mark.parametrize("n", [0, 2, 4, 8])
def test_half_integer_reflection_is_exact(n):
    # cot(pi x) vanishes at half-integers, so psi^(n)(-m - 1/2) = psi^(n)(m + 3/2) for even n
    m = np.array([0.0, 1.0, 7.0, 100.0, 1000.0, 123456.0])
    np.testing.assert_array_equal(special.polygamma(n, -m - 0.5), special.polygamma(n, m + 1.5))


def test_polygamma_large_order():
    x = np.array([30.0, 500.0, 1001.5])
    for n in (20, 30, 200):
        ref = _refs(lambda v, n=n: ref_polygamma(n, v), x)
        assert ulp_error(special.polygamma(n, x), ref).max() <= 2 * n, n
    assert special.polygamma(200, np.array([1.0]))[0] == -np.inf  # 200! overflows; the sign is (-1)^(n+1)
    assert special.polygamma(201, np.array([1.0]))[0] == np.inf
    # n! x^-(n+1) alone would underflow or overflow; the scaled product is still right
    x = np.array([1e100])
    np.testing.assert_allclose(special.polygamma(3, x), [2 / 1e300], rtol=1e-14)
    np.testing.assert_allclose(special.polygamma(1, np.array([1e-150])), [1e300], rtol=1e-14)


def test_against_scipy_when_available():
    sc = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(5)
    x = rng.uniform(0.01, 50, 2000)
    np.testing.assert_allclose(special.digamma(x), sc.digamma(x), rtol=1e-13)
    np.testing.assert_allclose(special.polygamma(2, x), sc.polygamma(2, x), rtol=1e-13)
    np.testing.assert_allclose(special.lgamma(x), sc.gammaln(x), rtol=1e-13, atol=1e-15)
    y = rng.uniform(-1, 1, 2000)
    np.testing.assert_allclose(special.erfinv(y), sc.erfinv(y), rtol=1e-14, atol=1e-300)


# ------------------------------------------------------------------ special values, dtypes, errors

INF, NAN = np.inf, np.nan
SPECIAL = [
    (special.erf, [NAN, INF, -INF, 0.0, -0.0], [NAN, 1.0, -1.0, 0.0, -0.0]),
    (special.erfinv, [NAN, 1.0, -1.0, 1.5, -1.5, INF, 0.0, -0.0], [NAN, INF, -INF, NAN, NAN, NAN, 0.0, -0.0]),
    (
        special.lgamma,
        [NAN, INF, -INF, 0.0, -0.0, -1.0, -2.0, 1.0, 2.0],
        [NAN, INF, -INF, INF, INF, INF, INF, 0, 0],
    ),
    (special.digamma, [NAN, INF, -INF, 0.0, -0.0, -1.0, -7.0], [NAN, INF, NAN, -INF, INF, NAN, NAN]),
    (
        lambda x: special.polygamma(1, x),
        [NAN, INF, -INF, 0.0, -0.0, -1.0, -7.0],
        [NAN, 0.0, NAN, INF, INF, INF, INF],
    ),
    (
        lambda x: special.polygamma(2, x),
        [NAN, INF, -INF, 0.0, -0.0, -1.0, -7.0],
        [NAN, -0.0, NAN, -INF, INF, NAN, NAN],
    ),
    (lambda x: special.polygamma(3, x), [NAN, INF, -INF, 0.0, -3.0], [NAN, 0.0, NAN, INF, INF]),
]


@pytest.mark.parametrize("case", range(len(SPECIAL)))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(case, dtype):
    fn, xs, expected = SPECIAL[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fn(np.array(xs, dtype))
    expected = np.array(expected, dtype)
    np.testing.assert_array_equal(got, expected)
    assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", list(FUNCS))
def test_dtype_and_shape_preserved(name, dtype):
    fn = FUNCS[name]
    base = (
        np.array([[0.3, 0.7, 1.5], [2.5, -0.25, 0.9]]) if name != "erfinv" else np.array([[0.3, -0.7, 0.5]])
    )
    x = base.astype(dtype)
    out = fn(x)
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dtype) and out.shape == x.shape
    if np.dtype(dtype) in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        np.testing.assert_array_equal(out, fn(x.astype(np.float32)).astype(dtype))
    scalar = fn(x.reshape(-1)[0])
    zero_d = fn(np.asarray(x.reshape(-1)[0]))
    for r in (scalar, zero_d):
        assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == np.dtype(dtype)
        assert r == out.reshape(-1)[0] or (np.isnan(r) and np.isnan(out.reshape(-1)[0]))
    strided = fn(x.T)
    np.testing.assert_array_equal(strided, out.T)


@pytest.mark.parametrize("name", list(FUNCS))
def test_float32_is_float64_rounded(name):
    fn = FUNCS[name]
    rng = np.random.default_rng(7)
    lo, hi = (-1, 1) if name == "erfinv" else (-20, 30)
    x = rng.uniform(lo, hi, 5000).astype(np.float32)
    got = fn(x)
    ref = fn(x.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(ref)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert ulp_error(got[finite], ref[finite]).max() <= 2 * np.finfo(np.float32).eps / EPS


def test_float32_against_decimal():
    x = np.float32([0.1, 0.9, 1.4616321, 2.5, 7.3, -2.7, 33.0])
    got = special.digamma(x)
    ref = _refs(ref_digamma_float, x).astype(np.float32)
    assert np.max(np.abs(got - ref) / np.spacing(np.abs(ref))) <= 1


def test_rejects_bad_input():
    with pytest.raises(TypeError, match="float16, bfloat16, float32 or float64"):
        special.erf(np.arange(3))
    with pytest.raises(TypeError, match="complex128"):
        special.lgamma(np.array([1j]))
    with pytest.raises(ValueError, match=">= 0"):
        special.polygamma(-1, np.array([1.0]))
    with pytest.raises(TypeError, match="integer"):
        special.polygamma(1.5, np.array([1.0]))
    assert special.polygamma(np.int64(1), np.array([1.0]))[0] == pytest.approx(math.pi**2 / 6)


def test_result_is_a_new_array():
    x = np.array([0.5, 1.0])
    for fn in FUNCS.values():
        out = fn(x)
        assert not np.shares_memory(out, x)
    np.testing.assert_array_equal(x, [0.5, 1.0])
