"""``SGD`` (momentum, dampening, Nesterov, weight decay) and ``Lion`` (sign momentum).

>>> import funclib as fl, funclib.optim as optim
>>> opt = optim.SGD([fl.zeros(3)], lr=0.1, momentum=0.9)
"""

from __future__ import annotations

import funclib as fl

from .optimizer import Optimizer, decay_coefficient, lerp, select, weight_decay

__all__ = ["SGD", "Lion"]


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's update: ``g += wd * p``; with momentum ``b = mu * b + (1 - dampening)
    * g`` (``b = g`` on the first step) and ``g = g + mu * b`` (Nesterov) or ``g = b``; then ``p -= lr * g``.

    Args:
        params: ``model.parameters()``, named parameters, a module, or parameter groups.
        lr: learning rate (default 1e-3).
        momentum: momentum factor (default 0).
        dampening: dampening of the momentum (default 0).
        weight_decay: L2 penalty added to the gradient (default 0).
        nesterov: Nesterov momentum (needs momentum > 0 and dampening 0).
        maximize: ascend instead of descend (default False).
        fused: as for ``Adam``.

    Returns:
        The optimizer; ``update(model, grads)`` or ``step(grads)`` applies one step.

    >>> optim.SGD([fl.ones(2)], lr=0.1, momentum=0.9).step([fl.tensor([1.0, -1.0])])
    [Tensor([0.9, 1.1], dtype=float32)]
    """

    defaults = {
        "lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False, "maximize": False,
    }  # fmt: skip

    nonnegative = ("momentum",)

    def prepare(self, group):
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening; set momentum > 0 and "
                             "dampening=0, or nesterov=False")

    def init_one(self, p, group):
        return {"momentum_buffer": fl.zeros_like(p)} if group["momentum"] != 0 else {}

    def coefficients(self, step, h, dtype):
        return {"lr": h["lr"], "mu": h["momentum"], "damp": 1 - h["dampening"], "first": step == 1,
                "decay": decay_coefficient(h)}  # fmt: skip

    def update_one(self, g, p, s, c, cfg):
        g, p = weight_decay(g, p, c, cfg)
        if "momentum_buffer" in s:
            buf = s["momentum_buffer"] = select(c["first"], g, s["momentum_buffer"] * c["mu"] + g * c["damp"])
            g = g + buf * c["mu"] if cfg["nesterov"] else buf
        return p - g * c["lr"], s


class Lion(Optimizer):
    """Lion (Chen et al., 2023): ``c = b1 * m + (1 - b1) * g``; ``p = p * (1 - lr * wd) - lr * sign(c)``;
    ``m = b2 * m + (1 - b2) * g``.

    Args:
        params: the tensors to train (see ``Optimizer``).
        lr: learning rate (default 1e-4).
        betas: the interpolation weights of the update and of the moving average (default (0.9, 0.99)).
        weight_decay: decoupled decay rate (default 0).
        maximize: ascend instead of descend (default False).
        fused: as for ``Adam``.

    Returns:
        The optimizer.

    >>> optim.Lion([fl.ones(2)], lr=0.1).step([fl.tensor([1.0, -1.0])])
    [Tensor([0.9, 1.1], dtype=float32)]
    """

    defaults = {"lr": 1e-4, "betas": (0.9, 0.99), "weight_decay": 0.0, "maximize": False}

    def init_one(self, p, group):
        return {"exp_avg": fl.zeros_like(p)}

    def coefficients(self, step, h, dtype):
        b1, b2 = h["betas"]
        return {"w1": 1 - b1, "w2": 1 - b2, "lr": h["lr"], "decay": decay_coefficient(h, decoupled=True)}

    def update_one(self, g, p, s, c, cfg):
        m = s["exp_avg"]
        g, p = weight_decay(g, p, c, cfg, decoupled=True)
        s["exp_avg"] = lerp(m, g, c["w2"])
        return p - fl.sign(lerp(m, g, c["w1"])) * c["lr"], s
