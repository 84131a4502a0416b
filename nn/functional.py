"""``nn.functional``: stateless layers, activations and losses with PyTorch's names, signatures and numerics.

Everything is a composition of funclib operations, so every transform applies. Convolutions run as one BLAS
matrix multiply over an im2col patch matrix (``funclib.primitives.conv``). Arguments follow PyTorch: channels
first (``N, C, H, W``), ``dim=`` for axes, losses take ``reduction=``.

>>> import funclib as fl
>>> import funclib.nn.functional as F
>>> F.cross_entropy(fl.zeros((2, 3)), fl.tensor([0, 2]))
Tensor(1.0986123, dtype=float32)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import funclib as fl
from funclib import dtypes
from funclib.checks import check_int, check_number, describe
from funclib.core import Tensor, Tracer, _state, _wrap
from funclib.errors import DTypeError, ShapeError
from funclib.ops.reductions import stable_shift
from funclib.primitives._util import normalize_axis
from funclib.primitives.conv import conv_patches, conv_patches_transpose
from funclib.primitives.dot import dot_general
from funclib.primitives.indexing import gather

from .module import _bernoulli_rows, next_key

__all__ = [
    "relu",
    "relu6",
    "leaky_relu",
    "elu",
    "selu",
    "celu",
    "gelu",
    "silu",
    "mish",
    "sigmoid",
    "tanh",
    "softplus",
    "softsign",
    "hardtanh",
    "hardsigmoid",
    "hardswish",
    "logsigmoid",
    "softmax",
    "log_softmax",
    "softmin",
    "glu",
    "dropout",
    "linear",
    "bilinear",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "unfold",
    "max_pool1d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "batch_norm",
    "layer_norm",
    "group_norm",
    "embedding",
    "one_hot",
    "pad",
    "normalize",
    "scaled_dot_product_attention",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
]


def _t(x, op: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    try:
        return fl.asarray(x)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}") from None


def _ft(x, op: str) -> Tensor:
    x = _t(x, op)
    if x.dtype not in dtypes.REAL_FLOATING:
        raise DTypeError(f"{op}: expected a floating-point input, got {x.dtype.name}; cast it with .astype(fl.float32)")
    return x


def _zero(x):
    return fl.zeros((), dtype=x.dtype)


# ---------------------------------------------------------------------------------------------------------------
# Activations


def relu(input, inplace: bool = False) -> Tensor:
    """``max(x, 0)``."""
    return fl.relu(input)


def relu6(input, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``."""
    return fl.relu6(input)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` for ``x >= 0``, else ``negative_slope * x``."""
    return fl.leaky_relu(input, negative_slope)


def elu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    return fl.elu(input, alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    return fl.elu(input, _SELU_ALPHA) * _SELU_SCALE


def celu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    x = _ft(input, "celu")
    return fl.elu(x / alpha, 1.0) * alpha if alpha != 1.0 else fl.elu(x, 1.0)


def gelu(input, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit; ``approximate="tanh"`` uses the tanh form."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return fl.gelu(input, approximate=approximate)


def silu(input, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    return fl.silu(input)


def mish(input, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    x = _ft(input, "mish")
    return x * fl.tanh(fl.softplus(x))


def sigmoid(input) -> Tensor:
    return fl.sigmoid(input)


def tanh(input) -> Tensor:
    return fl.tanh(input)


def softplus(input, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (as PyTorch)."""
    x = _ft(input, "softplus")
    sp = fl.softplus(x, beta)
    return fl.where(x * beta > threshold, x, sp)


def softsign(input) -> Tensor:
    """``x / (1 + |x|)``."""
    x = _ft(input, "softsign")
    return x / (fl.abs(x) + 1.0)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``clip(x, min_val, max_val)``."""
    check_number(min_val, "hardtanh", "min_val")
    check_number(max_val, "hardtanh", "max_val")
    return fl.clip(_ft(input, "hardtanh"), min_val, max_val)


def hardsigmoid(input, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return fl.relu6(_ft(input, "hardsigmoid") + 3.0) / 6.0


def hardswish(input, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    x = _ft(input, "hardswish")
    return x * fl.relu6(x + 3.0) / 6.0


def logsigmoid(input) -> Tensor:
    """``log(sigmoid(x))``, stable for large ``|x|``."""
    return fl.log_sigmoid(input)


def _dim(dim, x, op):
    if dim is None:
        # PyTorch's legacy choice for dim=None
        return 0 if x.ndim in (0, 1, 3) else 1
    return dim


def softmax(input, dim: int | None = None, dtype=None) -> Tensor:
    """Softmax along ``dim``."""
    x = _ft(input, "softmax") if dtype is None else _t(input, "softmax").astype(dtype)
    return fl.softmax(x, axis=_dim(dim, x, "softmax"))


def log_softmax(input, dim: int | None = None, dtype=None) -> Tensor:
    """Log-softmax along ``dim``."""
    x = _ft(input, "log_softmax") if dtype is None else _t(input, "log_softmax").astype(dtype)
    return fl.log_softmax(x, axis=_dim(dim, x, "log_softmax"))


def softmin(input, dim: int | None = None, dtype=None) -> Tensor:
    """``softmax(-x)`` along ``dim``."""
    x = _ft(input, "softmin") if dtype is None else _t(input, "softmin").astype(dtype)
    return fl.softmax(-x, axis=_dim(dim, x, "softmin"))


def glu(input, dim: int = -1) -> Tensor:
    """Gated linear unit: split ``dim`` in halves ``a, b`` and return ``a * sigmoid(b)``."""
    x = _ft(input, "glu")
    n = x.shape[dim]
    if n % 2:
        raise ShapeError(f"glu: dimension {dim} has odd size {n}; it must split into two halves")
    a, b = fl.split(x, 2, axis=dim)
    return a * fl.sigmoid(b)


# ---------------------------------------------------------------------------------------------------------------
# Dropout, linear


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False, *, key=None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training only).

    Args:
        input: the tensor.
        p: drop probability in ``[0, 1]``.
        training: off means identity.
        key: a ``fl.random`` key; default: split from ``nn.rng``'s key, else the global generator (eager only).
    """
    check_number(p, "dropout", "p", min=0.0, max=1.0)
    x = _ft(input, "dropout")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    k = next_key("dropout") if key is None else key
    keep = _bernoulli_rows(k, 1.0 - p, tuple(x.shape))
    return fl.where(keep, x * (1.0 / (1.0 - p)), _zero(x))


def linear(input, weight, bias=None) -> Tensor:
    """``input @ weight.T + bias`` with ``weight: (out_features, in_features)``."""
    x = _t(input, "linear")
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: input of shape {tuple(x.shape)} does not fit weight of shape {tuple(weight.shape)}; the last "
            f"axis of the input must have in_features={weight.shape[-1]} entries"
        )
    y = dot_general(x, weight, (((x.ndim - 1,), (1,)), ((), ())))
    return y + bias if bias is not None else y


def bilinear(input1, input2, weight, bias=None) -> Tensor:
    """``y_k = x1 @ weight[k] @ x2 + bias[k]`` with ``weight: (out, in1, in2)``."""
    x1, x2 = _t(input1, "bilinear"), _t(input2, "bilinear")
    if weight.ndim != 3 or x1.shape[-1] != weight.shape[1] or x2.shape[-1] != weight.shape[2]:
        raise ShapeError(
            f"bilinear: inputs {tuple(x1.shape)} and {tuple(x2.shape)} do not fit weight {tuple(weight.shape)} "
            "(expected last axes in1_features and in2_features)"
        )
    if x1.shape[:-1] != x2.shape[:-1]:
        raise ShapeError(f"bilinear: inputs must share leading dimensions, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    t = dot_general(x1, weight, (((x1.ndim - 1,), (1,)), ((), ())))  # (..., out, in2)
    y = fl.sum(t * fl.expand_dims(x2, axis=-2), axis=-1)
    return y + bias if bias is not None else y


# ---------------------------------------------------------------------------------------------------------------
# Convolution


_MIN = {"kernel_size": 1, "stride": 1, "dilation": 1, "padding": 0, "output_padding": 0}


def _tuple(v, n: int, op: str, name: str) -> tuple[int, ...]:
    """An int or ``n`` ints (one is repeated) as a tuple, each at least the argument's minimum (kernel sizes,
    strides and dilations 1, paddings 0)."""
    lo = _MIN.get(name)
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (check_int(v, op, name, min=lo),) * n
    if not isinstance(v, (tuple, list)):
        raise TypeError(f"{op}: {name} must be an int or a tuple of {n} ints, got {describe(v)}")
    v = tuple(check_int(a, op, name, min=lo) for a in v)
    if len(v) == 1 and n > 1:
        return v * n
    if len(v) != n:
        raise ValueError(f"{op}: {name} must be an int or {n} ints, got {v}")
    return v


def _pool_args(nd, kernel_size, stride, padding, dilation, op):
    """Pooling's kernel, stride (default: the kernel), padding and dilation, checked (PyTorch's rule: padding at
    most half the kernel)."""
    k = _tuple(kernel_size, nd, op, "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _tuple(stride, nd, op, "stride")
    p = _tuple(padding, nd, op, "padding")
    d = _tuple(dilation, nd, op, "dilation")
    for i in range(nd):
        if p[i] > k[i] // 2:
            raise ValueError(f"{op}: padding {p} must be at most half the kernel_size {k}")
    return k, s, p, d


def _conv_padding_arg(padding, nd, stride, op):
    """A convolution's padding as given (``'valid'``, ``'same'``, ints), checked; ``'same'`` needs stride 1."""
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"{op}: padding must be an int, a tuple of ints, 'valid' or 'same', got {padding!r}")
        if padding == "same" and any(a != 1 for a in stride):
            raise ValueError(f"{op}: padding='same' needs stride 1 (strided 'same' is ambiguous), got stride {stride}")
        return padding
    return _tuple(padding, nd, op, "padding")


def _conv_padding(padding, nd, k, dilation, stride, op):
    padding = _conv_padding_arg(padding, nd, stride, op)
    if padding == "valid":
        return ((0, 0),) * nd
    if padding == "same":
        tot = [dilation[i] * (k[i] - 1) for i in range(nd)]
        return tuple((t // 2, t - t // 2) for t in tot)
    return tuple((a, a) for a in padding)


def _check_fits(x, k, pad_, dilation, nd, op):
    """A ShapeError naming ``op`` when the (padded) input is smaller than the dilated kernel."""
    insz = tuple(x.shape[2:])
    for i in range(nd):
        if insz[i] + pad_[i][0] + pad_[i][1] < dilation[i] * (k[i] - 1) + 1:
            raise ShapeError(
                f"{op}: input spatial shape {insz} with padding {pad_} is smaller than the dilated kernel {k} "
                f"(dilation {dilation}); pad the input or use a smaller kernel"
            )


def _batched(x, nd, op):
    if x.ndim == nd + 2:
        return x, False
    if x.ndim == nd + 1:
        return fl.expand_dims(x, axis=0), True
    raise ShapeError(
        f"{op}: expected a {nd + 2}-d input (N, C, {', '.join('LHW'[-nd:] if nd < 3 else 'DHW')}) or an unbatched "
        f"{nd + 1}-d one, got shape {tuple(x.shape)}"
    )


def _channels_last(x, nd):
    return fl.permute_dims(x, (0, *range(2, nd + 2), 1))


def _channels_first(x, nd):
    return fl.permute_dims(x, (0, nd + 1, *range(1, nd + 1)))


def _conv(input, weight, bias, stride, padding, dilation, groups, nd, op):
    x, unbatched = _batched(_t(input, op), nd, op)
    if weight.ndim != nd + 2:
        raise ShapeError(f"{op}: weight must be {nd + 2}-d (out, in/groups, *kernel), got shape {tuple(weight.shape)}")
    n, c = x.shape[0], x.shape[1]
    o, cg = weight.shape[0], weight.shape[1]
    k = tuple(weight.shape[2:])
    if groups < 1 or c != cg * groups or o % groups:
        raise ShapeError(
            f"{op}: input with {c} channels (shape {tuple(x.shape)}) does not fit weight of shape "
            f"{tuple(weight.shape)} with groups={groups}: expected in_channels = weight.shape[1] * groups = "
            f"{cg * groups} and out_channels divisible by groups"
        )
    stride = _tuple(stride, nd, op, "stride")
    dilation = _tuple(dilation, nd, op, "dilation")
    pad_ = _conv_padding(padding, nd, k, dilation, stride, op)
    if bias is not None and tuple(bias.shape) != (o,):
        raise ShapeError(f"{op}: bias must have shape ({o},) (one entry per output channel), got {tuple(bias.shape)}")
    _check_fits(x, k, pad_, dilation, nd, op)
    # one (O, C * K) @ (C * K, out pixels) product per example and group, written straight into channels-first
    # (N, O, pixels): the weight is broadcast over the batch (a view), so the forward pass and both gradients are
    # batched GEMMs on contiguous matrices, with no layout copies
    cols = conv_patches(x, k, strides=stride, padding=pad_, dilation=dilation, channels_last=False)  # (N, C, *k, *out)
    osz = tuple(cols.shape[2 + nd :])
    m, kk, g, og = math.prod(osz), math.prod(k), groups, o // groups
    w4 = fl.broadcast_to(fl.reshape(weight, (1, g, og, cg * kk)), (n, g, og, cg * kk))
    y = dot_general(w4, fl.reshape(cols, (n, g, cg * kk, m)), (((3,), (2,)), ((0, 1), (0, 1))))  # (N, G, Og, pixels)
    y = fl.reshape(y, (n, o, *osz))
    if bias is not None:
        y = y + fl.reshape(bias, (o,) + (1,) * nd)
    return y[0] if unbatched else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """1-d convolution (cross-correlation) of ``(N, C, L)`` with ``weight: (out, C / groups, k)``."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """2-d convolution (cross-correlation) of ``(N, C, H, W)`` with ``weight: (out, C / groups, kh, kw)``.

    Args:
        stride, dilation: int or pair. padding: int, pair, ``"valid"`` or ``"same"``.
        groups: split channels into this many independent groups.

    >>> F.conv2d(fl.ones((1, 1, 4, 4)), fl.ones((2, 1, 3, 3))).shape
    (1, 2, 2, 2)
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, nd, op):
    x, unbatched = _batched(_t(input, op), nd, op)
    if weight.ndim != nd + 2:
        raise ShapeError(f"{op}: weight must be {nd + 2}-d (in, out/groups, *kernel), got shape {tuple(weight.shape)}")
    n, cin = x.shape[0], x.shape[1]
    og = weight.shape[1]
    k = tuple(weight.shape[2:])
    if groups < 1 or weight.shape[0] != cin or cin % groups:
        raise ShapeError(
            f"{op}: input with {cin} channels (shape {tuple(x.shape)}) does not fit weight of shape "
            f"{tuple(weight.shape)} with groups={groups}: expected weight.shape[0] = in_channels, divisible by groups"
        )
    stride = _tuple(stride, nd, op, "stride")
    dilation = _tuple(dilation, nd, op, "dilation")
    pad_ = _tuple(padding, nd, op, "padding")
    opad = _tuple(output_padding, nd, op, "output_padding")
    if bias is not None and tuple(bias.shape) != (og * groups,):
        raise ShapeError(
            f"{op}: bias must have shape ({og * groups},) (one entry per output channel), got {tuple(bias.shape)}"
        )
    for i in range(nd):
        if not (opad[i] < stride[i] or opad[i] < dilation[i]):
            raise ValueError(f"{op}: output_padding {opad} must be smaller than stride {stride} or dilation {dilation}")
    insz = tuple(x.shape[2:])
    outsz = tuple((insz[i] - 1) * stride[i] - 2 * pad_[i] + dilation[i] * (k[i] - 1) + opad[i] + 1 for i in range(nd))
    if any(s < 1 for s in outsz):
        raise ShapeError(f"{op}: the output spatial size {outsz} is not positive; reduce padding")
    rows = n * math.prod(insz)
    kk = math.prod(k)
    x2 = fl.reshape(_channels_last(x, nd), (rows, cin))
    g = groups
    cout = og * g
    if g == 1:
        w2 = fl.reshape(_channels_last(weight, nd), (cin, kk * og))
        cols = dot_general(x2, w2, (((1,), (0,)), ((), ())))  # (rows, K * Cout)
    else:
        cg = cin // g
        w3 = fl.reshape(_channels_last(weight, nd), (g, cg, kk, og))
        x3 = fl.reshape(x2, (rows, g, cg))
        y = dot_general(x3, w3, (((2,), (1,)), ((1,), (0,))))  # (G, rows, K, Og)
        cols = fl.permute_dims(y, (1, 2, 0, 3))
    cols = fl.reshape(cols, (n, *insz, *k, cout))
    y = conv_patches_transpose(cols, outsz, strides=stride, padding=tuple((p, p) for p in pad_), dilation=dilation)
    if bias is not None:
        y = y + fl.reshape(bias, (cout,) + (1,) * nd)
    return y[0] if unbatched else y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    """1-d transposed convolution of ``(N, C_in, L)`` with ``weight: (C_in, out / groups, k)``."""
    return _conv_transpose(
        input, weight, bias, stride, padding, output_padding, groups, dilation, 1, "conv_transpose1d"
    )


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    """2-d transposed convolution (the adjoint of ``conv2d`` in its input) with ``weight: (C_in, out / groups, kh,
    kw)``. Output size ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    >>> F.conv_transpose2d(fl.ones((1, 2, 3, 3)), fl.ones((2, 1, 2, 2)), stride=2).shape
    (1, 1, 6, 6)
    """
    return _conv_transpose(
        input, weight, bias, stride, padding, output_padding, groups, dilation, 2, "conv_transpose2d"
    )


def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding 2-d blocks as columns: ``(N, C, H, W) -> (N, C * kh * kw, L)`` (PyTorch's layout)."""
    _tuple(kernel_size, 2, "unfold", "kernel_size")
    _tuple(stride, 2, "unfold", "stride")
    x = _t(input, "unfold")
    if x.ndim != 4:
        raise ShapeError(f"unfold: expected a 4-d input (N, C, H, W), got shape {tuple(x.shape)}")
    k = _tuple(kernel_size, 2, "unfold", "kernel_size")
    cols = conv_patches(
        x,
        k,
        strides=_tuple(stride, 2, "unfold", "stride"),
        padding=tuple((p, p) for p in _tuple(padding, 2, "unfold", "padding")),
        dilation=_tuple(dilation, 2, "unfold", "dilation"),
    )
    n, oh, ow, kh, kw, c = cols.shape
    return fl.reshape(fl.permute_dims(cols, (0, 5, 3, 4, 1, 2)), (n, c * kh * kw, oh * ow))


# ---------------------------------------------------------------------------------------------------------------
# Pooling


def _pool_geometry(x, nd, kernel_size, stride, padding, dilation, ceil_mode, op):
    k, s, p, d = _pool_args(nd, kernel_size, stride, padding, dilation, op)
    insz = tuple(x.shape[2:])
    out, extra = [], []
    for i in range(nd):
        eff = d[i] * (k[i] - 1) + 1
        span = insz[i] + 2 * p[i] - eff
        if span < 0:
            raise ShapeError(
                f"{op}: input spatial shape {insz} (padding {p}) is smaller than the kernel {k} (dilation {d})"
            )
        o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= insz[i] + p[i]:
            o -= 1
        out.append(o)
        extra.append(max(0, (o - 1) * s[i] + eff - (insz[i] + 2 * p[i])))
    return k, s, p, d, tuple(out), tuple(extra)


def _blocks(x, nd, k, out):
    """Non-overlapping windows by reshape: ``(N, C, o1, k1, o2, k2, ...)`` after cropping the tail."""
    crop = (slice(None), slice(None)) + tuple(slice(0, out[i] * k[i]) for i in range(nd))
    if any(out[i] * k[i] != x.shape[2 + i] for i in range(nd)):
        x = x[crop]
    shape = (x.shape[0], x.shape[1]) + tuple(v for i in range(nd) for v in (out[i], k[i]))
    return fl.reshape(x, shape), tuple(3 + 2 * i for i in range(nd))


def _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd, op):
    x, unbatched = _batched(_ft(input, op), nd, op)
    k, s, p, d, out, extra = _pool_geometry(x, nd, kernel_size, stride, padding, dilation, ceil_mode, op)
    simple = s == k and not any(p) and all(v == 1 for v in d) and not any(extra)
    if simple and not return_indices:
        blocks, axes = _blocks(x, nd, k, out)
        y = fl.max(blocks, axis=axes)
    else:
        if any(p) or any(extra):
            x = fl.pad(x, [(0, 0), (0, 0)] + [(p[i], p[i] + extra[i]) for i in range(nd)], constant_values=-math.inf)
        cols = conv_patches(x, k, strides=s, dilation=d)  # (N, *out, *k, C)
        kaxes = tuple(range(1 + nd, 1 + 2 * nd))
        y = _channels_first(fl.max(cols, axis=kaxes), nd)
        if return_indices:
            flat = fl.reshape(cols, (*cols.shape[: 1 + nd], math.prod(k), cols.shape[-1]))
            arg = fl.argmax(flat, axis=1 + nd)  # (N, *out, C): index within the window
            idx = _window_to_input_index(arg, nd, k, s, p, d, out, tuple(input.shape[-nd:]))
            idx = _channels_first(idx, nd)
            return (y[0], idx[0]) if unbatched else (y, idx)
    return y[0] if unbatched else y


def _window_to_input_index(arg, nd, k, s, p, d, out, insz):
    """Flat input positions (PyTorch's ``return_indices``) of window-relative argmax ``arg: (N, *out, C)``."""
    flat = fl.zeros(arg.shape, dtype=fl.int64)
    rem = arg.astype(fl.int64)
    strides_k = [math.prod(k[i + 1 :]) for i in range(nd)]
    strides_in = [math.prod(insz[i + 1 :]) for i in range(nd)]
    for i in range(nd):
        ki = rem // strides_k[i]
        rem = rem - ki * strides_k[i]
        shape = [1] * (nd + 2)
        shape[1 + i] = out[i]
        base = fl.reshape(fl.arange(out[i], dtype=fl.int64) * s[i] - p[i], tuple(shape))
        flat = flat + (base + ki * d[i]) * strides_in[i]
    return flat


def max_pool1d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """1-d max pooling over ``(N, C, L)``."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d")


def max_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """2-d max pooling over ``(N, C, H, W)``; padding counts as ``-inf``. Tied maxima share the gradient equally
    (PyTorch gives it all to the first one).

    >>> F.max_pool2d(fl.arange(16.0).reshape(1, 1, 4, 4), 2)
    Tensor([[[[ 5.,  7.],
              [13., 15.]]]], dtype=float32)
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d")


def _avg_divisor(nd, k, s, p, out, insz, count_include_pad):
    """PyTorch's per-window divisor: the window clipped to the padded input (or to the input)."""
    per_axis = []
    for i in range(nd):
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], insz[i] + p[i])
        if count_include_pad:
            size = end - start
        else:
            size = np.minimum(end, insz[i]) - np.maximum(start, 0)
        per_axis.append(size.astype(np.float64))
    div = per_axis[0]
    for a in per_axis[1:]:
        div = np.multiply.outer(div, a)
    return div


def _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nd, op):
    if divisor_override is not None:
        check_int(divisor_override, op, "divisor_override", min=1)
    x, unbatched = _batched(_ft(input, op), nd, op)
    k, s, p, d, out, extra = _pool_geometry(x, nd, kernel_size, stride, padding, 1, ceil_mode, op)
    if s == k and not any(p) and not any(extra):
        blocks, axes = _blocks(x, nd, k, out)
        y = fl.sum(blocks, axis=axes)
        div = float(divisor_override or math.prod(k))
        y = y / div
    else:
        cols = conv_patches(x, k, strides=s, padding=tuple((p[i], p[i] + extra[i]) for i in range(nd)))
        y = _channels_first(fl.sum(cols, axis=tuple(range(1 + nd, 1 + 2 * nd))), nd)
        if divisor_override:
            y = y / float(divisor_override)
        else:
            div = _avg_divisor(nd, k, s, p, out, tuple(x.shape[2:]), count_include_pad)
            y = y / fl.asarray(div.astype(x.dtype))
    return y[0] if unbatched else y


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
    """1-d average pooling over ``(N, C, L)``."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")


def avg_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
):
    """2-d average pooling over ``(N, C, H, W)``, with PyTorch's divisors for padded and ceil-mode windows."""
    return _avg_pool(
        input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2, "avg_pool2d"
    )


def _adaptive_matrix(n_in: int, n_out: int, dtype) -> np.ndarray:
    a = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        lo = (i * n_in) // n_out
        hi = -((-(i + 1) * n_in) // n_out)
        a[i, lo:hi] = 1.0 / (hi - lo)
    return a.astype(dtype)


def _output_size(output_size, nd, op):
    """An adaptive pool's ``output_size``: positive ints, ``None`` keeping the input's size."""
    osz = (output_size,) * nd if isinstance(output_size, int) or output_size is None else output_size
    if not isinstance(osz, (tuple, list)) or len(osz) != nd:
        raise ValueError(f"{op}: output_size must be an int or {nd} ints (or None), got {output_size!r}")
    return tuple(None if o is None else check_int(o, op, "output_size", min=1) for o in osz)


def _adaptive_avg(input, output_size, nd, op):
    osz = _output_size(output_size, nd, op)
    x, unbatched = _batched(_ft(input, op), nd, op)
    insz = tuple(x.shape[2:])
    osz = tuple(insz[i] if osz[i] is None else osz[i] for i in range(nd))
    if all(insz[i] % osz[i] == 0 for i in range(nd)):
        blocks, axes = _blocks(x, nd, tuple(insz[i] // osz[i] for i in range(nd)), osz)
        y = fl.mean(blocks, axis=axes)
    else:
        y = x
        for i in range(nd):
            a = fl.asarray(_adaptive_matrix(insz[i], osz[i], x.dtype))
            ax = 2 + i
            y = dot_general(y, a, (((ax,), (1,)), ((), ())))  # the pooled axis moves last
            y = fl.moveaxis(y, -1, ax)
    return y[0] if unbatched else y


def adaptive_avg_pool1d(input, output_size) -> Tensor:
    """Average pooling of ``(N, C, L)`` to ``output_size`` bins (PyTorch's bin edges)."""
    return _adaptive_avg(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input, output_size) -> Tensor:
    """Average pooling of ``(N, C, H, W)`` to ``output_size`` (int, pair, ``None`` keeps a size) bins.

    >>> F.adaptive_avg_pool2d(fl.ones((1, 3, 7, 7)), 1).shape
    (1, 3, 1, 1)
    """
    return _adaptive_avg(input, output_size, 2, "adaptive_avg_pool2d")


# ---------------------------------------------------------------------------------------------------------------
# Normalization


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def batch_norm(
    input,
    running_mean,
    running_var,
    weight=None,
    bias=None,
    training: bool = False,
    momentum: float | None = 0.1,
    eps: float = 1e-5,
    *,
    num_batches_tracked=None,
    return_stats: bool = False,
):
    """Batch normalization over all axes but the channel axis 1.

    In training mode the batch statistics normalize; otherwise the running ones do. Tensors are immutable, so the
    running statistics are not updated in place: pass ``return_stats=True`` to get ``(out, new_running_mean,
    new_running_var)`` (momentum ``m``: ``new = (1 - m) * old + m * batch``, with the unbiased batch variance;
    ``momentum=None`` is the cumulative average and needs ``num_batches_tracked``, the count after this batch).
    ``nn.BatchNorm*`` stores them for you.
    """
    x = _ft(input, "batch_norm")
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input (N, C, ...) with at least 2 dims, got shape {tuple(x.shape)}")
    c = x.shape[1]
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(
                f"batch_norm: {name} has shape {tuple(t.shape)} but the input {tuple(x.shape)} has {c} channels"
            )
    axes = (0,) + tuple(range(2, x.ndim))
    cs = _channel_shape(x)
    new_stats = (running_mean, running_var)
    if training or running_mean is None:
        count = math.prod(x.shape[i] for i in axes)
        if training and count <= 1:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, got input of shape {tuple(x.shape)}"
            )
        mean = fl.mean(x, axis=axes, keepdims=True)
        xc = x - mean
        var = fl.mean(xc * xc, axis=axes, keepdims=True)
        if training and running_mean is not None:
            if momentum is None:
                if num_batches_tracked is None:
                    raise ValueError("batch_norm: momentum=None (cumulative average) needs num_batches_tracked")
                factor = 1.0 / fl.astype(num_batches_tracked, x.dtype)
            else:
                factor = momentum
            bm = fl.reshape(mean, (c,))
            bv = fl.reshape(var, (c,)) * (count / (count - 1))
            new_stats = (
                running_mean + (bm - running_mean) * factor,
                running_var + (bv - running_var) * factor,
            )
    else:
        xc = x - fl.reshape(running_mean, cs)
        var = fl.reshape(running_var, cs)
    scale = fl.rsqrt(var + eps)
    if weight is not None:
        scale = scale * fl.reshape(weight, cs)
    y = xc * scale
    if bias is not None:
        y = y + fl.reshape(bias, cs)
    return (y, *new_stats) if return_stats else y


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` axes (biased variance), then scale and shift."""
    x = _ft(input, "layer_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(ns) > x.ndim or tuple(x.shape[x.ndim - len(ns) :]) != ns:
        raise ShapeError(
            f"layer_norm: normalized_shape {ns} does not match the trailing dimensions of the input {tuple(x.shape)}"
        )
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    mean = fl.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = fl.mean(xc * xc, axis=axes, keepdims=True)
    y = xc * fl.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize over groups of channels (and all spatial axes), then scale and shift per channel."""
    x = _ft(input, "group_norm")
    if x.ndim < 2 or x.shape[1] % num_groups:
        raise ShapeError(
            f"group_norm: the {x.shape[1] if x.ndim > 1 else '?'} channels of input {tuple(x.shape)} do not split "
            f"into num_groups={num_groups} groups"
        )
    n, c = x.shape[0], x.shape[1]
    g = fl.reshape(x, (n, num_groups, c // num_groups) + tuple(x.shape[2:]))
    axes = tuple(range(2, g.ndim))
    mean = fl.mean(g, axis=axes, keepdims=True)
    gc = g - mean
    var = fl.mean(gc * gc, axis=axes, keepdims=True)
    y = fl.reshape(gc * fl.rsqrt(var + eps), tuple(x.shape))
    cs = _channel_shape(x)
    if weight is not None:
        y = y * fl.reshape(weight, cs)
    if bias is not None:
        y = y + fl.reshape(bias, cs)
    return y


# ---------------------------------------------------------------------------------------------------------------
# Embedding, one_hot, pad, normalize


def embedding(input, weight, padding_idx: int | None = None) -> Tensor:
    """Rows of ``weight: (num_embeddings, dim)`` at integer indices ``input``; the row at ``padding_idx`` gets no
    gradient."""
    idx = _t(input, "embedding")
    if idx.dtype not in dtypes.INTEGER:
        raise DTypeError(f"embedding: indices must be integers, got {idx.dtype.name}")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-d (num_embeddings, dim), got shape {tuple(weight.shape)}")
    if _state.trace is None and idx.size:
        lo, hi = int(fl.min(idx)), int(fl.max(idx))
        if lo < -weight.shape[0] or hi >= weight.shape[0]:
            raise IndexError(
                f"embedding: index {hi if hi >= weight.shape[0] else lo} is out of range for {weight.shape[0]} "
                "embeddings"
            )
    out = fl.take(weight, idx, axis=0)
    if padding_idx is not None:
        pad_ = padding_idx % weight.shape[0]
        mask = fl.expand_dims(idx == pad_, axis=-1)
        out = fl.where(mask, fl.stop_gradient(out), out)
    return out


def one_hot(tensor, num_classes: int = -1) -> Tensor:
    """One-hot int64 encoding with a new last axis (PyTorch's); ``num_classes=-1`` uses ``max + 1``."""
    x = _t(tensor, "one_hot")
    if x.dtype not in dtypes.INTEGER:
        raise DTypeError(f"one_hot: expected integer class indices, got {x.dtype.name}")
    if num_classes == -1:
        num_classes = int(fl.max(x)) + 1 if x.size else 0
    return fl.one_hot(x, num_classes, dtype=fl.int64)


def pad(input, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """PyTorch-order constant padding: ``pad = (left_last, right_last, left_second_last, ...)``."""
    x = _t(input, "pad")
    if mode != "constant":
        raise ValueError(f"pad: only mode='constant' is supported, got {mode!r}")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: expected pairs for at most {x.ndim} dims, got {pad}")
    width = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        width[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if any(lo < 0 or hi < 0 for lo, hi in width):
        neg = tuple(slice(-min(lo, 0), x.shape[i] + min(hi, 0)) for i, (lo, hi) in enumerate(width))
        x = x[neg]
        width = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    return fl.pad(x, width, constant_values=0 if value is None else value)


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``."""
    x = _ft(input, "normalize")
    normalize_axis(dim, x.ndim, "normalize")
    n = fl.linalg.vector_norm(x, axis=dim, keepdims=True, ord=p)
    return x / fl.maximum(n, eps)


# ---------------------------------------------------------------------------------------------------------------
# Attention


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    dropout_key=None,
) -> Tensor:
    """``softmax(q @ k.T * scale + mask) @ v`` over ``(..., L, E)`` queries and ``(..., S, E)`` keys.

    Args:
        attn_mask: boolean (True = may attend) or additive float mask, broadcastable to ``(..., L, S)``.
        dropout_p: dropout on the attention weights (draws from ``dropout_key`` or ``nn.rng``).
        is_causal: mask out keys after each query (upper triangle).
        scale: default ``1 / sqrt(E)``.
        enable_gqa: let query heads (axis -3) share fewer key/value heads.
    """
    q, k, v = _ft(query, "scaled_dot_product_attention"), _t(key, "sdpa"), _t(value, "sdpa")
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"scaled_dot_product_attention: query {tuple(q.shape)}, key {tuple(k.shape)} and value {tuple(v.shape)} "
            "must be (..., L, E), (..., S, E) and (..., S, Ev)"
        )
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k = fl.repeat(k, rep, axis=-3)
        v = fl.repeat(v, rep, axis=-3)
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = fl.matmul(q, fl.matrix_transpose(k)) * s
    lq, lk = q.shape[-2], k.shape[-2]
    neg = -math.inf
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
        causal = fl.asarray(np.tril(np.ones((lq, lk), bool)))
        scores = fl.where(causal, scores, neg)
    if attn_mask is not None:
        m = _t(attn_mask, "scaled_dot_product_attention")
        scores = fl.where(m, scores, neg) if m.dtype == fl.bool else scores + m
    w = fl.softmax(scores, axis=-1)
    if dropout_p > 0.0:
        w = dropout(w, dropout_p, True, key=dropout_key)
    return fl.matmul(w, v)


# ---------------------------------------------------------------------------------------------------------------
# Losses


def _reduce(loss, reduction: str, op: str):
    if reduction == "mean":
        return fl.mean(loss)
    if reduction == "sum":
        return fl.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _legacy(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    sa = True if size_average is None else size_average
    rd = True if reduce is None else reduce
    return "none" if not rd else ("mean" if sa else "sum")


def nll_loss(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input: (N, C, ...)``.

    The mean divides by the summed weights of the non-ignored targets (PyTorch's definition).
    """
    reduction = _legacy(size_average, reduce, reduction)
    x = _ft(input, "nll_loss")
    t = _t(target, "nll_loss")
    if t.dtype not in dtypes.INTEGER:
        raise DTypeError(f"nll_loss: target must hold integer class indices, got {t.dtype.name}")
    _check_target(x, t, "nll_loss")
    c = x.shape[1] if x.ndim > 1 else x.shape[0]
    rows, tflat, out_shape = _rows(x, t)
    if weight is None and not isinstance(t, Tracer) and not np.any(t.numpy() == ignore_index):
        # the common case (no weights, nothing ignored): the targets are known, so one gather picks the entries
        tf = tflat.numpy()
        _check_range_np(tf, c, "nll_loss")
        picked = _pick(rows, tf)
        if reduction == "none":
            return fl.reshape(-picked, out_shape)
        if reduction in ("sum", "mean"):
            return -(fl.sum(picked) if reduction == "sum" else fl.mean(picked))
        raise ValueError(f"nll_loss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    valid = tflat != ignore_index
    safe = fl.where(valid, tflat, 0)
    _check_range(safe, c, "nll_loss")
    picked = fl.take_along_axis(rows, fl.expand_dims(safe, axis=1), axis=1)[:, 0]
    w = fl.ones((c,), dtype=x.dtype) if weight is None else _t(weight, "nll_loss").astype(x.dtype)
    wt = fl.where(valid, fl.take(w, safe), _zero(x))
    loss = -picked * wt
    if reduction == "none":
        return fl.reshape(loss, out_shape)
    if reduction == "sum":
        return fl.sum(loss)
    if reduction == "mean":
        return fl.sum(loss) / fl.sum(wt)
    raise ValueError(f"nll_loss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _rows(x, t):
    """``(M, C)`` rows of ``x: (C,) | (N, C, d...)`` with matching flat targets and the per-sample output shape."""
    if x.ndim == 1:
        return fl.expand_dims(x, axis=0), fl.reshape(t, (1,)), ()
    c = x.shape[1]
    if x.ndim == 2:
        return x, t, (x.shape[0],)
    rows = fl.reshape(fl.moveaxis(x, 1, -1), (-1, c))
    return rows, fl.reshape(t, (-1,)), (x.shape[0],) + tuple(x.shape[2:])


def _check_target(x, t, op):
    want = () if x.ndim == 1 else (x.shape[0],) + tuple(x.shape[2:])
    if tuple(t.shape) != want:
        raise ShapeError(
            f"{op}: input of shape {tuple(x.shape)} needs class-index targets of shape {want}, got {tuple(t.shape)}"
        )


def _check_range(idx, c, op):
    if _state.trace is None and idx.size:
        _check_range_np(idx.numpy(), c, op)


def _check_range_np(idx: np.ndarray, c: int, op: str) -> None:
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= c:
            raise IndexError(f"{op}: target {hi if hi >= c else lo} is out of bounds for {c} classes")


def _pick(rows, targets: np.ndarray) -> Tensor:
    """``rows[i, targets[i]]`` for ``rows: (M, C)`` and known targets: one gather, its index built in NumPy."""
    idx = np.stack([np.arange(targets.shape[0]), targets.astype(np.int64, copy=False)], axis=1)
    return gather(rows, _wrap(idx), (0, 1))


def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy of logits ``input: (N, C, ...)`` (or ``(C,)``) against class indices or class probabilities.

    Args:
        target: integer class indices ``(N, ...)``, or floating probabilities shaped like ``input``.
        weight: per-class weights ``(C,)``.
        ignore_index: class index that contributes nothing (index targets only).
        reduction: ``'none' | 'mean' | 'sum'``; for index targets the mean divides by the summed weights of the
            non-ignored targets, for probability targets by the number of samples.
        label_smoothing: mix the target with the uniform distribution by this amount.

    >>> F.cross_entropy(fl.tensor([[2.0, 0.0]]), fl.tensor([0]))
    Tensor(0.12692805, dtype=float32)
    """
    reduction = _legacy(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"cross_entropy: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    x = _ft(input, "cross_entropy")
    t = _t(target, "cross_entropy")
    c = x.shape[1] if x.ndim > 1 else x.shape[0]
    if (
        weight is None
        and label_smoothing == 0.0
        and x.ndim <= 2
        and not isinstance(t, Tracer)
        and t.dtype in dtypes.INTEGER
        and not np.any(t.numpy() == ignore_index)
    ):
        # known class indices, nothing weighted or ignored: -log_softmax(x)[t] = log(sum(exp(x - m))) + (m - x[t])
        # with m the row max, a row reduction and one gather, without forming the (N, C) log-probabilities (a
        # third of the operations); m - x[t] is exact where x[t] is near m, so large logits lose no precision
        _check_target(x, t, "cross_entropy")
        rows, tflat, out_shape = _rows(x, t)
        tf = tflat.numpy()
        _check_range_np(tf, c, "cross_entropy")
        m, mk = stable_shift(rows, (1,))
        loss = fl.log(fl.sum(fl.exp(rows - mk), axis=1)) + (m - _pick(rows, tf))
        return fl.reshape(loss, out_shape) if reduction == "none" else _reduce(loss, reduction, "cross_entropy")
    logp = fl.log_softmax(x, axis=1 if x.ndim > 1 else 0)
    w = None if weight is None else _t(weight, "cross_entropy").astype(x.dtype)
    if w is not None and tuple(w.shape) != (c,):
        raise ShapeError(f"cross_entropy: weight must have shape ({c},), got {tuple(w.shape)}")
    if t.dtype in dtypes.REAL_FLOATING:
        if tuple(t.shape) != tuple(x.shape):
            raise ShapeError(
                f"cross_entropy: probability targets must have the input's shape {tuple(x.shape)}, got {tuple(t.shape)}"
            )
        if label_smoothing > 0.0:
            t = t * (1.0 - label_smoothing) + label_smoothing / c
        prod = logp * t
        if w is not None:
            prod = prod * fl.reshape(w, (c,) + (1,) * (x.ndim - 2) if x.ndim > 1 else (c,))
        loss = -fl.sum(prod, axis=1 if x.ndim > 1 else 0)
        return _reduce(loss, reduction, "cross_entropy")
    if t.dtype not in dtypes.INTEGER:
        raise DTypeError(
            f"cross_entropy: target must be integer class indices or float probabilities, got {t.dtype.name}"
        )
    nll = nll_loss(logp, t, w, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return nll
    rows, tflat, out_shape = _rows(logp, t)
    valid = tflat != ignore_index
    smooth = -fl.sum(rows * w if w is not None else rows, axis=1)
    smooth = fl.where(valid, smooth, _zero(x))
    if reduction == "none":
        smooth_r = fl.reshape(smooth, out_shape)
    elif reduction == "sum":
        smooth_r = fl.sum(smooth)
    elif w is not None:
        safe = fl.where(valid, tflat, 0)
        smooth_r = fl.sum(smooth) / fl.sum(fl.where(valid, fl.take(w, safe), _zero(x)))
    else:
        smooth_r = fl.sum(smooth) / fl.sum(valid.astype(x.dtype))
    return nll * (1.0 - label_smoothing) + smooth_r * (label_smoothing / c)


def _pair(input, target, op):
    x = _ft(input, op)
    t = _t(target, op)
    if tuple(x.shape) != tuple(t.shape):
        raise ShapeError(f"{op}: input shape {tuple(x.shape)} and target shape {tuple(t.shape)} must match")
    return x, t.astype(x.dtype) if t.dtype != x.dtype else t


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Mean squared error ``(x - y)**2``."""
    x, t = _pair(input, target, "mse_loss")
    d = x - t
    return _reduce(d * d, _legacy(size_average, reduce, reduction), "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Mean absolute error ``|x - y|``."""
    x, t = _pair(input, target, "l1_loss")
    return _reduce(fl.abs(x - t), _legacy(size_average, reduce, reduction), "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d**2 / beta`` for ``|d| < beta``, else ``|d| - 0.5 beta`` (``beta=0`` is L1)."""
    x, t = _pair(input, target, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    a = fl.abs(x - t)
    if beta == 0.0:
        loss = a
    else:
        loss = fl.where(a < beta, a * a * (0.5 / beta), a - 0.5 * beta)
    return _reduce(loss, _legacy(size_average, reduce, reduction), "smooth_l1_loss")


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``0.5 d**2`` for ``|d| <= delta``, else ``delta * (|d| - 0.5 delta)``."""
    x, t = _pair(input, target, "huber_loss")
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    a = fl.abs(x - t)
    loss = fl.where(a <= delta, a * a * 0.5, (a - 0.5 * delta) * delta)
    return _reduce(loss, reduction, "huber_loss")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``-w * (y log x + (1 - y) log(1 - x))`` for probabilities ``x``; logs are clamped at -100 (PyTorch)."""
    x, t = _pair(input, target, "binary_cross_entropy")
    if _state.trace is None and x.size and (float(fl.min(x)) < 0.0 or float(fl.max(x)) > 1.0):
        raise ValueError(
            "binary_cross_entropy: input values must lie in [0, 1]; use binary_cross_entropy_with_logits for logits"
        )
    lx = fl.maximum(fl.log(x), -100.0)
    l1x = fl.maximum(fl.log1p(-x), -100.0)
    loss = -(t * lx + (1.0 - t) * l1x)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction), "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None
) -> Tensor:
    """Sigmoid + binary cross entropy in one stable step; ``pos_weight`` weighs the positive term."""
    x, t = _pair(input, target, "binary_cross_entropy_with_logits")
    # -log(sigmoid(x)) = softplus(-x) and -log(1 - sigmoid(x)) = softplus(x), sharing log1p(exp(-|x|)); the
    # shorter (1 - t) x + softplus(-x) cancels catastrophically for large |x| (x = -20, t = 0 gives 0, not 2e-9)
    tail = fl.log1p(fl.exp(-fl.abs(x)))
    pos = fl.maximum(-x, 0.0) + tail
    neg = fl.maximum(x, 0.0) + tail
    if pos_weight is not None:
        loss = (1.0 - t) * neg + (pos_weight * t) * pos
    else:
        loss = (1.0 - t) * neg + t * pos
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction), "binary_cross_entropy_with_logits")


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL divergence with log-probabilities ``input``: ``target * (log(target) - input)`` pointwise.

    ``reduction='batchmean'`` divides the sum by the batch size (the mathematically correct mean); ``'mean'``
    averages over every element, as PyTorch does.
    """
    x, t = _pair(input, target, "kl_div")
    reduction = _legacy(size_average, reduce, reduction)
    if log_target:
        loss = fl.exp(t) * (t - x)
    else:
        safe = fl.where(t > 0, t, 1.0)
        loss = fl.where(t > 0, t * fl.log(safe), _zero(x)) - t * x  # 0 log 0 = 0
    if reduction == "batchmean":
        return fl.sum(loss) / (x.shape[0] if x.ndim else 1)
    return _reduce(loss, reduction, "kl_div")
