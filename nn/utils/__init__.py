"""``nn.utils``: helpers around the layers; ``nn.utils.rnn`` packs and pads variable-length sequences for the
recurrent layers.

>>> import funclib as fl, funclib.nn as nn
>>> nn.utils.rnn.pad_sequence([fl.ones(2), fl.ones(1)]).shape
(2, 2)
"""

from . import rnn

__all__ = ["rnn"]
