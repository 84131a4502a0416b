"""Quantized linear layers: weight-only int8/int4 inference, int8 activations, and quantization-aware training.

- ``QuantizedLinear``: weights stored quantized as buffers: int8 with one scale per output channel, or int4 in
  groups of ``group_size`` inputs (packed two per byte, so ``fl.save`` stores 4 bits a weight). Weight-only
  layers dequantize the weight and multiply in float32; with ``activation_dtype=fl.int8`` the input is quantized
  per token (one scale per row, symmetric, computed from the row: no calibration, and a row's result does not
  depend on the rest of the batch) and the product runs as an exact int8 x int8 -> int32 matmul.
- ``QATLinear``: a ``Linear`` whose forward pass fake-quantizes the weight (and the input) with the same schemes,
  with straight-through gradients (``fl.quantization.fake_quantize``), so training adapts to the rounding.
- ``prepare_qat_(model, ...)`` swaps a model's ``Linear`` layers for ``QATLinear`` (same parameters);
  ``quantize_(model, ...)`` swaps ``Linear`` and ``QATLinear`` layers for ``QuantizedLinear``. Both work in place
  and return the model, like torchao's functions of the same names.

>>> import funclib as fl, funclib.nn as nn
>>> model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
>>> nn.quantize_(model, fl.int4, group_size=8)[0]
QuantizedLinear(in_features=16, out_features=32, weight_dtype=int4, group_size=8, activation_dtype=None)
"""

from __future__ import annotations

from collections.abc import Callable

import funclib as fl
from funclib import dtypes
from funclib import quantization as Q
from funclib.errors import DTypeError, ShapeError

from . import functional as F
from .layers import Linear
from .module import Module

__all__ = ["QATLinear", "QuantizedLinear", "prepare_qat_", "quantize_"]

_WEIGHT_DTYPES = (dtypes.int8, dtypes.int4)


def _check_config(in_features, weight_dtype, group_size, activation_dtype):
    wd = dtypes.canonicalize(weight_dtype)
    if wd not in _WEIGHT_DTYPES:
        raise DTypeError(f"quantized Linear: weight_dtype must be int8 or int4, got {wd.name}")
    if group_size is not None and (group_size <= 0 or in_features % group_size):
        raise ShapeError(
            f"quantized Linear: group_size={group_size} must divide in_features={in_features}; pick a divisor"
        )
    ad = None if activation_dtype is None else dtypes.canonicalize(activation_dtype)
    if ad not in (None, dtypes.int8):
        raise DTypeError(f"quantized Linear: activation_dtype must be None or int8, got {ad.name}")
    if ad is not None and group_size is not None:
        raise ValueError(
            "quantized Linear: int8 activations need one weight scale per output channel (a group-wise scale varies "
            "along the contraction, so it cannot be applied to the int32 product); pass group_size=None"
        )
    if wd == dtypes.int4 and in_features % 2:
        raise ShapeError(f"quantized Linear: int4 weights are packed two per byte; in_features={in_features} is odd")
    return wd, ad


def _weight_quantizer(weight_dtype, group_size) -> dict:
    # per output channel (axis 0 of (out, in)), or groups along the inputs
    return {"axis": 0} if group_size is None else {"axis": 1, "group_size": group_size}


def _token_quantizer(x) -> dict:
    # per token: one scale for each row of the last axis
    return {"axis": x.ndim - 1, "group_size": x.shape[-1]}


def _token_scale(x):
    """Per-token (per-row) symmetric int8 quantization of activations: the ``Quantized`` of ``x``."""
    return Q.quantize(x, dtypes.int8, **_token_quantizer(x))


def _config_repr(m) -> str:
    ad = None if m.activation_dtype is None else m.activation_dtype.name
    return f"weight_dtype={m.weight_dtype.name}, group_size={m.group_size}, activation_dtype={ad}"


class QuantizedLinear(Module):
    """``y = x @ dequantize(weight).T + bias`` with a quantized weight (see the module docstring).

    Args:
        in_features, out_features, bias: as ``nn.Linear``.
        weight_dtype: ``fl.int8`` (default) or ``fl.int4``.
        group_size: inputs per weight scale (int4 group-wise); None for one scale per output channel.
        activation_dtype: None (weight-only) or ``fl.int8`` (dynamic per-token activations, int32 accumulation).

    Returns:
        A module mapping ``(*, in_features)`` to ``(*, out_features)`` (float32).

    Build one from a trained layer with ``QuantizedLinear.from_float(linear, ...)`` or ``nn.quantize_``; a fresh
    one holds zeros until ``load_state_dict``.

    >>> q = nn.QuantizedLinear.from_float(nn.Linear(8, 3), fl.int8)
    >>> q(fl.ones((2, 8))).shape
    (2, 3)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        weight_dtype=dtypes.int8,
        group_size: int | None = None,
        activation_dtype=None,
    ):
        super().__init__()
        wd, ad = _check_config(in_features, weight_dtype, group_size, activation_dtype)
        self.in_features, self.out_features = in_features, out_features
        self.weight_dtype, self.group_size, self.activation_dtype = wd, group_size, ad
        if wd == dtypes.int4:
            self.register_buffer("weight", fl.zeros((out_features, in_features // 2), dtype=fl.uint8))
        else:
            self.register_buffer("weight", fl.zeros((out_features, in_features), dtype=wd))
        n_scales = 1 if group_size is None else in_features // group_size
        self.register_buffer("weight_scale", fl.ones((out_features, n_scales)))
        self.register_buffer("bias", fl.zeros(out_features) if bias else None)

    @classmethod
    def from_float(
        cls, linear: Linear, weight_dtype=dtypes.int8, *, group_size: int | None = None, activation_dtype=None
    ) -> QuantizedLinear:
        """A ``QuantizedLinear`` with ``linear``'s weight quantized (symmetric) and its bias kept in float32."""
        out_f, in_f = (int(n) for n in linear.weight.shape)
        q = cls(
            in_f,
            out_f,
            linear.bias is not None,
            weight_dtype=weight_dtype,
            group_size=group_size,
            activation_dtype=activation_dtype,
        )
        w = fl.asarray(linear.weight).astype(fl.float32)
        qw = Q.quantize(w, q.weight_dtype, **_weight_quantizer(q.weight_dtype, group_size))
        q.weight = Q.pack_int4(qw.values) if q.weight_dtype == dtypes.int4 else qw.values
        q.weight_scale = fl.reshape(qw.scale, (out_f, -1))
        if linear.bias is not None:
            q.bias = fl.asarray(linear.bias).astype(fl.float32)
        return q

    def _quantized_weight(self) -> Q.Quantized:
        values = Q.unpack_int4(self.weight) if self.weight_dtype == dtypes.int4 else self.weight
        if self.group_size is None:
            return Q.Quantized(values, self.weight_scale, None, 0, None)
        return Q.Quantized(values, self.weight_scale, None, 1, self.group_size)

    def dequantized_weight(self, dtype=fl.float32):
        """The weight as floats, ``(out_features, in_features)``."""
        return self._quantized_weight().dequantize(dtype)

    def forward(self, input):
        x = fl.asarray(input)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ShapeError(
                f"QuantizedLinear(in_features={self.in_features}, out_features={self.out_features}): the input's "
                f"last axis must have {self.in_features} entries, got input of shape {tuple(x.shape)}"
            )
        if self.activation_dtype is None:
            w = self.dequantized_weight(fl.float32)
            y = F.linear(x.astype(fl.float32), w, self.bias)
        else:
            qx = _token_scale(x.astype(fl.float32))
            y = Q.scaled_matmul(qx.values, self._quantized_weight().values.T, qx.scale, self.weight_scale.T)
            y = y + self.bias if self.bias is not None else y
        return y.astype(x.dtype) if x.dtype in dtypes.REAL_FLOATING else y

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {_config_repr(self)}"


class QATLinear(Linear):
    """A ``Linear`` trained through fake quantization of its weight (and input): the forward pass sees the values
    ``QuantizedLinear`` will compute with, the backward pass the straight-through gradient. ``nn.quantize_``
    turns it into the matching ``QuantizedLinear``.

    Args:
        in_features, out_features, bias, device, dtype, key: as ``nn.Linear``.
        weight_dtype: the dtype the weight is fake-quantized to, ``fl.int8`` (default) or ``fl.int4``.
        group_size: inputs per weight scale (int4 group-wise); None for one scale per output channel.
        activation_dtype: None (weight-only) or ``fl.int8`` (the input is fake-quantized per token too).

    Returns:
        A module mapping ``(*, in_features)`` to ``(*, out_features)``.

    >>> layer = nn.QATLinear(8, 3, weight_dtype=fl.int8, activation_dtype=fl.int8)
    >>> layer(fl.ones((2, 8))).shape
    (2, 3)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype=None,
        *,
        weight_dtype=dtypes.int8,
        group_size: int | None = None,
        activation_dtype=None,
        key=None,
    ):
        super().__init__(in_features, out_features, bias, device, dtype, key=key)
        wd, ad = _check_config(in_features, weight_dtype, group_size, activation_dtype)
        self.weight_dtype, self.activation_dtype = wd, ad
        self.group_size = group_size

    @classmethod
    def from_float(cls, linear: Linear, weight_dtype=dtypes.int8, *, group_size=None, activation_dtype=None):
        """A ``QATLinear`` sharing ``linear``'s parameters."""
        out_f, in_f = (int(n) for n in linear.weight.shape)
        q = cls(
            in_f,
            out_f,
            linear.bias is not None,
            dtype=linear.weight.dtype,
            weight_dtype=weight_dtype,
            group_size=group_size,
            activation_dtype=activation_dtype,
            key=fl.random.key(0),
        )
        q.weight = linear.weight
        if linear.bias is not None:
            q.bias = linear.bias
        return q

    def forward(self, input):
        w = _fake_quantize(self.weight, self.weight_dtype, **_weight_quantizer(self.weight_dtype, self.group_size))
        x = fl.asarray(input)
        if self.activation_dtype is not None:
            x = _fake_quantize(x, dtypes.int8, **_token_quantizer(x))
        return F.linear(x, w, self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, {_config_repr(self)}"


def _fake_quantize(x, dtype, axis, group_size=None):
    """``x`` fake-quantized with the scales ``fl.quantization.quantize`` computes for it (held constant)."""
    q = Q.quantize(fl.stop_gradient(x), dtype, axis=axis, group_size=group_size)
    qmin, qmax = Q.qrange(dtype)
    if group_size is None:
        return Q.fake_quantize(x, q.scale, 0, qmin, qmax)
    shape = tuple(x.shape)
    grouped = shape[:axis] + (shape[axis] // group_size, group_size) + shape[axis + 1 :]
    scale = fl.expand_dims(q.scale, axis=axis + 1)
    return fl.reshape(Q.fake_quantize(fl.reshape(x, grouped), scale, 0, qmin, qmax), shape)


def _swap(model: Module, make: Callable, filter_fn, kinds) -> Module:
    if type(model) in kinds:  # a bare layer has no parent to rebind it in: return its replacement
        return make(model) if filter_fn is None or filter_fn(model, "") else model
    for module in list(model.modules()):
        for name, child in list(module._modules.items()):
            if type(child) in kinds and (filter_fn is None or filter_fn(child, name)):
                module._modules[name] = make(child)  # in place, keeping the children's order
    return model


def prepare_qat_(
    model: Module, weight_dtype=dtypes.int8, *, group_size: int | None = None, activation_dtype=None, filter_fn=None
) -> Module:
    """Replace ``model``'s ``nn.Linear`` layers by ``QATLinear`` (same parameters), in place.

    Train as usual afterwards, then call ``nn.quantize_(model)`` to get the quantized model.

    Args:
        model: the model to prepare for quantization-aware training.
        weight_dtype: ``fl.int8`` (default) or ``fl.int4``.
        group_size: inputs per weight scale (int4 group-wise), or None for per-output-channel scales.
        activation_dtype: None (weight-only) or ``fl.int8``.
        filter_fn: ``filter_fn(module, name) -> bool`` picks the layers (default: all).

    Returns:
        ``model``, changed in place.

    >>> model = nn.prepare_qat_(nn.Sequential(nn.Linear(4, 4)), fl.int8, activation_dtype=fl.int8)
    >>> type(model[0]).__name__
    'QATLinear'
    """
    kw = dict(group_size=group_size, activation_dtype=activation_dtype)
    return _swap(model, lambda m: QATLinear.from_float(m, weight_dtype, **kw), filter_fn, (Linear,))


def quantize_(
    model: Module, weight_dtype=None, *, group_size: int | None = None, activation_dtype=None, filter_fn=None
) -> Module:
    """Replace ``model``'s ``nn.Linear`` and ``QATLinear`` layers by ``QuantizedLinear``, in place; returns ``model``.

    Args:
        model: a trained model.
        weight_dtype: ``fl.int8`` or ``fl.int4``; default int8, or each ``QATLinear``'s own.
        group_size: inputs per weight scale (int4 group-wise), or None for per-output-channel scales.
        activation_dtype: None (weight-only) or ``fl.int8``; a ``QATLinear`` keeps its own unless given.
        filter_fn: ``filter_fn(module, name) -> bool`` picks the layers (default: all).

    Returns:
        ``model``, changed in place.

    >>> model = nn.quantize_(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), fl.int8)
    >>> model[0].weight.dtype
    dtype('int8')
    """

    def make(m):
        if isinstance(m, QATLinear):
            return QuantizedLinear.from_float(
                m,
                weight_dtype or m.weight_dtype,
                group_size=group_size if weight_dtype is not None else m.group_size,
                activation_dtype=activation_dtype if activation_dtype is not None else m.activation_dtype,
            )
        return QuantizedLinear.from_float(
            m, weight_dtype or dtypes.int8, group_size=group_size, activation_dtype=activation_dtype
        )

    return _swap(model, make, filter_fn, (Linear, QATLinear))
