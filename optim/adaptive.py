"""Per-coordinate adaptive methods: ``RMSprop`` (centered, momentum), ``Adagrad`` (learning-rate decay),
``Adadelta``, each PyTorch's update written per leaf.

>>> import funclib as fl, funclib.optim as optim
>>> opt = optim.RMSprop([fl.zeros(3)], lr=1e-2)
"""

from __future__ import annotations

import funclib as fl

from .optimizer import Optimizer, coef, float_step, hyperparameters, lerp, namespace, weight_decay

__all__ = ["RMSprop", "Adagrad", "Adadelta"]


class RMSprop(Optimizer):
    """RMSprop (Hinton): ``a = alpha a + (1 - alpha) g^2``; ``p -= lr g / (sqrt(a) + eps)`` (centered: subtract
    the squared running mean of ``g`` first; momentum: accumulate ``g / (sqrt(a) + eps)``). Default ``lr=1e-2``."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ):
        if alpha < 0:
            raise ValueError(f"RMSprop: invalid alpha value {alpha}")
        if momentum < 0:
            raise ValueError(f"RMSprop: invalid momentum value {momentum}")
        super().__init__(params, hyperparameters(locals()))

    numpy_rule = True

    def init_one(self, p, group):
        s = {"square_avg": fl.zeros_like(p)}
        if group["momentum"] > 0:
            s["momentum_buffer"] = fl.zeros_like(p)
        if group["centered"]:
            s["grad_avg"] = fl.zeros_like(p)
        return s

    def update_one(self, g, p, s, h, cfg):
        alpha = h["alpha"]
        g, p = weight_decay(g, p, h["lr"], h, cfg)
        sa = s["square_avg"] * alpha + g * g * (1 - alpha)
        s["square_avg"] = sa
        if cfg["centered"]:
            ga = lerp(s["grad_avg"], g, 1 - alpha)
            s["grad_avg"] = ga
            avg = namespace(p).sqrt(sa - ga * ga) + h["eps"]
        else:
            avg = namespace(p).sqrt(sa) + h["eps"]
        if cfg["momentum"] > 0:
            buf = s["momentum_buffer"] * h["momentum"] + g / avg
            s["momentum_buffer"] = buf
            return p - buf * h["lr"], s
        return p - (g / avg) * h["lr"], s


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.): ``sum += g^2``; ``p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps)``.
    Default ``lr=1e-2``, ``eps=1e-10``."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        *,
        maximize: bool = False,
    ):
        if lr_decay < 0 or initial_accumulator_value < 0:
            raise ValueError("Adagrad: lr_decay and initial_accumulator_value must be >= 0")
        super().__init__(params, hyperparameters(locals()))

    numpy_rule = True

    def init_one(self, p, group):
        return {"sum": fl.full_like(p, group["initial_accumulator_value"])}

    def update_one(self, g, p, s, h, cfg):
        g, p = weight_decay(g, p, h["lr"], h, cfg)
        clr = h["lr"] / (1 + (float_step(s["step"]) - 1) * h["lr_decay"])
        acc = s["sum"] + g * g
        s["sum"] = acc
        return p - (g / (namespace(p).sqrt(acc) + h["eps"])) * coef(clr, p), s


class Adadelta(Optimizer):
    """Adadelta (Zeiler): ``a = rho a + (1 - rho) g^2``; ``d = sqrt(u + eps) / sqrt(a + eps) * g``;
    ``u = rho u + (1 - rho) d^2``; ``p -= lr d``. Default ``lr=1.0``, ``rho=0.9``, ``eps=1e-6``."""

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
    ):
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Adadelta: invalid rho value {rho}")
        super().__init__(params, hyperparameters(locals()))

    numpy_rule = True

    def init_one(self, p, group):
        return {"square_avg": fl.zeros_like(p), "acc_delta": fl.zeros_like(p)}

    def update_one(self, g, p, s, h, cfg):
        xp = namespace(p)
        rho = h["rho"]
        g, p = weight_decay(g, p, h["lr"], h, cfg)
        sa = s["square_avg"] * rho + g * g * (1 - rho)
        std = xp.sqrt(sa + h["eps"])
        delta = xp.sqrt(s["acc_delta"] + h["eps"]) / std * g
        s["square_avg"] = sa
        s["acc_delta"] = s["acc_delta"] * rho + delta * delta * (1 - rho)
        return p - delta * h["lr"], s
