"""Argument conversions and checks shared by the functional layers (each error names the function)."""

from __future__ import annotations

import numpy as np

import funclib as fl
from funclib import dtypes
from funclib.checks import check_int, describe
from funclib.core import Tensor
from funclib.errors import DTypeError, ShapeError

from ..module import as_tensor


def as_float(x, op: str, what: str = "input") -> Tensor:
    x = as_tensor(x, op, what)
    if x.dtype not in dtypes.REAL_FLOATING:
        raise DTypeError(
            f"{op}: expected a floating-point {what}, got {x.dtype.name}; cast it with {what}.astype(fl.float32)"
        )
    return x


def zero(x):
    return fl.zeros((), dtype=x.dtype)


_MIN = {"kernel_size": 1, "stride": 1, "dilation": 1, "padding": 0, "output_padding": 0}


def ints(v, n: int, op: str, name: str) -> tuple[int, ...]:
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


def pool_args(nd, kernel_size, stride, padding, dilation, op):
    """Pooling's kernel, stride (default: the kernel), padding and dilation, checked (PyTorch's rule: padding at
    most half the kernel)."""
    k = ints(kernel_size, nd, op, "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else ints(stride, nd, op, "stride")
    p = ints(padding, nd, op, "padding")
    d = ints(dilation, nd, op, "dilation")
    for i in range(nd):
        if p[i] > k[i] // 2:
            raise ValueError(
                f"{op}: padding {p} must be at most half the kernel_size {k};"
                " lower padding or enlarge the kernel"
            )
    return k, s, p, d


def conv_padding_arg(padding, nd, stride, op):
    """A convolution's padding as given (``'valid'``, ``'same'``, ints), checked; ``'same'`` needs stride 1."""
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"{op}: padding must be an int, a tuple of ints, 'valid' or 'same', got {padding!r}")
        if padding == "same" and any(a != 1 for a in stride):
            raise ValueError(
                f"{op}: padding='same' needs stride 1 (strided 'same' is ambiguous), got stride {stride}; pass "
                "stride=1 or explicit padding"
            )
        return padding
    return ints(padding, nd, op, "padding")


def batched(x, nd, op):
    if x.ndim == nd + 2:
        return x, False
    if x.ndim == nd + 1:
        return fl.expand_dims(x, axis=0), True
    raise ShapeError(
        f"{op}: expected a {nd + 2}-d input (N, C, {', '.join('LHW'[-nd:] if nd < 3 else 'DHW')}) or an unbatched "
        f"{nd + 1}-d one, got shape {tuple(x.shape)}; reshape the input, channels on the axis after the batch"
    )


def channels_last(x, nd):
    return fl.permute_dims(x, (0, *range(2, nd + 2), 1))


def channels_first(x, nd):
    return fl.permute_dims(x, (0, nd + 1, *range(1, nd + 1)))


def documented(doc: str):
    """Give a function the docstring ``doc``, built from argument texts its variants share (``conv1d``/``conv2d``)."""

    def document(f):
        f.__doc__ = doc
        return f

    return document
