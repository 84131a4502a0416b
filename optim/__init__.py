"""``funclib.optim``: optimizers (pure per-leaf rules with PyTorch's facade), learning-rate schedulers and
gradient clipping.

>>> import funclib as fl, funclib.nn as nn, funclib.optim as optim
>>> model = nn.Linear(4, 1)
>>> opt = optim.Adam(model.parameters(), lr=1e-2)
>>> loss, grads = nn.value_and_grad(model, lambda m, x: (m(x) ** 2).mean())(model, fl.ones((8, 4)))
>>> model = opt.update(model, grads)
"""

from . import lr_scheduler
from .adam import Adam, Adamax, AdamW, NAdam, RAdam
from .adaptive import Adadelta, Adagrad, RMSprop
from .clip import clip_grad_norm_, clip_grad_value_, get_total_norm
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .sgd import SGD, Lion
from .zero import ZeroRedundancyOptimizer

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "RAdam",
    "RMSprop",
    "Adagrad",
    "Adadelta",
    "Lion",
    "LBFGS",
    "ZeroRedundancyOptimizer",
    "lr_scheduler",
    "clip_grad_norm_",
    "clip_grad_value_",
    "get_total_norm",
]
