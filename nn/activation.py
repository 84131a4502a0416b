"""Activation layers: each wraps the function of the same name in ``nn.functional`` (PyTorch's constructor
arguments and reprs; ``inplace`` is accepted and ignored, since tensors are immutable).

>>> import funclib as fl, funclib.nn as nn
>>> nn.ReLU()(fl.tensor([-1.0, 2.0]))
Tensor([0., 2.], dtype=float32)
"""

from __future__ import annotations

from funclib.checks import check_number

from . import functional as F
from .module import Module


class ReLU(Module):
    """``max(x, 0)``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU6(Module):
    """``min(max(x, 0), 6)``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu6(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``x`` if ``x >= 0`` else ``negative_slope * x``."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class SELU(Module):
    """Scaled ELU with the self-normalizing constants."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.selu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class GELU(Module):
    """Gaussian error linear unit (``approximate='tanh'`` for the tanh form)."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Mish(Module):
    """``x * tanh(softplus(x))``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.mish(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def __init__(self):
        super().__init__()

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """Hyperbolic tangent."""

    def __init__(self):
        super().__init__()

    def forward(self, input):
        return F.tanh(input)


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold``."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def __init__(self):
        super().__init__()

    def forward(self, input):
        return F.softsign(input)


class Hardtanh(Module):
    """``clip(x, min_val, max_val)``."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        check_number(min_val, "Hardtanh", "min_val")
        check_number(max_val, "Hardtanh", "max_val")
        if max_val <= min_val:
            raise ValueError(
                f"Hardtanh: max_val must be greater than min_val, got min_val={min_val}, max_val={max_val}"
            )
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class Hardsigmoid(Module):
    """``relu6(x + 3) / 6``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardsigmoid(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Hardswish(Module):
    """``x * relu6(x + 3) / 6``."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardswish(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LogSigmoid(Module):
    """``log(sigmoid(x))``."""

    def __init__(self):
        super().__init__()

    def forward(self, input):
        return F.logsigmoid(input)


class Softmax(Module):
    """Softmax along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Module):
    """Softmin along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class GLU(Module):
    """Gated linear unit along ``dim``."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


__all__ = [
    "ReLU",
    "ReLU6",
    "LeakyReLU",
    "ELU",
    "SELU",
    "CELU",
    "GELU",
    "SiLU",
    "Mish",
    "Sigmoid",
    "Tanh",
    "Softplus",
    "Softsign",
    "Hardtanh",
    "Hardsigmoid",
    "Hardswish",
    "LogSigmoid",
    "Softmax",
    "LogSoftmax",
    "Softmin",
    "GLU",
]
