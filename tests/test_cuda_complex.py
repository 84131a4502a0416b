"""Complex numbers on a CUDA device: every registry row with a complex dtype, run on the (simulated) device against
the CPU, and ``fft`` in all its variants against NumPy.

A row in ``UNSUPPORTED_COMPLEX`` must raise ``UnsupportedOnDeviceError`` naming its primitive (one that starts
running fails the test, so the list only shrinks)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from op_table import ROWS, as_tensors, bind, draw_case, tolerance

import funclib as fl
from funclib import dtypes as D
from funclib.core import DeviceTensor
from funclib.errors import UnsupportedOnDeviceError

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="pip install funclib[cuda]"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning"),
]

UNSUPPORTED_COMPLEX = {
}
COMPLEX_ROWS = [r for r in ROWS if D.complex64 in r.dtypes]


@pytest.mark.parametrize("dtype", [D.complex64, D.complex128], ids=["complex64", "complex128"])
@pytest.mark.parametrize("row", COMPLEX_ROWS, ids=[r.name for r in COMPLEX_ROWS])
@settings(max_examples=1, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_complex_rows_on_the_device_match_the_cpu(row, dtype, data):
    if dtype not in row.dtypes:
        pytest.skip(f"{row.name} has no {dtype.name} case")
    cfg, args = draw_case(data.draw, row, dtype)
    xs = as_tensors(args)
    want = fl.tree.leaves(row.apply(cfg, *xs))
    on_device = [x.to_device("cuda") for x in xs]
    if row.name in UNSUPPORTED_COMPLEX:
        with pytest.raises(UnsupportedOnDeviceError, match=f"'{row.name}'"):
            row.apply(cfg, *on_device)
        return
    got = fl.tree.leaves(row.apply(cfg, *on_device))
    assert len(got) == len(want)
    if row.check is not None:
        row.check(cfg, args, [g.cpu() for g in got])
        return
    rtol, atol = tolerance(dtype, 4 * row.tol)
    for g, w in zip(got, want):
        assert isinstance(g, DeviceTensor) and g.device == "cuda:0", f"{row.name}: result on {g.device}"
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_allclose(g.to_device("cpu").numpy(), w.numpy(), rtol=rtol, atol=atol, err_msg=row.name)


# on and beside every branch cut, at 0, +-1, +-i, at tiny and huge magnitudes (up to where |z| overflows), both
# signs of zero, infinities and NaN
_PARTS = (0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 1 + 2**-23, 1 - 2**-24, 1e-30, -1e-6, 3e3, 1e10, -1e30, 3e38, np.inf,
          -np.inf, np.nan)
EDGE_POINTS = [complex(a, b) for a in _PARTS for b in _PARTS]


def _assert_parts_match(got, want, exact, dtype, what):
    """Each part: NaN where NumPy's is, equal (sign included) where NumPy's is infinite or zero, else within 4 eps
    of the exact value (float64 math) with NumPy's sign."""
    eps = np.finfo(dtype).eps
    for part in ("real", "imag"):
        g, w, e = (getattr(a, part) for a in (got, want, exact))
        nan = np.isnan(w)
        assert np.array_equal(np.isnan(g), nan), (what, part, np.flatnonzero(np.isnan(g) != nan))
        g, w, e = g[~nan], w[~nan], e[~nan]
        assert np.array_equal(np.signbit(g), np.signbit(w)), (what, part, np.flatnonzero(np.signbit(g) !=
                                                                                          np.signbit(w)))
        special = np.isinf(w) | (w == 0)
        assert np.array_equal(g[special], w[special]), (what, part)
        g, e = g[~special], e[~special]
        err = np.abs(g - e) / np.maximum(np.abs(e), np.finfo(dtype).tiny)  # subnormals: absolute
        assert err.size == 0 or err.max() <= 4 * eps, (what, part, err.max() / eps)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_inverse_trig_and_sqrt_on_the_device_follow_numpy_branch_cuts_and_special_values(dtype):
    v = np.array(EDGE_POINTS, dtype)
    x = fl.asarray(v).cuda()
    for name, ref in (("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan), ("asinh", np.arcsinh),
                      ("acosh", np.arccosh), ("atanh", np.arctanh), ("sqrt", np.sqrt)):
        got = getattr(fl, name)(x).cpu().numpy()
        want = ref(v)
        assert got.dtype == want.dtype
        _assert_parts_match(got, want, ref(v.astype(np.complex128)), dtype, name)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_pow_on_the_device_matches_numpy(dtype):
    bases = [0, 1, -2.5 + 1j, 0.7j, 1.1 + 0.1j, -1, 1e-3 + 1j, complex(np.inf, 0), complex(0, np.inf),
             complex(np.nan, 0), 3e38 + 3e38j]
    exps = [0, 1, 2, 3, -1, -3, 60, 99, 0.5, 1j, -2 + 0.5j, 1.7 - 0.3j, 1e10, complex(np.nan, 0),
            complex(np.inf, 0)]
    x = np.array([a for a in bases for _ in exps], dtype)
    y = np.array([b for _ in bases for b in exps], dtype)
    got = fl.pow(fl.asarray(x).cuda(), fl.asarray(y).cuda()).cpu().numpy()
    want = x ** y
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        assert np.array_equal(np.isnan(g), np.isnan(w)), (part, x[np.isnan(g) != np.isnan(w)])
        inf = np.isinf(w)
        assert np.array_equal(g[inf], w[inf]), part
        ok = ~np.isnan(w) & ~inf
        # large exponents magnify the base's rounding: measured against the result's modulus
        scale = np.maximum(np.nan_to_num(np.abs(want[ok]), nan=0.0), np.abs(w[ok]))
        err = np.abs(g[ok] - w[ok]) / np.maximum(scale, np.finfo(dtype).tiny)
        assert err.max() <= 64 * np.finfo(dtype).eps, (part, x[ok][np.argmax(err)], y[ok][np.argmax(err)], err.max())


@pytest.mark.parametrize("name", ["scatter_add", "scatter", "scatter_mul"])
def test_complex_scatters_with_repeated_indices_fold_in_order_as_numpy(name):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 2)) + 1j * rng.standard_normal((5, 2))).astype(np.complex64)
    idx = np.array([[1], [3], [1], [-1], [1], [3]], np.int64)
    upd = (rng.standard_normal((6, 2)) + 1j * rng.standard_normal((6, 2))).astype(np.complex64)
    got = [bind(name, fl.asarray(x).cuda(), fl.asarray(idx).cuda(), fl.asarray(upd).cuda(), axes=(0,)).cpu().numpy()
           for _ in range(2)]
    want = x.copy()
    if name == "scatter":
        for p, i in enumerate(idx[:, 0]):  # the last write wins
            want[i] = upd[p]
    else:
        (np.add if name == "scatter_add" else np.multiply).at(want, idx[:, 0], upd)
    np.testing.assert_array_equal(got[0], got[1])  # no atomics: the same bits every time
    np.testing.assert_allclose(got[0], want, rtol=1e-6)


def _cnormal(rng, *shape):
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def test_complex_factorizations_match_lapack_in_every_shape():
    from funclib.core import PRIMITIVES

    rng = np.random.default_rng(5)
    for shape in ((3, 3), (2, 4, 3), (3, 4), (1, 2)):
        a = _cnormal(rng, *shape)
        g = fl.asarray(a).cuda()
        for full in (False, True):
            (q, r), (cq, cr) = fl.linalg.qr(g, mode="complete" if full else "reduced"), np.linalg.qr(
                a, mode="complete" if full else "reduced")
            np.testing.assert_allclose(q.cpu().numpy(), cq, atol=1e-12)  # LAPACK's phases, not just any QR
            np.testing.assert_allclose(r.cpu().numpy(), cr, atol=1e-12)
        lu, piv, perm = (o.cpu().numpy() for o in fl.tree.leaves(PRIMITIVES["lu"].bind(g)))
        clu, cpiv, cperm = (o.numpy() for o in fl.tree.leaves(PRIMITIVES["lu"].bind(fl.asarray(a))))
        np.testing.assert_allclose(lu, clu, atol=1e-12)
        np.testing.assert_array_equal(piv, cpiv)
        np.testing.assert_array_equal(perm, cperm)
    # the |re| + |im| pivot LAPACK takes, where the largest modulus would pick another row
    a = np.array([[0.9 + 0.9j, 1.0], [1.25 + 0.0j, 2.0]])
    _, piv, _ = PRIMITIVES["lu"].bind(fl.asarray(a).cuda())
    np.testing.assert_array_equal(piv.cpu().numpy(), [0, 1])
    s = _cnormal(rng, 2, 4, 4)
    h = s + np.conj(np.swapaxes(s, -1, -2)) + np.diag([0.0, 3, 6, 9])
    hl = np.tril(h) + np.triu(_cnormal(rng, 4, 4), 1)  # the primitive reads the lower triangle only
    w, v = (o.cpu().numpy() for o in PRIMITIVES["eigh"].bind(fl.asarray(hl).cuda()))
    assert w.dtype == np.float64 and v.dtype == np.complex128
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), atol=1e-12)
    np.testing.assert_allclose(h @ v, v * w[..., None, :], atol=1e-11)
    np.testing.assert_allclose(np.conj(np.swapaxes(v, -1, -2)) @ v, np.broadcast_to(np.eye(4), h.shape), atol=1e-12)
    pd = h @ np.conj(np.swapaxes(h, -1, -2)) + np.eye(4)
    pl = np.tril(pd) + np.triu(_cnormal(rng, 4, 4), 1)
    np.testing.assert_allclose(PRIMITIVES["cholesky"].bind(fl.asarray(pl).cuda()).cpu().numpy(),
                               np.linalg.cholesky(pd), atol=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match="cholesky: .*not positive definite"):
        fl.linalg.cholesky(fl.asarray(-np.eye(3, dtype=np.complex64)).cuda())


def test_complex_triangular_solves_match_the_cpu_in_every_variant():
    from funclib.core import PRIMITIVES

    rng = np.random.default_rng(3)
    a = fl.asarray(_cnormal(rng, 2, 3, 3) + 4 * np.eye(3))
    b = fl.asarray(_cnormal(rng, 2, 3, 2))
    for left, lower, trans, conj, unit in [(L, lo, t, c, u) for L in (True, False) for lo in (True, False)
                                           for t in (False, True) for c in (False, True) for u in (False, True)]:
        bb = b if left else fl.matrix_transpose(b)
        kw = dict(left_side=left, lower=lower, transpose_a=trans, conjugate_a=conj, unit_diagonal=unit)
        want = PRIMITIVES["triangular_solve"].bind(a, bb, **kw)
        got = PRIMITIVES["triangular_solve"].bind(a.cuda(), bb.cuda(), **kw)
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-10, atol=1e-12, err_msg=str(kw))


FFT_CASES = [
    # (function, input shape, keyword arguments)
    ("fft", (3, 8), {}), ("fft", (2, 7), {"norm": "ortho"}), ("ifft", (2, 6), {}), ("ifft", (5,), {"norm": "forward"}),
    ("rfft", (2, 9), {}), ("rfft", (10,), {"norm": "ortho"}), ("irfft", (2, 5), {}), ("irfft", (2, 5), {"n": 9}),
    ("fftn", (2, 3, 4), {}), ("ifftn", (3, 5), {"axes": (0, 1)}), ("rfftn", (2, 4, 6), {}), ("irfftn", (3, 4), {}),
    ("irfftn", (3, 4), {"s": (3, 7), "axes": (0, 1)}), ("fft", (4, 6), {"axis": 0}), ("hfft", (2, 5), {}),
]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name,shape,kw", FFT_CASES, ids=[f"{c[0]}{c[1]}{c[2]}" for c in FFT_CASES])
def test_fft_on_the_device_matches_numpy(name, shape, kw, dtype):
    rng = np.random.default_rng(abs(hash((name, shape))) % 2**32)
    a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if name.startswith("rfft"):
        a = a.real.copy()
    got = getattr(fl.fft, name)(fl.asarray(a).cuda(), **kw)
    assert isinstance(got, DeviceTensor) and got.device == "cuda:0"
    want = getattr(np.fft, name)(a, **kw)
    cpu = getattr(fl.fft, name)(fl.asarray(a), **kw)
    assert got.dtype == cpu.dtype
    eps = np.finfo(dtype).eps
    scale = np.abs(want).max()
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=0, atol=50 * eps * max(scale, 1.0))


def test_fft_on_the_device_under_jit_and_grad_matches_the_cpu():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 6)).astype(np.float32)

    def loss(x):
        spec = fl.fft.rfft(x)
        return fl.sum(fl.real(spec * fl.conj(spec))) + fl.sum(fl.fft.irfft(spec * spec, n=6))

    for f in (loss, fl.jit(loss)):
        g = fl.grad(f)(fl.asarray(a).cuda())
        want = fl.grad(loss)(fl.asarray(a))
        assert g.device == "cuda:0"
        np.testing.assert_allclose(g.cpu().numpy(), want.numpy(), rtol=1e-4, atol=1e-4)
