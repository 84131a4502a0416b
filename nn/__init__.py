"""``funclib.nn``: a PyTorch-style layer library on the functional core.

A ``Module`` is a pytree (parameters and buffers are its leaves), so ``fl.grad``, ``fl.vmap`` and ``fl.jit`` apply to
models directly; optimizers in ``funclib.optim`` rebind the new parameters on the module. See ``nn.module`` for the
design (state under transforms, randomness, frozen parameters).

>>> import funclib as torch
>>> import funclib.nn as nn
>>> class SimpleNet(nn.Module):
...     def __init__(self):
...         super(SimpleNet, self).__init__()
...         self.fc = nn.Linear(10, 5)
...     def forward(self, x):
...         return torch.relu(self.fc(x))
>>> model = SimpleNet()
>>> model(torch.randn(3, 10)).shape
(3, 5)
"""

from . import functional, init, parallel
from .activation import *  # noqa: F401, F403
from .container import ModuleDict, ModuleList, Sequential
from .layers import *  # noqa: F401, F403
from .loss import *  # noqa: F401, F403
from .module import (
    Buffer,
    Module,
    ModuleStateError,
    Parameter,
    StateDictError,
    functional_call,
    rng,
    stack_module_state,
    value_and_grad,
)
from .quantized import QATLinear, QuantizedLinear, prepare_qat_, quantize_
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "functional",
    "init",
    "parallel",
    "Module",
    "Parameter",
    "Buffer",
    "ModuleStateError",
    "StateDictError",
    "functional_call",
    "stack_module_state",
    "value_and_grad",
    "rng",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "QuantizedLinear",
    "QATLinear",
    "quantize_",
    "prepare_qat_",
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
]
