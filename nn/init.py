"""Parameter initializers with PyTorch's names and formulas. Tensors are immutable, so each returns a new tensor
with the shape and dtype of its first argument (``w = init.kaiming_uniform_(w, a=math.sqrt(5))``).

Every random initializer takes ``key=`` (a ``fl.random`` key); without one it draws from the global generator that
``fl.manual_seed`` sets.

>>> import funclib as fl, funclib.nn as nn
>>> w = nn.init.xavier_uniform_(fl.empty((4, 3)), key=fl.random.key(0))
"""

from __future__ import annotations

import math

import funclib as fl
from funclib import dtypes
from funclib import random as _random
from funclib.core import Tensor
from funclib.errors import ShapeError

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
]


def _key(key, op):
    return _random._next_key(op) if key is None else key


def _float_like(tensor, op) -> tuple[tuple[int, ...], object]:
    if not isinstance(tensor, Tensor):
        tensor = fl.asarray(tensor)
    d = tensor.dtype if tensor.dtype in dtypes.REAL_FLOATING else dtypes.default_float
    return tuple(tensor.shape), d


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table): 1 for linear/sigmoid, 5/3 for tanh, sqrt(2)
    for relu, sqrt(2 / (1 + slope**2)) for leaky_relu, 3/4 for selu.

    Args:
        nonlinearity: ``"linear"``, a convolution's name, ``"sigmoid"``, ``"tanh"``, ``"relu"``, ``"leaky_relu"``
            or ``"selu"``.
        param: leaky_relu's negative slope (default 0.01).

    Returns:
        The gain, a float.

    >>> nn.init.calculate_gain("relu")
    1.4142135623730951
    """
    linear = (
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    )
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(
        f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; use one of 'linear', 'conv1d', 'conv2d', "
        "'conv3d', 'conv_transpose1d', 'conv_transpose2d', 'conv_transpose3d', 'sigmoid', 'tanh', 'relu', "
        "'leaky_relu', 'selu'"
    )


def _fans(shape, op) -> tuple[int, int]:
    if len(shape) < 2:
        raise ShapeError(
            f"{op}: fan in and fan out need a tensor with at least 2 dimensions, got shape {shape}"
        )
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def uniform_(tensor, a: float = 0.0, b: float = 1.0, *, key=None) -> Tensor:
    """Values drawn uniformly from ``[a, b)``.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float).
        a: the lower bound (default 0).
        b: the upper bound (default 1).
        key: a ``fl.random`` key (default: the global generator).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.uniform_(w)``).

    >>> w = nn.init.uniform_(fl.empty((2, 3)), -0.1, 0.1, key=fl.random.key(0))
    >>> w.shape, bool(fl.all(fl.abs(w) <= 0.1))
    ((2, 3), True)
    """
    shape, d = _float_like(tensor, "uniform_")
    return _random.uniform(_key(key, "uniform_"), shape, d, minval=a, maxval=b)


def normal_(tensor, mean: float = 0.0, std: float = 1.0, *, key=None) -> Tensor:
    """Values drawn from ``N(mean, std**2)``.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float).
        mean: the mean (default 0).
        std: the standard deviation (default 1).
        key: a ``fl.random`` key (default: the global generator).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.normal_(w)``).

    >>> nn.init.normal_(fl.empty(1000), 2.0, 0.5, key=fl.random.key(0)).mean() > 1.9
    Tensor(True, dtype=bool)
    """
    shape, d = _float_like(tensor, "normal_")
    z = _random.normal(_key(key, "normal_"), shape, d)
    return z * std + mean if (std != 1.0 or mean != 0.0) else z


def trunc_normal_(
    tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, *, key=None
) -> Tensor:
    """Values from ``N(mean, std**2)`` truncated to ``[a, b]`` (absolute bounds, as in PyTorch).

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float).
        mean: the mean (default 0).
        std: the standard deviation (default 1).
        a: the lower bound (default -2).
        b: the upper bound (default 2).
        key: a ``fl.random`` key (default: the global generator).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.trunc_normal_(w)``).

    >>> w = nn.init.trunc_normal_(fl.empty(1000), std=1.0, a=-1.0, b=1.0, key=fl.random.key(0))
    >>> bool(fl.all(fl.abs(w) <= 1.0))
    True
    """
    shape, d = _float_like(tensor, "trunc_normal_")
    z = _random.truncated_normal(_key(key, "trunc_normal_"), (a - mean) / std, (b - mean) / std, shape, d)
    return z * std + mean


def constant_(tensor, val: float) -> Tensor:
    """Every value set to ``val``.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float).
        val: the value.

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.constant_(w)``).

    >>> nn.init.constant_(fl.empty(3), 0.5)
    Tensor([0.5, 0.5, 0.5], dtype=float32)
    """
    shape, d = _float_like(tensor, "constant_")
    return fl.full(shape, val, dtype=d)


def ones_(tensor) -> Tensor:
    """Every value set to 1.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.ones_(w)``).

    >>> nn.init.ones_(fl.empty(2))
    Tensor([1., 1.], dtype=float32)
    """
    return constant_(tensor, 1.0)


def zeros_(tensor) -> Tensor:
    """Every value set to 0.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.zeros_(w)``).

    >>> nn.init.zeros_(fl.empty(2))
    Tensor([0., 0.], dtype=float32)
    """
    return constant_(tensor, 0.0)


def eye_(tensor) -> Tensor:
    """The identity matrix (2-d tensors only).

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.eye_(w)``).

    >>> nn.init.eye_(fl.empty((2, 3)))
    Tensor([[1., 0., 0.],
            [0., 1., 0.]], dtype=float32)
    """
    shape, d = _float_like(tensor, "eye_")
    if len(shape) != 2:
        raise ShapeError(f"eye_: only 2-d tensors are supported, got shape {shape}")
    return fl.eye(shape[0], shape[1], dtype=d)


def xavier_uniform_(tensor, gain: float = 1.0, *, key=None) -> Tensor:
    """Glorot uniform: ``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))``.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float). At least 2-d.
        gain: a scale factor (default 1; see ``calculate_gain``).
        key: a ``fl.random`` key (default: the global generator).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.xavier_uniform_(w)``).

    >>> w = nn.init.xavier_uniform_(fl.empty((4, 6)), key=fl.random.key(0))
    >>> bool(fl.all(fl.abs(w) <= 1.0))
    True
    """
    shape, _ = _float_like(tensor, "xavier_uniform_")
    fan_in, fan_out = _fans(shape, "xavier_uniform_")
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, key=key)


def xavier_normal_(tensor, gain: float = 1.0, *, key=None) -> Tensor:
    """Glorot normal: ``N(0, std**2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float). At least 2-d.
        gain: a scale factor (default 1; see ``calculate_gain``).
        key: a ``fl.random`` key (default: the global generator).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.xavier_normal_(w)``).

    >>> nn.init.xavier_normal_(fl.empty((4, 6)), key=fl.random.key(0)).shape
    (4, 6)
    """
    shape, _ = _float_like(tensor, "xavier_normal_")
    fan_in, fan_out = _fans(shape, "xavier_normal_")
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), key=key)


def _kaiming_std(tensor, a, mode, nonlinearity, op):
    shape, _ = _float_like(tensor, op)
    if 0 in shape:
        return 0.0
    fan_in, fan_out = _fans(shape, op)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(
    tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", *, key=None
) -> Tensor:
    """He uniform: ``U(-b, b)`` with ``b = gain * sqrt(3 / fan)``. ``Linear`` and ``Conv`` use
    ``a=sqrt(5)``, which gives ``b = 1 / sqrt(fan_in)``.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float). At least 2-d.
        a: the negative slope of the leaky_relu that follows (default 0).
        mode: ``"fan_in"`` (keeps the forward variance) or ``"fan_out"`` (the backward one).
        nonlinearity: the nonlinearity whose ``calculate_gain`` is used (default ``"leaky_relu"``).
        key: a ``fl.random`` key (default: the global generator).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.kaiming_uniform_(w)``).

    >>> w = nn.init.kaiming_uniform_(fl.empty((3, 4)), a=5 ** 0.5, key=fl.random.key(0))
    >>> bool(fl.all(fl.abs(w) <= 0.5))
    True
    """
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    return uniform_(tensor, -bound, bound, key=key)


def kaiming_normal_(
    tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", *, key=None
) -> Tensor:
    """He normal: ``N(0, std**2)`` with ``std = gain / sqrt(fan)``.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float). At least 2-d.
        a: the negative slope of the leaky_relu that follows (default 0).
        mode: ``"fan_in"`` (keeps the forward variance) or ``"fan_out"`` (the backward one).
        nonlinearity: the nonlinearity whose ``calculate_gain`` is used (default ``"leaky_relu"``).
        key: a ``fl.random`` key (default: the global generator).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.kaiming_normal_(w)``).

    >>> nn.init.kaiming_normal_(fl.empty((3, 4)), nonlinearity="relu", key=fl.random.key(0)).shape
    (3, 4)
    """
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_"), key=key)


def orthogonal_(tensor, gain: float = 1.0, *, key=None) -> Tensor:
    """A (semi-)orthogonal matrix, flattened over the trailing dimensions; the QR signs are fixed so the draw is
    uniform (Haar), as in PyTorch.

    Args:
        tensor: gives the shape and dtype (a non-floating one becomes the default float). At least 2-d.
        gain: a scale factor (default 1; see ``calculate_gain``).
        key: a ``fl.random`` key (default: the global generator).

    Returns:
        A new tensor (tensors are immutable: assign it, ``w = init.orthogonal_(w)``).

    >>> q = nn.init.orthogonal_(fl.empty((3, 3)), key=fl.random.key(0))
    >>> bool(fl.all(fl.abs(q @ q.T - fl.eye(3)) < 1e-5))
    True
    """
    shape, d = _float_like(tensor, "orthogonal_")
    if len(shape) < 2:
        raise ShapeError(
            f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape {shape}"
        )
    rows = shape[0]
    cols = math.prod(shape[1:])
    flat = _random.normal(_key(key, "orthogonal_"), (rows, cols), fl.float64)
    if rows < cols:
        flat = fl.matrix_transpose(flat)
    q, r = fl.linalg.qr(flat)
    q = q * fl.sign(fl.diagonal(r))
    if rows < cols:
        q = fl.matrix_transpose(q)
    return fl.reshape(q * gain, shape).astype(d)
