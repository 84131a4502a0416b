"""Core layers: ``Identity``, ``Linear``, ``Bilinear``, ``Flatten``, ``Unflatten``, convolutions, pooling,
normalization, dropout and ``Embedding``, with PyTorch's parameter names, layouts and default initialization.

Every constructor takes ``key=`` (a ``fl.random`` key, split among the layer's parameters in PyTorch's draw order);
without one the parameters are drawn from the global generator that ``fl.manual_seed`` sets.

>>> import funclib as fl, funclib.nn as nn
>>> nn.Linear(10, 5, key=fl.random.key(0)).weight.shape
(5, 10)
"""

from __future__ import annotations

import math

import funclib as fl
from funclib import dtypes
from funclib.checks import check_int, check_number, check_probability, check_shape
from funclib.errors import ShapeError
from funclib.primitives._util import normalize_axis

from . import functional as F
from . import init
from .functional._args import conv_padding_arg, ints, pool_args
from .functional._conv import conv, conv_transpose, padding_mode_widths
from .functional._pooling import adaptive_avg_pool, adaptive_output_size, avg_pool, max_pool
from .module import Module, Parameter, _split_key, store_state

__all__ = [
    "Identity",
    "Linear",
    "Bilinear",
    "Flatten",
    "Unflatten",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "MaxPool1d",
    "MaxPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "LayerNorm",
    "GroupNorm",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Embedding",
]

_DEVICE_DTYPE_KEY = """
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).
        key: a ``fl.random`` key for the initialization (default: the global generator)."""
_CONV_ARGS = """
        in_channels: channels of the input (``C_in``).
        out_channels: channels of the output.
        kernel_size: an int, or one per spatial axis.
        stride: an int or one per axis (default 1).
        padding: an int, one per axis, ``"valid"`` or ``"same"`` (default 0).
        dilation: spacing of the kernel's taps, an int or one per axis (default 1).
        groups: split the channels into this many independent groups (default 1).
        bias: learn an additive bias (default True).
        padding_mode: ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"`` (default ``"zeros"``).""" + (
    _DEVICE_DTYPE_KEY
)
_CONV_TRANSPOSE_ARGS = """
        in_channels: channels of the input (``C_in``).
        out_channels: channels of the output.
        kernel_size: an int, or one per spatial axis.
        stride: an int or one per axis (default 1).
        padding: removed from each side of the output, an int or one per axis (default 0).
        output_padding: added to one side of the output to pick among the sizes a stride allows (default 0).
        groups: split the channels into this many independent groups (default 1).
        bias: learn an additive bias (default True).
        dilation: spacing of the kernel's taps (default 1).
        padding_mode: only ``"zeros"``.""" + _DEVICE_DTYPE_KEY
_POOL_ARGS = """
        kernel_size: the window, an int or one per spatial axis.
        stride: an int or one per axis (default: the kernel size).
        padding: added on both sides (counted as -inf for max pooling), at most half the kernel (default 0)."""
_MAX_POOL_ARGS = _POOL_ARGS + """
        dilation: spacing of the window's taps (default 1).
        return_indices: also return the flat input position of each maximum (default False).
        ceil_mode: round the output size up, so a partial last window counts (default False)."""
_AVG_POOL_ARGS = _POOL_ARGS + """
        ceil_mode: round the output size up, so a partial last window counts (default False).
        count_include_pad: divide by the padded window size rather than by the values inside (default True)."""
_BATCH_NORM_ARGS = """
        num_features: the channels ``C`` (axis 1).
        eps: added to the variance (default 1e-5).
        momentum: weight of the batch in the running statistics; None for the cumulative average (default 0.1).
        affine: learn a per-channel scale ``weight`` and shift ``bias`` (default True).
        track_running_stats: keep running statistics for evaluation mode (default True).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``)."""
_CHANNEL_DROPOUT_ARGS = """
        p: the probability of zeroing a channel (default 0.5).
        inplace: accepted for PyTorch compatibility and ignored (tensors are immutable)."""


def _dtype(dtype, device=None):
    if device not in (None, "cpu"):
        raise ValueError(f"unknown device {device!r}; funclib runs on 'cpu': pass device=None or 'cpu'")
    d = dtypes.float_default() if dtype is None else dtypes.canonicalize(dtype)
    if d not in dtypes.REAL_FLOATING:
        raise TypeError(
            f"layer parameters must be floating point, got dtype {d.name};"
            " pass dtype=fl.float32 (or float64, ...)"
        )
    return d


def _check_divides(op: str, part: str, p, whole: str, w) -> None:
    """Check that the positive int ``p`` (heads, groups) divides the positive int ``w`` (features, channels)."""
    check_int(w, op, whole, min=1)
    check_int(p, op, part, min=1)
    if w % p:
        raise ValueError(f"{op}: {whole}={w} must be divisible by {part}={p}; choose {part} dividing {whole}")

def _affine(module, shape, d, weight: bool, bias: bool) -> None:
    """Register a norm's ``weight`` (ones) and ``bias`` (zeros) of ``shape``; each is None when off, as in
    PyTorch, so the state_dict keys do not depend on the options."""
    module.register_parameter("weight", Parameter(fl.ones(shape, dtype=d)) if weight else None)
    module.register_parameter("bias", Parameter(fl.zeros(shape, dtype=d)) if bias else None)


def _norm_stats(module, num_features, eps, momentum, affine: bool, track_running_stats: bool, d) -> None:
    """The state batch and instance norms share: checked options, per-channel affine parameters and (when
    tracked) running statistics with their batch counter, in PyTorch's state_dict layout."""
    name = type(module).__name__
    check_int(num_features, name, "num_features", min=1)
    check_number(eps, name, "eps", min=0.0)
    if momentum is not None:
        check_number(momentum, name, "momentum", min=0.0, max=1.0)
    module.num_features, module.eps, module.momentum = num_features, eps, momentum
    module.affine, module.track_running_stats = affine, track_running_stats
    _affine(module, (num_features,), d, affine, affine)
    if track_running_stats:
        module.register_buffer("running_mean", fl.zeros((num_features,), dtype=d))
        module.register_buffer("running_var", fl.ones((num_features,), dtype=d))
        # an instance norm keeps the counter only for PyTorch's layout: PyTorch never advances it there
        module._register_counter("num_batches_tracked")
    else:
        for buffer in ("running_mean", "running_var", "num_batches_tracked"):
            module.register_buffer(buffer, None)


def _uniform(shape, bound, d, key):
    return Parameter(init.uniform_(fl.empty(shape, dtype=d), -bound, bound, key=key))


class Identity(Module):
    """The identity: returns its input (arguments to the constructor are ignored, as in PyTorch).

    Args:
        *args: ignored.
        **kwargs: ignored.

    Returns:
        A module whose ``forward(input)`` is ``input``.

    >>> x = fl.ones(3)
    >>> nn.Identity(54, unused="x")(x) is x
    True
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight: (out_features, in_features)``.

    Init (PyTorch's): ``weight ~ U(-1/sqrt(in), 1/sqrt(in))`` (kaiming uniform with ``a=sqrt(5)``), same bound for
    ``bias``.

    Args:
        in_features: the size of the input's last axis.
        out_features: the size of the output's last axis.
        bias: learn an additive bias (default True).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).
        key: a ``fl.random`` key for the initialization (default: the global generator).

    Returns:
        A module mapping ``(*, in_features)`` to ``(*, out_features)``.

    >>> nn.Linear(10, 5)(fl.ones((3, 10))).shape
    (3, 5)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *, key=None):
        super().__init__()
        d = _dtype(dtype, device)
        self.in_features = check_int(in_features, "Linear", "in_features", min=0)
        self.out_features = check_int(out_features, "Linear", "out_features", min=0)
        kw, kb = _split_key(key, 2)
        self.weight = Parameter(
            init.kaiming_uniform_(fl.empty((out_features, in_features), dtype=d), a=math.sqrt(5), key=kw)
        )
        if bias:
            self.bias = _uniform((out_features,), 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0, d, kb)
        else:
            self.register_parameter("bias", None)

    def forward(self, input):
        if input.ndim < 1 or input.shape[-1] != self.in_features:
            raise ShapeError(
                f"Linear(in_features={self.in_features}, out_features={self.out_features}): the input's last axis "
                f"must have {self.in_features} entries, got input of shape {tuple(input.shape)}; check in_features or "
                "reshape the input (features on the last axis)"
            )
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y_k = x1 @ weight[k] @ x2 + bias[k]`` with ``weight: (out, in1, in2)``; init ``U(+-1/sqrt(in1))``.

    Args:
        in1_features: the size of the first input's last axis.
        in2_features: the size of the second input's last axis.
        out_features: the size of the output's last axis.
        bias: learn an additive bias (default True).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).
        key: a ``fl.random`` key for the initialization (default: the global generator).

    Returns:
        A module mapping ``(*, in1)`` and ``(*, in2)`` to ``(*, out)``.

    >>> nn.Bilinear(3, 4, 2)(fl.ones((5, 3)), fl.ones((5, 4))).shape
    (5, 2)
    """

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        super().__init__()
        d = _dtype(dtype, device)
        for n, v in (("in1_features", in1_features), ("in2_features", in2_features), ("out_features", out_features)):
            check_int(v, "Bilinear", n, min=1)
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        bound = 1.0 / math.sqrt(in1_features)
        kw, kb = _split_key(key, 2)
        self.weight = _uniform((out_features, in1_features, in2_features), bound, d, kw)
        if bias:
            self.bias = _uniform((out_features,), bound, d, kb)
        else:
            self.register_parameter("bias", None)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class Flatten(Module):
    """Flatten axes ``start_dim..end_dim`` into one.

    Args:
        start_dim: the first axis flattened (default 1, keeping the batch axis).
        end_dim: the last axis flattened (default -1).

    Returns:
        A module merging those axes.

    >>> nn.Flatten()(fl.ones((2, 3, 4))).shape
    (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return fl.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size`` (one entry may be -1).

    Args:
        dim: the axis to split.
        unflattened_size: the new axes' sizes; their product must be the axis's size.

    Returns:
        A module splitting that axis.

    >>> nn.Unflatten(1, (3, -1))(fl.ones((2, 12))).shape
    (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = check_int(dim, "Unflatten", "dim")
        self.unflattened_size = check_shape(unflattened_size, "Unflatten", "unflattened_size", allow_unknown=True)

    def forward(self, input):
        d = normalize_axis(self.dim, input.ndim, "Unflatten")
        n, want = input.shape[d], self.unflattened_size
        known = math.prod(a for a in want if a != -1)
        if (-1 not in want and known != n) or (-1 in want and (known == 0 or n % known)):
            raise ShapeError(
                f"Unflatten: axis {d} of the input (shape {tuple(input.shape)}) has size {n}, which cannot be split "
                f"into unflattened_size {want}; pass sizes whose product is {n} (one of them may be -1)"
            )
        shape = tuple(input.shape[:d]) + want + tuple(input.shape[d + 1 :])
        return fl.reshape(input, shape)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


# ---------------------------------------------------------------------------------------------------------------
# Convolutions


class _ConvNd(Module):
    _nd = 2
    _transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        super().__init__()
        nd = self._nd
        name = type(self).__name__
        check_int(in_channels, name, "in_channels", min=1)
        check_int(out_channels, name, "out_channels", min=1)
        check_int(groups, name, "groups", min=1)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: in_channels={in_channels} and out_channels={out_channels} must be divisible by "
                f"groups={groups}; choose groups dividing both"
            )
        modes = ("zeros",) if self._transposed else ("zeros", "reflect", "replicate", "circular")
        if padding_mode not in modes:
            raise ValueError(
                f"{name}: padding_mode must be {' or '.join(repr(m) for m in modes)}, got {padding_mode!r}"
                + ("; pad the input with F.pad first" if self._transposed else "")
            )
        d = _dtype(dtype, device)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = ints(kernel_size, nd, name, "kernel_size")
        self.stride = ints(stride, nd, name, "stride")
        if self._transposed and isinstance(padding, str):
            raise ValueError(
                f"{name}: padding must be an int or {nd} ints (transposed convolutions have no 'same'/'valid'), got "
                f"{padding!r}; choose output_padding or forward(x, output_size=...) for the output size"
            )
        self.padding = conv_padding_arg(padding, nd, self.stride, name)
        self.dilation = ints(dilation, nd, name, "dilation")
        self.output_padding = (0,) * nd
        self.groups = groups
        self.padding_mode = padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        kw, kb = _split_key(key, 2)
        self.weight = Parameter(init.kaiming_uniform_(fl.empty(shape, dtype=d), a=math.sqrt(5), key=kw))
        if bias:
            fan_in = shape[1] * math.prod(self.kernel_size)
            self.bias = _uniform((out_channels,), 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0, d, kb)
        else:
            self.register_parameter("bias", None)

    def forward(self, input):
        self._check(input)
        name, padding = type(self).__name__, self.padding
        if self.padding_mode != "zeros":
            k, d, s = self.kernel_size, self.dilation, self.stride
            input = F.pad(input, padding_mode_widths(padding, self._nd, k, d, s, name), mode=self.padding_mode)
            padding = 0
        return conv(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups, self._nd, name)

    def _check(self, input):
        nd = self._nd
        axes = ", ".join("LHW"[-nd:] if nd < 3 else "DHW")
        if input.ndim not in (nd + 1, nd + 2) or input.shape[-nd - 1] != self.in_channels:
            raise ShapeError(
                f"{type(self).__name__}({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}): "
                f"expected input of shape (N, C, {axes}) with C={self.in_channels} (or unbatched (C, {axes})), got "
                f"{tuple(input.shape)}; check in_channels or transpose your input (channels come first)"
            )

    def extra_repr(self):
        nd = self._nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * nd:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s


class Conv1d(_ConvNd):
    __doc__ = f"""1-d convolution (cross-correlation) over ``(N, C_in, L)``; ``weight: (out, in / groups, k)`` and
    ``bias: (out,)``, PyTorch's init (``U(+-1/sqrt(fan_in))``, ``fan_in = in / groups * k``).

    Args:{_CONV_ARGS}

    Returns:
        A module mapping ``(N, C_in, L)`` (or unbatched ``(C_in, L)``) to ``(N, out_channels, L_out)``.

    >>> nn.Conv1d(2, 4, 3)(fl.ones((1, 2, 10))).shape
    (1, 4, 8)
    """

    _nd = 1


class Conv2d(_ConvNd):
    __doc__ = f"""2-d convolution (cross-correlation) over ``(N, C_in, H, W)``; ``weight: (out, in / groups, kh,
    kw)`` and ``bias: (out,)``, PyTorch's init (``U(+-1/sqrt(fan_in))``, ``fan_in = in / groups * kh * kw``).

    Args:{_CONV_ARGS}

    Returns:
        A module mapping ``(N, C_in, H, W)`` (or unbatched ``(C_in, H, W)``) to ``(N, out_channels, H_out, W_out)``.

    >>> nn.Conv2d(1, 8, 3, padding=1)(fl.ones((2, 1, 8, 8))).shape
    (2, 8, 8, 8)
    """

    _nd = 2


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        # PyTorch's argument order for transposed convolutions (output_padding before groups)
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
            key=key,
        )
        name = type(self).__name__
        self.output_padding = ints(output_padding, self._nd, name, "output_padding")
        for i in range(self._nd):
            if not (self.output_padding[i] < self.stride[i] or self.output_padding[i] < self.dilation[i]):
                raise ValueError(
                    f"{name}: output_padding {self.output_padding} must be smaller than stride {self.stride} or "
                    f"dilation {self.dilation}; lower output_padding"
                )

    def forward(self, input, output_size=None):
        self._check(input)
        op = self._output_padding(input, output_size)
        args = (self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation)
        return conv_transpose(input, *args, self._nd, type(self).__name__)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        nd = self._nd
        output_size = tuple(output_size)[-nd:]
        insz = tuple(input.shape[-nd:])
        pads = []
        for i in range(nd):
            base = (
                (insz[i] - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1) + 1
            )
            extra = output_size[i] - base
            if not 0 <= extra < max(self.stride[i], self.dilation[i]):
                raise ValueError(
                    f"{type(self).__name__}: output_size {output_size} is not reachable from input {insz}; sizes "
                    f"between {base} and {base + max(self.stride[i], self.dilation[i]) - 1} are possible on axis {i}; "
                    "pick output_size in that range"
                )
            pads.append(extra)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    __doc__ = f"""1-d transposed convolution (the adjoint of ``Conv1d`` in its input) over ``(N, C_in, L)``;
    ``weight: (in, out / groups, k)``. ``forward(x, output_size=...)`` picks the output padding.

    Args:{_CONV_TRANSPOSE_ARGS}

    Returns:
        A module mapping ``(N, C_in, L)`` to ``(N, out_channels, (L - 1) * stride - 2 * padding + dilation * (k - 1)
        + output_padding + 1)``.

    >>> nn.ConvTranspose1d(4, 2, 2, stride=2)(fl.ones((1, 4, 5))).shape
    (1, 2, 10)
    """

    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    __doc__ = f"""2-d transposed convolution (the adjoint of ``Conv2d`` in its input) over ``(N, C_in, H, W)``;
    ``weight: (in, out / groups, kh, kw)``, PyTorch's init. ``forward(x, output_size=...)`` picks the output padding.

    Args:{_CONV_TRANSPOSE_ARGS}

    Returns:
        A module mapping ``(N, C_in, H, W)`` to ``(N, out_channels, H_out, W_out)``, each size as for
        ``ConvTranspose1d``.

    >>> nn.ConvTranspose2d(4, 2, 2, stride=2)(fl.ones((1, 4, 5, 5))).shape
    (1, 2, 10, 10)
    """

    _nd = 2


# ---------------------------------------------------------------------------------------------------------------
# Pooling


class _PoolNd(Module):
    _nd = 2

    def _window(self, kernel_size, stride, padding, dilation=1) -> None:
        """Check and keep the window (the stride defaults to the kernel size)."""
        pool_args(self._nd, kernel_size, stride, padding, dilation, type(self).__name__)
        self.kernel_size, self.stride, self.padding = kernel_size, kernel_size if stride is None else stride, padding


class _MaxPoolNd(_PoolNd):
    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False, ceil_mode: bool = False
    ):
        super().__init__()
        self._window(kernel_size, stride, padding, dilation)
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input):
        window = (self.kernel_size, self.stride, self.padding, self.dilation)
        return max_pool(input, *window, self.ceil_mode, self.return_indices, self._nd, type(self).__name__)

    def extra_repr(self):
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    __doc__ = f"""1-d max pooling over ``(N, C, L)``. Tied maxima share the gradient equally.

    Args:{_MAX_POOL_ARGS}

    Returns:
        A module mapping ``(N, C, L)`` to ``(N, C, L_out)`` (and the indices with ``return_indices``).

    >>> nn.MaxPool1d(2)(fl.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
    Tensor([[[3., 2.]]], dtype=float32)
    """

    _nd = 1


class MaxPool2d(_MaxPoolNd):
    __doc__ = f"""2-d max pooling over ``(N, C, H, W)``. Tied maxima share the gradient equally.

    Args:{_MAX_POOL_ARGS}

    Returns:
        A module mapping ``(N, C, H, W)`` to ``(N, C, H_out, W_out)`` (and the indices with ``return_indices``).

    >>> nn.MaxPool2d(2)(fl.ones((1, 3, 8, 8))).shape
    (1, 3, 4, 4)
    """

    _nd = 2


class _AvgPoolNd(_PoolNd):
    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
        divisor_override: int | None = None,
    ):
        super().__init__()
        self._window(kernel_size, stride, padding)
        if divisor_override is not None:
            check_int(divisor_override, type(self).__name__, "divisor_override", min=1)
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, divisor_override

    def forward(self, input):
        options = (self.ceil_mode, self.count_include_pad, self.divisor_override)
        return avg_pool(input, self.kernel_size, self.stride, self.padding, *options, self._nd, type(self).__name__)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    __doc__ = f"""1-d average pooling over ``(N, C, L)``, with PyTorch's divisors for padded windows.

    Args:{_AVG_POOL_ARGS}

    Returns:
        A module mapping ``(N, C, L)`` to ``(N, C, L_out)``.

    >>> nn.AvgPool1d(2)(fl.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
    Tensor([[[2., 1.]]], dtype=float32)
    """

    _nd = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    __doc__ = f"""2-d average pooling over ``(N, C, H, W)``, with PyTorch's divisors for padded and ceil-mode
    windows.

    Args:{_AVG_POOL_ARGS}
        divisor_override: divide every window by this instead (default None).

    Returns:
        A module mapping ``(N, C, H, W)`` to ``(N, C, H_out, W_out)``.

    >>> nn.AvgPool2d(2)(fl.ones((1, 3, 8, 8))).shape
    (1, 3, 4, 4)
    """

    _nd = 2


class _AdaptiveAvgPoolNd(Module):
    _nd = 2

    def __init__(self, output_size):
        super().__init__()
        adaptive_output_size(output_size, self._nd, type(self).__name__)
        self.output_size = output_size

    def forward(self, input):
        return adaptive_avg_pool(input, self.output_size, self._nd, type(self).__name__)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Average ``(N, C, L)`` into ``output_size`` bins (PyTorch's bin edges).

    Args:
        output_size: the number of bins (None keeps the input's size).

    Returns:
        A module mapping ``(N, C, L)`` to ``(N, C, output_size)``.

    >>> nn.AdaptiveAvgPool1d(2)(fl.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
    Tensor([[[2., 1.]]], dtype=float32)
    """

    _nd = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average ``(N, C, H, W)`` into ``output_size`` bins (``1`` gives global average pooling).

    Args:
        output_size: an int or ``(h, w)`` (None keeps that axis's size).

    Returns:
        A module mapping ``(N, C, H, W)`` to ``(N, C, h, w)``.

    >>> nn.AdaptiveAvgPool2d(1)(fl.ones((2, 3, 7, 7))).shape
    (2, 3, 1, 1)
    """

    _nd = 2


# ---------------------------------------------------------------------------------------------------------------
# Normalization


class _BatchNorm(Module):
    _ndims: tuple[int, ...] = (2, 3)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        _norm_stats(self, num_features, eps, momentum, affine, track_running_stats, _dtype(dtype, device))

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            d = self._buffers["running_mean"].dtype
            self._buffers["running_mean"] = fl.zeros((self.num_features,), dtype=d)
            self._buffers["running_var"] = fl.ones((self.num_features,), dtype=d)
            self._buffers["num_batches_tracked"] = fl.asarray(0.0, dtype=fl.float64)

    def forward(self, input):
        name = type(self).__name__
        if input.ndim not in self._ndims:
            want = " or ".join(f"{n}D" for n in self._ndims)
            raise ShapeError(
                f"{name}: expected {want} input (got {input.ndim}D input of shape {tuple(input.shape)}); use "
                "BatchNorm1d for (N, C) or (N, C, L), BatchNorm2d for (N, C, H, W) and BatchNorm3d for (N, C, D, H, W)"
            )
        if input.shape[1] != self.num_features:
            raise ShapeError(
                f"{name}({self.num_features}): the input has {input.shape[1]} channels on axis 1 (shape "
                f"{tuple(input.shape)}), expected {self.num_features}; check num_features or transpose your input "
                "(channels on axis 1)"
            )
        update = self.training and self.track_running_stats
        nbt = self.num_batches_tracked + 1.0 if update else None
        use_batch = self.training or not self.track_running_stats
        y, rm, rv = F.batch_norm(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            use_batch,
            self.momentum,
            self.eps,
            num_batches_tracked=nbt,
            return_stats=True,
        )
        if update:
            store_state(self, {"num_batches_tracked": nbt, "running_mean": rm, "running_var": rv})
        return y

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    __doc__ = f"""Batch normalization of ``(N, C)`` or ``(N, C, L)``: in training mode each channel is normalized
    by the batch's statistics and the running statistics move towards them (the unbiased batch variance, as
    PyTorch); in evaluation mode the running statistics normalize. See ``nn.module`` for how the statistics update
    under ``grad``/``jit``/``vmap``.

    Args:{_BATCH_NORM_ARGS}

    Returns:
        A module mapping ``(N, C[, L])`` to the same shape.

    >>> bn = nn.BatchNorm1d(3)
    >>> _ = bn(fl.randn(8, 3))
    >>> int(bn.num_batches_tracked)
    1
    """

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    __doc__ = f"""Batch normalization of ``(N, C, H, W)`` over ``N, H, W`` per channel (see ``BatchNorm1d``).

    Args:{_BATCH_NORM_ARGS}

    Returns:
        A module mapping ``(N, C, H, W)`` to the same shape.

    >>> y = nn.BatchNorm2d(2)(fl.randn(4, 2, 3, 3))
    >>> bool(fl.all(fl.abs(y.mean(axis=(0, 2, 3))) < 1e-5))
    True
    """

    _ndims = (4,)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` axes (biased variance), then scale and shift.

    Args:
        normalized_shape: an int or the trailing shape normalized over.
        eps: added to the variance (default 1e-5).
        elementwise_affine: learn ``weight`` (ones) and ``bias`` (zeros) of that shape (default True).
        bias: learn the shift (default True).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).

    Returns:
        A module mapping a tensor to one of the same shape.

    >>> nn.LayerNorm(2)(fl.tensor([[1.0, 3.0]]))
    Tensor([[-0.999995,  0.999995]], dtype=float32)
    """

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        d = _dtype(dtype, device)
        ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = ns, eps, elementwise_affine
        _affine(self, ns, d, elementwise_affine, elementwise_affine and bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalize groups of channels of ``(N, C, ...)`` (with all spatial axes), then scale and shift per channel.

    Args:
        num_groups: the groups; ``num_channels`` must be a multiple.
        num_channels: the channels ``C`` (axis 1).
        eps: added to the variance (default 1e-5).
        affine: learn a per-channel ``weight`` and ``bias`` (default True).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).

    Returns:
        A module mapping ``(N, C, ...)`` to the same shape.

    >>> nn.GroupNorm(2, 4)(fl.ones((1, 4, 3))).shape
    (1, 4, 3)
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        _check_divides("GroupNorm", "num_groups", num_groups, "num_channels", num_channels)
        d = _dtype(dtype, device)
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine(self, (num_channels,), d, affine, affine)

    def forward(self, input):
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise ShapeError(
                f"GroupNorm({self.num_groups}, {self.num_channels}): expected input (N, {self.num_channels}, ...), "
                f"got shape {tuple(input.shape)}; check num_channels or transpose your input (channels on axis 1)"
            )
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


# ---------------------------------------------------------------------------------------------------------------
# Dropout and embedding


class Dropout(Module):
    """Zero elements with probability ``p`` in training mode, scaling the rest by ``1 / (1 - p)``; the identity in
    evaluation mode. Random numbers come from ``nn.rng``'s key when one is installed, else from the global generator.

    Args:
        p: the probability of zeroing an element (default 0.5).
        inplace: accepted for PyTorch compatibility and ignored (tensors are immutable).

    Returns:
        A module mapping a tensor to one of the same shape.

    >>> with nn.rng(fl.random.key(0)):
    ...     y = nn.Dropout(0.5)(fl.ones(6))
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    """

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        check_probability(p, type(self).__name__, "p")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout(Dropout):
    _nd = 2

    def forward(self, input):
        if not self.training or self.p == 0.0:
            return input
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise ShapeError(
                f"{type(self).__name__}: expected a {nd + 1}D or {nd + 2}D input, got {input.ndim}D (shape "
                f"{tuple(input.shape)}); use Dropout1d for (N, C, L), Dropout2d for (N, C, H, W), Dropout for others"
            )
        mask_shape = tuple(input.shape[: input.ndim - nd]) + (1,) * nd
        return input * F.dropout(fl.ones(mask_shape, dtype=input.dtype), self.p, True)


class Dropout1d(_ChannelDropout):
    __doc__ = f"""Zero whole channels of ``(N, C, L)`` (or ``(C, L)``) with probability ``p`` in training mode.

    Args:{_CHANNEL_DROPOUT_ARGS}

    Returns:
        A module mapping a tensor to one of the same shape.

    >>> nn.Dropout1d(0.5).eval()(fl.ones((2, 3, 4))).shape
    (2, 3, 4)
    """

    _nd = 1


class Dropout2d(_ChannelDropout):
    __doc__ = f"""Zero whole channels of ``(N, C, H, W)`` (or ``(C, H, W)``) with probability ``p`` in training
    mode.

    Args:{_CHANNEL_DROPOUT_ARGS}

    Returns:
        A module mapping a tensor to one of the same shape.

    >>> with nn.rng(fl.random.key(1)):
    ...     y = nn.Dropout2d(0.5)(fl.ones((1, 4, 2, 2)))
    >>> y[0, :, 0, 0].tolist() == y[0, :, 1, 1].tolist()  # a channel is kept or zeroed as a whole
    True
    """

    _nd = 2


class Embedding(Module):
    """A lookup table ``weight: (num_embeddings, embedding_dim)`` initialized ``N(0, 1)``; the ``padding_idx`` row
    starts at zero and gets no gradient.

    Args:
        num_embeddings: the rows.
        embedding_dim: the size of each row.
        padding_idx: a row kept at zero without gradient (default None).
        device: ``None`` or ``"cpu"``.
        dtype: the table's floating dtype (default ``fl.float32``).
        key: a ``fl.random`` key for the initialization (default: the global generator).

    Returns:
        A module mapping integer indices of any shape to ``(*indices.shape, embedding_dim)``.

    >>> nn.Embedding(10, 4)(fl.tensor([[1, 2], [3, 4]])).shape
    (2, 2, 4)
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        _weight=None,
        _freeze: bool = False,
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        super().__init__()
        d = _dtype(dtype, device)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} rows; pass an index in "
                    f"[-{num_embeddings}, {num_embeddings})"
                )
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            w = init.normal_(fl.empty((num_embeddings, embedding_dim), dtype=d), key=key)
            if padding_idx is not None:
                w = w.at[padding_idx].set(0.0)
        else:
            w = fl.asarray(_weight)
            if tuple(w.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(
                    f"Embedding: _weight has shape {tuple(w.shape)}, expected ({num_embeddings}, {embedding_dim}); "
                    "pass num_embeddings and embedding_dim matching it (or use Embedding.from_pretrained)"
                )
        self.weight = Parameter(w, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None) -> Embedding:
        """An ``Embedding`` holding ``embeddings`` (frozen by default)."""
        e = fl.asarray(embeddings)
        if e.ndim != 2:
            raise ShapeError(
                f"Embedding.from_pretrained: embeddings must be 2-d (num_embeddings, embedding_dim), got shape "
                f"{tuple(e.shape)}"
            )
        return cls(e.shape[0], e.shape[1], padding_idx, _weight=e, _freeze=freeze, dtype=e.dtype)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
