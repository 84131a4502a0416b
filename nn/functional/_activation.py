"""Activation functions. Each states its formula and the output of its example (the input ``[-1, 0, 0.5, 2]``)
in ``@_documented``, which writes the docstring; ``nn.activation`` builds its layers' docstrings from the same."""

from __future__ import annotations

import inspect

import funclib as fl
from funclib.checks import check_number
from funclib.core import Tensor
from funclib.errors import ShapeError

from ._args import as_float, as_tensor

# what each argument means, in the functions' and the layers' docstrings
ARG_DOCS = {
    "input": "the tensor (floating point).",
    "inplace": "accepted for PyTorch compatibility and ignored: tensors are immutable (default False).",
    "negative_slope": "the slope for negative inputs (default 0.01).",
    "alpha": "the scale of the negative part (default 1.0).",
    "approximate": "``'none'`` (exact, with erf) or ``'tanh'`` (the tanh approximation).",
    "beta": "the sharpness (default 1.0).",
    "threshold": "above ``beta * x > threshold`` the output is ``x`` itself (default 20.0).",
    "min_val": "the lower bound (default -1.0).",
    "max_val": "the upper bound (default 1.0).",
    "dim": "the axis (``None``: PyTorch's legacy choice, axis 0 for 0-d, 1-d and 3-d inputs, else 1).",
    "dtype": "cast the input to this dtype first (default None).",
}
EXAMPLE_INPUT = "fl.tensor([-1.0, 0.0, 0.5, 2.0])"


def _documented(formula: str, output: str, args: str = ""):
    """Write an activation's docstring: ``formula``, Args, Returns and the example ``F.name(EXAMPLE_INPUT{args})``
    printing ``output``."""

    def document(f):
        params = "".join(f"\n        {k}: {ARG_DOCS[k]}" for k in inspect.signature(f).parameters)
        f.__doc__ = (
            f"{formula}\n\n    Args:{params}\n\n    Returns:\n        A tensor of the input's shape"
            f"{' (halved on dim)' if f.__name__ == 'glu' else ''}.\n\n"
            f"    >>> F.{f.__name__}({EXAMPLE_INPUT}{args})\n    Tensor({output}, dtype=float32)\n    "
        )
        return f

    return document


@_documented("``max(x, 0)``.", "[0. , 0. , 0.5, 2. ]")
def relu(input, inplace: bool = False) -> Tensor:
    return fl.relu(input)


@_documented("``min(max(x, 0), 6)``.", "[0. , 0. , 0.5, 2. ]")
def relu6(input, inplace: bool = False) -> Tensor:
    return fl.relu6(input)


@_documented("``x`` for ``x >= 0``, else ``negative_slope * x``.", "[-0.01,  0.  ,  0.5 ,  2.  ]")
def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return fl.leaky_relu(input, negative_slope)


@_documented(
    "``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``.",
    "[-0.63212055,  0.        ,  0.5       ,  2.        ]",
)
def elu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return fl.elu(input, alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@_documented(
    "``scale * elu(x, alpha)`` with the self-normalizing constants (``1.0507``, ``1.6733``).",
    "[-1.1113307,  0.       ,  0.5253505,  2.101402 ]",
)
def selu(input, inplace: bool = False) -> Tensor:
    return fl.elu(input, _SELU_ALPHA) * _SELU_SCALE


@_documented(
    "``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.",
    "[-0.63212055,  0.        ,  0.5       ,  2.        ]",
)
def celu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    x = as_float(input, "celu")
    return fl.elu(x / alpha, 1.0) * alpha if alpha != 1.0 else fl.elu(x, 1.0)


@_documented(
    'Gaussian error linear unit ``x * Phi(x)``; ``approximate="tanh"`` uses the tanh form.',
    "[-0.15865526,  0.        ,  0.34573123,  1.9544997 ]",
)
def gelu(input, approximate: str = "none") -> Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return fl.gelu(input, approximate=approximate)


@_documented("``x * sigmoid(x)``.", "[-0.26894143,  0.        ,  0.31122968,  1.7615942 ]")
def silu(input, inplace: bool = False) -> Tensor:
    return fl.silu(input)


@_documented("``x * tanh(softplus(x))``.", "[-0.3034014 ,  0.        ,  0.37524518,  1.9439589 ]")
def mish(input, inplace: bool = False) -> Tensor:
    x = as_float(input, "mish")
    return x * fl.tanh(fl.softplus(x))


@_documented("``1 / (1 + exp(-x))``.", "[0.26894143, 0.5       , 0.62245935, 0.8807971 ]")
def sigmoid(input) -> Tensor:
    return fl.sigmoid(input)


@_documented("Hyperbolic tangent.", "[-0.7615942,  0.       ,  0.4621172,  0.9640276]")
def tanh(input) -> Tensor:
    return fl.tanh(input)


@_documented(
    "``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (as PyTorch).",
    "[0.31326163, 0.6931472 , 0.974077  , 2.126928  ]",
)
def softplus(input, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    x = as_float(input, "softplus")
    sp = fl.softplus(x, beta)
    return fl.where(x * beta > threshold, x, sp)


@_documented("``x / (1 + |x|)``.", "[-0.5       ,  0.        ,  0.33333334,  0.6666667 ]")
def softsign(input) -> Tensor:
    x = as_float(input, "softsign")
    return x / (fl.abs(x) + 1.0)


@_documented("``clip(x, min_val, max_val)``.", "[-1. ,  0. ,  0.5,  1. ]")
def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    check_number(min_val, "hardtanh", "min_val")
    check_number(max_val, "hardtanh", "max_val")
    return fl.clip(as_float(input, "hardtanh"), min_val, max_val)


@_documented("``relu6(x + 3) / 6``.", "[0.33333334, 0.5       , 0.5833333 , 0.8333333 ]")
def hardsigmoid(input, inplace: bool = False) -> Tensor:
    return fl.relu6(as_float(input, "hardsigmoid") + 3.0) / 6.0


@_documented("``x * relu6(x + 3) / 6``.", "[-0.33333334,  0.        ,  0.29166666,  1.6666666 ]")
def hardswish(input, inplace: bool = False) -> Tensor:
    x = as_float(input, "hardswish")
    return x * fl.relu6(x + 3.0) / 6.0


@_documented("``log(sigmoid(x))``, stable for large ``|x|``.", "[-1.3132616, -0.6931472, -0.474077 , -0.126928 ]")
def logsigmoid(input) -> Tensor:
    return fl.log_sigmoid(input)


def _softmax_input(input, dim, dtype, op):
    """The input, cast to ``dtype`` when one is given, and the axis to normalize along."""
    x = as_float(input, op) if dtype is None else as_tensor(input, op).astype(dtype)
    if dim is None:
        # PyTorch's legacy choice for dim=None
        return x, 0 if x.ndim in (0, 1, 3) else 1
    return x, dim


@_documented(
    "Softmax along ``dim``: ``exp(x) / sum(exp(x))``.",
    "[0.03535379, 0.09610157, 0.1584447 , 0.71009994]",
    ", dim=0",
)
def softmax(input, dim: int | None = None, dtype=None) -> Tensor:
    x, axis = _softmax_input(input, dim, dtype, "softmax")
    return fl.softmax(x, axis=axis)


@_documented(
    "Log-softmax along ``dim``: ``x - logsumexp(x)``.",
    "[-3.3423495 , -2.3423495 , -1.8423495 , -0.34234956]",
    ", dim=0",
)
def log_softmax(input, dim: int | None = None, dtype=None) -> Tensor:
    x, axis = _softmax_input(input, dim, dtype, "log_softmax")
    return fl.log_softmax(x, axis=axis)


@_documented("Softmin along ``dim``: ``softmax(-x)``.", "[0.60946006, 0.22420782, 0.13598892, 0.03034323]", ", dim=0")
def softmin(input, dim: int | None = None, dtype=None) -> Tensor:
    x, axis = _softmax_input(input, dim, dtype, "softmin")
    return fl.softmax(-x, axis=axis)


@_documented(
    "Gated linear unit: ``dim`` split into halves ``a, b``, then ``a * sigmoid(b)``.",
    "[-0.62245935,  0.        ]",
)
def glu(input, dim: int = -1) -> Tensor:
    x = as_float(input, "glu")
    n = x.shape[dim]
    if n % 2:
        raise ShapeError(
            f"glu: dimension {dim} has odd size {n};"
            " it must split into two halves: pick a dim of even size"
        )
    a, b = fl.split(x, 2, axis=dim)
    return a * fl.sigmoid(b)
