"""Activation layers, one row each: a module class that calls the ``nn.functional`` function of the same name with
its constructor arguments (PyTorch's names, defaults and reprs; ``inplace`` is accepted and ignored, since tensors
are immutable).

>>> import funclib as fl, funclib.nn as nn
>>> nn.ReLU()(fl.tensor([-1.0, 2.0]))
Tensor([0., 2.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from funclib.checks import check_number

from . import functional as F
from ._rows import row_class
from .functional._activation import ARG_DOCS
from .module import Module


class _Activation(Module):
    """The rows' base: the constructor's arguments are attributes; ``forward`` passes all but ``inplace`` on."""

    _function: Callable[..., Any]
    _forwarded: tuple[str, ...] = ()
    _check: Callable[..., None] | None = None

    def _setup(self, **arguments) -> None:
        if self._check is not None:
            self._check(type(self).__name__, **arguments)
        self.__dict__.update(arguments)  # numbers and strings: static attributes

    def forward(self, input):
        return self._function(input, *(getattr(self, a) for a in self._forwarded))

    def extra_repr(self) -> str:
        shown = [f"{a}={getattr(self, a)!r}" for a in self._forwarded]
        if getattr(self, "inplace", False):
            shown.append("inplace=True")
        return ", ".join(shown)


def _activation(name: str, function, params: dict[str, Any], example: str, output: str, check=None):
    """The class of one row: ``example`` is the constructor call of the docstring's example and ``output`` the
    values it prints for the input ``[-1, 0, 0.5, 2]``; the summary is the function's."""
    forwarded = tuple(k for k in params if k != "inplace")
    return row_class(
        _Activation, name, __name__, function, params,
        summary=function.__doc__.split("\n")[0],
        args={k: ARG_DOCS[k] for k in params},
        returns=f"A module whose ``forward(input)`` is ``F.{function.__name__}({', '.join(('input', *forwarded))})``.",
        example=f"nn.{example}(fl.tensor([-1.0, 0.0, 0.5, 2.0]))",
        output=f"Tensor({output}, dtype=float32)",
        _forwarded=forwarded,
        _check=None if check is None else staticmethod(check),
    )


def _ordered_bounds(op: str, min_val, max_val, inplace) -> None:
    check_number(min_val, op, "min_val")
    check_number(max_val, op, "max_val")
    if max_val <= min_val:
        raise ValueError(
            f"{op}: max_val must be greater than min_val, got min_val={min_val}, max_val={max_val}; swap them"
        )


_INPLACE = {"inplace": False}
_DIM = {"dim": None}

# class, function, constructor arguments, the docstring example's call and its output for [-1, 0, 0.5, 2]
_TABLE = (
    ("ReLU", F.relu, _INPLACE, "ReLU()", "[0. , 0. , 0.5, 2. ]"),
    ("ReLU6", F.relu6, _INPLACE, "ReLU6()", "[0. , 0. , 0.5, 2. ]"),
    ("LeakyReLU", F.leaky_relu, {"negative_slope": 0.01, **_INPLACE}, "LeakyReLU(0.1)", "[-0.1,  0. ,  0.5,  2. ]"),
    ("ELU", F.elu, {"alpha": 1.0, **_INPLACE}, "ELU()", "[-0.63212055,  0.        ,  0.5       ,  2.        ]"),
    ("SELU", F.selu, _INPLACE, "SELU()", "[-1.1113307,  0.       ,  0.5253505,  2.101402 ]"),
    ("CELU", F.celu, {"alpha": 1.0, **_INPLACE}, "CELU(2.0)", "[-0.78693867,  0.        ,  0.5       ,  2.        ]"),
    ("GELU", F.gelu, {"approximate": "none"}, "GELU()", "[-0.15865526,  0.        ,  0.34573123,  1.9544997 ]"),
    ("SiLU", F.silu, _INPLACE, "SiLU()", "[-0.26894143,  0.        ,  0.31122968,  1.7615942 ]"),
    ("Mish", F.mish, _INPLACE, "Mish()", "[-0.3034014 ,  0.        ,  0.37524518,  1.9439589 ]"),
    ("Sigmoid", F.sigmoid, {}, "Sigmoid()", "[0.26894143, 0.5       , 0.62245935, 0.8807971 ]"),
    ("Tanh", F.tanh, {}, "Tanh()", "[-0.7615942,  0.       ,  0.4621172,  0.9640276]"),
    ("Softplus", F.softplus, {"beta": 1.0, "threshold": 20.0},
     "Softplus()", "[0.31326163, 0.6931472 , 0.974077  , 2.126928  ]"),
    ("Softsign", F.softsign, {}, "Softsign()", "[-0.5       ,  0.        ,  0.33333334,  0.6666667 ]"),
    ("Hardtanh", F.hardtanh, {"min_val": -1.0, "max_val": 1.0, **_INPLACE},
     "Hardtanh()", "[-1. ,  0. ,  0.5,  1. ]", _ordered_bounds),
    ("Hardsigmoid", F.hardsigmoid, _INPLACE, "Hardsigmoid()", "[0.33333334, 0.5       , 0.5833333 , 0.8333333 ]"),
    ("Hardswish", F.hardswish, _INPLACE, "Hardswish()", "[-0.33333334,  0.        ,  0.29166666,  1.6666666 ]"),
    ("LogSigmoid", F.logsigmoid, {}, "LogSigmoid()", "[-1.3132616, -0.6931472, -0.474077 , -0.126928 ]"),
    ("Softmax", F.softmax, _DIM, "Softmax(dim=0)", "[0.03535379, 0.09610157, 0.1584447 , 0.71009994]"),
    ("LogSoftmax", F.log_softmax, _DIM, "LogSoftmax(dim=0)", "[-3.3423495 , -2.3423495 , -1.8423495 , -0.34234956]"),
    ("Softmin", F.softmin, _DIM, "Softmin(dim=0)", "[0.60946006, 0.22420782, 0.13598892, 0.03034323]"),
    ("GLU", F.glu, {"dim": -1}, "GLU()", "[-0.62245935,  0.        ]"),
)
(
    ReLU, ReLU6, LeakyReLU, ELU, SELU, CELU, GELU, SiLU, Mish, Sigmoid, Tanh, Softplus, Softsign, Hardtanh,
    Hardsigmoid, Hardswish, LogSigmoid, Softmax, LogSoftmax, Softmin, GLU,
) = (_activation(*row) for row in _TABLE)
__all__ = [row[0] for row in _TABLE]
