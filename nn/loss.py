"""Loss modules, one row each: a module class that calls the ``nn.functional`` loss of the same name with its
constructor arguments (PyTorch's names and defaults; class weights are buffers, as in PyTorch; the deprecated
``size_average``/``reduce`` are folded into ``reduction``).

>>> import funclib as fl, funclib.nn as nn
>>> nn.CrossEntropyLoss()(fl.zeros((2, 3)), fl.tensor([0, 1]))
Tensor(1.0986123, dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import functional as F
from ._rows import row_class
from .functional._loss import LOSS_ARG_DOCS, legacy_reduction
from .module import Module

_TENSORS = ("weight", "pos_weight")
_LEGACY = ("size_average", "reduce")


class _Loss(Module):
    """The rows' base: tensors become buffers, the deprecated flags fold into ``reduction``, and ``forward`` passes
    the rest on by keyword."""

    _function: Callable[..., Any]
    _forwarded: tuple[str, ...] = ()

    def _setup(self, **arguments) -> None:
        if "size_average" in arguments:
            arguments["reduction"] = legacy_reduction(
                arguments.pop("size_average"), arguments.pop("reduce"), arguments["reduction"]
            )
        for k, v in arguments.items():
            if k in _TENSORS:
                self.register_buffer(k, v)
            else:
                setattr(self, k, v)

    def forward(self, input, target):
        return self._function(input, target, **{k: getattr(self, k) for k in self._forwarded})

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


def _loss(name: str, function, summary: str, params: dict[str, Any], example: str, output: str):
    """The class of one row: ``example`` is the docstring example's call and ``output`` the loss it prints."""
    return row_class(
        _Loss, name, __name__, function, params,
        summary=summary,
        args={k: LOSS_ARG_DOCS[k] for k in params},
        returns=f"A module whose ``forward(input, target)`` is ``F.{function.__name__}`` with these arguments.",
        example=f"nn.{example}",
        output=f"Tensor({output}, dtype=float32)",
        _forwarded=tuple(k for k in params if k not in _LEGACY),
    )


_MEAN = {"size_average": None, "reduce": None, "reduction": "mean"}
_WEIGHTED = {"weight": None, **_MEAN}
_XY = "(fl.tensor([0.5, 2.0, -1.0]), fl.tensor([0.0, 2.5, 1.0]))"
_LOGITS = "(fl.tensor([[2.0, 0.5, -1.0], [0.0, 1.0, 0.0]]), fl.tensor([0, 1]))"

# class, function, summary, constructor arguments, the docstring example and the loss it prints
_TABLE = (
    ("CrossEntropyLoss", F.cross_entropy, "Cross entropy of logits against class indices or class probabilities.",
     {"weight": None, "size_average": None, "ignore_index": -100, "reduce": None, "reduction": "mean",
      "label_smoothing": 0.0}, "CrossEntropyLoss()" + _LOGITS, "0.39637795"),
    ("NLLLoss", F.nll_loss, "Negative log-likelihood of class indices under log-probabilities.",
     {"weight": None, "size_average": None, "ignore_index": -100, "reduce": None, "reduction": "mean"},
     "NLLLoss()(fl.log_softmax(fl.tensor([[2.0, 0.5, -1.0], [0.0, 1.0, 0.0]]), axis=1), fl.tensor([0, 1]))",
     "0.39637795"),
    ("MSELoss", F.mse_loss, "Mean squared error ``(x - y)**2``.", _MEAN, "MSELoss()" + _XY, "1.5"),
    ("L1Loss", F.l1_loss, "Mean absolute error ``|x - y|``.", _MEAN, "L1Loss()" + _XY, "1."),
    ("SmoothL1Loss", F.smooth_l1_loss, "``0.5 d**2 / beta`` for ``|d| < beta``, else ``|d| - 0.5 beta``.",
     {**_MEAN, "beta": 1.0}, "SmoothL1Loss()" + _XY, "0.5833333"),
    ("HuberLoss", F.huber_loss, "``0.5 d**2`` for ``|d| <= delta``, else ``delta * (|d| - 0.5 delta)``.",
     {"reduction": "mean", "delta": 1.0}, "HuberLoss(delta=0.5)" + _XY, "0.375"),
    ("BCELoss", F.binary_cross_entropy, "Binary cross entropy of probabilities.", _WEIGHTED,
     "BCELoss()(fl.tensor([0.9, 0.2]), fl.tensor([1.0, 0.0]))", "0.16425206"),
    ("BCEWithLogitsLoss", F.binary_cross_entropy_with_logits, "Sigmoid and binary cross entropy in one stable step.",
     {**_WEIGHTED, "pos_weight": None}, "BCEWithLogitsLoss()(fl.tensor([2.0, -1.0]), fl.tensor([1.0, 0.0]))",
     "0.22009481"),
    ("KLDivLoss", F.kl_div, "KL divergence of probabilities ``target`` from log-probabilities ``input``.",
     {**_MEAN, "log_target": False},
     "KLDivLoss(reduction='batchmean')(fl.log(fl.tensor([[0.25, 0.75]])), fl.tensor([[0.5, 0.5]]))", "0.14384104"),
)
(
    CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss, BCEWithLogitsLoss, KLDivLoss,
) = (_loss(*row) for row in _TABLE)
__all__ = [row[0] for row in _TABLE]
