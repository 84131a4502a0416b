"""Linear maps, dropout and attention."""

from __future__ import annotations

import math

import numpy as np

import funclib as fl
from funclib import random as _random
from funclib.checks import check_number
from funclib.core import Tensor
from funclib.errors import ShapeError
from funclib.primitives.dot import dot_general

from ..module import next_key
from ._args import as_float, as_tensor, zero


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False, *, key=None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training only).

    Args:
        input: the tensor.
        p: drop probability in ``[0, 1]`` (default 0.5).
        training: off means identity (default True).
        inplace: accepted for PyTorch compatibility and ignored (tensors are immutable).
        key: a ``fl.random`` key; default: split from ``nn.rng``'s key, else the global generator (eager only).

    Returns:
        A tensor of the input's shape.

    >>> F.dropout(fl.ones(6), 0.5, key=fl.random.key(0)).tolist()
    [2.0, 0.0, 2.0, 0.0, 0.0, 0.0]
    """
    check_number(p, "dropout", "p", min=0.0, max=1.0)
    x = as_float(input, "dropout")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    k = next_key("dropout") if key is None else key
    keep = _random.bernoulli(k, 1.0 - p, tuple(x.shape))
    return fl.where(keep, x * (1.0 / (1.0 - p)), zero(x))


def linear(input, weight, bias=None) -> Tensor:
    """``input @ weight.T + bias`` with ``weight: (out_features, in_features)``.

    Args:
        input: ``(*, in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` (default None).

    Returns:
        ``(*, out_features)``.

    >>> F.linear(fl.ones((2, 3)), fl.ones((4, 3)), fl.zeros(4))
    Tensor([[3., 3., 3., 3.],
            [3., 3., 3., 3.]], dtype=float32)
    """
    x = as_tensor(input, "linear")
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: input of shape {tuple(x.shape)} does not fit weight of shape {tuple(weight.shape)}; the last "
            f"axis of the input must have in_features={weight.shape[-1]} entries"
        )
    y = dot_general(x, weight, (((x.ndim - 1,), (1,)), ((), ())))
    return y + bias if bias is not None else y


def bilinear(input1, input2, weight, bias=None) -> Tensor:
    """``y_k = x1 @ weight[k] @ x2 + bias[k]`` with ``weight: (out, in1, in2)``.

    Args:
        input1: ``(*, in1)``.
        input2: ``(*, in2)`` with the same leading axes.
        weight: ``(out, in1, in2)``.
        bias: ``(out,)`` (default None).

    Returns:
        ``(*, out)``.

    >>> F.bilinear(fl.ones((1, 2)), fl.ones((1, 3)), fl.ones((4, 2, 3))).shape
    (1, 4)
    """
    x1, x2 = as_tensor(input1, "bilinear", "input1"), as_tensor(input2, "bilinear", "input2")
    if weight.ndim != 3 or x1.shape[-1] != weight.shape[1] or x2.shape[-1] != weight.shape[2]:
        raise ShapeError(
            f"bilinear: inputs {tuple(x1.shape)} and {tuple(x2.shape)} do not fit weight {tuple(weight.shape)} "
            "(expected last axes in1_features and in2_features); check the weight or the inputs' last axes"
        )
    if x1.shape[:-1] != x2.shape[:-1]:
        raise ShapeError(f"bilinear: inputs must share leading dimensions, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    t = dot_general(x1, weight, (((x1.ndim - 1,), (1,)), ((), ())))  # (..., out, in2)
    y = fl.sum(t * fl.expand_dims(x2, axis=-2), axis=-1)
    return y + bias if bias is not None else y


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    dropout_key=None,
) -> Tensor:
    """``softmax(q @ k.T * scale + mask) @ v`` over ``(..., L, E)`` queries and ``(..., S, E)`` keys.

    Args:
        query, key, value: ``(..., L, E)``, ``(..., S, E)`` and ``(..., S, Ev)``.
        attn_mask: boolean (True = may attend) or additive float mask, broadcastable to ``(..., L, S)``.
        dropout_p: dropout on the attention weights (draws from ``dropout_key`` or ``nn.rng``).
        is_causal: mask out keys after each query (upper triangle).
        scale: default ``1 / sqrt(E)``.
        enable_gqa: let query heads (axis -3) share fewer key/value heads.
        dropout_key: the key for ``dropout_p``.

    Returns:
        ``(..., L, Ev)``.

    >>> q = fl.ones((2, 4, 8))
    >>> F.scaled_dot_product_attention(q, q, q, is_causal=True).shape
    (2, 4, 8)
    """
    op = "scaled_dot_product_attention"
    q, k, v = as_float(query, op, "query"), as_tensor(key, op, "key"), as_tensor(value, op, "value")
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"scaled_dot_product_attention: query {tuple(q.shape)}, key {tuple(k.shape)} and value {tuple(v.shape)} "
            "must be (..., L, E), (..., S, E) and (..., S, Ev)"
        )
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k = fl.repeat(k, rep, axis=-3)
        v = fl.repeat(v, rep, axis=-3)
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = fl.matmul(q, fl.matrix_transpose(k)) * s
    lq, lk = q.shape[-2], k.shape[-2]
    neg = -math.inf
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
        causal = fl.asarray(np.tril(np.ones((lq, lk), bool)))
        scores = fl.where(causal, scores, neg)
    if attn_mask is not None:
        m = as_tensor(attn_mask, "scaled_dot_product_attention", "attn_mask")
        scores = fl.where(m, scores, neg) if m.dtype == fl.bool else scores + m
    w = fl.softmax(scores, axis=-1)
    if dropout_p > 0.0:
        w = dropout(w, dropout_p, True, key=dropout_key)
    return fl.matmul(w, v)
