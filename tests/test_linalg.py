"""fl.linalg: results against numpy.linalg, derivatives against central finite differences (float64),
second order, vmap against a loop, and the transpose identity of triangular_solve."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funclib as fl
from funclib.errors import DTypeError, MissingRuleError, ShapeError
from funclib.primitives import linalg as P

# ------------------------------------------------------------------------------------------------------------
# helpers


def _rng(seed=0):
    return np.random.default_rng(seed)


def rnd(rng, shape, dtype=np.float64):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def spd(rng, n, batch=(), dtype=np.float64):
    """Well-conditioned Hermitian positive-definite matrices: A A^H + n I."""
    a = rnd(rng, batch + (n, n), dtype)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def well(rng, n, batch=(), dtype=np.float64):
    """Well-conditioned general square matrices."""
    return (rnd(rng, batch + (n, n), dtype) + 2 * n**0.5 * np.eye(n)).astype(dtype)


def _leaves(o):
    if isinstance(o, (tuple, list)):
        return [leaf for p in o for leaf in _leaves(p)]
    return [np.asarray(o)]


def _flat(o):
    return np.concatenate([leaf.ravel() for leaf in _leaves(o)])


def _pair(a, b):
    """The bilinear pairing Re(sum(a * b)) under which transposes (and complex vjps) are defined."""
    return float(np.real(np.sum(_flat(a) * _flat(b))))


def _shift(args, ts, eps):
    return [fl.asarray(np.asarray(a) + eps * np.asarray(t)) for a, t in zip(args, ts)]


def check_jvp(f, args, *, eps=1e-6, rtol=1e-6, seed=1):
    """``fl.jvp`` against central differences along a random direction (float64/complex128 inputs)."""
    rng = _rng(seed)
    args = [fl.asarray(a) for a in args]
    ts = [rnd(rng, a.shape, a.dtype) for a in args]
    _, tout = fl.jvp(f, tuple(args), tuple(fl.asarray(t) for t in ts))
    fd = (_flat(f(*_shift(args, ts, eps))) - _flat(f(*_shift(args, ts, -eps)))) / (2 * eps)
    got = _flat(tout)
    np.testing.assert_allclose(got, fd, rtol=rtol, atol=rtol * max(1.0, np.abs(fd).max()))


def check_vjp(f, args, *, seed=2):
    """``<u, J v> == <J^T u, v>`` with J from fl.jvp and J^T from fl.vjp."""
    rng = _rng(seed)
    args = [fl.asarray(a) for a in args]
    ts = [fl.asarray(rnd(rng, a.shape, a.dtype)) for a in args]
    out, tout = fl.jvp(f, tuple(args), tuple(ts))
    _, f_vjp = fl.vjp(f, *args)
    us = (
        type(out)(fl.asarray(rnd(rng, o.shape, o.dtype)) for o in out)
        if isinstance(out, (tuple, list))
        else (fl.asarray(rnd(rng, out.shape, out.dtype)))
    )
    cts = f_vjp(us)
    lhs, rhs = _pair(us, tout), _pair(cts, ts)
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs)), (lhs, rhs)


def check_grad(f, x, *, eps=1e-6, rtol=1e-6, seed=3):
    """``fl.grad`` of a real scalar function against a central difference along a random direction."""
    rng = _rng(seed)
    x = fl.asarray(x)
    g = fl.grad(f)(x).numpy()
    t = rnd(rng, x.shape, x.dtype)
    fd = (float(f(*_shift([x], [t], eps))) - float(f(*_shift([x], [t], -eps)))) / (2 * eps)
    got = _pair(g, t)
    assert abs(got - fd) <= rtol * max(1.0, abs(fd)), (got, fd)


def check_all(f, args, **kw):
    check_jvp(f, args, **kw)
    check_vjp(f, args)


def traced(f):
    """Run ``f`` under a transform (jvp with zero tangents), so the composition path runs instead of the eager
    LAPACK shortcut."""

    def run(*args):
        args = tuple(fl.asarray(a) for a in args)
        return fl.jvp(f, args, tuple(fl.zeros_like(a) for a in args))[0]

    return run


def sign_fixed(v):
    """Eigen/singular vectors with the gauge fixed: first row made real and non-negative."""
    top = v[..., :1, :]
    if v.dtype in (fl.complex64, fl.complex128):
        return v * (fl.conj(top) / fl.abs(top))
    return v * fl.sign(top)


# ------------------------------------------------------------------------------------------------------------
# results against numpy.linalg


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_cholesky_matches_numpy(dtype):
    a = spd(_rng(), 5, (2, 3), dtype)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-12
    L = fl.linalg.cholesky(fl.asarray(a))
    assert L.dtype == dtype and L.shape == a.shape
    np.testing.assert_allclose(L.numpy(), np.linalg.cholesky(a), rtol=tol, atol=tol)
    U = fl.linalg.cholesky(fl.asarray(a), upper=True)
    np.testing.assert_allclose(
        U.numpy(), np.conj(np.swapaxes(np.linalg.cholesky(a), -1, -2)), rtol=tol, atol=tol
    )


def test_cholesky_not_positive_definite_raises():
    with pytest.raises(np.linalg.LinAlgError, match="cholesky: .*not positive definite"):
        fl.linalg.cholesky(fl.asarray(-np.eye(3)))


def _tri_reference(a, b, left, lower, trans, conj, unit):
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t = t - np.diag(np.diag(t)) + np.eye(a.shape[-1])
    if conj:
        t = np.conj(t)
    if trans:
        t = t.T
    return np.linalg.solve(t, b) if left else np.linalg.solve(t.T, b.T).T


@pytest.mark.parametrize("left,lower,trans,unit", list(itertools.product([True, False], repeat=4)))
def test_triangular_solve_matches_dense_solve(left, lower, trans, unit):
    rng = _rng()
    n = 5
    a = rnd(rng, (n, n)) + 3 * np.eye(n)
    b = rnd(rng, (n, 3) if left else (3, n))
    x = P.triangular_solve(
        fl.asarray(a), fl.asarray(b), left_side=left, lower=lower, transpose_a=trans, unit_diagonal=unit
    )
    np.testing.assert_allclose(x.numpy(), _tri_reference(a, b, left, lower, trans, False, unit), rtol=1e-10)


@pytest.mark.parametrize("trans", [False, True])
def test_triangular_solve_complex_conjugate(trans):
    rng = _rng()
    a = rnd(rng, (4, 4), np.complex128) + 3 * np.eye(4)
    b = rnd(rng, (4, 2), np.complex128)
    x = P.triangular_solve(
        fl.asarray(a), fl.asarray(b), left_side=True, lower=True, transpose_a=trans, conjugate_a=True
    )
    np.testing.assert_allclose(x.numpy(), _tri_reference(a, b, True, True, trans, True, False), rtol=1e-10)


def test_triangular_solve_large_blocked_and_batched():
    rng = _rng()
    n = 150  # more than one block
    a = np.tril(rnd(rng, (2, n, n))) / n**0.5 + 2 * np.eye(n)
    b = rnd(rng, (2, n, 3))
    x = fl.linalg.solve_triangular(fl.asarray(a), fl.asarray(b), lower=True)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-9, atol=1e-12)


def test_triangular_solve_errors():
    a = fl.asarray(np.eye(3))
    with pytest.raises(ShapeError, match="triangular_solve: b f64\\[4,2\\] must have 3 rows"):
        P.triangular_solve(a, fl.asarray(np.ones((4, 2))), left_side=True)
    with pytest.raises(DTypeError, match="share a dtype"):
        P.triangular_solve(a, fl.asarray(np.ones((3, 2), np.float32)), left_side=True)
    # a zero pivot gives inf/nan (BLAS trsm semantics), in the blocked and the row-by-row path alike
    x = P.triangular_solve(
        fl.asarray(np.diag([1.0, 0.0, 2.0])), fl.asarray(np.ones((3, 1))), left_side=True, lower=True
    )
    assert x.numpy()[0, 0] == 1.0 and np.isinf(x.numpy()[1, 0])


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 70, 70), (100, 40), (40, 100)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_lu_reconstructs_and_matches_lapack(shape, dtype):
    a = rnd(_rng(), shape, dtype)
    lu, piv, perm = (x.numpy() for x in fl.linalg.lu(fl.asarray(a)))
    m, n = shape[-2:]
    k = min(m, n)
    L = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    U = np.triu(lu[..., :k, :])
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.take_along_axis(a, perm[..., :, None], -2), L @ U, atol=tol * n)
    assert piv.dtype == np.int32 and perm.dtype == np.int32 and piv.shape == shape[:-2] + (k,)
    sl = pytest.importorskip("scipy.linalg")
    if len(shape) == 2:
        ref_lu, ref_piv = sl.lu_factor(a)
        np.testing.assert_array_equal(piv, ref_piv)
        np.testing.assert_allclose(lu, ref_lu, rtol=tol, atol=tol)


def test_lu_singular_matrix_keeps_going():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    lu, _, perm = (x.numpy() for x in fl.linalg.lu(fl.asarray(a)))
    L, U = np.tril(lu, -1) + np.eye(3), np.triu(lu)
    np.testing.assert_allclose(a[perm], L @ U, atol=1e-14)
    assert fl.linalg.det(fl.asarray(a)).item() == pytest.approx(0.0, abs=1e-12)
    assert float(traced(fl.linalg.det)(a)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 5, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_qr_matches_numpy(shape, mode, dtype):
    a = rnd(_rng(), shape, dtype)
    q, r = fl.linalg.qr(fl.asarray(a), mode=mode)
    qn, rn = np.linalg.qr(a, mode=mode)
    assert q.dtype == dtype and q.shape == qn.shape and r.shape == rn.shape
    np.testing.assert_allclose(q.numpy(), qn, atol=1e-5)
    np.testing.assert_allclose(r.numpy(), rn, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_eigh_matches_numpy(dtype):
    a = (spd(_rng(), 5, (3,), dtype) - 5 * np.eye(5)).astype(dtype)
    w, v = fl.linalg.eigh(fl.asarray(a))
    wn = np.linalg.eigvalsh(a)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    assert w.dtype == np.dtype(dtype).type(0).real.dtype and v.dtype == dtype
    np.testing.assert_allclose(w.numpy(), wn, rtol=tol, atol=tol)
    recon = v.numpy() @ (w.numpy()[..., None] * np.conj(np.swapaxes(v.numpy(), -1, -2)))
    np.testing.assert_allclose(recon, a, atol=tol * 10)
    np.testing.assert_allclose(fl.linalg.eigvalsh(fl.asarray(a)).numpy(), wn, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 4, 5)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_svd_matches_numpy(shape, dtype):
    a = rnd(_rng(), shape, dtype)
    tol = 1e-4 if dtype == np.complex64 else 1e-10
    for full in (True, False):
        u, s, vh = fl.linalg.svd(fl.asarray(a), full_matrices=full)
        un, sn, vhn = np.linalg.svd(a, full_matrices=full)
        assert u.shape == un.shape and vh.shape == vhn.shape and s.dtype == sn.dtype
        np.testing.assert_allclose(s.numpy(), sn, rtol=tol, atol=tol)
        k = sn.shape[-1]
        recon = (u.numpy()[..., :k] * s.numpy()[..., None, :]) @ vh.numpy()[..., :k, :]
        np.testing.assert_allclose(recon, a, atol=tol * 10)
    np.testing.assert_allclose(
        fl.linalg.svdvals(fl.asarray(a)).numpy(), np.linalg.svd(a, compute_uv=False), rtol=tol, atol=tol
    )


@pytest.mark.parametrize("run", [lambda f: f, traced], ids=["eager", "traced"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_lu_compositions_match_numpy(run, dtype):
    rng = _rng()
    a = well(rng, 4, (2, 3), dtype)
    b = rnd(rng, (2, 3, 4, 2), dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(run(fl.linalg.solve)(a, b).numpy(), np.linalg.solve(a, b), rtol=tol, atol=tol)
    bv = rnd(rng, (4,), dtype)
    np.testing.assert_allclose(
        run(fl.linalg.solve)(a, bv).numpy(), np.linalg.solve(a, bv), rtol=tol, atol=tol
    )
    b1 = rnd(rng, (4, 2), dtype)  # broadcast against a's batch
    np.testing.assert_allclose(
        run(fl.linalg.solve)(a, b1).numpy(), np.linalg.solve(a, b1), rtol=tol, atol=tol
    )
    np.testing.assert_allclose(run(fl.linalg.inv)(a).numpy(), np.linalg.inv(a), rtol=tol, atol=tol)
    np.testing.assert_allclose(run(fl.linalg.det)(a).numpy(), np.linalg.det(a), rtol=tol, atol=tol)
    s, ld = run(lambda x: tuple(fl.linalg.slogdet(x)))(a)
    sn, ldn = np.linalg.slogdet(a)
    np.testing.assert_allclose(s.numpy(), sn, rtol=tol, atol=tol)
    np.testing.assert_allclose(ld.numpy(), ldn, rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log")
def test_slogdet_singular_and_negative():
    s, ld = traced(lambda x: tuple(fl.linalg.slogdet(x)))(np.array([[1.0, 2.0], [2.0, 4.0]]))
    assert s.item() == 0.0 and ld.item() == -np.inf
    s, ld = traced(lambda x: tuple(fl.linalg.slogdet(x)))(np.array([[0.0, 2.0], [3.0, 0.0]]))
    assert s.item() == -1.0 and ld.item() == pytest.approx(np.log(6.0))


def test_solve_errors():
    with pytest.raises(ShapeError, match="solve: x2 of shape \\(3,\\) does not match x1 of shape \\(4, 4\\)"):
        fl.linalg.solve(fl.eye(4), fl.ones(3))
    with pytest.raises(ShapeError, match="square"):
        fl.linalg.inv(fl.ones((2, 3)))
    with pytest.raises(DTypeError, match="cholesky: expected a floating-point or complex matrix, got int64"):
        P.cholesky(fl.asarray(np.eye(2, dtype=np.int64)))
    with pytest.raises(ShapeError, match="lu: expected a matrix"):
        P.lu(fl.ones(3))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_svd_compositions_match_numpy(dtype):
    rng = _rng()
    a = rnd(rng, (2, 5, 3), dtype)
    np.testing.assert_allclose(fl.linalg.pinv(fl.asarray(a)).numpy(), np.linalg.pinv(a), atol=1e-10)
    low = rnd(rng, (5, 2), dtype) @ rnd(rng, (2, 4), dtype)
    np.testing.assert_allclose(fl.linalg.pinv(fl.asarray(low)).numpy(), np.linalg.pinv(low), atol=1e-10)
    assert fl.linalg.matrix_rank(fl.asarray(low)).item() == 2 == np.linalg.matrix_rank(low)
    np.testing.assert_array_equal(fl.linalg.matrix_rank(fl.asarray(a)).numpy(), [3, 3])
    r = fl.linalg.matrix_rank(fl.asarray(np.diag([1.0, 1e-3, 0.0])), rtol=1e-2)
    assert r.item() == 1 and r.dtype == np.int64


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_matrix_norm_matches_numpy(ord, dtype):
    a = rnd(_rng(), (2, 4, 3), dtype)
    got = fl.linalg.matrix_norm(fl.asarray(a), ord=ord)
    ref = np.linalg.norm(a, ord=ord, axis=(-2, -1))
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5)
    assert got.dtype == np.dtype(dtype).type(0).real.dtype
    assert fl.linalg.matrix_norm(fl.asarray(a), ord=ord, keepdims=True).shape == (2, 1, 1)


def test_matrix_norm_bad_ord():
    with pytest.raises(ValueError, match="matrix_norm: ord must be one of"):
        fl.linalg.matrix_norm(fl.eye(2), ord=3)


@pytest.mark.parametrize("ord", [2, 1, np.inf, -np.inf, 0, 3, 0.5, -1])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_vector_norm_matches_numpy(ord, axis):
    a = rnd(_rng(), (2, 3, 4))
    got = fl.linalg.vector_norm(fl.asarray(a), ord=ord, axis=axis)
    if axis is None:
        ref = np.linalg.norm(a.ravel(), ord=ord)
    elif isinstance(axis, int):
        ref = np.linalg.norm(a, ord=ord, axis=axis)
    else:
        ref = np.linalg.norm(np.moveaxis(a, axis, (-2, -1)).reshape(3, -1), ord=ord, axis=-1)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12)
    kept = fl.linalg.vector_norm(fl.asarray(a), ord=ord, axis=axis, keepdims=True)
    expect = {None: (1, 1, 1), 1: (2, 1, 4), (0, 2): (1, 3, 1)}[axis]
    assert kept.shape == expect
    np.testing.assert_allclose(kept.numpy().ravel(), np.ravel(ref), rtol=1e-12)


def test_vector_norm_complex():
    a = rnd(_rng(), (3, 4), np.complex64)
    got = fl.linalg.vector_norm(fl.asarray(a), axis=-1)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), np.linalg.norm(a, axis=-1), rtol=1e-6)


def test_matrix_power_cross_trace():
    rng = _rng()
    a = well(rng, 3, (2,))
    for n in (0, 1, 2, 5, -1, -3):
        np.testing.assert_allclose(
            fl.linalg.matrix_power(fl.asarray(a), n).numpy(),
            np.linalg.matrix_power(a, n),
            rtol=1e-10,
            atol=1e-12,
        )
    x, y = rnd(rng, (4, 3)), rnd(rng, (3,))
    np.testing.assert_allclose(fl.linalg.cross(fl.asarray(x), fl.asarray(y)).numpy(), np.cross(x, y))
    xt = rnd(rng, (3, 2, 4))
    np.testing.assert_allclose(
        fl.linalg.cross(fl.asarray(xt), fl.asarray(xt[::-1]), axis=0).numpy(), np.cross(xt, xt[::-1], axis=0)
    )
    with pytest.raises(ShapeError, match="cross: axis -1 must have size 3"):
        fl.linalg.cross(fl.ones(4), fl.ones(4))
    b = rnd(rng, (2, 4, 5))
    for off in (0, 1, -2):
        np.testing.assert_allclose(
            fl.linalg.trace(fl.asarray(b), offset=off).numpy(), np.trace(b, offset=off, axis1=-2, axis2=-1)
        )


def test_namespace_exposes_the_extension():
    names = [
        "cholesky",
        "cross",
        "det",
        "diagonal",
        "eigh",
        "eigvalsh",
        "inv",
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
        "svd",
        "svdvals",
        "tensordot",
        "trace",
        "vecdot",
        "vector_norm",
    ]
    for n in names:
        assert callable(getattr(fl.linalg, n)), n
    a = fl.asarray(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(fl.linalg.matrix_transpose(a).numpy(), a.numpy().T)
    np.testing.assert_array_equal(fl.linalg.outer(fl.ones(2), fl.ones(3)).numpy(), np.ones((2, 3)))


@pytest.mark.parametrize("dtype", [fl.float16, fl.bfloat16])
def test_low_precision_computes_in_float32(dtype):
    a = spd(_rng(), 4)
    x = fl.asarray(a).astype(dtype)
    a32 = x.astype(fl.float32).numpy()
    L = fl.linalg.cholesky(x)
    assert L.dtype == dtype
    np.testing.assert_allclose(L.astype(fl.float32).numpy(), np.linalg.cholesky(a32), rtol=2e-2, atol=2e-2)
    w = fl.linalg.eigvalsh(x)
    assert w.dtype == dtype
    np.testing.assert_allclose(w.astype(fl.float32).numpy(), np.linalg.eigvalsh(a32), rtol=2e-2)
    s = traced(fl.linalg.solve)(x, fl.ones(4).astype(dtype))
    assert s.dtype == dtype
    np.testing.assert_allclose(
        s.astype(fl.float32).numpy(), np.linalg.solve(a32, np.ones(4)), rtol=5e-2, atol=1e-2
    )


@given(m=st.integers(1, 7), n=st.integers(1, 7), b=st.integers(0, 2))
def test_lu_property(m, n, b):
    a = rnd(_rng(m * 100 + n * 10 + b), (b,) * min(b, 1) + (m, n))
    lu, _, perm = (x.numpy() for x in fl.linalg.lu(fl.asarray(a)))
    k = min(m, n)
    L, U = np.tril(lu[..., :, :k], -1) + np.eye(m, k), np.triu(lu[..., :k, :])
    np.testing.assert_allclose(np.take_along_axis(a, perm[..., :, None], -2), L @ U, atol=1e-12)
    assert np.all(np.abs(np.tril(lu[..., :, :k], -1)) <= 1 + 1e-12)  # partial pivoting bounds the multipliers


# ------------------------------------------------------------------------------------------------------------
# first derivatives (float64 / complex128) against finite differences


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_cholesky_derivatives(dtype):
    a = spd(_rng(), 4, (2,), dtype)
    check_all(fl.linalg.cholesky, [a])
    check_all(P.cholesky, [a])  # the primitive alone: derivative of its lower-triangle-reading impl
    check_all(lambda x: fl.linalg.cholesky(x, upper=True), [a])
    check_grad(lambda x: fl.sum(fl.abs(fl.linalg.cholesky(x)) ** 2), a)


@pytest.mark.parametrize("left,lower,trans,unit", list(itertools.product([True, False], repeat=4)))
def test_triangular_solve_derivatives(left, lower, trans, unit):
    rng = _rng()
    a = rnd(rng, (2, 4, 4)) + 3 * np.eye(4)
    b = rnd(rng, (2, 4, 3) if left else (2, 3, 4))
    f = lambda a, b: P.triangular_solve(
        a, b, left_side=left, lower=lower, transpose_a=trans, unit_diagonal=unit
    )
    check_all(f, [a, b])


@pytest.mark.parametrize("trans", [False, True])
def test_triangular_solve_complex_derivatives(trans):
    rng = _rng()
    a = rnd(rng, (4, 4), np.complex128) + 3 * np.eye(4)
    b = rnd(rng, (4, 2), np.complex128)
    check_all(
        lambda a, b: P.triangular_solve(
            a, b, left_side=True, lower=False, transpose_a=trans, conjugate_a=True
        ),
        [a, b],
    )


@pytest.mark.parametrize("left,trans", list(itertools.product([True, False], repeat=2)))
def test_triangular_solve_transpose_identity(left, trans):
    """<u, T b> == <T^t u, b> for the map b -> triangular_solve(a, b) (a fixed)."""
    rng = _rng()
    a = fl.asarray(rnd(rng, (3, 4, 4)) + 3 * np.eye(4))
    b = fl.asarray(rnd(rng, (3, 4, 2) if left else (3, 2, 4)))
    f = lambda b: P.triangular_solve(a, b, left_side=left, lower=True, transpose_a=trans)
    u = fl.asarray(rnd(rng, b.shape))
    (tu,) = fl.linear_transpose(f, b)(u)
    assert _pair(u, f(b)) == pytest.approx(_pair(tu, b), rel=1e-12)


def test_triangular_solve_is_not_transposable_in_a():
    b = fl.asarray(np.ones((3, 1)))
    with pytest.raises(TypeError, match="linear in b only"):
        fl.linear_transpose(
            lambda a: P.triangular_solve(a, b, left_side=True, lower=True), fl.eye(3, dtype=fl.float64)
        )(b)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_lu_derivatives(shape, dtype):
    a = rnd(_rng(), shape, dtype)
    check_all(lambda x: P.lu(x)[0], [a])
    _, tangents = fl.jvp(P.lu, (fl.asarray(a),), (fl.asarray(a),))
    assert not tangents[1].numpy().any() and tangents[1].dtype == np.int32


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_qr_derivatives(shape, dtype):
    a = rnd(_rng(), shape, dtype)
    check_all(lambda x: tuple(fl.linalg.qr(x)), [a])
    if shape[-2] <= shape[-1]:
        check_all(lambda x: tuple(fl.linalg.qr(x, mode="complete")), [a])


def test_qr_complete_tall_has_no_derivative():
    a = fl.asarray(rnd(_rng(), (5, 3)))
    with pytest.raises(MissingRuleError, match="qr: no derivative for mode='complete' with m > n"):
        fl.jvp(lambda x: fl.linalg.qr(x, mode="complete").Q, (a,), (a,))
    assert "full_matrices=True with m > n" in P.qr_p.no_rule["jvp"]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eigh_derivatives(dtype):
    a = spd(_rng(), 4, (2,), dtype) - 4 * np.eye(4)
    check_all(lambda x: (fl.linalg.eigh(x)[0], sign_fixed(fl.linalg.eigh(x)[1])), [a])
    check_all(lambda x: (P.eigh(x)[0], sign_fixed(P.eigh(x)[1])), [a])
    check_all(fl.linalg.eigvalsh, [a])


def test_eigh_degenerate_eigenvalues():
    """At repeated eigenvalues: finite derivatives, exact for eigenvalue sums and for the non-degenerate
    pairs."""
    a = fl.asarray(np.diag([1.0, 1.0, 3.0]))
    g = fl.grad(lambda x: fl.sum(fl.linalg.eigvalsh(x)))(a)
    np.testing.assert_allclose(g.numpy(), np.eye(3), atol=1e-14)
    g3 = fl.grad(lambda x: fl.linalg.eigvalsh(x)[2])(a)
    np.testing.assert_allclose(g3.numpy(), np.diag([0.0, 0.0, 1.0]), atol=1e-14)
    # the projector onto the top eigenvector is smooth here; so is its derivative
    proj = lambda x: fl.sum(fl.linalg.eigh(x)[1][:, 2] ** 2 * fl.asarray([1.0, 2.0, 3.0]))
    gp = fl.grad(proj)(a).numpy()
    assert np.all(np.isfinite(gp))
    check_grad(proj, a.numpy() + np.diag([0.0, 0.0, 0.0]))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_svd_derivatives(shape, dtype):
    a = rnd(_rng(), shape, dtype)

    def gauge_fixed(x):
        u, s, vh = fl.linalg.svd(x, full_matrices=False)
        top = u[..., :1, :]
        ph = fl.sign(top) if dtype == np.float64 else fl.conj(top) / fl.abs(top)
        return u * ph, s, vh * fl.conj(fl.matrix_transpose(ph))

    check_all(gauge_fixed, [a])
    check_all(fl.linalg.svdvals, [a])
    if shape[-1] == shape[-2]:
        check_jvp(lambda x: fl.linalg.svd(x, full_matrices=True).S, [a])
    else:
        with pytest.raises(MissingRuleError, match="svd: no derivative for full_matrices=True"):
            fl.jvp(lambda x: fl.linalg.svd(x).U, (fl.asarray(a),), (fl.asarray(a),))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_composition_derivatives(dtype):
    rng = _rng()
    a = well(rng, 4, (2,), dtype)
    b = rnd(rng, (2, 4, 3), dtype)
    check_all(fl.linalg.solve, [a, b])
    check_all(lambda a, b: fl.linalg.solve(a, b), [a[0], b[0, :, 0]])
    check_all(fl.linalg.inv, [a])
    check_all(fl.linalg.det, [a])
    check_all(lambda x: fl.linalg.slogdet(x).logabsdet, [a])
    check_all(lambda x: fl.linalg.matrix_power(x, -2), [a])
    check_all(lambda x: fl.linalg.pinv(x), [rnd(rng, (2, 5, 3), dtype)])
    check_all(lambda x: fl.linalg.solve_triangular(x, b[0], lower=True), [a[0]])


def test_det_gradient_is_cofactor_matrix():
    a = well(_rng(), 4)
    g = fl.grad(fl.linalg.det)(fl.asarray(a)).numpy()
    np.testing.assert_allclose(g, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10)


@pytest.mark.parametrize("ord", ["fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf])
def test_matrix_norm_gradients(ord):
    a = rnd(_rng(), (4, 3))
    check_grad(lambda x: fl.linalg.matrix_norm(x, ord=ord), a)


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, np.inf, -np.inf])
def test_vector_norm_gradients(ord):
    a = rnd(_rng(), (3, 4))
    check_grad(lambda x: fl.sum(fl.linalg.vector_norm(x, ord=ord, axis=1)), a)


@pytest.mark.filterwarnings("ignore:divide by zero encountered in power")
@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, np.inf, -np.inf, 0])
def test_vector_norm_subgradient_at_zero_is_zero(ord):
    for dtype in (np.float64, np.complex128):
        g = fl.grad(lambda x: fl.linalg.vector_norm(x, ord=ord), holomorphic=False)(fl.zeros(3, dtype=dtype))
        np.testing.assert_array_equal(g.numpy(), np.zeros(3))
    gf = fl.grad(lambda x: fl.linalg.matrix_norm(x))(fl.zeros((2, 2), dtype=fl.float64))
    np.testing.assert_array_equal(gf.numpy(), np.zeros((2, 2)))
    # second order at zero stays finite too
    h = fl.grad(lambda x: fl.sum(fl.grad(lambda y: fl.linalg.vector_norm(y, ord=2))(x)))(
        fl.zeros(3, dtype=fl.float64)
    )
    assert np.all(np.isfinite(h.numpy()))


def test_cross_trace_derivatives():
    rng = _rng()
    check_all(lambda x, y: fl.linalg.cross(x, y), [rnd(rng, (2, 3)), rnd(rng, (2, 3))])
    check_all(lambda x: fl.linalg.trace(x, offset=1), [rnd(rng, (2, 4, 4))])


# ------------------------------------------------------------------------------------------------------------
# second order


def _second_order(f, x, seed=4):
    """grad of <grad f, v> (reverse over reverse) and jvp of grad f (forward over reverse) against FD."""
    v = fl.asarray(rnd(_rng(seed), np.shape(x)))
    check_grad(lambda y: fl.sum(fl.grad(f)(y) * v), x, rtol=1e-5)
    check_jvp(fl.grad(f), [x], rtol=1e-5)


def test_second_order_cholesky():
    c = fl.asarray(rnd(_rng(5), (4, 4)))
    _second_order(lambda x: fl.sum(fl.linalg.cholesky(x) * c), spd(_rng(), 4))


def test_second_order_solve():
    b = fl.asarray(rnd(_rng(5), (4, 2)))
    _second_order(lambda x: fl.sum(fl.linalg.solve(x, b) ** 2), well(_rng(), 4))


def test_second_order_eigh():
    c = fl.asarray(rnd(_rng(5), (4,)))
    _second_order(lambda x: fl.sum(fl.linalg.eigvalsh(x) ** 3 * c), spd(_rng(), 4) - 4 * np.eye(4))
    _second_order(
        lambda x: fl.sum(sign_fixed(fl.linalg.eigh(x)[1]) * fl.asarray(np.arange(16.0).reshape(4, 4))),
        spd(_rng(), 4) - 4 * np.eye(4),
    )


def test_second_order_det():
    _second_order(fl.linalg.det, well(_rng(), 4))
    _second_order(lambda x: fl.linalg.slogdet(x).logabsdet, well(_rng(), 3))


def test_second_order_qr_svd_triangular():
    c = fl.asarray(rnd(_rng(5), (5, 3)))
    _second_order(lambda x: fl.sum(fl.linalg.qr(x).Q * c), rnd(_rng(), (5, 3)))
    _second_order(
        lambda x: fl.sum(fl.linalg.svdvals(x) ** 2 * fl.asarray([1.0, 2.0, 3.0])), rnd(_rng(), (5, 3))
    )
    b = fl.asarray(rnd(_rng(5), (4, 2)))
    _second_order(lambda x: fl.sum(fl.linalg.solve_triangular(x, b, lower=True) ** 2), well(_rng(), 4))


# ------------------------------------------------------------------------------------------------------------
# vmap against a Python loop


def _vmap_vs_loop(f, args, in_axes=0):
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    tens = [fl.asarray(a) for a in args]
    got = fl.vmap(f, in_axes=in_axes)(*tens)
    lanes = []
    for i in range(size):
        lane = [
            t if ax is None else fl.asarray(np.take(np.asarray(a), i, axis=ax))
            for t, a, ax in zip(tens, args, axes)
        ]
        lanes.append(f(*lane))
    got_l, ref_l = _leaves(got), None
    ref_l = [np.stack(parts) for parts in zip(*[_leaves(r) for r in lanes])]
    assert len(got_l) == len(ref_l)
    for g, r in zip(got_l, ref_l):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)


def test_vmap_primitives():
    rng = _rng()
    a = spd(rng, 4, (3, 2))
    g = rnd(rng, (3, 2, 5, 4))
    _vmap_vs_loop(fl.linalg.cholesky, [a])
    _vmap_vs_loop(fl.linalg.cholesky, [np.moveaxis(a, 0, 2)], in_axes=2)
    _vmap_vs_loop(lambda x: tuple(fl.linalg.lu(x)), [g])
    _vmap_vs_loop(lambda x: tuple(fl.linalg.qr(x)), [g])
    _vmap_vs_loop(lambda x: fl.linalg.eigvalsh(x), [a])
    _vmap_vs_loop(lambda x: tuple(fl.linalg.svd(x, full_matrices=False)), [g], in_axes=1)
    _vmap_vs_loop(fl.linalg.svdvals, [g])


@pytest.mark.parametrize("left", [True, False])
def test_vmap_triangular_solve(left):
    rng = _rng()
    a = rnd(rng, (3, 2, 4, 4)) + 3 * np.eye(4)
    b = rnd(rng, (3, 2, 4, 5) if left else (3, 2, 5, 4))
    f = lambda a, b: P.triangular_solve(a, b, left_side=left, lower=True, transpose_a=True)
    _vmap_vs_loop(f, [a, b])
    _vmap_vs_loop(f, [a[0], b], in_axes=(None, 0))  # shared matrix: lanes folded into one solve
    _vmap_vs_loop(f, [a, b[0]], in_axes=(0, None))
    _vmap_vs_loop(f, [a[0], np.moveaxis(b, 0, -1)], in_axes=(None, -1))


def test_vmap_compositions_and_derivatives():
    rng = _rng()
    a = well(rng, 3, (4,))
    b = rnd(rng, (4, 3))
    _vmap_vs_loop(fl.linalg.solve, [a, b])
    _vmap_vs_loop(fl.linalg.solve, [a[0], b], in_axes=(None, 0))
    _vmap_vs_loop(fl.linalg.det, [a])
    _vmap_vs_loop(fl.linalg.inv, [a])
    _vmap_vs_loop(fl.grad(fl.linalg.det), [a])
    _vmap_vs_loop(fl.grad(lambda x: fl.sum(fl.linalg.cholesky(x))), [spd(rng, 3, (4,))])
    _vmap_vs_loop(fl.grad(lambda x: fl.sum(fl.linalg.eigvalsh(x) ** 2)), [spd(rng, 3, (4,))])
    _vmap_vs_loop(lambda x: fl.linalg.vector_norm(x), [rnd(rng, (4, 5))])
    _vmap_vs_loop(lambda x: fl.linalg.matrix_norm(x, ord="nuc"), [rnd(rng, (4, 3, 2))])


def test_jaxpr_shows_the_composition():
    text = str(fl.make_jaxpr(fl.linalg.solve)(fl.eye(3), fl.ones(3)))
    assert "lu" in text and text.count("triangular_solve") == 2
