"""The Adam family: ``Adam`` (with AMSGrad), ``AdamW``, ``Adamax``, ``NAdam``, ``RAdam``, each PyTorch's update
written per leaf. Bias corrections use the step count in double precision when it is a Python int (eager), as
PyTorch does.

>>> import funclib as fl, funclib.optim as optim
>>> opt = optim.AdamW([fl.zeros(3)], lr=1e-3, weight_decay=1e-2)
"""

from __future__ import annotations

import funclib as fl

from .optimizer import Optimizer, coef, decay_coefficient, float_step, lerp, pow_, select, sqrt_, weight_decay

__all__ = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"]


def _moments(h) -> dict:
    """The moving-average weights every Adam variant uses."""
    b1, b2 = h["betas"]
    return {"w1": 1 - b1, "b2": b2, "w2": 1 - b2, "eps": h["eps"]}


class Adam(Optimizer):
    """Adam (Kingma & Ba), PyTorch's form: ``g += wd * p``; ``m = lerp(m, g, 1 - b1)``;
    ``v = b2 v + (1 - b2) g^2``; ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``;
    with ``amsgrad`` the running maximum of ``v`` is used.

    Args:
        params: the tensors to train (see ``Optimizer``).
        lr: learning rate (default 1e-3).
        betas: decay rates of the first and second moments (default (0.9, 0.999)).
        eps: added to the denominator (default 1e-8).
        weight_decay: L2 penalty added to the gradient (default 0).
        amsgrad: use the running maximum of the second moment (default False).
        maximize: ascend instead of descend (default False).
        fused: run a concrete step as one compiled call: None (default) when its parameters hold 65536 elements
            or more, True always, False never. The results are the same bits either way.

    Returns:
        The optimizer; ``update(model, grads)`` or ``step(grads)`` applies one step.

    >>> w = fl.tensor([1.0, -2.0])
    >>> optim.Adam([w], lr=0.5).step([fl.tensor([0.5, -0.5])])  # the first step moves each entry by lr
    [Tensor([ 0.50000006, -1.5       ], dtype=float32)]
    """

    defaults = {
        "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False, "maximize": False,
    }  # fmt: skip
    _decoupled = False

    def init_one(self, p, group):
        s = {"exp_avg": fl.zeros_like(p), "exp_avg_sq": fl.zeros_like(p)}
        if group["amsgrad"]:
            s["max_exp_avg_sq"] = fl.zeros_like(p)
        return s

    def coefficients(self, step, h, dtype):
        b1, b2 = h["betas"]
        return {
            **_moments(h),
            "step_size": coef(h["lr"] / (1 - pow_(b1, step)), dtype),
            "bc2_sqrt": coef(sqrt_(1 - pow_(b2, step)), dtype),
            "decay": decay_coefficient(h, self._decoupled),
        }

    def update_one(self, g, p, s, c, cfg):
        g, p = weight_decay(g, p, c, cfg, self._decoupled)
        m = s["exp_avg"] = lerp(s["exp_avg"], g, c["w1"])
        v = s["exp_avg_sq"] = s["exp_avg_sq"] * c["b2"] + g * g * c["w2"]
        if cfg["amsgrad"]:
            v = s["max_exp_avg_sq"] = fl.maximum(s["max_exp_avg_sq"], v)
        return p - (m / (fl.sqrt(v) / c["bc2_sqrt"] + c["eps"])) * c["step_size"], s


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * wd`` before the Adam step.

    Args:
        params, lr, betas, eps, amsgrad, maximize, fused: as for ``Adam``.
        weight_decay: the decoupled decay rate (default 1e-2).

    Returns:
        The optimizer.

    >>> optim.AdamW([fl.ones(2)], lr=0.1, weight_decay=0.5).step([fl.zeros(2)])
    [Tensor([0.95, 0.95], dtype=float32)]
    """

    defaults = {**Adam.defaults, "weight_decay": 1e-2}
    _decoupled = True


class Adamax(Optimizer):
    """Adamax (infinity-norm Adam): ``u = max(b2 u, |g| + eps)``; ``p -= lr / (1 - b1^t) * m / u``.

    Args:
        params, betas, eps, weight_decay, maximize, fused: as for ``Adam``.
        lr: learning rate (default 2e-3).

    Returns:
        The optimizer.

    >>> optim.Adamax([fl.ones(2)], lr=0.1).step([fl.tensor([1.0, -1.0])])
    [Tensor([0.9, 1.1], dtype=float32)]
    """

    defaults = {"lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "maximize": False}

    def init_one(self, p, group):
        return {"exp_avg": fl.zeros_like(p), "exp_inf": fl.zeros_like(p)}

    def coefficients(self, step, h, dtype):
        step_size = coef(h["lr"] / (1 - pow_(h["betas"][0], step)), dtype)
        return {**_moments(h), "step_size": step_size, "decay": decay_coefficient(h)}

    def update_one(self, g, p, s, c, cfg):
        g, p = weight_decay(g, p, c, cfg)
        m = s["exp_avg"] = lerp(s["exp_avg"], g, c["w1"])
        u = s["exp_inf"] = fl.maximum(s["exp_inf"] * c["b2"], fl.abs(g) + c["eps"])
        return p - (m / u) * c["step_size"], s


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat), PyTorch's momentum-decay schedule
    ``mu_t = b1 (1 - 0.5 * 0.96^(t * momentum_decay))``.

    Args:
        params, betas, eps, weight_decay, maximize, fused: as for ``Adam``.
        lr: learning rate (default 2e-3).
        momentum_decay: the schedule's rate (default 4e-3).
        decoupled_weight_decay: decay the parameters as AdamW does (NAdamW; default False).

    Returns:
        The optimizer.

    >>> optim.NAdam([fl.ones(2)], lr=0.1).step([fl.tensor([1.0, -1.0])])
    [Tensor([0.8943548, 1.1056452], dtype=float32)]
    """

    defaults = {
        "lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "momentum_decay": 4e-3,
        "decoupled_weight_decay": False, "maximize": False,
    }  # fmt: skip

    def init_one(self, p, group):
        # a float64 tensor, not a Python float, so its type is the same going into and out of a jitted step
        return {
            "mu_product": fl.asarray(1.0, dtype=fl.float64),
            "exp_avg": fl.zeros_like(p),
            "exp_avg_sq": fl.zeros_like(p),
        }

    def coefficients(self, step, h, dtype):
        b1, b2 = h["betas"]
        md = h["momentum_decay"]
        # the momentum products are kept in float64 in the state: these enter them in float64 too
        f64 = lambda x: fl.asarray(x, dtype=fl.float64)  # noqa: E731
        return {
            **_moments(h),
            "bc2": 1 - pow_(b2, step),
            "lr": f64(h["lr"]),
            "mu": f64(b1 * (1.0 - 0.5 * pow_(0.96, float_step(step) * md))),
            "mu_next": f64(b1 * (1.0 - 0.5 * pow_(0.96, (float_step(step) + 1) * md))),
            "decay": decay_coefficient(h, bool(h["decoupled_weight_decay"])),
        }

    def update_one(self, g, p, s, c, cfg):
        g, p = weight_decay(g, p, c, cfg, cfg["decoupled_weight_decay"])
        mu, mu_next = c["mu"], c["mu_next"]
        mu_product = s["mu_product"] = s["mu_product"] * mu
        m = s["exp_avg"] = lerp(s["exp_avg"], g, c["w1"])
        v = s["exp_avg_sq"] = s["exp_avg_sq"] * c["b2"] + g * g * c["w2"]
        denom = fl.sqrt(v / coef(c["bc2"], p.dtype)) + c["eps"]
        p = p + (g / denom) * coef(-c["lr"] * (1.0 - mu) / (1.0 - mu_product), p.dtype)
        return p + (m / denom) * coef(-c["lr"] * mu_next / (1.0 - mu_product * mu_next), p.dtype), s


class RAdam(Optimizer):
    """Rectified Adam (Liu et al.): plain momentum SGD while the variance estimate is unreliable
    (``rho_t <= 5``), rectified Adam afterwards.

    Args:
        params, lr, betas, eps, weight_decay, maximize, fused: as for ``Adam``.
        decoupled_weight_decay: decay the parameters as AdamW does (RAdamW; default False).

    Returns:
        The optimizer.

    >>> optim.RAdam([fl.ones(2)], lr=0.1).step([fl.tensor([1.0, -1.0])])
    [Tensor([0.9, 1.1], dtype=float32)]
    """

    defaults = {
        "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "decoupled_weight_decay": False,
        "maximize": False,
    }  # fmt: skip

    def init_one(self, p, group):
        return {"exp_avg": fl.zeros_like(p), "exp_avg_sq": fl.zeros_like(p)}

    def coefficients(self, step, h, dtype):
        b1, b2 = h["betas"]
        bc2 = 1 - pow_(b2, step)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * pow_(b2, step) / bc2
        rectify = rho_t > 5.0
        r = select(rectify, rho_t, 6.0)  # the rectifier is used, so defined, only past 5
        rect = ((r - 4) * (r - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * r)) ** 0.5
        return {
            **_moments(h),
            "bc1": coef(1 - pow_(b1, step), dtype),
            "bc2_sqrt": coef(bc2**0.5, dtype),
            "rect": coef(rect, dtype),
            "rectify": rectify,
            "lr": h["lr"],
            "decay": decay_coefficient(h, bool(h["decoupled_weight_decay"])),
        }

    def update_one(self, g, p, s, c, cfg):
        g, p = weight_decay(g, p, c, cfg, cfg["decoupled_weight_decay"])
        m = s["exp_avg"] = lerp(s["exp_avg"], g, c["w1"])
        v = s["exp_avg_sq"] = s["exp_avg_sq"] * c["b2"] + g * g * c["w2"]
        step = (m / c["bc1"]) * c["lr"]
        adaptive = c["bc2_sqrt"] / (fl.sqrt(v) + c["eps"])
        return p - select(c["rectify"], step * adaptive * c["rect"], step), s
