"""Resizing layers: ``Upsample`` (and PyTorch's ``UpsamplingNearest2d``/``UpsamplingBilinear2d``),
``PixelShuffle`` and ``PixelUnshuffle``, over ``F.interpolate`` and the pixel shuffles.

>>> import funclib as fl, funclib.nn as nn
>>> nn.Upsample(scale_factor=2, mode="bilinear")(fl.ones((1, 3, 4, 4))).shape
(1, 3, 8, 8)
"""

from __future__ import annotations

from funclib.checks import check_choice, check_int

from . import functional as F
from .functional._resample import MODES
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle"]


class Upsample(Module):
    """Resize the spatial axes of ``(N, C, *spatial)`` by ``F.interpolate``.

    Args:
        size: the output's spatial size, an int or one per axis.
        scale_factor: or a multiplier (one, or one per axis).
        mode: ``"nearest"``, ``"nearest-exact"``, ``"linear"``, ``"bilinear"``, ``"trilinear"`` or ``"area"``
            (default ``"nearest"``).
        align_corners: for the linear modes only (default None: False).
        recompute_scale_factor: map coordinates with ``in / out`` rather than ``scale_factor`` (default None).

    Returns:
        A module mapping ``(N, C, *spatial)`` to ``(N, C, *out_spatial)``.

    >>> nn.Upsample(scale_factor=2)(fl.tensor([[[1.0, 2.0]]]))
    Tensor([[[1., 1., 2., 2.]]], dtype=float32)
    """

    def __init__(
        self, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ):
        super().__init__()
        check_choice(mode, type(self).__name__, "mode", MODES)
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return F.interpolate(
            input, self.size, self.scale_factor, self.mode, self.align_corners, self.recompute_scale_factor
        )

    def extra_repr(self):
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of ``(N, C, H, W)`` (``Upsample(mode="nearest")``).

    Args:
        size: the output's ``(H, W)`` or an int.
        scale_factor: or a multiplier.

    Returns:
        A module mapping ``(N, C, H, W)`` to ``(N, C, H_out, W_out)``.

    >>> nn.UpsamplingNearest2d(scale_factor=2)(fl.ones((1, 1, 2, 2))).shape
    (1, 1, 4, 4)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of ``(N, C, H, W)`` with ``align_corners=True``, as PyTorch's class.

    Args:
        size: the output's ``(H, W)`` or an int.
        scale_factor: or a multiplier.

    Returns:
        A module mapping ``(N, C, H, W)`` to ``(N, C, H_out, W_out)``.

    >>> nn.UpsamplingBilinear2d(size=3)(fl.tensor([[[[0.0, 2.0]]]]))[0, 0, 0]
    Tensor([0., 1., 2.], dtype=float32)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """Rearrange ``(*, C * r**2, H, W)`` into ``(*, C, H * r, W * r)``.

    Args:
        upscale_factor: ``r``.

    Returns:
        A module mapping ``(*, C * r**2, H, W)`` to ``(*, C, H * r, W * r)``.

    >>> nn.PixelShuffle(2)(fl.ones((1, 8, 3, 3))).shape
    (1, 2, 6, 6)
    """

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = check_int(upscale_factor, "PixelShuffle", "upscale_factor", min=1)

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """Rearrange ``(*, C, H * r, W * r)`` into ``(*, C * r**2, H, W)``, the inverse of ``PixelShuffle``.

    Args:
        downscale_factor: ``r``.

    Returns:
        A module mapping ``(*, C, H * r, W * r)`` to ``(*, C * r**2, H, W)``.

    >>> nn.PixelUnshuffle(2)(fl.ones((1, 2, 6, 6))).shape
    (1, 8, 3, 3)
    """

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = check_int(downscale_factor, "PixelUnshuffle", "downscale_factor", min=1)

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"
