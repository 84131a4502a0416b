"""Neural-network staples as compositions: softmax, log_softmax, relu, gelu, softplus, silu, one_hot, ...

Each is written so its derivative is stable for large inputs (|x| = 1e4 in float32 gives no inf or nan).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..checks import check_int
from ..core import _wrap, concrete_or_none
from ..errors import DTypeError
from ..namespace import public
from ..primitives import shape as S
from ..primitives.elementwise import _to_tensor, convert, greater, greater_equal
from ..primitives.shape import reduce_sum, select
from ..primitives.transcendental import erf, expm1, sigmoid, tanh
from . import elementwise as E
from . import reductions as R
from .reductions import _axes, stable_shift


def _f(x, op):
    return E._float(x, op)


@public
def softmax(x, /, axis=-1):
    """``exp(x) / sum(exp(x))`` along ``axis``, computed from the shifted logits.

    >>> fl.softmax(fl.tensor([0.0, 0.0]))
    Tensor([0.5, 0.5], dtype=float32)
    """
    x = _f(x, "softmax")
    axes = _axes(x, axis, "softmax")
    _, mk = stable_shift(x, axes)
    e = E.exp(E.subtract(x, mk))
    return E.divide(e, S.reshape(reduce_sum(e, axes), mk.shape))


@public
def log_softmax(x, /, axis=-1):
    """``x - logsumexp(x)`` along ``axis``, computed as ``s - log(sum(exp(s)))`` from the shifted logits
    ``s = x - max(x)``: subtracting the rounded ``logsumexp`` itself would lose the low bits of the result when
    the logits are large (``[1000, 1000]`` in float32).

    >>> fl.log_softmax(fl.tensor([1000.0, 1000.0]))
    Tensor([-0.6931472, -0.6931472], dtype=float32)
    """
    x = _f(x, "log_softmax")
    axes = _axes(x, axis, "log_softmax")
    _, mk = stable_shift(x, axes)
    shifted = E.subtract(x, mk)
    lse = E.log(reduce_sum(E.exp(shifted), axes))
    return E.subtract(shifted, S.reshape(lse, mk.shape))


@public
def relu(x, /):
    """``max(x, 0)``; the derivative at 0 is 0."""
    x = _to_tensor(x, "relu")
    return select(greater(x, _wrap(np.zeros((), x.dtype))), x, _wrap(np.zeros((), x.dtype)))


@public
def relu6(x, /):
    """``min(max(x, 0), 6)``."""
    return E.clip(relu(_to_tensor(x, "relu6")), None, 6.0)


@public
def leaky_relu(x, /, negative_slope: float = 0.01):
    x = _f(x, "leaky_relu")
    return select(greater_equal(x, _wrap(np.zeros((), x.dtype))), x, E.multiply(x, negative_slope))


@public
def elu(x, /, alpha: float = 1.0):
    x = _f(x, "elu")
    zero = _wrap(np.zeros((), x.dtype))
    neg = E.multiply(expm1(E.minimum(x, zero)), alpha)
    return select(greater(x, zero), x, neg)


@public
def softplus(x, /, beta: float = 1.0, threshold: float | None = None):
    """``log(1 + exp(beta x)) / beta`` without overflow: ``max(z, 0) + log1p(exp(-|z|))``."""
    x = _f(x, "softplus")
    z = E.multiply(x, beta) if beta != 1.0 else x
    zero = _wrap(np.zeros((), x.dtype))
    out = E.add(E.maximum(z, zero), E.log1p(E.exp(E.negative(E.abs(z)))))
    return E.divide(out, beta) if beta != 1.0 else out


@public
def log_sigmoid(x, /):
    """``log(sigmoid(x)) = -softplus(-x)``."""
    return E.negative(softplus(E.negative(_f(x, "log_sigmoid"))))


@public
def silu(x, /):
    """``x * sigmoid(x)`` (swish)."""
    x = _f(x, "silu")
    return E.multiply(x, sigmoid(x))


swish = public(silu, name="swish")


@public
def gelu(x, /, approximate: bool | str = False):
    """Gaussian error linear unit; ``approximate=True`` (or ``'tanh'``) uses the tanh form."""
    x = _f(x, "gelu")
    if approximate in (True, "tanh"):
        c = math.sqrt(2.0 / math.pi)
        inner = E.multiply(E.add(x, E.multiply(E.multiply(E.multiply(x, x), x), 0.044715)), c)
        return E.multiply(E.multiply(x, 0.5), E.add(tanh(inner), 1.0))
    if approximate not in (False, "none"):
        raise ValueError(f"gelu: approximate must be False/'none' or True/'tanh', got {approximate!r}")
    return E.multiply(E.multiply(x, 0.5), E.add(erf(E.multiply(x, 1.0 / math.sqrt(2.0))), 1.0))


@public
def one_hot(x, num_classes: int, *, dtype=None, axis: int = -1):
    """One-hot encode integer labels: ``out[..., c] = (x == c)``.

    A label outside ``[0, num_classes)`` is an error when its value is known (eagerly, and under ``fl.grad``);
    under ``fl.jit`` and ``fl.vmap`` it gives an all-zero row, as in JAX.

    >>> fl.one_hot(fl.tensor([0, 2]), 3)
    Tensor([[1., 0., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    x = _to_tensor(x, "one_hot")
    if x.dtype not in dtypes.INTEGER:
        raise DTypeError(f"one_hot: labels must be integers, got {x.dtype.name}")
    num_classes = check_int(num_classes, "one_hot", "num_classes", min=0)
    check_labels(x, num_classes, "one_hot")
    d = dtypes.canonicalize(dtype or dtypes.default_float)
    nd = x.ndim + 1
    ax = axis % nd
    shape = list(x.shape)
    shape.insert(ax, num_classes)
    classes = S.iota(x.dtype, tuple(shape), ax)
    xb = S.broadcast_in_dim(x, tuple(shape), tuple(i for i in range(nd) if i != ax))
    return convert(E.equal(xb, classes), d)


def check_labels(x, num_classes: int, op: str) -> None:
    """An IndexError naming ``op`` when a known class label lies outside ``[0, num_classes)``."""
    c = concrete_or_none(x)
    if c is None or not c.size:
        return
    v = c._value
    lo, hi = int(v.min()), int(v.max())
    if lo < 0 or hi >= num_classes:
        bad = hi if hi >= num_classes else lo
        raise IndexError(
            f"{op}: class label {bad} is out of range for num_classes={num_classes} (labels must lie in "
            f"[0, {num_classes}))"
        )


@public
def normalize(x, /, axis=-1, eps: float = 1e-12):
    """``x / max(||x||, eps)`` along ``axis``."""
    x = _f(x, "normalize")
    n = E.sqrt(R.sum(E.multiply(x, x), axis=axis, keepdims=True))
    return E.divide(x, E.maximum(n, _wrap(np.asarray(eps, x.dtype))))
