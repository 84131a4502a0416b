"""Normalization layers beyond batch, layer and group norm: ``InstanceNorm1d/2d/3d``, ``RMSNorm`` and
``LocalResponseNorm``, with PyTorch's parameter names, defaults and running-statistics rules.

>>> import funclib as fl, funclib.nn as nn
>>> nn.RMSNorm(4)(fl.ones((2, 4))).shape
(2, 4)
"""

from __future__ import annotations

import funclib as fl
from funclib.checks import check_int, check_number
from funclib.errors import ShapeError

from . import functional as F
from .layers import _dtype, _norm_stats
from .module import Module, Parameter, store_state

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "RMSNorm", "LocalResponseNorm"]

_INSTANCE_NORM_ARGS = """
        num_features: the channels ``C`` (axis 1, or axis 0 of an unbatched input).
        eps: added to the variance (default 1e-5).
        momentum: weight of the batch in the running statistics; None is 0, as in PyTorch (default 0.1).
        affine: learn a per-channel scale ``weight`` and shift ``bias`` (default False).
        track_running_stats: keep running statistics, which normalize in evaluation mode (default False).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``)."""


class _InstanceNorm(Module):
    _nd = 1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        _norm_stats(self, num_features, eps, momentum, affine, track_running_stats, _dtype(dtype, device))

    def forward(self, input):
        name, nd = type(self).__name__, self._nd
        if input.ndim not in (nd + 1, nd + 2):
            axes = ", ".join("LHW"[-nd:] if nd < 3 else "DHW")
            raise ShapeError(
                f"{name}: expected input of shape (N, C, {axes}) or unbatched (C, {axes}), got "
                f"{tuple(input.shape)}; use InstanceNorm{input.ndim - 2 if input.ndim > 2 else 1}d for that rank"
            )
        unbatched = input.ndim == nd + 1
        x = fl.expand_dims(input, axis=0) if unbatched else input
        if (self.affine or self.track_running_stats) and x.shape[1] != self.num_features:
            raise ShapeError(
                f"{name}({self.num_features}): the input has {x.shape[1]} channels (shape {tuple(input.shape)}), "
                f"expected {self.num_features}; check num_features or transpose your input (channels first)"
            )
        use_input = self.training or not self.track_running_stats
        y, rm, rv = F.instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, use_input,
            0.0 if self.momentum is None else self.momentum, self.eps, return_stats=True,
        )
        if self.training and self.track_running_stats:
            store_state(self, {"running_mean": rm, "running_var": rv})
        return y[0] if unbatched else y

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    __doc__ = f"""Instance normalization of ``(N, C, L)`` (or unbatched ``(C, L)``): each example's channels are
    normalized over ``L`` by their own statistics.

    Args:{_INSTANCE_NORM_ARGS}

    Returns:
        A module mapping ``(N, C, L)`` to the same shape.

    >>> nn.InstanceNorm1d(1)(fl.tensor([[[1.0, 3.0]]]))
    Tensor([[[-0.999995,  0.999995]]], dtype=float32)
    """

    _nd = 1


class InstanceNorm2d(_InstanceNorm):
    __doc__ = f"""Instance normalization of ``(N, C, H, W)`` (or unbatched ``(C, H, W)``) over ``H, W``.

    Args:{_INSTANCE_NORM_ARGS}

    Returns:
        A module mapping ``(N, C, H, W)`` to the same shape.

    >>> nn.InstanceNorm2d(3, affine=True)(fl.randn(2, 3, 4, 4)).shape
    (2, 3, 4, 4)
    """

    _nd = 2


class InstanceNorm3d(_InstanceNorm):
    __doc__ = f"""Instance normalization of ``(N, C, D, H, W)`` (or unbatched ``(C, D, H, W)``) over ``D, H, W``.

    Args:{_INSTANCE_NORM_ARGS}

    Returns:
        A module mapping ``(N, C, D, H, W)`` to the same shape.

    >>> nn.InstanceNorm3d(3)(fl.randn(2, 3, 2, 4, 4)).shape
    (2, 3, 2, 4, 4)
    """

    _nd = 3


class RMSNorm(Module):
    """Root-mean-square normalization over the trailing ``normalized_shape`` axes, then a learned elementwise scale
    (no centering, no shift), as ``torch.nn.RMSNorm``.

    Args:
        normalized_shape: an int or the trailing shape normalized over.
        eps: added to the mean square (default None: the machine epsilon of the input's dtype).
        elementwise_affine: learn ``weight`` (ones) of that shape (default True).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).

    Returns:
        A module mapping a tensor to one of the same shape.

    >>> nn.RMSNorm(2, eps=0.0)(fl.tensor([[3.0, 4.0]]))
    Tensor([[0.84852815, 1.1313709 ]], dtype=float32)
    """

    def __init__(
        self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None, dtype=None
    ):
        super().__init__()
        d = _dtype(dtype, device)
        ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        for n in ns:
            check_int(n, "RMSNorm", "normalized_shape", min=1)
        if eps is not None:
            check_number(eps, "RMSNorm", "eps", min=0.0)
        self.normalized_shape, self.eps, self.elementwise_affine = ns, eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(fl.ones(ns, dtype=d))
        else:
            self.register_parameter("weight", None)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Local response normalization across channels (AlexNet's), as ``torch.nn.LocalResponseNorm``.

    Args:
        size: the channels in each window.
        alpha: the scale of the mean square (default 1e-4).
        beta: the exponent (default 0.75).
        k: the additive constant (default 1).

    Returns:
        A module mapping ``(N, C, *)`` to the same shape.

    >>> nn.LocalResponseNorm(2, alpha=1.0, beta=1.0)(fl.ones((1, 3, 1))).reshape(-1)
    Tensor([0.6666667, 0.5      , 0.5      ], dtype=float32)
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        check_int(size, "LocalResponseNorm", "size", min=1)
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
