"""Loss functions. Each states its summary, what its input and target are, and an example in ``@_documented``,
which writes the docstring from those and the arguments they share (``LOSS_ARG_DOCS``, also ``nn.loss``'s)."""

from __future__ import annotations

import inspect

import numpy as np

import funclib as fl
from funclib import dtypes
from funclib.core import Tensor, Tracer, _state, _wrap
from funclib.errors import DTypeError, ShapeError
from funclib.ops.reductions import stable_shift
from funclib.primitives.indexing import gather

from ._args import as_float, as_tensor, zero

LOSS_ARG_DOCS = {
    "weight": "per-class (or per-element) weights (default None).",
    "size_average": "deprecated; folded into ``reduction`` as PyTorch does.",
    "ignore_index": "the target class that contributes nothing (default -100).",
    "reduce": "deprecated; folded into ``reduction`` as PyTorch does.",
    "reduction": "``'mean'`` (default), ``'sum'`` or ``'none'`` (one loss per element).",
    "label_smoothing": "mix the targets with the uniform distribution by this amount (default 0.0).",
    "beta": "where the loss turns from quadratic to linear (default 1.0).",
    "delta": "where the loss turns from quadratic to linear (default 1.0).",
    "pos_weight": "a weight for the positive term, per class (default None).",
    "log_target": "the target holds log-probabilities (default False).",
}


def _documented(summary: str, input: str, target: str, example: str, output: str):
    """Write a loss's docstring: ``summary``, Args (``input`` and ``target`` described here, the rest from
    ``LOSS_ARG_DOCS``), Returns, and ``example`` printing ``output``."""

    def document(f):
        docs = {"input": input, "target": target, **LOSS_ARG_DOCS}
        args = "".join(f"\n        {k}: {docs[k]}" for k in inspect.signature(f).parameters)
        f.__doc__ = (
            f"{summary}\n\n    Args:{args}\n\n    Returns:\n        The loss: a 0-d tensor, or one per element "
            f"with ``reduction='none'``.\n\n    >>> {example}\n    {output}\n    "
        )
        return f

    return document



def _reduce(loss, reduction: str, op: str):
    if reduction == "mean":
        return fl.mean(loss)
    if reduction == "sum":
        return fl.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    sa = True if size_average is None else size_average
    rd = True if reduce is None else reduce
    return "none" if not rd else ("mean" if sa else "sum")


@_documented(
    "Negative log-likelihood of class indices under log-probabilities; the mean divides by the summed weights"
    "\n    of the non-ignored targets (PyTorch's definition).",
    "log-probabilities ``(N, C, ...)`` or ``(C,)``.",
    "class indices ``(N, ...)``.",
    "F.nll_loss(fl.log(fl.tensor([[0.25, 0.75]])), fl.tensor([1]))",
    "Tensor(0.2876821, dtype=float32)",
)
def nll_loss(
    input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None, reduction: str = "mean"
) -> Tensor:
    reduction = legacy_reduction(size_average, reduce, reduction)
    x = as_float(input, "nll_loss")
    t = as_tensor(target, "nll_loss", "target")
    if t.dtype not in dtypes.INTEGER:
        raise DTypeError(
            f"nll_loss: target must hold integer class indices, got {t.dtype.name}; cast it with "
            "target.astype(fl.int64)"
        )
    _check_target(x, t, "nll_loss")
    c = x.shape[1] if x.ndim > 1 else x.shape[0]
    rows, tflat, out_shape = _rows(x, t)
    if weight is None and not isinstance(t, Tracer) and t.device == "cpu" and not np.any(t.numpy() == ignore_index):
        # the common case (no weights, nothing ignored): the targets are known, so one gather picks the entries
        tf = tflat.numpy()
        _check_range_np(tf, c, "nll_loss")
        picked = _pick(rows, tf)
        if reduction == "none":
            return fl.reshape(-picked, out_shape)
        if reduction in ("sum", "mean"):
            return -(fl.sum(picked) if reduction == "sum" else fl.mean(picked))
        raise ValueError(f"nll_loss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    valid = tflat != ignore_index
    safe = fl.where(valid, tflat, 0)
    _check_range(safe, c, "nll_loss")
    picked = fl.take_along_axis(rows, fl.expand_dims(safe, axis=1), axis=1)[:, 0]
    if weight is None:
        w = fl.ones((c,), dtype=x.dtype, device=tflat.device)
    else:
        w = as_tensor(weight, "nll_loss", "weight").astype(x.dtype)
    wt = fl.where(valid, fl.take(w, safe), zero(x))
    loss = -picked * wt
    if reduction == "none":
        return fl.reshape(loss, out_shape)
    if reduction == "sum":
        return fl.sum(loss)
    if reduction == "mean":
        return fl.sum(loss) / fl.sum(wt)
    raise ValueError(f"nll_loss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _rows(x, t):
    """``(M, C)`` rows of ``x: (C,) | (N, C, d...)`` with matching flat targets and the per-sample output shape."""
    if x.ndim == 1:
        return fl.expand_dims(x, axis=0), fl.reshape(t, (1,)), ()
    c = x.shape[1]
    if x.ndim == 2:
        return x, t, (x.shape[0],)
    rows = fl.reshape(fl.moveaxis(x, 1, -1), (-1, c))
    return rows, fl.reshape(t, (-1,)), (x.shape[0],) + tuple(x.shape[2:])


def _check_target(x, t, op):
    want = () if x.ndim == 1 else (x.shape[0],) + tuple(x.shape[2:])
    if tuple(t.shape) != want:
        raise ShapeError(
            f"{op}: input of shape {tuple(x.shape)} needs class-index targets of shape {want}, got {tuple(t.shape)}"
        )


def _check_range(idx, c, op):
    # on a device the gather that follows checks the bounds (reading them here would copy to the host)
    if _state.trace is None and idx.size and idx.device == "cpu":
        _check_range_np(idx.numpy(), c, op)


def _check_range_np(idx: np.ndarray, c: int, op: str) -> None:
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= c:
            raise IndexError(
                f"{op}: target {hi if hi >= c else lo} is out of bounds for {c} classes; targets are class indices in "
                f"[0, {c}) (or ignore_index)"
            )


def _pick(rows, targets: np.ndarray) -> Tensor:
    """``rows[i, targets[i]]`` for ``rows: (M, C)`` and known targets: one gather, its index built in NumPy."""
    idx = np.stack([np.arange(targets.shape[0]), targets.astype(np.int64, copy=False)], axis=1)
    return gather(rows, _wrap(idx), (0, 1))


@_documented(
    "Cross entropy of logits against class indices or class probabilities. For index targets the mean divides"
    "\n    by the summed weights of the non-ignored targets, for probability targets by the number of samples.",
    "logits ``(N, C, ...)`` or ``(C,)``.",
    "class indices ``(N, ...)``, or floating probabilities shaped like ``input``.",
    "F.cross_entropy(fl.tensor([[2.0, 0.0]]), fl.tensor([0]))",
    "Tensor(0.12692805, dtype=float32)",
)
def cross_entropy(
    input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None, reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"cross_entropy: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    x = as_float(input, "cross_entropy")
    t = as_tensor(target, "cross_entropy", "target")
    c = x.shape[1] if x.ndim > 1 else x.shape[0]
    if (
        weight is None
        and label_smoothing == 0.0
        and x.ndim <= 2
        and not isinstance(t, Tracer)
        and t.device == "cpu"  # reads the targets; on a device the general path below keeps them there
        and t.dtype in dtypes.INTEGER
        and not np.any(t.numpy() == ignore_index)
    ):
        # known class indices, nothing weighted or ignored: -log_softmax(x)[t] = log(sum(exp(x - m))) + (m - x[t])
        # with m the row max, a row reduction and one gather, without forming the (N, C) log-probabilities (a
        # third of the operations); m - x[t] is exact where x[t] is near m, so large logits lose no precision
        _check_target(x, t, "cross_entropy")
        rows, tflat, out_shape = _rows(x, t)
        tf = tflat.numpy()
        _check_range_np(tf, c, "cross_entropy")
        m, mk = stable_shift(rows, (1,))
        loss = fl.log(fl.sum(fl.exp(rows - mk), axis=1)) + (m - _pick(rows, tf))
        return fl.reshape(loss, out_shape) if reduction == "none" else _reduce(loss, reduction, "cross_entropy")
    logp = fl.log_softmax(x, axis=1 if x.ndim > 1 else 0)
    w = None if weight is None else as_tensor(weight, "cross_entropy", "weight").astype(x.dtype)
    if w is not None and tuple(w.shape) != (c,):
        raise ShapeError(f"cross_entropy: weight must have shape ({c},), got {tuple(w.shape)}")
    if t.dtype in dtypes.REAL_FLOATING:
        if tuple(t.shape) != tuple(x.shape):
            raise ShapeError(
                f"cross_entropy: probability targets must have the input's shape {tuple(x.shape)}, got {tuple(t.shape)}"
            )
        if label_smoothing > 0.0:
            t = t * (1.0 - label_smoothing) + label_smoothing / c
        prod = logp * t
        if w is not None:
            prod = prod * fl.reshape(w, (c,) + (1,) * (x.ndim - 2) if x.ndim > 1 else (c,))
        loss = -fl.sum(prod, axis=1 if x.ndim > 1 else 0)
        return _reduce(loss, reduction, "cross_entropy")
    if t.dtype not in dtypes.INTEGER:
        raise DTypeError(
            f"cross_entropy: target must be integer class indices or float probabilities, got {t.dtype.name}; cast "
            "indices with .astype(fl.int64) or probabilities with .astype(fl.float32)"
        )
    nll = nll_loss(logp, t, w, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return nll
    rows, tflat, out_shape = _rows(logp, t)
    valid = tflat != ignore_index
    smooth = -fl.sum(rows * w if w is not None else rows, axis=1)
    smooth = fl.where(valid, smooth, zero(x))
    if reduction == "none":
        smooth_r = fl.reshape(smooth, out_shape)
    elif reduction == "sum":
        smooth_r = fl.sum(smooth)
    elif w is not None:
        safe = fl.where(valid, tflat, 0)
        smooth_r = fl.sum(smooth) / fl.sum(fl.where(valid, fl.take(w, safe), zero(x)))
    else:
        smooth_r = fl.sum(smooth) / fl.sum(valid.astype(x.dtype))
    return nll * (1.0 - label_smoothing) + smooth_r * (label_smoothing / c)


def _pair(input, target, op):
    x = as_float(input, op)
    t = as_tensor(target, op, "target")
    if tuple(x.shape) != tuple(t.shape):
        raise ShapeError(
            f"{op}: input shape {tuple(x.shape)} and target shape {tuple(t.shape)} must match; reshape the target (or "
            "broadcast it with fl.broadcast_to)"
        )
    return x, t.astype(x.dtype) if t.dtype != x.dtype else t


@_documented(
    "Mean squared error ``(x - y)**2``.",
    "the prediction.",
    "the target, of the input's shape.",
    "F.mse_loss(fl.tensor([0.5, 2.0, -1.0]), fl.tensor([0.0, 2.5, 1.0]))",
    "Tensor(1.5, dtype=float32)",
)
def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    x, t = _pair(input, target, "mse_loss")
    d = x - t
    return _reduce(d * d, legacy_reduction(size_average, reduce, reduction), "mse_loss")


@_documented(
    "Mean absolute error ``|x - y|``.",
    "the prediction.",
    "the target, of the input's shape.",
    "F.l1_loss(fl.tensor([0.5, 2.0, -1.0]), fl.tensor([0.0, 2.5, 1.0]))",
    "Tensor(1., dtype=float32)",
)
def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    x, t = _pair(input, target, "l1_loss")
    return _reduce(fl.abs(x - t), legacy_reduction(size_average, reduce, reduction), "l1_loss")


@_documented(
    "``0.5 d**2 / beta`` for ``|d| < beta``, else ``|d| - 0.5 beta`` (``beta=0`` is L1).",
    "the prediction.",
    "the target, of the input's shape.",
    "F.smooth_l1_loss(fl.tensor([0.5, 2.0, -1.0]), fl.tensor([0.0, 2.5, 1.0]))",
    "Tensor(0.5833333, dtype=float32)",
)
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    x, t = _pair(input, target, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    a = fl.abs(x - t)
    if beta == 0.0:
        loss = a
    else:
        loss = fl.where(a < beta, a * a * (0.5 / beta), a - 0.5 * beta)
    return _reduce(loss, legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")


@_documented(
    "``0.5 d**2`` for ``|d| <= delta``, else ``delta * (|d| - 0.5 delta)``.",
    "the prediction.",
    "the target, of the input's shape.",
    "F.huber_loss(fl.tensor([0.5, 2.0, -1.0]), fl.tensor([0.0, 2.5, 1.0]), delta=0.5)",
    "Tensor(0.375, dtype=float32)",
)
def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    x, t = _pair(input, target, "huber_loss")
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    a = fl.abs(x - t)
    loss = fl.where(a <= delta, a * a * 0.5, (a - 0.5 * delta) * delta)
    return _reduce(loss, reduction, "huber_loss")


@_documented(
    "``-w * (y log x + (1 - y) log(1 - x))`` for probabilities ``x``; logs are clamped at -100 (PyTorch).",
    "probabilities in ``[0, 1]``.",
    "targets in ``[0, 1]``, of the input's shape.",
    "F.binary_cross_entropy(fl.tensor([0.9, 0.2]), fl.tensor([1.0, 0.0]))",
    "Tensor(0.16425206, dtype=float32)",
)
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    x, t = _pair(input, target, "binary_cross_entropy")
    if _state.trace is None and x.size and (float(fl.min(x)) < 0.0 or float(fl.max(x)) > 1.0):
        raise ValueError(
            "binary_cross_entropy: input values must lie in [0, 1]; use binary_cross_entropy_with_logits for logits"
        )
    lx = fl.maximum(fl.log(x), -100.0)
    l1x = fl.maximum(fl.log1p(-x), -100.0)
    loss = -(t * lx + (1.0 - t) * l1x)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy")


@_documented(
    "Sigmoid and binary cross entropy in one stable step; ``pos_weight`` weighs the positive term.",
    "logits.",
    "targets in ``[0, 1]``, of the input's shape.",
    "F.binary_cross_entropy_with_logits(fl.tensor([2.0, -1.0]), fl.tensor([1.0, 0.0]))",
    "Tensor(0.22009481, dtype=float32)",
)
def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None
) -> Tensor:
    x, t = _pair(input, target, "binary_cross_entropy_with_logits")
    # -log(sigmoid(x)) = softplus(-x) and -log(1 - sigmoid(x)) = softplus(x), sharing log1p(exp(-|x|)); the
    # shorter (1 - t) x + softplus(-x) cancels catastrophically for large |x| (x = -20, t = 0 gives 0, not 2e-9)
    tail = fl.log1p(fl.exp(-fl.abs(x)))
    pos = fl.maximum(-x, 0.0) + tail
    neg = fl.maximum(x, 0.0) + tail
    if pos_weight is not None:
        loss = (1.0 - t) * neg + (pos_weight * t) * pos
    else:
        loss = (1.0 - t) * neg + t * pos
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy_with_logits")


@_documented(
    "KL divergence with log-probabilities ``input``: ``target * (log(target) - input)`` pointwise."
    "\n    ``reduction='batchmean'`` divides the sum by the batch size (the mathematically correct mean);"
    "\n    ``'mean'`` averages over every element, as PyTorch does.",
    "log-probabilities.",
    "probabilities (log-probabilities with ``log_target``), of the input's shape.",
    "F.kl_div(fl.log(fl.tensor([[0.25, 0.75]])), fl.tensor([[0.5, 0.5]]), reduction='batchmean')",
    "Tensor(0.14384104, dtype=float32)",
)
def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False) -> Tensor:
    x, t = _pair(input, target, "kl_div")
    reduction = legacy_reduction(size_average, reduce, reduction)
    if log_target:
        loss = fl.exp(t) * (t - x)
    else:
        safe = fl.where(t > 0, t, 1.0)
        loss = fl.where(t > 0, t * fl.log(safe), zero(x)) - t * x  # 0 log 0 = 0
    if reduction == "batchmean":
        return fl.sum(loss) / (x.shape[0] if x.ndim else 1)
    return _reduce(loss, reduction, "kl_div")
