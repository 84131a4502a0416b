"""The Adam family: ``Adam`` (with AMSGrad), ``AdamW``, ``Adamax``, ``NAdam``, ``RAdam``, each PyTorch's update
written per leaf. Bias corrections use the step count in double precision when it is a Python int (eager), as
PyTorch does.

>>> import funclib as fl, funclib.optim as optim
>>> opt = optim.AdamW([fl.zeros(3)], lr=1e-3, weight_decay=1e-2)
"""

from __future__ import annotations

import funclib as fl

from .optimizer import Optimizer, coef, float_step, hyperparameters, lerp, namespace, pow_, sqrt_, weight_decay

__all__ = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"]


class Adam(Optimizer):
    """Adam (Kingma & Ba), PyTorch's form: ``g += wd * p``; ``m = lerp(m, g, 1 - b1)``;
    ``v = b2 v + (1 - b2) g^2``; ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``;
    with ``amsgrad`` the running maximum of ``v`` is used.

    Args:
        lr: default 1e-3. betas: default (0.9, 0.999). eps: default 1e-8. weight_decay: L2, default 0.
        amsgrad: default False. maximize: ascend.
    """

    _decoupled = False
    numpy_rule = True
    fused_rule = True

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ):
        super().__init__(params, hyperparameters(locals()))

    def init_one(self, p, group):
        s = {"exp_avg": fl.zeros_like(p), "exp_avg_sq": fl.zeros_like(p)}
        if group["amsgrad"]:
            s["max_exp_avg_sq"] = fl.zeros_like(p)
        return s

    def update_one(self, g, p, s, h, cfg):
        return self.update_arrays(g, p, s, self.coefficients(s["step"], h, cfg, p), self.rule_flags(cfg))

    def rule_flags(self, cfg):
        return (cfg["weight_decay"] != 0, bool(cfg["amsgrad"]))

    def coefficients(self, step, h, cfg, p):
        b1, b2 = h["betas"]
        lr = h["lr"]
        c = {
            "w1": 1 - b1,
            "b2": b2,
            "w2": 1 - b2,
            "step_size": coef(lr / (1 - pow_(b1, step)), p),
            "bc2_sqrt": coef(sqrt_(1 - pow_(b2, step)), p),
            "eps": h["eps"],
        }
        if cfg["weight_decay"] != 0:
            c["decay"] = 1 - lr * h["weight_decay"] if self._decoupled else h["weight_decay"]
        return c

    def update_arrays(self, g, p, s, c, flags):
        xp = namespace(p)
        decay, amsgrad = flags
        if decay:
            if self._decoupled:
                p = p * c["decay"]
            else:
                g = g + p * c["decay"]
        m = lerp(s["exp_avg"], g, c["w1"])
        v = s["exp_avg_sq"] * c["b2"] + g * g * c["w2"]
        if amsgrad:
            vmax = xp.maximum(s["max_exp_avg_sq"], v)
            s["max_exp_avg_sq"] = vmax
            denom = xp.sqrt(vmax) / c["bc2_sqrt"] + c["eps"]
        else:
            denom = xp.sqrt(v) / c["bc2_sqrt"] + c["eps"]
        s["exp_avg"], s["exp_avg_sq"] = m, v
        return p - (m / denom) * c["step_size"], s


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * wd`` before the Adam step.
    Default ``weight_decay=1e-2``."""

    _decoupled = True

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class Adamax(Optimizer):
    """Adamax (infinity-norm Adam): ``u = max(b2 u, |g| + eps)``; ``p -= lr / (1 - b1^t) * m / u``.
    Default ``lr=2e-3``."""

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
    ):
        super().__init__(params, hyperparameters(locals()))

    numpy_rule = True

    def init_one(self, p, group):
        return {"exp_avg": fl.zeros_like(p), "exp_inf": fl.zeros_like(p)}

    def update_one(self, g, p, s, h, cfg):
        xp = namespace(p)
        b1, b2 = h["betas"]
        g, p = weight_decay(g, p, h["lr"], h, cfg)
        m = lerp(s["exp_avg"], g, 1 - b1)
        u = xp.maximum(s["exp_inf"] * b2, xp.abs(g) + h["eps"])
        bc = 1 - pow_(b1, s["step"])
        s["exp_avg"], s["exp_inf"] = m, u
        return p - (m / u) * coef(h["lr"] / bc, p), s


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat), PyTorch's momentum-decay schedule
    ``mu_t = b1 (1 - 0.5 * 0.96^(t * momentum_decay))``. Default ``lr=2e-3``; ``decoupled_weight_decay`` gives
    NAdamW."""

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        maximize: bool = False,
    ):
        super().__init__(params, hyperparameters(locals()))

    numpy_rule = True

    def init_one(self, p, group):
        # a float64 tensor, not a Python float, so its type is the same going into and out of a jitted step
        return {
            "mu_product": fl.asarray(1.0, dtype=fl.float64),
            "exp_avg": fl.zeros_like(p),
            "exp_avg_sq": fl.zeros_like(p),
        }

    def update_one(self, g, p, s, h, cfg):
        step = s["step"]
        b1, b2 = h["betas"]
        lr = h["lr"]
        bc2 = 1 - pow_(b2, step)
        g, p = weight_decay(g, p, lr, h, cfg, cfg["decoupled_weight_decay"])
        md = h["momentum_decay"]
        t = float_step(step)
        mu = b1 * (1.0 - 0.5 * pow_(0.96, t * md))
        mu_next = b1 * (1.0 - 0.5 * pow_(0.96, (t + 1) * md))
        mu_product = s["mu_product"] * mu
        m = lerp(s["exp_avg"], g, 1 - b1)
        v = s["exp_avg_sq"] * b2 + g * g * (1 - b2)
        denom = namespace(p).sqrt(v / coef(bc2, p)) + h["eps"]
        mu_product_next = mu_product * mu_next
        p = p + (g / denom) * coef(-lr * (1.0 - mu) / (1.0 - mu_product), p)
        p = p + (m / denom) * coef(-lr * mu_next / (1.0 - mu_product_next), p)
        s["mu_product"], s["exp_avg"], s["exp_avg_sq"] = mu_product, m, v
        return p, s


class RAdam(Optimizer):
    """Rectified Adam (Liu et al.): plain momentum SGD while the variance estimate is unreliable
    (``rho_t <= 5``), rectified Adam afterwards. ``decoupled_weight_decay`` gives RAdamW."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        *,
        maximize: bool = False,
    ):
        super().__init__(params, hyperparameters(locals()))

    numpy_rule = True

    def init_one(self, p, group):
        return {"exp_avg": fl.zeros_like(p), "exp_avg_sq": fl.zeros_like(p)}

    def update_one(self, g, p, s, h, cfg):
        step = s["step"]
        b1, b2 = h["betas"]
        lr = h["lr"]
        g, p = weight_decay(g, p, lr, h, cfg, cfg["decoupled_weight_decay"])
        m = lerp(s["exp_avg"], g, 1 - b1)
        v = s["exp_avg_sq"] * b2 + g * g * (1 - b2)
        s["exp_avg"], s["exp_avg_sq"] = m, v
        bc1 = 1 - pow_(b1, step)
        bc2 = 1 - pow_(b2, step)
        mhat = m / coef(bc1, p)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * pow_(b2, step) / bc2
        if isinstance(rho_t, fl.Tensor):
            safe = fl.maximum(rho_t, 5.0 + 1e-3)
            rect = fl.sqrt((safe - 4) * (safe - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * safe))
            adaptive = coef(sqrt_(bc2), p) / (fl.sqrt(v) + h["eps"])
            upd = fl.where(rho_t > 5.0, adaptive * coef(rect, p), 1.0)
            return p - mhat * lr * upd, s
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = coef(bc2**0.5, p) / (namespace(p).sqrt(v) + h["eps"])
            return p - mhat * lr * adaptive * rect, s
        return p - mhat * lr, s
