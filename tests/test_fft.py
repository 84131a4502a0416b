"""fl.fft: results against numpy.fft, derivatives against central finite differences (float64), the transpose
identity <u, J v> = <J^T u, v> for every transform type, and vmap against a loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funclib as fl
from funclib.errors import DTypeError, ShapeError
from funclib.primitives import fft as P


def rnd(rng, shape, dtype=np.float64):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _pair(a, b):
    """The bilinear pairing Re(sum(a * b)) under which funclib's transposes are defined."""
    return float(np.real(np.sum(np.asarray(a) * np.asarray(b))))


NORMS = ["backward", "ortho", "forward"]

# (name, input kind, keyword arguments)
CASES = [
    ("fft", "c", {}),
    ("fft", "c", {"n": 5}),
    ("fft", "c", {"n": 11, "axis": 0}),
    ("ifft", "c", {}),
    ("ifft", "c", {"n": 6, "axis": 1}),
    ("rfft", "r", {}),
    ("rfft", "r", {"n": 7}),
    ("rfft", "r", {"n": 12, "axis": 0}),
    ("irfft", "c", {}),
    ("irfft", "c", {"n": 9}),
    ("irfft", "c", {"n": 4, "axis": 0}),
    ("hfft", "c", {}),
    ("hfft", "c", {"n": 7}),
    ("ihfft", "r", {}),
    ("ihfft", "r", {"n": 5}),
    ("fftn", "c", {}),
    ("fftn", "c", {"s": (3, 10), "axes": (0, 2)}),
    ("ifftn", "c", {"axes": (1,)}),
    ("ifftn", "c", {"s": (2, 4), "axes": (-1, 0)}),
    ("rfftn", "r", {}),
    ("rfftn", "r", {"s": (6, 5), "axes": (1, 2)}),
    ("rfftn", "r", {"axes": (2, 0)}),
    ("irfftn", "c", {}),
    ("irfftn", "c", {"s": (4, 7), "axes": (0, 2)}),
    ("irfftn", "c", {"axes": (1,)}),
]
SHAPE = (3, 4, 8)


def _input(kind, dtype_real=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return rnd(rng, SHAPE, dtype_real if kind == "r" else np.result_type(dtype_real, np.complex64))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name,kind,kw", CASES)
def test_matches_numpy(name, kind, kw, norm):
    x = _input(kind)
    got = getattr(fl.fft, name)(fl.asarray(x), norm=norm, **kw).numpy()
    ref = getattr(np.fft, name)(x, norm=norm, **kw)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,kind,kw", CASES[::3])
def test_single_precision_stays_single(name, kind, kw):
    x = _input(kind, np.float32)
    got = getattr(fl.fft, name)(fl.asarray(x), **kw)
    ref = getattr(np.fft, name)(x.astype(np.complex128 if kind == "c" else np.float64), **kw)
    assert got.dtype == (np.float32 if ref.dtype == np.float64 else np.complex64)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_input_dtypes():
    x = np.arange(8.0)
    assert fl.fft.fft(fl.asarray(x.astype(np.float32))).dtype == np.complex64
    assert fl.fft.fft(fl.asarray(x)).dtype == np.complex128
    assert fl.fft.fft(fl.asarray(x.astype(np.int64))).dtype == np.complex64
    h = fl.fft.rfft(fl.asarray(x).astype(fl.float16))
    assert h.dtype == np.complex64
    np.testing.assert_allclose(h.numpy(), np.fft.rfft(x), rtol=1e-3)
    assert fl.fft.irfft(fl.asarray(np.fft.rfft(x).astype(np.complex64))).dtype == np.float32
    with pytest.raises(DTypeError, match="rfft: expected a real floating-point input, got complex64"):
        fl.fft.rfft(fl.asarray(x.astype(np.complex64)))


def test_errors():
    x = fl.asarray(np.ones((2, 4), np.complex64))
    with pytest.raises(ValueError, match="norm must be one of"):
        fl.fft.fft(x, norm="both")
    with pytest.raises(ValueError, match="fft: transform lengths must be positive"):
        fl.fft.fft(x, n=0)
    with pytest.raises(ValueError, match="repeated axes"):
        fl.fft.fftn(x, axes=(0, 0))
    with pytest.raises(ShapeError, match="needs trailing axes \\(3,\\)"):
        P.fft(fl.asarray(np.ones((2, 4), np.complex64)), "irfft", (4,))
    with pytest.raises(DTypeError, match="fft_type='fft' needs a complex64 or complex128 input"):
        P.fft(fl.asarray(np.ones(4, np.float32)), "fft", (4,))


def test_freqs_and_shifts():
    for n in (1, 4, 7):
        np.testing.assert_allclose(fl.fft.fftfreq(n, d=0.3).numpy(), np.fft.fftfreq(n, d=0.3), rtol=1e-6)
        np.testing.assert_allclose(fl.fft.rfftfreq(n, d=0.3).numpy(), np.fft.rfftfreq(n, d=0.3), rtol=1e-6)
    assert fl.fft.fftfreq(4).dtype == np.float32 and fl.fft.fftfreq(4, dtype=fl.float64).dtype == np.float64
    x = np.arange(30.0).reshape(5, 6)
    for axes in (None, 0, (1,), (0, 1)):
        np.testing.assert_array_equal(
            fl.fft.fftshift(fl.asarray(x), axes=axes).numpy(), np.fft.fftshift(x, axes)
        )
        np.testing.assert_array_equal(
            fl.fft.ifftshift(fl.asarray(x), axes=axes).numpy(), np.fft.ifftshift(x, axes)
        )


def test_round_trips():
    rng = np.random.default_rng(1)
    x = fl.asarray(rnd(rng, (3, 9)))
    for norm in NORMS:
        np.testing.assert_allclose(
            fl.fft.irfft(fl.fft.rfft(x, norm=norm), n=9, norm=norm).numpy(), x.numpy(), atol=1e-12
        )
        np.testing.assert_allclose(
            fl.fft.ifftn(fl.fft.fftn(x, norm=norm), norm=norm).numpy(), x.numpy(), atol=1e-12
        )


@given(n=st.integers(1, 12), m=st.integers(1, 12), kind=st.sampled_from(["fft", "ifft", "rfft", "irfft"]))
def test_lengths_property(n, m, kind):
    rng = np.random.default_rng(n * 13 + m)
    x = rnd(rng, (2, n), np.float64 if kind == "rfft" else np.complex128)
    got = getattr(fl.fft, kind)(fl.asarray(x), n=m).numpy()
    np.testing.assert_allclose(got, getattr(np.fft, kind)(x, n=m), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------------------------------
# derivatives


def _fd_check(f, x, eps=1e-6):
    rng = np.random.default_rng(3)
    t = rnd(rng, x.shape, x.dtype)
    _, tout = fl.jvp(f, (fl.asarray(x),), (fl.asarray(t),))
    fd = (f(fl.asarray(x + eps * t)).numpy() - f(fl.asarray(x - eps * t)).numpy()) / (2 * eps)
    np.testing.assert_allclose(tout.numpy(), fd, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(fd).max()))


def _vjp_check(f, x):
    rng = np.random.default_rng(4)
    x = fl.asarray(x)
    t = fl.asarray(rnd(rng, x.shape, x.dtype))
    y, tout = fl.jvp(f, (x,), (t,))
    u = fl.asarray(rnd(rng, y.shape, y.dtype))
    _, f_vjp = fl.vjp(f, x)
    (ct,) = f_vjp(u)
    assert ct.dtype == x.dtype and ct.shape == x.shape
    assert _pair(u, tout) == pytest.approx(_pair(ct, t), rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name,kind,kw", CASES)
def test_derivatives(name, kind, kw, norm):
    x = _input(kind)
    f = lambda v: getattr(fl.fft, name)(v, norm=norm, **kw)
    _fd_check(f, x)
    _vjp_check(f, x)


@pytest.mark.parametrize("fft_type", ["fft", "ifft", "rfft", "irfft"])
@pytest.mark.parametrize("lengths", [(8,), (7,), (1,), (3, 6), (4, 2, 5)])
def test_primitive_transpose_identity(fft_type, lengths):
    """<u, F x> == <F^T u, x> for the primitive itself, including the Hermitian weights of irfft."""
    rng = np.random.default_rng(5)
    shape = (2,) + lengths
    if fft_type == "irfft":
        shape = shape[:-1] + (lengths[-1] // 2 + 1,)
    x = fl.asarray(rnd(rng, shape, np.float64 if fft_type == "rfft" else np.complex128))
    f = lambda v: P.fft(v, fft_type, lengths)
    y = f(x)
    u = fl.asarray(rnd(rng, y.shape, y.dtype))
    (ft_u,) = fl.linear_transpose(f, x)(u)
    assert ft_u.dtype == x.dtype and ft_u.shape == x.shape
    assert _pair(u, y) == pytest.approx(_pair(ft_u, x), rel=1e-10, abs=1e-10)


def test_grad_of_real_losses():
    rng = np.random.default_rng(6)
    x = rnd(rng, (10,))
    # Parseval: sum |fft(x)|^2 = n sum x^2, so the gradient is 2 n x
    g = fl.grad(lambda v: fl.sum(fl.abs(fl.fft.fft(v)) ** 2))(fl.asarray(x))
    np.testing.assert_allclose(g.numpy(), 2 * 10 * x, rtol=1e-10)
    # a low-pass filter: irfft(mask * rfft(x)) is a symmetric projection, so grad(<c, P x>) = P c
    c = rnd(rng, (10,))
    mask = np.zeros(6)
    mask[:3] = 1

    def lowpass(v):
        return fl.fft.irfft(fl.fft.rfft(v) * fl.asarray(mask.astype(np.complex128)), n=10)

    g = fl.grad(lambda v: fl.sum(lowpass(v) * fl.asarray(c)))(fl.asarray(x))
    np.testing.assert_allclose(g.numpy(), lowpass(fl.asarray(c)).numpy(), atol=1e-12)
    # second order: the Hessian of sum(irfft(rfft(v) ** 2)) applied to a direction, against finite differences
    f = lambda v: fl.sum(fl.fft.irfft(fl.fft.rfft(v) ** 2, n=10) * fl.asarray(c))
    t = rnd(rng, (10,))
    gf = fl.grad(f)
    _, hv = fl.jvp(gf, (fl.asarray(x),), (fl.asarray(t),))
    fd = (gf(fl.asarray(x + 1e-6 * t)).numpy() - gf(fl.asarray(x - 1e-6 * t)).numpy()) / 2e-6
    np.testing.assert_allclose(hv.numpy(), fd, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------------------------------------------------
# vmap


@pytest.mark.parametrize("name,kind,kw", CASES[::2])
def test_vmap_matches_loop(name, kind, kw):
    x = _input(kind)
    f = lambda v: getattr(fl.fft, name)(v, norm="ortho", **{k: v2 for k, v2 in kw.items() if k != "axes"})
    for in_axis in (0, 2):
        got = fl.vmap(f, in_axes=in_axis)(fl.asarray(x)).numpy()
        ref = np.stack([f(fl.asarray(np.take(x, i, axis=in_axis))).numpy() for i in range(x.shape[in_axis])])
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_vmap_of_grad():
    x = rnd(np.random.default_rng(7), (4, 6))
    g = fl.vmap(fl.grad(lambda v: fl.sum(fl.abs(fl.fft.rfft(v)) ** 2)))(fl.asarray(x)).numpy()
    ref = np.stack([fl.grad(lambda v: fl.sum(fl.abs(fl.fft.rfft(v)) ** 2))(fl.asarray(r)).numpy() for r in x])
    np.testing.assert_allclose(g, ref, rtol=1e-12)
