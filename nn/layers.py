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


def _dtype(dtype, device=None):
    if device not in (None, "cpu"):
        raise ValueError(f"unknown device {device!r}; funclib runs on 'cpu'")
    d = dtypes.default_float if dtype is None else dtypes.canonicalize(dtype)
    if d not in dtypes.REAL_FLOATING:
        raise TypeError(f"layer parameters must be floating point, got dtype {d.name}")
    return d


def _uniform(shape, bound, d, key):
    return Parameter(init.uniform_(fl.empty(shape, dtype=d), -bound, bound, key=key))


class Identity(Module):
    """Returns its input (arguments to the constructor are ignored, as in PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight: (out_features, in_features)``.

    Init (PyTorch's): ``weight ~ U(-1/sqrt(in), 1/sqrt(in))`` (kaiming uniform with ``a=sqrt(5)``), same bound for
    ``bias``.

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
                f"must have {self.in_features} entries, got input of shape {tuple(input.shape)}"
            )
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y_k = x1 @ weight[k] @ x2 + bias[k]`` with ``weight: (out, in1, in2)``; init ``U(+-1/sqrt(in1))``."""

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
    """Flatten axes ``start_dim..end_dim`` into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return fl.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size``."""

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
                f"into unflattened_size {want}"
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
                f"groups={groups}"
            )
        if padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode='zeros' is supported, got {padding_mode!r}")
        d = _dtype(dtype, device)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = ints(kernel_size, nd, name, "kernel_size")
        self.stride = ints(stride, nd, name, "stride")
        if self._transposed and isinstance(padding, str):
            raise ValueError(f"{name}: padding must be an int or {nd} ints (no 'same'/'valid'), got {padding!r}")
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
        conv = F.conv1d if self._nd == 1 else F.conv2d
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def _check(self, input):
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2) or input.shape[-nd - 1] != self.in_channels:
            raise ShapeError(
                f"{type(self).__name__}({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}): "
                f"expected input of shape (N, {self.in_channels}, {', '.join('*' * nd)}) or unbatched "
                f"({self.in_channels}, ...), got {tuple(input.shape)}"
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
        return s


class Conv1d(_ConvNd):
    """1-d convolution over ``(N, C_in, L)``; ``weight: (out, in / groups, k)``, PyTorch's init."""

    _nd = 1


class Conv2d(_ConvNd):
    """2-d convolution over ``(N, C_in, H, W)``; ``weight: (out, in / groups, kh, kw)``; init
    ``U(+-1/sqrt(fan_in))`` for weight and bias with ``fan_in = in / groups * kh * kw``.

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
                    f"dilation {self.dilation}"
                )

    def forward(self, input, output_size=None):
        self._check(input)
        op = self._output_padding(input, output_size)
        conv = F.conv_transpose1d if self._nd == 1 else F.conv_transpose2d
        return conv(input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation)

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
                    f"between {base} and {base + max(self.stride[i], self.dilation[i]) - 1} are possible on axis {i}"
                )
            pads.append(extra)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution over ``(N, C_in, L)``; ``weight: (in, out / groups, k)``."""

    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution over ``(N, C_in, H, W)``; ``weight: (in, out / groups, kh, kw)``; PyTorch's
    init (fan_in computed from ``weight.shape[1] * kh * kw``). ``forward(x, output_size=...)`` picks the
    output padding.

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
    """1-d max pooling over ``(N, C, L)``."""

    _nd = 1


class MaxPool2d(_MaxPoolNd):
    """2-d max pooling over ``(N, C, H, W)`` (stride defaults to the kernel size).

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
    """1-d average pooling over ``(N, C, L)``."""

    _nd = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """2-d average pooling over ``(N, C, H, W)`` with PyTorch's divisors."""

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
    """Average ``(N, C, L)`` into ``output_size`` bins."""

    _nd = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average ``(N, C, H, W)`` into ``output_size`` bins (``1`` gives global average pooling)."""

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
        d = _dtype(dtype, device)
        name = type(self).__name__
        check_int(num_features, name, "num_features", min=1)
        check_number(eps, name, "eps", min=0.0)
        if momentum is not None:
            check_number(momentum, name, "momentum", min=0.0, max=1.0)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(fl.ones((num_features,), dtype=d))
            self.bias = Parameter(fl.zeros((num_features,), dtype=d))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", fl.zeros((num_features,), dtype=d))
            self.register_buffer("running_var", fl.ones((num_features,), dtype=d))
            self._register_counter("num_batches_tracked")
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

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
            raise ShapeError(f"{name}: expected {want} input (got {input.ndim}D input of shape {tuple(input.shape)})")
        if input.shape[1] != self.num_features:
            raise ShapeError(
                f"{name}({self.num_features}): the input has {input.shape[1]} channels on axis 1 (shape "
                f"{tuple(input.shape)}), expected {self.num_features}"
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
    """Batch normalization of ``(N, C)`` or ``(N, C, L)``; running statistics with momentum 0.1 and the unbiased
    batch variance, as PyTorch. See ``nn.module`` for how the statistics update under ``grad``/``jit``/``vmap``.

    >>> bn = nn.BatchNorm1d(3)
    >>> _ = bn(fl.randn(8, 3))
    >>> int(bn.num_batches_tracked)
    1
    """

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of ``(N, C, H, W)`` over ``N, H, W`` per channel (see ``BatchNorm1d``)."""

    _ndims = (4,)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` axes; ``weight`` ones and ``bias`` zeros of that shape."""

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
        if elementwise_affine:
            self.weight = Parameter(fl.ones(ns, dtype=d))
            if bias:
                self.bias = Parameter(fl.zeros(ns, dtype=d))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalize groups of channels of ``(N, C, ...)``; per-channel ``weight``/``bias``."""

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
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels={num_channels} must be divisible by num_groups={num_groups}")
        d = _dtype(dtype, device)
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(fl.ones((num_channels,), dtype=d))
            self.bias = Parameter(fl.zeros((num_channels,), dtype=d))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise ShapeError(
                f"GroupNorm({self.num_groups}, {self.num_channels}): expected input (N, {self.num_channels}, ...), "
                f"got shape {tuple(input.shape)}"
            )
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


# ---------------------------------------------------------------------------------------------------------------
# Dropout and embedding


class Dropout(Module):
    """Zero elements with probability ``p`` in training mode (scaling the rest by ``1 / (1 - p)``).

    Random numbers come from ``nn.rng``'s key when one is installed, else from the global generator.
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
            raise ShapeError(f"{type(self).__name__}: expected a {nd + 1}D or {nd + 2}D input, got {input.ndim}D")
        mask_shape = tuple(input.shape[: input.ndim - nd]) + (1,) * nd
        return input * F.dropout(fl.ones(mask_shape, dtype=input.dtype), self.p, True)


class Dropout1d(_ChannelDropout):
    """Zero whole channels of ``(N, C, L)`` with probability ``p``."""

    _nd = 1


class Dropout2d(_ChannelDropout):
    """Zero whole channels of ``(N, C, H, W)`` with probability ``p``."""

    _nd = 2


class Embedding(Module):
    """A lookup table ``weight: (num_embeddings, embedding_dim)`` initialized ``N(0, 1)``; the ``padding_idx`` row
    starts at zero and gets no gradient.

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
                raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} rows")
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
                    f"Embedding: _weight has shape {tuple(w.shape)}, expected ({num_embeddings}, {embedding_dim})"
                )
        self.weight = Parameter(w, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None) -> Embedding:
        """An ``Embedding`` holding ``embeddings`` (frozen by default)."""
        e = fl.asarray(embeddings)
        if e.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained: embeddings must be 2-d, got shape {tuple(e.shape)}")
        return cls(e.shape[0], e.shape[1], padding_idx, _weight=e, _freeze=freeze, dtype=e.dtype)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
