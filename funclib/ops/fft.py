"""The Array API ``fft`` extension (``fl.fft``): NumPy semantics over the single ``fft`` primitive.

Each transform moves its axes to the end, crops or zero-pads them to the requested lengths, applies the
primitive and moves them back; ``norm`` ("backward", "ortho", "forward") is a scale applied here. Complex64
stays complex64 and float32 gives complex64; float16/bfloat16 are computed in float32.

>>> x = fl.tensor([1.0, 2.0, 3.0, 4.0])
>>> fl.fft.irfft(fl.fft.rfft(x), n=4)
Tensor([1., 2., 3., 4.], dtype=float32)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import dtypes
from ..checks import check_choice, check_int, check_number
from ..core import Tensor, _wrap
from ..errors import DTypeError
from ..primitives import shape as S
from ..primitives._util import normalize_axis
from ..primitives.elementwise import _to_tensor, conj, convert, multiply
from ..primitives.fft import fft as _fft_prim
from .manipulation import roll

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _as_input(x, kind: str, op: str):
    """Convert to the dtype the primitive takes: complex for fft/ifft/irfft, float32/float64 for rfft."""
    x = _to_tensor(x, op)
    d = x.dtype
    if kind == "rfft":
        if d in dtypes.COMPLEX:
            raise DTypeError(
                f"{op}: expected a real floating-point input, got {d.name}; use fl.fft.fft for complex"
            )
        target = dtypes.float64 if d == dtypes.float64 else dtypes.float32
    elif d in dtypes.COMPLEX:
        return x
    else:
        target = dtypes.complex128 if d == dtypes.float64 else dtypes.complex64
    return x if d == target else convert(x, target)


def _scale(norm: str, inverse: bool, n: int) -> float | None:
    if norm == "backward" or n == 0:
        return None
    if norm == "ortho":
        return math.sqrt(n) if inverse else 1.0 / math.sqrt(n)
    return float(n) if inverse else 1.0 / n


def _resize(x, axis: int, n: int):
    """Crop or zero-pad ``axis`` of ``x`` to length ``n``."""
    have = x.shape[axis]
    if have == n:
        return x
    if have > n:
        hi = list(x.shape)
        hi[axis] = n
        return S.slice_(x, (0,) * x.ndim, hi)
    cfg = [(0, 0, 0)] * x.ndim
    cfg[axis] = (0, n - have, 0)
    return S.pad(x, _wrap(np.zeros((), x.dtype)), cfg)


def _transform(x, kind: str, s, axes, norm: str, op: str):
    check_choice(norm, op, "norm", _NORMS)
    x = _as_input(x, kind, op)
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(normalize_axis(a, x.ndim, op) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axes {axes}")
    if not axes:
        raise ValueError(f"{op}: needs at least one axis, got an input of shape {tuple(x.shape)}")
    if s is None:
        s = [x.shape[a] for a in axes]
        if kind == "irfft":
            s[-1] = 2 * (s[-1] - 1)
    s = tuple(int(n) for n in s)
    if len(s) != len(axes):
        raise ValueError(f"{op}: s={s} and axes={axes} must have the same length")
    if any(n < 1 for n in s):
        raise ValueError(f"{op}: transform lengths must be positive, got {s} (input shape {tuple(x.shape)})")
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    perm = rest + axes
    y = S.transpose(x, perm) if perm != tuple(range(x.ndim)) else x
    r = len(axes)
    for i, n in enumerate(s):
        if kind == "irfft" and i == r - 1:
            n = n // 2 + 1
        y = _resize(y, y.ndim - r + i, n)
    y = _fft_prim(y, kind, s)
    c = _scale(norm, kind in ("ifft", "irfft"), math.prod(s))
    if c is not None:
        y = multiply(y, c)
    inv = tuple(int(i) for i in np.argsort(perm))
    return S.transpose(y, inv) if perm != tuple(range(x.ndim)) else y


def _one(n, axis):
    return (None if n is None else (n,)), (axis,)


def fft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The one-dimensional discrete Fourier transform along ``axis``.

    Args:
      x: input (real inputs are converted to complex).
      n: length of the transform: ``x`` is cropped or zero-padded to it. Default: ``x.shape[axis]``.
      axis: the axis to transform. Default -1.
      norm: "backward" (no scaling, default), "ortho" (1/sqrt(n)) or "forward" (1/n).

    >>> fl.fft.fft(fl.tensor([1.0, 0.0, 0.0, 0.0]))
    Tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    """
    return _transform(x, "fft", *_one(n, axis), norm, "fft")


def ifft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The one-dimensional inverse DFT (1/n scaling with norm="backward"). Arguments as ``fft``.

    >>> fl.fft.ifft(fl.fft.fft(fl.tensor([1.0, 2.0, 3.0]))).real
    Tensor([1., 2., 3.], dtype=float32)
    """
    return _transform(x, "ifft", *_one(n, axis), norm, "ifft")


def fftn(
    x, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str = "backward"
) -> Tensor:
    """The n-dimensional DFT over ``axes`` (all axes, or the last ``len(s)``, by default) with lengths ``s``.

    >>> fl.fft.fftn(fl.ones((2, 2))).real
    Tensor([[4., 0.],
           [0., 0.]], dtype=float32)
    """
    return _transform(x, "fft", s, axes, norm, "fftn")


def ifftn(
    x, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str = "backward"
) -> Tensor:
    """The n-dimensional inverse DFT. Arguments as ``fftn``.

    >>> fl.fft.ifftn(fl.fft.fftn(fl.tensor([[1.0, 2.0], [3.0, 4.0]]))).real
    Tensor([[1., 2.],
            [3., 4.]], dtype=float32)
    """
    return _transform(x, "ifft", s, axes, norm, "ifftn")


def rfft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The DFT of a real input: the ``n // 2 + 1`` non-negative frequencies. Arguments as ``fft``.

    >>> fl.fft.rfft(fl.tensor([1.0, 1.0, 1.0, 1.0]))
    Tensor([4.+0.j, 0.+0.j, 0.+0.j], dtype=complex64)
    """
    return _transform(x, "rfft", *_one(n, axis), norm, "rfft")


def irfft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (x.shape[axis] - 1)``).

    The imaginary parts of the zero-frequency (and, for even ``n``, the Nyquist) bins are ignored.

    >>> fl.fft.irfft(fl.fft.rfft(fl.tensor([1.0, 2.0, 3.0, 4.0])), n=4)
    Tensor([1., 2., 3., 4.], dtype=float32)
    """
    return _transform(x, "irfft", *_one(n, axis), norm, "irfft")


def rfftn(
    x, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str = "backward"
) -> Tensor:
    """The n-dimensional DFT of a real input; the last axis keeps ``s[-1] // 2 + 1`` frequencies.

    >>> fl.fft.rfftn(fl.ones((2, 4))).shape
    (2, 3)
    """
    return _transform(x, "rfft", s, axes, norm, "rfftn")


def irfftn(
    x, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str = "backward"
) -> Tensor:
    """The inverse of ``rfftn``; ``s`` gives the output lengths (last: ``2 * (x.shape[axes[-1]] - 1)``).

    >>> x = fl.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0]])
    >>> fl.fft.irfftn(fl.fft.rfftn(x), s=(2, 4))
    Tensor([[1., 2., 3., 4.],
            [0., 1., 0., 1.]], dtype=float32)
    """
    return _transform(x, "irfft", s, axes, norm, "irfftn")


def hfft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The DFT of a Hermitian-symmetric signal given by its first half: a real spectrum of length ``n``.

    >>> fl.fft.hfft(fl.tensor([1.0, 0.0, 0.0]))
    Tensor([1., 1., 1., 1.], dtype=float32)
    """
    x = _as_input(x, "fft", "hfft")
    check_choice(norm, "hfft", "norm", _NORMS)
    return _transform(conj(x), "irfft", *_one(n, axis), _SWAP[norm], "hfft")


def ihfft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Tensor:
    """The inverse of ``hfft``: the half spectrum of a real input.

    >>> fl.fft.ihfft(fl.tensor([1.0, 1.0, 1.0, 1.0]))
    Tensor([1.-0.j, 0.-0.j, 0.-0.j], dtype=complex64)
    """
    check_choice(norm, "ihfft", "norm", _NORMS)
    return conj(_transform(x, "rfft", *_one(n, axis), _SWAP[norm], "ihfft"))


def _freq_dtype(dtype):
    d = dtypes.canonicalize(dtype) if dtype is not None else dtypes.float_default()
    if d not in dtypes.REAL_FLOATING:
        raise DTypeError(f"fftfreq: dtype must be a real floating-point dtype, got {d.name}")
    return d


def fftfreq(n: int, /, *, d: float = 1.0, dtype=None, device=None) -> Tensor:
    """Sample frequencies of an ``n``-point DFT with sample spacing ``d``: ``[0, 1, ..., -1] / (d * n)``.

    >>> fl.fft.fftfreq(4)
    Tensor([ 0.  ,  0.25, -0.5 , -0.25], dtype=float32)
    """
    if device not in (None, "cpu"):
        raise ValueError(f"fftfreq: unknown device {device!r}; funclib tensors live on 'cpu'")
    n = check_int(n, "fftfreq", "n", min=1)
    d = check_number(d, "fftfreq", "d")
    return _wrap(np.fft.fftfreq(n, d=d).astype(_freq_dtype(dtype)))


def rfftfreq(n: int, /, *, d: float = 1.0, dtype=None, device=None) -> Tensor:
    """Sample frequencies of an ``n``-point real DFT: ``[0, 1, ..., n // 2] / (d * n)``.

    >>> fl.fft.rfftfreq(8, d=0.5)
    Tensor([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    if device not in (None, "cpu"):
        raise ValueError(f"rfftfreq: unknown device {device!r}; funclib tensors live on 'cpu'")
    n = check_int(n, "rfftfreq", "n", min=1)
    d = check_number(d, "rfftfreq", "d")
    return _wrap(np.fft.rfftfreq(n, d=d).astype(_freq_dtype(dtype)))


def _shift(x, axes, sign, op):
    x = _to_tensor(x, op)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    axes = tuple(normalize_axis(a, x.ndim, op) for a in axes)
    if not axes:
        return x
    return roll(x, tuple(sign * (x.shape[a] // 2) for a in axes), axis=axes)


def fftshift(x, /, *, axes: int | Sequence[int] | None = None) -> Tensor:
    """Move the zero frequency to the centre (roll each axis by half its length).

    >>> fl.fft.fftshift(fl.fft.fftfreq(4))
    Tensor([-0.5 , -0.25,  0.  ,  0.25], dtype=float32)
    """
    return _shift(x, axes, 1, "fftshift")


def ifftshift(x, /, *, axes: int | Sequence[int] | None = None) -> Tensor:
    """The inverse of ``fftshift``.

    >>> fl.fft.ifftshift(fl.fft.fftshift(fl.arange(5)))
    Tensor([0, 1, 2, 3, 4], dtype=int64)
    """
    return _shift(x, axes, -1, "ifftshift")


__all__ = [
    "fft",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfftn",
    "rfft",
    "rfftfreq",
    "rfftn",
]
