"""Quantization: integer and float8 values with scales, fake quantization for training, scaled matrix products.

``quantize(x, dtype, axis=..., group_size=..., symmetric=...)`` returns a ``Quantized`` pytree (values, scale and,
for affine schemes, zero point) and ``dequantize`` maps it back: ``(values - zero_point) * scale``.

Granularity (where one scale applies):

- per tensor: ``axis=None, group_size=None``; the scale has shape ``()``.
- per channel: ``axis=a``: one scale per index of axis ``a`` (the statistics run over every other axis); the scale
  keeps ``x``'s rank with size 1 elsewhere, so it broadcasts against ``x``. For a Linear weight ``(out, in)``,
  ``axis=0`` gives one scale per output channel.
- per group: ``group_size=g``: consecutive blocks of ``g`` entries along ``axis`` (default the last, the reduction
  axis of a ``(out, in)`` weight) share a scale; the scale has ``x``'s shape with that axis divided by ``g``.

Schemes: symmetric (``zero_point`` None; signed integers use ``[-qmax, qmax]``, so the scale is ``amax / qmax``;
unsigned ones are centred on 128 (8 for uint4)) or affine (``symmetric=False``: the range ``[min(x, 0),
max(x, 0)]`` maps onto ``[qmin, qmax]`` with an integer zero point, so 0.0 is exact). float8 is symmetric: the
scale maps ``amax`` to the format's largest value and the cast saturates. Rounding is half to even, as in PyTorch.

``fake_quantize`` has PyTorch's ``fake_quantize_per_tensor_affine`` semantics (with broadcasting scales, also its
per-channel one): the forward pass quantizes and dequantizes, the gradient is the straight-through estimator,
passed where ``round(x / scale) + zero_point`` lies in ``[qmin, qmax]`` and zero where the clamp cuts. The scale and
zero point get no gradient.

``scaled_matmul(a, b, scale_a, scale_b)`` multiplies quantized operands exactly in a wide accumulator (int8: int32,
float8: float32) and applies the scales to the product, which is how int8 and FP8 GEMMs run on hardware.

Example:
    >>> w = fl.randn(64, 128)
    >>> q = fl.quantization.quantize(w, fl.int4, group_size=32)
    >>> q.values.dtype, q.scale.shape
    (dtype(int4), (64, 4))
    >>> float(fl.max(fl.abs(q.dequantize() - w))) < 0.3
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..core import Tensor
from ..errors import DTypeError, ShapeError
from ..ops.creation import asarray
from ..ops.elementwise import clip, round
from ..ops.linalg_basic import matmul
from ..ops.manipulation import reshape, stack
from ..ops.reductions import max, min
from ..ops.searching import where
from ..primitives.elementwise import (
    abs,
    bitwise_and,
    bitwise_or,
    bitwise_right_shift,
    convert,
    maximum,
    minimum,
    stop_gradient,
)
from ..tree import register_dataclass

__all__ = [
    "Quantized",
    "dequantize",
    "fake_quantize",
    "pack_int4",
    "qrange",
    "quantize",
    "scaled_matmul",
    "unpack_int4",
]

_INTS = (dtypes.int8, dtypes.uint8, dtypes.int4, dtypes.uint4)
_F32 = dtypes.float32


def qrange(dtype) -> tuple[float, float]:
    """The representable range ``(qmin, qmax)`` of a quantized dtype.

    >>> fl.quantization.qrange(fl.int4)
    (-8, 7)
    """
    d = dtypes.canonicalize(dtype)
    if d in dtypes.FLOAT8:
        m = dtypes.finfo(d).max
        return -m, m
    if d in _INTS or d in dtypes.INTEGER:
        info = dtypes.iinfo(d)
        return info.min, info.max
    raise DTypeError(f"quantize: {d.name} is not a quantized dtype; use one of int8, uint8, int4, uint4 or a float8")


@register_dataclass(data_fields=["values", "scale", "zero_point"], meta_fields=["axis", "group_size"])
@dataclass(frozen=True)
class Quantized:
    """A quantized tensor: ``values`` (the quantized dtype, ``x``'s shape), its ``scale`` (float32) and
    ``zero_point`` (int32, or None for symmetric schemes); ``axis``/``group_size`` say how the scale applies (see the
    module docstring). A pytree: it passes through ``jit``, ``vmap`` and ``fl.save``'s containers as its leaves.
    """

    values: Tensor
    scale: Tensor
    zero_point: Tensor | None
    axis: int | None
    group_size: int | None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def dequantize(self, dtype=_F32) -> Tensor:
        """``(values - zero_point) * scale`` as ``dtype`` (float32 by default)."""
        return dequantize(self, dtype)


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"quantize: axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim


def _grouped_shape(shape, axis, group_size):
    n = shape[axis]
    if group_size <= 0 or n % group_size:
        raise ShapeError(
            f"quantize: group_size={group_size} must be positive and divide axis {axis} of shape {tuple(shape)} "
            f"(size {n}); pad the axis or pick a divisor"
        )
    return tuple(shape[:axis]) + (n // group_size, group_size) + tuple(shape[axis + 1 :])


def quantize(
    x,
    dtype=dtypes.int8,
    *,
    axis: int | None = None,
    group_size: int | None = None,
    symmetric: bool = True,
    scale=None,
    zero_point=None,
) -> Quantized:
    """Quantize ``x`` to ``dtype`` (int8, uint8, int4, uint4 or a float8) with computed or given scales.

    Args:
        x: a floating-point tensor.
        dtype: the quantized dtype. Default ``fl.int8``.
        axis: per-channel axis, or with ``group_size`` the axis split into groups (default the last).
        group_size: entries per group along ``axis``; None for per-tensor or per-channel scales.
        symmetric: symmetric scheme (no zero point) or affine (``False``; integers only).
        scale, zero_point: given instead of computed, shaped as ``quantize`` would return them.

    Returns:
        A ``Quantized`` with ``values``, ``scale`` and ``zero_point``.

    >>> q = fl.quantization.quantize(fl.tensor([[0.5, -1.0], [2.0, 0.25]]), axis=0)
    >>> q.values, q.scale.shape
    (Tensor([[ 64, -127],
           [127,  16]], dtype=int8), (2, 1))
    """
    x = asarray(x)
    d = dtypes.canonicalize(dtype)
    qmin, qmax = qrange(d)
    if x.dtype not in dtypes.INEXACT or x.dtype in dtypes.COMPLEX:
        raise DTypeError(f"quantize: expected a real floating-point tensor, got {x.dtype.name}")
    float8 = d in dtypes.FLOAT8
    if float8 and not symmetric:
        raise ValueError("quantize: float8 quantization is symmetric (float8 has no zero point); pass symmetric=True")
    xf = convert(x, _F32)
    shape = tuple(x.shape)
    if group_size is not None:
        a = _axis(-1 if axis is None else axis, x.ndim)
        xf = reshape(xf, _grouped_shape(shape, a, group_size))
        red = (a + 1,)
    elif axis is not None:
        a = _axis(axis, x.ndim)
        red = tuple(i for i in range(x.ndim) if i != a)
    else:
        a, red = None, tuple(range(x.ndim))
    if scale is None:
        scale, zero_point = _params(xf, red, d, qmin, qmax, symmetric)
        if a is None:  # per tensor: 0-d parameters
            scale = reshape(scale, ())
            zero_point = None if zero_point is None else reshape(zero_point, ())
    else:
        scale = convert(asarray(scale), _F32)
        scale = reshape(scale, _stat_shape(xf.shape, red)) if group_size is not None else scale
        if zero_point is not None:
            zero_point = convert(asarray(zero_point), dtypes.int32)
            zero_point = reshape(zero_point, tuple(scale.shape)) if group_size is not None else zero_point
    if float8:
        values = convert(xf / scale, d)
    else:
        r = round(xf / scale)
        if zero_point is not None:
            r = r + convert(zero_point, _F32)
        values = convert(clip(r, float(qmin), float(qmax)), d)
    if group_size is not None:
        values = reshape(values, shape)
        scale = reshape(scale, _scale_shape(shape, a, group_size))
        zero_point = None if zero_point is None else reshape(zero_point, _scale_shape(shape, a, group_size))
    return Quantized(values, scale, zero_point, a, group_size)


def _stat_shape(shape, red):
    return tuple(1 if i in red else n for i, n in enumerate(shape))


def _scale_shape(shape, a, group_size):
    return tuple(shape[:a]) + (shape[a] // group_size,) + tuple(shape[a + 1 :])


def _params(xf, red, d, qmin, qmax, symmetric):
    if symmetric:
        amax = max(abs(xf), axis=red, keepdims=True)
        if qmin < 0:  # signed integers and float8: [-qmax, qmax]
            steps, zp = qmax, None
        else:  # unsigned, centred
            mid = (qmin + qmax + 1) // 2
            steps, zp = qmax - mid, mid
        scale = amax / float(steps)
        scale = where(scale > 0, scale, 1.0)  # an all-zero slice: any scale represents it exactly
        if zp is not None:
            zp = asarray(np.full(tuple(scale.shape), zp, np.int32))
        return scale, zp
    lo = minimum(min(xf, axis=red, keepdims=True), 0.0)
    hi = maximum(max(xf, axis=red, keepdims=True), 0.0)
    scale = (hi - lo) / float(qmax - qmin)
    scale = where(scale > 0, scale, 1.0)
    zp = convert(clip(float(qmin) - round(lo / scale), float(qmin), float(qmax)), dtypes.int32)
    return scale, zp


def dequantize(q: Quantized, dtype=_F32) -> Tensor:
    """``(values - zero_point) * scale`` in ``dtype`` (float32 by default).

    >>> q = fl.quantization.quantize(fl.tensor([1.0, -0.5]))
    >>> fl.quantization.dequantize(q)
    Tensor([ 1.      , -0.503937], dtype=float32)
    """
    v = convert(q.values, _F32)
    scale, zp = q.scale, q.zero_point
    shape = tuple(v.shape)
    if q.group_size is not None:
        a = q.axis
        grouped = _grouped_shape(shape, a, q.group_size)
        v = reshape(v, grouped)
        scale = reshape(scale, _stat_shape(grouped, (a + 1,)))
        zp = None if zp is None else reshape(zp, tuple(scale.shape))
    if zp is not None:
        v = v - convert(zp, _F32)
    out = v * scale
    if q.group_size is not None:
        out = reshape(out, shape)
    return convert(out, dtypes.canonicalize(dtype))


def fake_quantize(x, scale, zero_point=0, qmin: int = -128, qmax: int = 127) -> Tensor:
    """Quantize and dequantize ``x`` in its dtype, with the straight-through gradient (PyTorch semantics).

    ``(clip(round(x / scale) + zero_point, qmin, qmax) - zero_point) * scale``; the derivative is 1 where
    ``round(x / scale) + zero_point`` lies in ``[qmin, qmax]`` and 0 where the clamp cuts. ``scale`` and
    ``zero_point`` broadcast against ``x`` (per-tensor or per-channel) and get no gradient; ``qmin``/``qmax`` are
    Python numbers.

    >>> x = fl.tensor([0.3, 2.0, -5.0])
    >>> fl.quantization.fake_quantize(x, 0.25, 0, -8, 7)
    Tensor([ 0.25,  1.75, -2.  ], dtype=float32)
    >>> fl.grad(lambda x: fl.sum(fl.quantization.fake_quantize(x, 0.25, 0, -8, 7)))(x)
    Tensor([1., 0., 0.], dtype=float32)
    """
    x = asarray(x)
    if x.dtype not in dtypes.INEXACT or x.dtype in dtypes.COMPLEX:
        raise DTypeError(f"fake_quantize: expected a real floating-point tensor, got {x.dtype.name}")
    if qmin > qmax:
        raise ValueError(f"fake_quantize: qmin={qmin} exceeds qmax={qmax}")
    scale = stop_gradient(_like(scale, x))
    zp = stop_gradient(_like(zero_point, x))
    r = round(stop_gradient(x) / scale) + zp
    q = (clip(r, float(qmin), float(qmax)) - zp) * scale
    inside = (r >= qmin) & (r <= qmax)
    # the value of q with the derivative of x (masked): x - x is exactly 0 for finite x, so the value is q's bits
    return where(inside, q + (x - stop_gradient(x)), q)


def _like(v, x):
    v = asarray(v) if isinstance(v, Tensor) else asarray(v, dtype=x.dtype)
    return v if v.dtype == x.dtype else convert(v, x.dtype)


def scaled_matmul(a, b, scale_a, scale_b, *, out_dtype=_F32) -> Tensor:
    """``(a @ b) * scale_a * scale_b`` for quantized operands, the product accumulated exactly.

    int8 (and other integer) operands accumulate in int32, float8/bfloat16/float16 ones in float32; the scales then
    apply to the wide product. ``scale_a`` broadcasts against ``a``'s rows (shape ``()`` or ``(M, 1)``),
    ``scale_b`` against ``b``'s columns (``()`` or ``(1, N)``), so per-tensor, per-token and per-channel scales all
    work. Symmetric schemes only (no zero points).

    >>> qa = fl.quantization.quantize(fl.randn(4, 8), fl.float8_e4m3fn)
    >>> qb = fl.quantization.quantize(fl.randn(8, 3), fl.float8_e4m3fn)
    >>> fl.quantization.scaled_matmul(qa.values, qb.values, qa.scale, qb.scale).shape
    (4, 3)
    """
    a, b = asarray(a), asarray(b)
    if a.dtype != b.dtype:
        raise DTypeError(f"scaled_matmul: operands must share a dtype, got {a.dtype.name} and {b.dtype.name}")
    if a.dtype in dtypes.INTEGER or a.dtype in dtypes.INT4:
        wide = dtypes.int32 if a.dtype.itemsize <= 2 else dtypes.int64
    else:
        wide = dtypes.float64 if a.dtype == dtypes.float64 else _F32
    acc = matmul(a, b, preferred_element_type=wide)
    out = convert(acc, _F32) * (convert(asarray(scale_a), _F32) * convert(asarray(scale_b), _F32))
    return convert(out, dtypes.canonicalize(out_dtype))


def pack_int4(values) -> Tensor:
    """Two int4/uint4 values per byte along the last axis (even index in the low nibble): ``(..., 2n) -> (..., n)``
    uint8, the storage ``fl.save`` can hold.

    >>> fl.quantization.pack_int4(fl.asarray([1, -1], dtype=fl.int4))
    Tensor([241], dtype=uint8)
    """
    v = asarray(values)
    if v.dtype not in dtypes.INT4:
        raise DTypeError(f"pack_int4: expected int4 or uint4 values, got {v.dtype.name}")
    n = v.shape[-1] if v.ndim else 0
    if v.ndim == 0 or n % 2:
        raise ShapeError(f"pack_int4: the last axis must have an even length, got shape {tuple(v.shape)}")
    u = bitwise_and(convert(v, dtypes.int16), 15)
    pairs = reshape(u, tuple(v.shape[:-1]) + (n // 2, 2))
    return convert(bitwise_or(pairs[..., 0], pairs[..., 1] * 16), dtypes.uint8)


def unpack_int4(packed, dtype=dtypes.int4) -> Tensor:
    """The inverse of ``pack_int4``: ``(..., n)`` uint8 to ``(..., 2n)`` values of ``dtype`` (int4 or uint4).

    >>> fl.quantization.unpack_int4(fl.asarray([241], dtype=fl.uint8))
    Tensor([1, -1], dtype=int4)
    """
    p = asarray(packed)
    d = dtypes.canonicalize(dtype)
    if p.dtype != dtypes.uint8 or d not in dtypes.INT4:
        raise DTypeError(f"unpack_int4: expected uint8 bytes and an int4/uint4 dtype, got {p.dtype.name}, {d.name}")
    lo, hi = bitwise_and(p, 15), bitwise_right_shift(p, 4)
    both = stack([lo, hi], axis=-1)
    return convert(reshape(both, tuple(p.shape[:-1]) + (2 * p.shape[-1],)), d)
