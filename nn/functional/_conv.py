"""Convolutions (im2col patches and one batched matrix multiply), ``unfold`` and ``pad``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import funclib as fl
from funclib.core import Tensor
from funclib.errors import ShapeError
from funclib.primitives.conv import conv_patches, conv_patches_transpose
from funclib.primitives.dot import dot_general

from ._args import as_tensor, batched, channels_last, conv_padding_arg, documented, ints

_CONV_ARGS = """
        bias: ``(out,)`` (default None).
        stride: an int or one per spatial axis (default 1).
        padding: an int, one per axis, ``"valid"`` or ``"same"`` (default 0).
        dilation: spacing of the kernel's taps, an int or one per axis (default 1).
        groups: split the channels into this many independent groups (default 1)."""
_CONV_TRANSPOSE_ARGS = """
        bias: ``(out,)`` (default None).
        stride: an int or one per spatial axis (default 1).
        padding: removed from each side of the output, an int or one per axis (default 0).
        output_padding: added to one side of the output, below the stride or the dilation (default 0).
        groups: split the channels into this many independent groups (default 1).
        dilation: spacing of the kernel's taps (default 1)."""


def _conv_padding(padding, nd, k, dilation, stride, op):
    padding = conv_padding_arg(padding, nd, stride, op)
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


def conv(input, weight, bias, stride, padding, dilation, groups, nd, op):
    x, unbatched = batched(as_tensor(input, op), nd, op)
    if weight.ndim != nd + 2:
        raise ShapeError(f"{op}: weight must be {nd + 2}-d (out, in/groups, *kernel), got shape {tuple(weight.shape)}")
    n, c = x.shape[0], x.shape[1]
    o, cg = weight.shape[0], weight.shape[1]
    k = tuple(weight.shape[2:])
    if groups < 1 or c != cg * groups or o % groups:
        raise ShapeError(
            f"{op}: input with {c} channels (shape {tuple(x.shape)}) does not fit weight of shape "
            f"{tuple(weight.shape)} with groups={groups}: expected in_channels = weight.shape[1] * groups = "
            f"{cg * groups} and out_channels divisible by groups; check the weight or transpose your input (channels "
            "on axis 1)"
        )
    stride = ints(stride, nd, op, "stride")
    dilation = ints(dilation, nd, op, "dilation")
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


@documented(
    f"""1-d convolution (cross-correlation) of ``(N, C, L)`` with ``weight: (out, C / groups, k)``.

    Args:
        input: ``(N, C, L)`` or unbatched ``(C, L)``.
        weight: ``(out, C / groups, k)``.{_CONV_ARGS}

    Returns:
        ``(N, out, L_out)`` (unbatched: ``(out, L_out)``).

    >>> F.conv1d(fl.ones((1, 2, 5)), fl.ones((3, 2, 3))).shape
    (1, 3, 3)
    """
)
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    return conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


@documented(
    f"""2-d convolution (cross-correlation) of ``(N, C, H, W)`` with ``weight: (out, C / groups, kh, kw)``: one
    batched matrix multiply over im2col patches.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``.
        weight: ``(out, C / groups, kh, kw)``.{_CONV_ARGS}

    Returns:
        ``(N, out, H_out, W_out)`` (unbatched: ``(out, H_out, W_out)``).

    >>> F.conv2d(fl.ones((1, 1, 4, 4)), fl.ones((2, 1, 3, 3))).shape
    (1, 2, 2, 2)
    """
)
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    return conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, nd, op):
    x, unbatched = batched(as_tensor(input, op), nd, op)
    if weight.ndim != nd + 2:
        raise ShapeError(f"{op}: weight must be {nd + 2}-d (in, out/groups, *kernel), got shape {tuple(weight.shape)}")
    n, cin = x.shape[0], x.shape[1]
    og = weight.shape[1]
    k = tuple(weight.shape[2:])
    if groups < 1 or weight.shape[0] != cin or cin % groups:
        raise ShapeError(
            f"{op}: input with {cin} channels (shape {tuple(x.shape)}) does not fit weight of shape "
            f"{tuple(weight.shape)} with groups={groups}: expected weight.shape[0] = in_channels, divisible by groups; "
            "check the weight or transpose your input (channels on axis 1)"
        )
    stride = ints(stride, nd, op, "stride")
    dilation = ints(dilation, nd, op, "dilation")
    pad_ = ints(padding, nd, op, "padding")
    opad = ints(output_padding, nd, op, "output_padding")
    if bias is not None and tuple(bias.shape) != (og * groups,):
        raise ShapeError(
            f"{op}: bias must have shape ({og * groups},) (one entry per output channel), got {tuple(bias.shape)}"
        )
    for i in range(nd):
        if not (opad[i] < stride[i] or opad[i] < dilation[i]):
            raise ValueError(
                f"{op}: output_padding {opad} must be smaller than stride {stride} or dilation {dilation}; lower "
                "output_padding"
            )
    insz = tuple(x.shape[2:])
    outsz = tuple((insz[i] - 1) * stride[i] - 2 * pad_[i] + dilation[i] * (k[i] - 1) + opad[i] + 1 for i in range(nd))
    if any(s < 1 for s in outsz):
        raise ShapeError(f"{op}: the output spatial size {outsz} is not positive; reduce padding")
    rows = n * math.prod(insz)
    kk = math.prod(k)
    x2 = fl.reshape(channels_last(x, nd), (rows, cin))
    g = groups
    cout = og * g
    if g == 1:
        w2 = fl.reshape(channels_last(weight, nd), (cin, kk * og))
        cols = dot_general(x2, w2, (((1,), (0,)), ((), ())))  # (rows, K * Cout)
    else:
        cg = cin // g
        w3 = fl.reshape(channels_last(weight, nd), (g, cg, kk, og))
        x3 = fl.reshape(x2, (rows, g, cg))
        y = dot_general(x3, w3, (((2,), (1,)), ((1,), (0,))))  # (G, rows, K, Og)
        cols = fl.permute_dims(y, (1, 2, 0, 3))
    cols = fl.reshape(cols, (n, *insz, *k, cout))
    y = conv_patches_transpose(cols, outsz, strides=stride, padding=tuple((p, p) for p in pad_), dilation=dilation)
    if bias is not None:
        y = y + fl.reshape(bias, (cout,) + (1,) * nd)
    return y[0] if unbatched else y


@documented(
    f"""1-d transposed convolution (the adjoint of ``conv1d`` in its input) with ``weight: (C_in, out / groups,
    k)``; output size ``(L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    Args:
        input: ``(N, C_in, L)`` or unbatched ``(C_in, L)``.
        weight: ``(C_in, out / groups, k)``.{_CONV_TRANSPOSE_ARGS}

    Returns:
        ``(N, out, L_out)``.

    >>> F.conv_transpose1d(fl.ones((1, 2, 3)), fl.ones((2, 1, 2)), stride=2).shape
    (1, 1, 6)
    """
)
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    return conv_transpose(
        input, weight, bias, stride, padding, output_padding, groups, dilation, 1, "conv_transpose1d"
    )


@documented(
    f"""2-d transposed convolution (the adjoint of ``conv2d`` in its input) with ``weight: (C_in, out / groups,
    kh, kw)``; each output size ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    Args:
        input: ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_in, out / groups, kh, kw)``.{_CONV_TRANSPOSE_ARGS}

    Returns:
        ``(N, out, H_out, W_out)``.

    >>> F.conv_transpose2d(fl.ones((1, 2, 3, 3)), fl.ones((2, 1, 2, 2)), stride=2).shape
    (1, 1, 6, 6)
    """
)
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    return conv_transpose(
        input, weight, bias, stride, padding, output_padding, groups, dilation, 2, "conv_transpose2d"
    )


def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding 2-d blocks as columns: ``(N, C, H, W) -> (N, C * kh * kw, L)`` (PyTorch's layout).

    Args:
        input: ``(N, C, H, W)``.
        kernel_size: an int or ``(kh, kw)``.
        dilation: spacing of the taps (default 1).
        padding: zeros added on both sides (default 0).
        stride: an int or a pair (default 1).

    Returns:
        ``(N, C * kh * kw, L)`` with ``L`` the number of blocks.

    >>> F.unfold(fl.ones((1, 2, 4, 4)), 2).shape
    (1, 8, 9)
    """
    ints(kernel_size, 2, "unfold", "kernel_size")
    ints(stride, 2, "unfold", "stride")
    x = as_tensor(input, "unfold")
    if x.ndim != 4:
        raise ShapeError(f"unfold: expected a 4-d input (N, C, H, W), got shape {tuple(x.shape)}; add the batch axis")
    k = ints(kernel_size, 2, "unfold", "kernel_size")
    cols = conv_patches(
        x,
        k,
        strides=ints(stride, 2, "unfold", "stride"),
        padding=tuple((p, p) for p in ints(padding, 2, "unfold", "padding")),
        dilation=ints(dilation, 2, "unfold", "dilation"),
    )
    n, oh, ow, kh, kw, c = cols.shape
    return fl.reshape(fl.permute_dims(cols, (0, 5, 3, 4, 1, 2)), (n, c * kh * kw, oh * ow))


def pad(input, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """Constant padding in PyTorch's order: ``pad = (left_last, right_last, left_second_last, ...)``; negative
    widths crop.

    Args:
        input: the tensor.
        pad: pairs of widths, starting from the last axis.
        mode: only ``"constant"``.
        value: the fill value (default 0).

    Returns:
        The padded tensor.

    >>> F.pad(fl.ones((1, 2)), (1, 0))
    Tensor([[0., 1., 1.]], dtype=float32)
    """
    x = as_tensor(input, "pad")
    if mode != "constant":
        raise ValueError(
            f"pad: only mode='constant' is supported, got {mode!r}; reflect and replicate padding are not implemented "
            "here (funclib.numpy.pad has them)"
        )
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(
            f"pad: expected pairs for at most {x.ndim} dims, got {pad}; pass (left, right) widths per axis, last axis "
            "first"
        )
    width = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        width[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if any(lo < 0 or hi < 0 for lo, hi in width):
        neg = tuple(slice(-min(lo, 0), x.shape[i] + min(hi, 0)) for i, (lo, hi) in enumerate(width))
        x = x[neg]
        width = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    return fl.pad(x, width, constant_values=0 if value is None else value)
