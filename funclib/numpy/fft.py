"""``funclib.numpy.fft``: NumPy's ``numpy.fft`` signatures (positional ``n``/``s``, ``axis``/``axes``,
``norm`` of None, "backward", "ortho" or "forward") over ``fl.fft``, differentiable and traceable.

Integer and float32 inputs give complex64 (the default complex dtype), float64 gives complex128.

>>> import funclib.numpy as fnp
>>> fnp.fft.fft(fnp.array([1.0, 0.0, 0.0, 0.0]), 2)
Tensor([1.+0.j, 1.+0.j], dtype=complex64)
"""

from __future__ import annotations

from ..core import Tensor
from ..ops import fft as F
from ._util import asarray, check_device, no_out, static_int

__all__ = [
    "fft",
    "ifft",
    "rfft",
    "irfft",
    "hfft",
    "ihfft",
    "fft2",
    "ifft2",
    "rfft2",
    "irfft2",
    "fftn",
    "ifftn",
    "rfftn",
    "irfftn",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]


def _norm(norm):
    return "backward" if norm is None else norm


def _n(n, op):
    return None if n is None else static_int(n, op, "n")


def _s(s, op):
    return None if s is None else tuple(static_int(v, op, "s") for v in s)


def _one(fn, op, a, n, axis, norm, out):
    no_out(out, f"fft.{op}")
    return fn(asarray(a, f"fft.{op}"), n=_n(n, op), axis=axis, norm=_norm(norm))


def _many(fn, op, a, s, axes, norm, out):
    no_out(out, f"fft.{op}")
    return fn(asarray(a, f"fft.{op}"), s=_s(s, op), axes=None if axes is None else tuple(axes), norm=_norm(norm))


def fft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """The 1-D discrete Fourier transform along ``axis``, of length ``n`` (cropping or zero-padding).

    >>> fnp.fft.fft(fnp.array([1.0, 1.0]))
    Tensor([2.+0.j, 0.+0.j], dtype=complex64)
    """
    return _one(F.fft, "fft", a, n, axis, norm, out)


def ifft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """The 1-D inverse DFT.

    >>> fnp.fft.ifft(fnp.array([4.0, 0.0, 0.0, 0.0]))
    Tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    """
    return _one(F.ifft, "ifft", a, n, axis, norm, out)


def rfft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """The DFT of real input: the ``n // 2 + 1`` non-negative frequencies.

    >>> fnp.fft.rfft(fnp.array([1.0, 1.0, 1.0, 1.0]))
    Tensor([4.+0.j, 0.+0.j, 0.+0.j], dtype=complex64)
    """
    return _one(F.rfft, "rfft", a, n, axis, norm, out)


def irfft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """The inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``).

    >>> fnp.fft.irfft(fnp.array([4.0, 0.0, 0.0]))
    Tensor([1., 1., 1., 1.], dtype=float32)
    """
    return _one(F.irfft, "irfft", a, n, axis, norm, out)


def hfft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """The DFT of a Hermitian-symmetric signal given by its first half (a real spectrum).

    >>> fnp.fft.hfft(fnp.array([1.0, 0.0]))
    Tensor([1., 1.], dtype=float32)
    """
    return _one(F.hfft, "hfft", a, n, axis, norm, out)


def ihfft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """The inverse of ``hfft``.

    >>> fnp.fft.ihfft(fnp.array([2.0, 2.0])).real
    Tensor([2., 0.], dtype=float32)
    """
    return _one(F.ihfft, "ihfft", a, n, axis, norm, out)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None) -> Tensor:
    """The 2-D DFT over ``axes`` (the last two), with lengths ``s``.

    >>> fnp.fft.fft2(fnp.ones((2, 2))).real
    Tensor([[4., 0.],
           [0., 0.]], dtype=float32)
    """
    return _many(F.fftn, "fft2", a, s, axes, norm, out)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None) -> Tensor:
    """The 2-D inverse DFT.

    >>> fnp.fft.ifft2(fnp.array([[4.0, 0.0], [0.0, 0.0]]))
    Tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]], dtype=complex64)
    """
    return _many(F.ifftn, "ifft2", a, s, axes, norm, out)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None) -> Tensor:
    """The 2-D DFT of real input.

    >>> fnp.fft.rfft2(fnp.ones((2, 4))).shape
    (2, 3)
    """
    return _many(F.rfftn, "rfft2", a, s, axes, norm, out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None) -> Tensor:
    """The inverse of ``rfft2``.

    >>> fnp.fft.irfft2(fnp.array([[8.0, 0.0, 0.0]]))
    Tensor([[2., 2., 2., 2.]], dtype=float32)
    """
    return _many(F.irfftn, "irfft2", a, s, axes, norm, out)


def fftn(a, s=None, axes=None, norm=None, out=None) -> Tensor:
    """The N-D DFT over ``axes`` (all, or the last ``len(s)``), with lengths ``s``.

    >>> fnp.fft.fftn(fnp.ones((2, 2)))
    Tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]], dtype=complex64)
    """
    return _many(F.fftn, "fftn", a, s, axes, norm, out)


def ifftn(a, s=None, axes=None, norm=None, out=None) -> Tensor:
    """The N-D inverse DFT.

    >>> fnp.fft.ifftn(fnp.array([[4.0, 0.0], [0.0, 0.0]]))
    Tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]], dtype=complex64)
    """
    return _many(F.ifftn, "ifftn", a, s, axes, norm, out)


def rfftn(a, s=None, axes=None, norm=None, out=None) -> Tensor:
    """The N-D DFT of real input (the last axis keeps ``s[-1] // 2 + 1`` frequencies).

    >>> fnp.fft.rfftn(fnp.ones((2, 2, 4))).shape
    (2, 2, 3)
    """
    return _many(F.rfftn, "rfftn", a, s, axes, norm, out)


def irfftn(a, s=None, axes=None, norm=None, out=None) -> Tensor:
    """The inverse of ``rfftn``.

    >>> fnp.fft.irfftn(fnp.array([[8.0, 0.0, 0.0]])).shape
    (1, 4)
    """
    return _many(F.irfftn, "irfftn", a, s, axes, norm, out)


def fftfreq(n, d=1.0, device=None) -> Tensor:
    """The sample frequencies of an ``n``-point DFT with spacing ``d`` (default float dtype).

    >>> fnp.fft.fftfreq(4)
    Tensor([ 0.  ,  0.25, -0.5 , -0.25], dtype=float32)
    """
    check_device(device, "fft.fftfreq")
    return F.fftfreq(static_int(n, "fft.fftfreq", "n"), d=d)


def rfftfreq(n, d=1.0, device=None) -> Tensor:
    """The sample frequencies of an ``n``-point real DFT.

    >>> fnp.fft.rfftfreq(4)
    Tensor([0.  , 0.25, 0.5 ], dtype=float32)
    """
    check_device(device, "fft.rfftfreq")
    return F.rfftfreq(static_int(n, "fft.rfftfreq", "n"), d=d)


def fftshift(x, axes=None) -> Tensor:
    """The zero frequency moved to the centre.

    >>> fnp.fft.fftshift(fnp.array([0, 1, 2, -2, -1]))
    Tensor([-2, -1,  0,  1,  2], dtype=int64)
    """
    return F.fftshift(asarray(x, "fft.fftshift"), axes=axes)


def ifftshift(x, axes=None) -> Tensor:
    """The inverse of ``fftshift``.

    >>> fnp.fft.ifftshift(fnp.array([-2, -1, 0, 1, 2]))
    Tensor([ 0,  1,  2, -2, -1], dtype=int64)
    """
    return F.ifftshift(asarray(x, "fft.ifftshift"), axes=axes)
