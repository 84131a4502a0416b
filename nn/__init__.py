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

from . import activation, container, functional, init, layers, loss, module, parallel, quantized, rnn, transformer
from .activation import *  # noqa: F401, F403
from .container import *  # noqa: F401, F403
from .layers import *  # noqa: F401, F403
from .loss import *  # noqa: F401, F403
from .module import *  # noqa: F401, F403
from .quantized import *  # noqa: F401, F403
from .rnn import *  # noqa: F401, F403
from .transformer import *  # noqa: F401, F403

__all__ = [
    "functional",
    "init",
    "parallel",
    *module.__all__,
    *container.__all__,
    *layers.__all__,
    *activation.__all__,
    *loss.__all__,
    *quantized.__all__,
    *rnn.__all__,
    *transformer.__all__,
]
