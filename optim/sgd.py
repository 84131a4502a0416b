"""``SGD`` (momentum, dampening, Nesterov, weight decay) and ``Lion`` (sign momentum).

>>> import funclib as fl, funclib.optim as optim
>>> opt = optim.SGD([fl.zeros(3)], lr=0.1, momentum=0.9)
"""

from __future__ import annotations

import funclib as fl

from .optimizer import Optimizer, first_step, hyperparameters, lerp, namespace, weight_decay

__all__ = ["SGD", "Lion"]


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's update: ``g += wd * p``; with momentum ``b = mu * b + (1 - dampening)
    * g`` (``b = g`` on the first step) and ``g = g + mu * b`` (Nesterov) or ``g = b``; then ``p -= lr * g``.

    Args:
        params: ``model.parameters()``, named parameters, a module, or parameter groups.
        lr: learning rate (default 1e-3). momentum, dampening, weight_decay: default 0.
        nesterov: Nesterov momentum (needs momentum > 0 and dampening 0). maximize: ascend instead.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ):
        if momentum < 0.0:
            raise ValueError(f"SGD: invalid momentum value {momentum}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, hyperparameters(locals()))

    numpy_rule = True

    def init_one(self, p, group):
        return {"momentum_buffer": fl.zeros_like(p)} if group["momentum"] != 0 else {}

    def update_one(self, g, p, s, h, cfg):
        g, p = weight_decay(g, p, h["lr"], h, cfg)
        mu = h["momentum"]
        if "momentum_buffer" in s:
            buf = first_step(s["step"], g, s["momentum_buffer"] * mu + g * (1 - h["dampening"]))
            s["momentum_buffer"] = buf
            g = g + buf * mu if cfg["nesterov"] else buf
        return p - g * h["lr"], s


class Lion(Optimizer):
    """Lion (Chen et al., 2023): ``c = b1 * m + (1 - b1) * g``; ``p = p * (1 - lr * wd) - lr * sign(c)``;
    ``m = b2 * m + (1 - b2) * g``.

    Args:
        lr: default 1e-4. betas: default (0.9, 0.99). weight_decay: decoupled, default 0.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
    ):
        super().__init__(params, hyperparameters(locals()))

    numpy_rule = True

    def init_one(self, p, group):
        return {"exp_avg": fl.zeros_like(p)}

    def update_one(self, g, p, s, h, cfg):
        b1, b2 = h["betas"]
        m = s["exp_avg"]
        c = lerp(m, g, 1 - b1)
        if cfg["weight_decay"] != 0:
            p = p * (1 - h["lr"] * h["weight_decay"])
        p = p - namespace(p).sign(c) * h["lr"]
        s["exp_avg"] = lerp(m, g, 1 - b2)
        return p, s
