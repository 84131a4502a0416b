"""Activation functions."""

from __future__ import annotations

import funclib as fl
from funclib.checks import check_number
from funclib.core import Tensor
from funclib.errors import ShapeError

from ._args import as_float, as_tensor


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
    x = as_float(input, "celu")
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
    x = as_float(input, "mish")
    return x * fl.tanh(fl.softplus(x))


def sigmoid(input) -> Tensor:
    return fl.sigmoid(input)


def tanh(input) -> Tensor:
    return fl.tanh(input)


def softplus(input, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (as PyTorch)."""
    x = as_float(input, "softplus")
    sp = fl.softplus(x, beta)
    return fl.where(x * beta > threshold, x, sp)


def softsign(input) -> Tensor:
    """``x / (1 + |x|)``."""
    x = as_float(input, "softsign")
    return x / (fl.abs(x) + 1.0)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``clip(x, min_val, max_val)``."""
    check_number(min_val, "hardtanh", "min_val")
    check_number(max_val, "hardtanh", "max_val")
    return fl.clip(as_float(input, "hardtanh"), min_val, max_val)


def hardsigmoid(input, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return fl.relu6(as_float(input, "hardsigmoid") + 3.0) / 6.0


def hardswish(input, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    x = as_float(input, "hardswish")
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
    x = as_float(input, "softmax") if dtype is None else as_tensor(input, "softmax").astype(dtype)
    return fl.softmax(x, axis=_dim(dim, x, "softmax"))


def log_softmax(input, dim: int | None = None, dtype=None) -> Tensor:
    """Log-softmax along ``dim``."""
    x = as_float(input, "log_softmax") if dtype is None else as_tensor(input, "log_softmax").astype(dtype)
    return fl.log_softmax(x, axis=_dim(dim, x, "log_softmax"))


def softmin(input, dim: int | None = None, dtype=None) -> Tensor:
    """``softmax(-x)`` along ``dim``."""
    x = as_float(input, "softmin") if dtype is None else as_tensor(input, "softmin").astype(dtype)
    return fl.softmax(-x, axis=_dim(dim, x, "softmin"))


def glu(input, dim: int = -1) -> Tensor:
    """Gated linear unit: split ``dim`` in halves ``a, b`` and return ``a * sigmoid(b)``."""
    x = as_float(input, "glu")
    n = x.shape[dim]
    if n % 2:
        raise ShapeError(f"glu: dimension {dim} has odd size {n}; it must split into two halves")
    a, b = fl.split(x, 2, axis=dim)
    return a * fl.sigmoid(b)
