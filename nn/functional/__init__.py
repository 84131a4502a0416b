"""``nn.functional``: stateless layers, activations and losses with PyTorch's names, signatures and numerics.

Everything is a composition of funclib operations, so every transform applies. Convolutions run as one BLAS
matrix multiply over an im2col patch matrix (``funclib.primitives.conv``). Arguments follow PyTorch: channels
first (``N, C, H, W``), ``dim=`` for axes, losses take ``reduction=``. Import the functions from here; the
modules behind them (activations, linear maps and attention, convolutions, pooling, normalization, lookups,
losses) are private.

>>> import funclib as fl
>>> import funclib.nn.functional as F
>>> F.cross_entropy(fl.zeros((2, 3)), fl.tensor([0, 2]))
Tensor(1.0986123, dtype=float32)
"""

from ._activation import (
    celu,
    elu,
    gelu,
    glu,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    log_softmax,
    logsigmoid,
    mish,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    softmax,
    softmin,
    softplus,
    softsign,
    tanh,
)
from ._conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d, pad, unfold
from ._linear import bilinear, dropout, linear, scaled_dot_product_attention
from ._loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from ._normalization import batch_norm, group_norm, layer_norm, normalize
from ._pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d
from ._sparse import embedding, one_hot

__all__ = [
    "relu",
    "relu6",
    "leaky_relu",
    "elu",
    "selu",
    "celu",
    "gelu",
    "silu",
    "mish",
    "sigmoid",
    "tanh",
    "softplus",
    "softsign",
    "hardtanh",
    "hardsigmoid",
    "hardswish",
    "logsigmoid",
    "softmax",
    "log_softmax",
    "softmin",
    "glu",
    "dropout",
    "linear",
    "bilinear",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "unfold",
    "max_pool1d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "batch_norm",
    "layer_norm",
    "group_norm",
    "embedding",
    "one_hot",
    "pad",
    "normalize",
    "scaled_dot_product_attention",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
]
