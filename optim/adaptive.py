"""Per-coordinate adaptive methods: ``RMSprop`` (centered, momentum), ``Adagrad`` (learning-rate decay),
``Adadelta``, each PyTorch's update written per leaf.

>>> import funclib as fl, funclib.optim as optim
>>> opt = optim.RMSprop([fl.zeros(3)], lr=1e-2)
"""

from __future__ import annotations

import funclib as fl

from .optimizer import Optimizer, coef, decay_coefficient, float_step, lerp, weight_decay

__all__ = ["RMSprop", "Adagrad", "Adadelta"]


class RMSprop(Optimizer):
    """RMSprop (Hinton): ``a = alpha a + (1 - alpha) g^2``; ``p -= lr g / (sqrt(a) + eps)`` (centered: subtract
    the squared running mean of ``g`` first; momentum: accumulate ``g / (sqrt(a) + eps)``).

    Args:
        params: the tensors to train (see ``Optimizer``).
        lr: learning rate (default 1e-2).
        alpha: decay rate of the squared average (default 0.99).
        eps: added to the denominator (default 1e-8).
        weight_decay: L2 penalty added to the gradient (default 0).
        momentum: momentum factor (default 0).
        centered: normalize by the estimated variance instead of the second moment (default False).
        maximize: ascend instead of descend (default False).
        fused: as for ``Adam``.

    Returns:
        The optimizer; ``update(model, grads)`` or ``step(grads)`` applies one step.

    >>> optim.RMSprop([fl.ones(2)], lr=0.01).step([fl.tensor([1.0, -1.0])])
    [Tensor([0.90000004, 1.1       ], dtype=float32)]
    """

    defaults = {
        "lr": 1e-2, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0, "centered": False,
        "maximize": False,
    }  # fmt: skip

    nonnegative = ("alpha", "momentum")

    def init_one(self, p, group):
        s = {"square_avg": fl.zeros_like(p)}
        if group["momentum"] > 0:
            s["momentum_buffer"] = fl.zeros_like(p)
        if group["centered"]:
            s["grad_avg"] = fl.zeros_like(p)
        return s

    def coefficients(self, step, h, dtype):
        a = h["alpha"]
        return {"alpha": a, "w": 1 - a, "eps": h["eps"], "lr": h["lr"], "mu": h["momentum"],
                "decay": decay_coefficient(h)}  # fmt: skip

    def update_one(self, g, p, s, c, cfg):
        g, p = weight_decay(g, p, c, cfg)
        sa = s["square_avg"] = s["square_avg"] * c["alpha"] + g * g * c["w"]
        if cfg["centered"]:
            ga = s["grad_avg"] = lerp(s["grad_avg"], g, c["w"])
            sa = sa - ga * ga
        g = g / (fl.sqrt(sa) + c["eps"])
        if cfg["momentum"]:
            g = s["momentum_buffer"] = s["momentum_buffer"] * c["mu"] + g
            return p - g * c["lr"], s
        return p - g * c["lr"], s


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.): ``sum += g^2``; ``p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps)``.

    Args:
        params: the tensors to train (see ``Optimizer``).
        lr: learning rate (default 1e-2).
        lr_decay: learning-rate decay per step (default 0).
        weight_decay: L2 penalty added to the gradient (default 0).
        initial_accumulator_value: the starting sum of squares (default 0).
        eps: added to the denominator (default 1e-10).
        maximize: ascend instead of descend (default False).
        fused: as for ``Adam``.

    Returns:
        The optimizer.

    >>> optim.Adagrad([fl.ones(2)], lr=0.1).step([fl.tensor([1.0, -1.0])])
    [Tensor([0.9, 1.1], dtype=float32)]
    """

    defaults = {
        "lr": 1e-2, "lr_decay": 0.0, "weight_decay": 0.0, "initial_accumulator_value": 0.0, "eps": 1e-10,
        "maximize": False,
    }  # fmt: skip

    nonnegative = ("lr_decay", "initial_accumulator_value")

    def init_one(self, p, group):
        return {"sum": fl.full_like(p, group["initial_accumulator_value"])}

    def coefficients(self, step, h, dtype):
        clr = coef(h["lr"] / (1 + (float_step(step) - 1) * h["lr_decay"]), dtype)
        return {"clr": clr, "eps": h["eps"], "decay": decay_coefficient(h)}

    def update_one(self, g, p, s, c, cfg):
        g, p = weight_decay(g, p, c, cfg)
        acc = s["sum"] = s["sum"] + g * g
        return p - (g / (fl.sqrt(acc) + c["eps"])) * c["clr"], s


class Adadelta(Optimizer):
    """Adadelta (Zeiler): ``a = rho a + (1 - rho) g^2``; ``d = sqrt(u + eps) / sqrt(a + eps) * g``;
    ``u = rho u + (1 - rho) d^2``; ``p -= lr d``.

    Args:
        params: the tensors to train (see ``Optimizer``).
        lr: scale of the update (default 1.0).
        rho: decay rate of the running averages (default 0.9).
        eps: added inside the square roots (default 1e-6).
        weight_decay: L2 penalty added to the gradient (default 0).
        maximize: ascend instead of descend (default False).
        fused: as for ``Adam``.

    Returns:
        The optimizer.

    >>> optim.Adadelta([fl.ones(2)]).step([fl.tensor([1.0, -1.0])])
    [Tensor([0.99683774, 1.0031623 ], dtype=float32)]
    """

    defaults = {"lr": 1.0, "rho": 0.9, "eps": 1e-6, "weight_decay": 0.0, "maximize": False}

    def prepare(self, group):
        if isinstance(group["rho"], (int, float)) and not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Adadelta: invalid rho {group['rho']}; pass a value in [0, 1]")

    def init_one(self, p, group):
        return {"square_avg": fl.zeros_like(p), "acc_delta": fl.zeros_like(p)}

    def coefficients(self, step, h, dtype):
        return {"rho": h["rho"], "w": 1 - h["rho"], "eps": h["eps"], "lr": h["lr"], "decay": decay_coefficient(h)}

    def update_one(self, g, p, s, c, cfg):
        g, p = weight_decay(g, p, c, cfg)
        sa = s["square_avg"] = s["square_avg"] * c["rho"] + g * g * c["w"]
        delta = fl.sqrt(s["acc_delta"] + c["eps"]) / fl.sqrt(sa + c["eps"]) * g
        s["acc_delta"] = s["acc_delta"] * c["rho"] + delta * delta * c["w"]
        return p - delta * c["lr"], s
