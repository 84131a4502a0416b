"""Gradient clipping that returns new trees (tensors are immutable): ``clip_grad_norm_`` and ``clip_grad_value_``,
with PyTorch's names and numerics. Both work on any pytree of gradients (a model-shaped tree, a dict, a list) and
under ``fl.jit``.

>>> import funclib as fl, funclib.optim as optim
>>> grads, norm = optim.clip_grad_norm_({"w": fl.full((4,), 3.0)}, max_norm=1.0)
>>> float(norm)
6.0
"""

from __future__ import annotations

import math
from typing import Any

import funclib as fl
from funclib import tree as tree_util
from funclib.checks import check_number
from funclib.core import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm"]


def _grad_leaves(grads):
    leaves, treedef = tree_util.flatten(grads, is_leaf=lambda x: x is None)
    return leaves, treedef


def get_total_norm(grads, norm_type: float = 2.0) -> Tensor:
    """The ``norm_type``-norm of all gradients together (``inf`` for the largest magnitude).

    Args:
        grads: a pytree of gradients (None leaves are skipped).
        norm_type: the order (default 2; ``float("inf")`` for the largest magnitude).

    Returns:
        A 0-d tensor.

    >>> optim.get_total_norm([fl.tensor([3.0]), fl.tensor([4.0])])
    Tensor(5., dtype=float32)
    """
    norm_type = float(check_number(norm_type, "get_total_norm", "norm_type"))
    leaves = [g for g in _grad_leaves(grads)[0] if g is not None]
    if not leaves:
        return fl.asarray(0.0)
    if math.isinf(norm_type):
        norms = [fl.max(fl.abs(g)) for g in leaves]
        return fl.max(fl.stack([n.astype(fl.float32) if n.dtype != leaves[0].dtype else n for n in norms]))
    norms = [fl.linalg.vector_norm(g, ord=norm_type) for g in leaves]
    dt = norms[0].dtype
    return fl.linalg.vector_norm(fl.stack([n.astype(dt) for n in norms]), ord=norm_type)


def clip_grad_norm_(
    grads, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False
) -> tuple[Any, Tensor]:
    """Scale all gradients together so their total ``norm_type``-norm is at most ``max_norm``.

    Args:
        grads: a pytree of gradients (None leaves are kept).
        max_norm: the bound.
        norm_type: the order (default 2; ``float("inf")`` for the max norm).
        error_if_nonfinite: raise when the total norm is nan or inf (eager only).

    Returns:
        ``(clipped_grads, total_norm)``: the scale is ``min(1, max_norm / (total_norm + 1e-6))``, as in PyTorch.

    >>> grads, norm = optim.clip_grad_norm_({"w": fl.tensor([3.0, 4.0])}, max_norm=1.0)
    >>> grads["w"], norm
    (Tensor([0.5999999 , 0.79999983], dtype=float32), Tensor(5., dtype=float32))
    """
    check_number(max_norm, "clip_grad_norm_", "max_norm", min=0.0)
    check_number(norm_type, "clip_grad_norm_", "norm_type")
    leaves, treedef = _grad_leaves(grads)
    total = get_total_norm(grads, norm_type)
    if error_if_nonfinite and not bool(fl.isfinite(total)):
        raise RuntimeError(
            f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is non-finite, so it cannot be "
            "clipped; pass error_if_nonfinite=False to clip anyway"
        )
    scale = fl.minimum(max_norm / (total + 1e-6), 1.0)
    out = [None if g is None else g * scale.astype(g.dtype) for g in leaves]
    return tree_util.unflatten(treedef, out), total


def clip_grad_value_(grads, clip_value: float) -> Any:
    """Clip every gradient element to ``[-clip_value, clip_value]``.

    Args:
        grads: a pytree of gradients (None leaves are kept).
        clip_value: the bound, at least 0.

    Returns:
        The clipped gradients, in ``grads``'s structure.

    >>> optim.clip_grad_value_([fl.tensor([-3.0, 0.5])], 1.0)
    [Tensor([-1. ,  0.5], dtype=float32)]
    """
    c = float(check_number(clip_value, "clip_grad_value_", "clip_value", min=0.0))
    leaves, treedef = _grad_leaves(grads)
    return tree_util.unflatten(treedef, [None if g is None else fl.clip(g, -c, c) for g in leaves])
