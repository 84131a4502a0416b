"""Learning-rate schedulers with PyTorch's names, arguments and step semantics: each ``step()`` advances
``last_epoch`` and writes the new rates into ``optimizer.param_groups[i]["lr"]`` (the recursive, chainable form,
so schedulers compose and respect manual changes); ``get_last_lr()`` reads them back.

Under ``fl.jit`` pass ``optimizer.hyperparams()`` into the jitted step: the rates are arguments, so a changing
schedule does not retrace.

>>> import funclib as fl, funclib.optim as optim
>>> opt = optim.SGD([fl.zeros(2)], lr=0.1)
>>> sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
>>> sched.step(); round(sched.get_last_lr()[0], 6)
0.097553
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from funclib.checks import check_callable, check_int, check_number, describe

from .optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "PolynomialLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "OneCycleLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "ChainedScheduler",
]


def _per_group(name: str, optimizer: Optimizer, value, op: str) -> list:
    _check_optimizer(optimizer, op)
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{op}: expected {len(optimizer.param_groups)} values for {name} (one per parameter group), got "
                f"{len(value)}"
            )
        return list(value)
    return [value] * len(optimizer.param_groups)


def _check_optimizer(optimizer, op: str) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{op}: optimizer must be a funclib.optim Optimizer, got {describe(optimizer)}")


def _functions(name: str, optimizer: Optimizer, value, op: str) -> list:
    fs = _per_group(name, optimizer, value, op)
    for f in fs:
        check_callable(f, op, name)
    return fs


class LRScheduler:
    """Base class: a subclass defines ``get_lr()`` (the recursive form: the new rates from the current ones) and
    optionally ``_get_closed_form_lr()`` (the rates at ``last_epoch``, for ``step(epoch)``).

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    >>> class Halving(optim.lr_scheduler.LRScheduler):
    ...     def get_lr(self):
    ...         return [lr / 2 if self.last_epoch > 0 else lr for lr in self._current()]
    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = Halving(opt)
    >>> sched.step(); sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        _check_optimizer(optimizer, type(self).__name__)
        check_int(last_epoch, type(self).__name__, "last_epoch", min=-1)
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise ValueError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a scheduler with "
                        "last_epoch >= 0; load the optimizer's state_dict first"
                    )
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def _current(self) -> list:
        return [g["lr"] for g in self.optimizer.param_groups]

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last ``step``."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``, using the closed form where there is one)."""
        if epoch is not None:
            check_int(epoch, f"{type(self).__name__}.step", "epoch", min=0)
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, values):
            g["lr"] = lr
        self._last_lr = self._current()

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (and functions, which are not data)."""
        return {
            k: v
            for k, v in self.__dict__.items()
            if k != "optimizer" and not callable(v) and k != "lr_lambdas"
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={getattr(self, '_last_lr', None)})"
        )


class LambdaLR(LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        lr_lambda: a function of the epoch, or one per group.
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.9 ** epoch)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.9, 0.81, 0.729, 0.6561]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ):
        self.lr_lambdas = _functions("lr_lambda", optimizer, lr_lambda, "LambdaLR")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]


class MultiplicativeLR(LRScheduler):
    """``lr *= lr_lambda(epoch)`` at each step after the first.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        lr_lambda: a function of the epoch, or one per group.
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.MultiplicativeLR(opt, lambda epoch: 0.5)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.5, 0.25, 0.125, 0.0625]
    """

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1):
        self.lr_lambdas = _functions("lr_lambda", optimizer, lr_lambda, "MultiplicativeLR")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch > 0:
            return [
                g["lr"] * f(self.last_epoch) for g, f in zip(self.optimizer.param_groups, self.lr_lambdas)
            ]
        return self._current()


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        step_size: the epochs between decays.
        gamma: the factor (default 0.1).
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        check_int(step_size, "StepLR", "step_size", min=1)
        check_number(gamma, "StepLR", "gamma")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each epoch in ``milestones``.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        milestones: the epochs (a repeated one multiplies again).
        gamma: the factor (default 0.1).
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.1)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.1, 0.1, 0.01, 0.01]
    """

    def __init__(
        self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch: int = -1
    ):
        self.milestones = Counter(check_int(m, "MultiStepLR", "milestones", min=0) for m in milestones)
        self.gamma = check_number(gamma, "MultiStepLR", "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._current()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._current()]

    def _get_closed_form_lr(self):
        ms = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(ms, self.last_epoch) for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """``lr * factor`` for the first ``total_iters`` epochs, then ``lr``.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        factor: in ``[0, 1]`` (default 1/3).
        total_iters: the epochs it lasts (default 5).
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.5, 1.0, 1.0, 1.0]
    """

    def __init__(
        self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1
    ):
        check_number(factor, "ConstantLR", "factor", min=0.0, max=1.0)
        check_int(total_iters, "ConstantLR", "total_iters", min=0)
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._current()]
        if self.last_epoch != self.total_iters:
            return self._current()
        return [lr * (1.0 / self.factor) for lr in self._current()]

    def _get_closed_form_lr(self):
        on = self.last_epoch >= self.total_iters
        return [base * (self.factor + on * (1 - self.factor)) for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale linearly from ``start_factor * lr`` to ``end_factor * lr`` over ``total_iters`` epochs (warm-up).

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        start_factor: in ``(0, 1]`` (default 1/3).
        end_factor: in ``[0, 1]`` (default 1).
        total_iters: the epochs of the ramp (default 5).
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.5, 0.75, 1.0, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ):
        check_number(start_factor, "LinearLR", "start_factor", min=0.0, max=1.0, min_open=True)
        check_number(end_factor, "LinearLR", "end_factor", min=0.0, max=1.0)
        check_int(total_iters, "LinearLR", "total_iters", min=1)
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._current()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        span = self.end_factor - self.start_factor
        mult = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [lr * mult for lr in self._current()]

    def _get_closed_form_lr(self):
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [
            base * (self.start_factor + (self.end_factor - self.start_factor) * frac)
            for base in self.base_lrs
        ]


class ExponentialLR(LRScheduler):
    """Multiply the rate by ``gamma`` every epoch.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        gamma: the factor.
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.5, 0.25, 0.125, 0.0625]
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = check_number(gamma, "ExponentialLR", "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self._is_initial:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay to zero over ``total_iters`` epochs as ``(1 - t / total_iters) ** power``.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        total_iters: the epochs of the decay (default 5).
        power: the exponent (default 1).
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.PolynomialLR(opt, total_iters=4)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.75, 0.5, 0.25, 0.0]
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1):
        check_int(total_iters, "PolynomialLR", "total_iters", min=1)
        check_number(power, "PolynomialLR", "power")
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch > self.total_iters:
            return self._current()
        t, n = self.last_epoch, self.total_iters
        factor = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [lr * factor for lr in self._current()]

    def _get_closed_form_lr(self):
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (1.0 - frac) ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from ``initial_lr`` to ``eta_min`` over ``T_max`` epochs:
    ``eta_min + (base - eta_min) * (1 + cos(pi * t / T_max)) / 2``.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        T_max: the epochs of half a cosine period.
        eta_min: the lowest rate (default 0).
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.8536, 0.5, 0.1464, 0.0]
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):  # noqa: N803
        check_int(T_max, "CosineAnnealingLR", "T_max", min=1)
        check_number(eta_min, "CosineAnnealingLR", "eta_min")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, tm, emin = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and t > 0:
            return [emin + (base - emin) * (1 + math.cos(t * math.pi / tm)) / 2 for base in self.base_lrs]
        if (t - 1 - tm) % (2 * tm) == 0:
            return [
                g["lr"] + (base - emin) * (1 - math.cos(math.pi / tm)) / 2
                for base, g in zip(self.base_lrs, self.optimizer.param_groups)
            ]
        ratio = (1 + math.cos(math.pi * t / tm)) / (1 + math.cos(math.pi * (t - 1) / tm))
        return [ratio * (g["lr"] - emin) + emin for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        t, tm, emin = self.last_epoch, self.T_max, self.eta_min
        return [emin + (base - emin) * (1 + math.cos(math.pi * t / tm)) / 2 for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every ``T_i`` epochs, ``T_i`` growing by ``T_mult`` (SGDR).

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        T_0: the epochs before the first restart.
        T_mult: the factor ``T_i`` grows by at each restart (default 1).
        eta_min: the lowest rate (default 0).
        last_epoch: ``-1`` starts fresh; a saved epoch resumes (the groups must hold ``initial_lr``).

    Returns:
        The scheduler; call ``step()`` once per epoch, after the optimizer's steps.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]  # after each epoch
    [0.5, 1.0, 0.5, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,  # noqa: N803
        last_epoch: int = -1,
    ):
        check_int(T_0, "CosineAnnealingWarmRestarts", "T_0", min=1)
        check_int(T_mult, "CosineAnnealingWarmRestarts", "T_mult", min=1)
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [
            self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
            for base in self.base_lrs
        ]

    def step(self, epoch: float | None = None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur %= self.T_i
                self.T_i *= self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts: expected a non-negative epoch, got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        self._step_count = getattr(self, "_step_count", 0) + 1
        for g, lr in zip(self.optimizer.param_groups, self.get_lr()):
            g["lr"] = lr
        self._last_lr = self._current()


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith): warm up from ``max_lr / div_factor`` to ``max_lr`` over ``pct_start`` of
    ``total_steps``, then anneal to ``initial_lr / final_div_factor``; momentum (or Adam's beta1) cycles
    inversely between ``max_momentum`` and ``base_momentum``. Step it once per batch.

    Args:
        optimizer: the optimizer whose groups' ``lr`` (and momentum) are scheduled.
        max_lr: the peak rate, or one per group.
        total_steps: the steps of the cycle (or give ``epochs`` and ``steps_per_epoch``).
        epochs: the epochs, with ``steps_per_epoch``.
        steps_per_epoch: the batches per epoch.
        pct_start: the warm-up's share of the cycle (default 0.3).
        anneal_strategy: ``"cos"`` (default) or ``"linear"``.
        cycle_momentum: cycle the momentum too (default True).
        base_momentum: the momentum at the peak rate (default 0.85).
        max_momentum: the momentum at the lowest rates (default 0.95).
        div_factor: ``initial_lr = max_lr / div_factor`` (default 25).
        final_div_factor: ``min_lr = initial_lr / final_div_factor`` (default 1e4).
        three_phase: anneal back to ``initial_lr`` before the final decay (default False).
        last_epoch: ``-1`` starts fresh; a saved step resumes.

    Returns:
        The scheduler; call ``step()`` after each optimizer step.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0, momentum=0.9)
    >>> sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=5)
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for batch in range(4)]
    [0.9505, 0.6113, 0.1883, 0.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum=0.85,
        max_momentum=0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ):
        _check_optimizer(optimizer, "OneCycleLR")
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"OneCycleLR: expected a positive integer total_steps, got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if epochs <= 0 or steps_per_epoch <= 0:
                raise ValueError("OneCycleLR: epochs and steps_per_epoch must be positive")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: define either total_steps or (epochs and steps_per_epoch)")
        if not 0 <= pct_start <= 1 or not isinstance(pct_start, float):
            raise ValueError(f"OneCycleLR: expected a float pct_start in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        self.anneal_strategy = anneal_strategy
        n = self.total_steps
        if three_phase:
            self._phases = [
                (float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * n) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        max_lrs = _per_group("max_lr", optimizer, max_lr, "OneCycleLR")
        if last_epoch == -1:
            for m, g in zip(max_lrs, optimizer.param_groups):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "OneCycleLR: the optimizer must support momentum or beta1 with cycle_momentum=True; pass "
                    "cycle_momentum=False"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            maxm = _per_group("max_momentum", optimizer, max_momentum, "OneCycleLR")
            basem = _per_group("base_momentum", optimizer, base_momentum, "OneCycleLR")
            if last_epoch == -1:
                for mx, bs, g in zip(maxm, basem, optimizer.param_groups):
                    if self.use_beta1:
                        g["betas"] = (mx, *g["betas"][1:])
                    else:
                        g["momentum"] = mx
                    g["max_momentum"], g["base_momentum"] = mx, bs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        t = self.last_epoch
        if t > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {t} times; total_steps is {self.total_steps}: make total_steps (or epochs "
                "and steps_per_epoch) cover every step"
            )
        lrs = []
        for g in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if t <= end or i == len(self._phases) - 1:
                    pct = (t - start) / (end - start)
                    lr = self._anneal(g[lr0], g[lr1], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(g[m0], g[m1], pct)
                    break
                start = end
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    g["betas"] = (mom, *g["betas"][1:])
                else:
                    g["momentum"] = mom
        return lrs


class ReduceLROnPlateau:
    """Multiply the rate by ``factor`` when ``step(metric)`` has not improved for ``patience`` epochs.

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        mode: ``"min"`` (a loss, default) or ``"max"`` (an accuracy).
        factor: the reduction factor, in ``[0, 1)`` (default 0.1).
        patience: the epochs without improvement tolerated (default 10).
        threshold: the least change that counts as an improvement (default 1e-4).
        threshold_mode: ``"rel"`` (relative to the best, default) or ``"abs"``.
        cooldown: epochs to wait after a reduction (default 0).
        min_lr: the floor, or one per group (default 0).
        eps: smaller changes of the rate are skipped (default 1e-8).

    Returns:
        The scheduler; call ``step(metric)`` once per epoch.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> sched = optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> [sched.step(1.0) or opt.param_groups[0]["lr"] for epoch in range(4)]  # the loss does not improve
    [1.0, 1.0, 0.5, 0.5]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr=0.0,
        eps: float = 1e-8,
    ):
        check_number(factor, "ReduceLROnPlateau", "factor", min=0.0, max=1.0, max_open=True)
        check_int(patience, "ReduceLROnPlateau", "patience", min=0)
        check_int(cooldown, "ReduceLROnPlateau", "cooldown", min=0)
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown (use 'min' or 'max')")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"ReduceLROnPlateau: threshold_mode {threshold_mode!r} is unknown (use 'rel' or 'abs')"
            )
        self.optimizer = optimizer
        self.min_lrs = _per_group("min_lr", optimizer, min_lr, "ReduceLROnPlateau")
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.cooldown_counter = 0
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _is_better(self, a: float) -> bool:
        best, th = self.best, self.threshold
        if self.mode == "min":
            return a < best * (1.0 - th) if self.threshold_mode == "rel" else a < best - th
        return a > best * (th + 1.0) if self.threshold_mode == "rel" else a > best + th

    def step(self, metrics) -> None:
        """Record ``metrics`` (a number or 0-d tensor) for this epoch."""
        current = float(check_number(metrics, "ReduceLROnPlateau.step", "metrics"))
        self.last_epoch += 1
        if self._is_better(current):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for g, floor in zip(self.optimizer.param_groups, self.min_lrs):
                old = g["lr"]
                new = max(old * self.factor, floor)
                if old - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return self._last_lr

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at the epochs in ``milestones`` (warm-up, then decay).

    Args:
        optimizer: the optimizer all the schedulers belong to.
        schedulers: the schedulers, in order.
        milestones: the epochs where the next one takes over (one fewer than the schedulers).
        last_epoch: ``-1`` starts fresh.

    Returns:
        The scheduler; call ``step()`` once per epoch.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> warmup = optim.lr_scheduler.ConstantLR(opt, factor=0.1, total_iters=2)
    >>> decay = optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> sched = optim.lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=[2])
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]
    [0.1, 1.0, 0.5, 0.25]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Sequence[LRScheduler],
        milestones: Sequence[int],
        last_epoch: int = -1,
    ):
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler")
        for i, s in enumerate(schedulers):
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(
                    f"SequentialLR does not support ReduceLROnPlateau (scheduler {i}); step it with the metric yourself"
                )
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"SequentialLR: scheduler {i} belongs to another optimizer; build every scheduler on this one"
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR: expected {len(schedulers) - 1} milestones for {len(schedulers)} schedulers, got "
                f"{len(milestones)}"
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        for s in self._schedulers:
            s.last_epoch -= 1
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched.step(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        subs = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, subs):
            s.load_state_dict(sd)


class ChainedScheduler(LRScheduler):
    """Step several schedulers together each epoch (their effects multiply).

    Args:
        schedulers: the schedulers, all of one optimizer.
        optimizer: that optimizer (default: the first scheduler's).

    Returns:
        The scheduler; call ``step()`` once per epoch.

    >>> opt = optim.SGD([fl.zeros(1)], lr=1.0)
    >>> half = optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> sched = optim.lr_scheduler.ChainedScheduler([half, optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)])
    >>> [round(sched.step() or opt.param_groups[0]["lr"], 4) for epoch in range(4)]
    [0.45, 0.81, 0.729, 0.6561]
    """

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler")
        self.optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler) or s.optimizer is not self.optimizer:
                raise ValueError(
                    f"ChainedScheduler: schedulers[{i}] ({type(s).__name__}) does not schedule the chain's optimizer; "
                    "every scheduler must belong to one optimizer"
                )
        self._schedulers = list(schedulers)
        self._last_lr = self._current()

    def step(self) -> None:
        for s in self._schedulers:
            s.step()
        self._last_lr = self._current()

    def state_dict(self) -> dict[str, Any]:
        return {"_schedulers": [s.state_dict() for s in self._schedulers], "_last_lr": self._last_lr}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for s, sd in zip(self._schedulers, state_dict["_schedulers"]):
            s.load_state_dict(sd)
        self._last_lr = state_dict["_last_lr"]
