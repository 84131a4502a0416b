"""``fft``: the one Fourier-transform primitive, over the trailing ``len(fft_lengths)`` axes.

``fft_type`` is ``"fft"``, ``"ifft"`` (complex to complex), ``"rfft"`` (real to half-spectrum complex) or
``"irfft"`` (half spectrum to real of lengths ``fft_lengths``). The scaling is NumPy's ``norm="backward"``
(1/N on the inverse transforms); ``funclib.ops.fft`` handles the other norms, arbitrary axes and
cropping/zero-padding.

It is linear. The transposes use the bilinear pairing ``Re(sum(ct * y))`` of ``conj``/``real`` in
elementwise.py: the DFT matrix is symmetric, so fft and ifft are their own transposes; rfft = slice . fft .
(real -> complex), whose transpose is ``real(fft(zero-pad(ct)))``; irfft sums each half-spectrum bin twice
except DC and Nyquist, so its transpose is ``conj(rfft(ct))`` weighted by (1, 2, ..., 2, 1) / N.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Zero, _state, _wrap, aval_of, concrete_or_none
from ..errors import DTypeError, ShapeError
from .elementwise import conj, multiply, real
from .shape import bdim_to_front, pad

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")
_REAL = (dtypes.float32, dtypes.float64)
_COMPLEX = (dtypes.complex64, dtypes.complex128)

fft_p = Primitive("fft", linear=True)
fft_p.family = "fft"


def _np_fft(x, fft_type, fft_lengths):
    axes = tuple(range(-len(fft_lengths), 0))
    if fft_type == "fft":
        return np.fft.fftn(x, axes=axes)
    if fft_type == "ifft":
        return np.fft.ifftn(x, axes=axes)
    if fft_type == "rfft":
        return np.fft.rfftn(x, axes=axes)
    return np.fft.irfftn(x, s=fft_lengths, axes=axes)


@fft_p.def_impl
def _fft_impl(x, *, fft_type, fft_lengths):
    x = np.asarray(x)
    out_dtype = dtypes.real_dtype(x.dtype) if fft_type == "irfft" else dtypes.complex_dtype(x.dtype)
    return np.asarray(_np_fft(x, fft_type, fft_lengths)).astype(out_dtype, copy=False)


@fft_p.def_abstract_eval
def _fft_abstract(x, *, fft_type, fft_lengths):
    if fft_type not in FFT_TYPES:
        raise ValueError(f"fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    want = _REAL if fft_type == "rfft" else _COMPLEX
    if x.dtype not in want:
        raise DTypeError(
            f"fft: fft_type={fft_type!r} needs a {' or '.join(d.name for d in want)} input, got "
            f"{x.dtype.name}; convert it first (fl.fft.* does this for you)"
        )
    r = len(fft_lengths)
    if r == 0 or r > x.ndim or any(n < 1 for n in fft_lengths):
        raise ShapeError(
            f"fft: fft_lengths {fft_lengths} must be 1 to {x.ndim} positive lengths for an input of shape "
            f"{x.shape}"
        )
    expected = tuple(fft_lengths)
    if fft_type == "irfft":
        expected = expected[:-1] + (expected[-1] // 2 + 1,)
    if x.shape[-r:] != expected:
        raise ShapeError(
            f"fft: fft_type={fft_type!r} with fft_lengths={fft_lengths} needs trailing axes {expected}, got "
            f"input shape {x.shape}; crop or zero-pad first"
        )
    shape = x.shape
    if fft_type == "rfft":
        shape = shape[:-1] + (shape[-1] // 2 + 1,)
    elif fft_type == "irfft":
        shape = shape[:-1] + (fft_lengths[-1],)
    dtype = dtypes.real_dtype(x.dtype) if fft_type == "irfft" else dtypes.complex_dtype(x.dtype)
    return ShapedArray(shape, dtype)


@fft_p.def_jvp
def _fft_jvp(primals, tangents, **params):
    y = fft_p.bind(primals[0], **params)
    t = tangents[0]
    if type(t) is Zero:
        return y, Zero(aval_of(y))
    return y, fft_p.bind(t, **params)


@fft_p.def_transpose
def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type in ("fft", "ifft"):
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    n = fft_lengths[-1]
    if fft_type == "rfft":
        cfg = ((0, 0, 0),) * (ct.ndim - 1) + ((0, n - ct.shape[-1], 0),)
        full = pad(ct, _wrap(np.zeros((), ct.dtype)), cfg)
        return [real(fft_p.bind(full, fft_type="fft", fft_lengths=fft_lengths))]
    spec = fft_p.bind(ct, fft_type="rfft", fft_lengths=fft_lengths)
    weight = np.full(n // 2 + 1, 2.0)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    weight /= math.prod(fft_lengths)
    w = _wrap(weight.astype(spec.dtype))
    c = concrete_or_none(spec)
    if c is not None and c.device != "cpu":  # the rule's constant follows the cotangent's device
        w = w.to_device(c.device)
    return [conj(multiply(spec, w))]


@fft_p.def_vmap
def _fft_vmap(args, dims, **params):
    return fft_p.bind(bdim_to_front(args[0], dims[0]), **params), 0


def fft(x, fft_type: str, fft_lengths):
    """The ``fft_type`` transform over the trailing ``len(fft_lengths)`` axes (NumPy's "backward" scaling)."""
    params = {"fft_type": str(fft_type), "fft_lengths": tuple(int(n) for n in fft_lengths)}
    if _state.trace is None:  # eager evaluation skips abstract_eval: check shapes and dtypes here
        _fft_abstract(aval_of(x), **params)
    return fft_p.bind(x, **params)
