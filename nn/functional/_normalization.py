"""Batch, layer and group normalization, and ``normalize``."""

from __future__ import annotations

import math

import funclib as fl
from funclib.core import Tensor
from funclib.errors import ShapeError
from funclib.primitives._util import normalize_axis

from ._args import as_float


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

    Args:
        input: ``(N, C, ...)``.
        running_mean, running_var: ``(C,)`` or None (then the batch statistics always normalize).
        weight, bias: a per-channel scale and shift ``(C,)`` (default None).
        training: normalize with the batch statistics (default False).
        momentum: the batch's weight in the new running statistics; None for the cumulative average.
        eps: added to the variance (default 1e-5).
        num_batches_tracked: the batch count after this one, for ``momentum=None``.
        return_stats: also return the new running statistics (default False).

    Returns:
        The normalized tensor, or ``(out, new_running_mean, new_running_var)`` with ``return_stats``.

    >>> y = F.batch_norm(fl.tensor([[1.0], [3.0]]), None, None, training=True)
    >>> y
    Tensor([[-0.999995],
            [ 0.999995]], dtype=float32)
    """
    x = as_float(input, "batch_norm")
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
                f"batch_norm: {name} has shape {tuple(t.shape)} but the input {tuple(x.shape)} has {c} channels; pass "
                f"one value per channel, shape ({c},)"
            )
    axes = (0,) + tuple(range(2, x.ndim))
    cs = _channel_shape(x)
    new_stats = (running_mean, running_var)
    if training or running_mean is None:
        count = math.prod(x.shape[i] for i in axes)
        if training and count <= 1:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, got input of shape {tuple(x.shape)}"
                "; use a larger batch or evaluation mode (model.eval())"
            )
        mean = fl.mean(x, axis=axes, keepdims=True)
        xc = x - mean
        var = fl.mean(xc * xc, axis=axes, keepdims=True)
        if training and running_mean is not None:
            if momentum is None:
                if num_batches_tracked is None:
                    raise ValueError(
                        "batch_norm: momentum=None (cumulative average) needs num_batches_tracked; pass the count "
                        "after this batch, or a momentum"
                    )
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
    """Normalize over the trailing ``normalized_shape`` axes (biased variance), then scale and shift.

    Args:
        input: ``(*, *normalized_shape)``.
        normalized_shape: an int or the trailing shape.
        weight, bias: of that shape (default None).
        eps: added to the variance (default 1e-5).

    Returns:
        A tensor of the input's shape.

    >>> F.layer_norm(fl.tensor([[1.0, 3.0]]), 2)
    Tensor([[-0.999995,  0.999995]], dtype=float32)
    """
    x = as_float(input, "layer_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(ns) > x.ndim or tuple(x.shape[x.ndim - len(ns) :]) != ns:
        raise ShapeError(
            f"layer_norm: normalized_shape {ns} does not match the trailing dimensions of the input {tuple(x.shape)}; "
            "pass the input's trailing shape"
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
    """Normalize over groups of channels (and all spatial axes), then scale and shift per channel.

    Args:
        input: ``(N, C, ...)``.
        num_groups: the groups; ``C`` must be a multiple.
        weight, bias: a per-channel scale and shift ``(C,)`` (default None).
        eps: added to the variance (default 1e-5).

    Returns:
        A tensor of the input's shape.

    >>> F.group_norm(fl.tensor([[[1.0], [3.0], [5.0], [5.0]]]), 2).reshape(-1)
    Tensor([-0.999995,  0.999995,  0.      ,  0.      ], dtype=float32)
    """
    x = as_float(input, "group_norm")
    if x.ndim < 2 or x.shape[1] % num_groups:
        raise ShapeError(
            f"group_norm: the {x.shape[1] if x.ndim > 1 else '?'} channels of input {tuple(x.shape)} do not split "
            f"into num_groups={num_groups} groups; choose num_groups dividing the channels (axis 1)"
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


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``.

    Args:
        input: the tensor.
        p: the norm's order (default 2).
        dim: the axis (default 1).
        eps: the smallest norm divided by (default 1e-12).

    Returns:
        A tensor of the input's shape.

    >>> F.normalize(fl.tensor([[3.0, 4.0]]))
    Tensor([[0.6, 0.8]], dtype=float32)
    """
    x = as_float(input, "normalize")
    normalize_axis(dim, x.ndim, "normalize")
    n = fl.linalg.vector_norm(x, axis=dim, keepdims=True, ord=p)
    return x / fl.maximum(n, eps)
