"""``LBFGS``: limited-memory BFGS with an optional strong-Wolfe line search, PyTorch's algorithm.

L-BFGS needs several evaluations per step, so it takes a closure instead of gradients. The flat parameter vector
lives in NumPy (in the parameters' dtype): the iteration is data-dependent control flow around the closure, which
does the differentiable work.

>>> import funclib as fl, funclib.optim as optim
>>> def rosenbrock(ps):
...     x = ps[0]
...     return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
>>> opt = optim.LBFGS([fl.tensor([-1.5, 2.0])], line_search_fn="strong_wolfe")
>>> loss = opt.step(fl.value_and_grad(rosenbrock))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import funclib as fl
from funclib.checks import check_int
from funclib.core import Tensor

from ..nn.module import Module, named_grads
from .optimizer import Optimizer, _model_step_error, hyperparameters

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """Minimizer of the cubic through ``(x1, f1, g1)`` and ``(x2, f2, g2)``, clipped to ``bounds``."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = disc**0.5
    if x1 <= x2:
        t = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        t = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(t, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Find a step ``t`` along ``d`` meeting the strong Wolfe conditions (bracketing, then cubic zoom)."""
    d_norm = float(np.abs(d).max())
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        lo, hi = t + 0.01 * (t - t_prev), t * 10
        t_old = t
        t = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(lo, hi))
        t_prev, f_prev, g_prev, gtd_prev = t_old, f_new, g_new.copy(), gtd_new
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new @ d)
        it += 1
    if it == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
        bracket_gtd = [gtd, gtd_new]
    insufficient = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        span = max(bracket) - min(bracket)
        eps = 0.1 * span
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient or t >= max(bracket) or t <= min(bracket):
                t = (
                    max(bracket) - eps
                    if abs(t - max(bracket)) < abs(t - min(bracket))
                    else min(bracket) + eps
                )
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new @ d)
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = (
                t,
                f_new,
                g_new.copy(),
                gtd_new,
            )
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new.copy(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS (PyTorch's algorithm and defaults): two-loop recursion over the last ``history_size`` curvature
    pairs, ``max_iter`` iterations per ``step``, optional ``line_search_fn="strong_wolfe"``.

    Use ``step(closure)`` with ``closure(params) -> (loss, grads)`` over the parameter list, or
    ``update(model, closure)`` with ``closure() -> (loss, grads)`` that evaluates ``model`` as it currently is
    (L-BFGS writes each trial point into the model before calling it). Both return the loss at the starting
    point, as PyTorch's ``step`` does.

    Args:
        params: the tensors to optimize (one parameter group).
        lr: step scale (default 1).
        max_iter: iterations per step (default 20).
        max_eval: function evaluations per step (default ``max_iter * 1.25``).
        tolerance_grad: stop when the largest gradient entry is below this (default 1e-7).
        tolerance_change: stop when the step or the loss changes less than this (default 1e-9).
        history_size: curvature pairs kept (default 100).
        line_search_fn: None (a fixed step) or ``"strong_wolfe"``.

    Returns:
        The optimizer; ``step(closure)`` and ``update(model, closure)`` return the loss at the starting point.

    >>> opt = optim.LBFGS([fl.tensor([3.0])], line_search_fn="strong_wolfe")
    >>> _ = opt.step(fl.value_and_grad(lambda ps: (ps[0] ** 2).sum()))
    >>> abs(float(opt.param_groups[0]["params"][0][0])) < 1e-6
    True
    """

    def __init__(
        self,
        params,
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ):
        check_int(max_iter, "LBFGS", "max_iter", min=1)
        check_int(history_size, "LBFGS", "history_size", min=1)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        check_int(max_eval, "LBFGS", "max_eval", min=1)
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        super().__init__(params, hyperparameters(locals()))
        if len(self.param_groups) != 1:
            raise ValueError(
                "LBFGS doesn't support per-parameter options (parameter groups); build it from one list of tensors"
            )
        self.lbfgs_state: dict[str, Any] = {"func_evals": 0, "n_iter": 0}

    def _init_slot(self, p, group):
        return {}

    def apply(self, grads, params, state, hyper=None):
        raise TypeError("LBFGS needs a closure: use step(closure) or update(model, closure)")

    # --- flat vectors -------------------------------------------------------------------------------------------
    def _shapes(self):
        return [(tuple(p.shape), p.dtype) for p in self.param_groups[0]["params"]]

    def _flatten(self, tensors) -> np.ndarray:
        dtype = np.result_type(*[d for _, d in self._shapes()])
        parts = [np.asarray(t, dtype=dtype).reshape(-1) for t in tensors]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    def _unflatten(self, flat: np.ndarray) -> list[Tensor]:
        out, i = [], 0
        for shape, d in self._shapes():
            n = int(np.prod(shape, dtype=np.int64))
            out.append(fl.asarray(flat[i : i + n].reshape(shape).astype(d)))
            i += n
        return out

    # --- the algorithm ------------------------------------------------------------------------------------------
    def _run(self, evaluate: Callable[[list[Tensor]], tuple[Any, list]], x0: np.ndarray):
        """Minimize from ``x0``; ``evaluate(params) -> (loss, grads)``. Returns ``(x, orig_loss)``."""
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        st = self.lbfgs_state

        def f_and_g(x):
            loss, grads = evaluate(self._unflatten(x))
            return float(loss), self._flatten(grads), loss

        x = x0.copy()
        loss, flat_grad, orig_loss = f_and_g(x)
        evals = 1
        st["func_evals"] += 1
        if np.abs(flat_grad).max() <= tol_grad:
            return x, orig_loss
        d, t = st.get("d"), st.get("t")
        old_dirs, old_stps, ro = st.get("old_dirs"), st.get("old_stps"), st.get("ro")
        h_diag, prev_grad, prev_loss = st.get("H_diag"), st.get("prev_flat_grad"), st.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                r = q * h_diag
                for i in range(len(old_dirs)):
                    be = float(old_dirs[i] @ r) * ro[i]
                    r = r + (al[i] - be) * old_stps[i]
                d = r
            prev_grad = flat_grad.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr if st["n_iter"] == 1 else lr
            gtd = float(flat_grad @ d)
            if gtd > -tol_change:
                break
            ls_evals = 0
            if line_search is not None:
                x_start = x.copy()

                def along(step, x_start=x_start, d=d):
                    f_val, g_val, _ = f_and_g(x_start + step * d)
                    return f_val, g_val

                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    along, t, d, loss, flat_grad, gtd, tolerance_change=tol_change
                )
                x = x_start + t * d
                opt_cond = np.abs(flat_grad).max() <= tol_grad
            else:
                x = x + t * d
                opt_cond = False
                if n_iter != max_iter:
                    loss, flat_grad, _ = f_and_g(x)
                    opt_cond = np.abs(flat_grad).max() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            st["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        st.update(
            d=d,
            t=t,
            old_dirs=old_dirs,
            old_stps=old_stps,
            ro=ro,
            H_diag=h_diag,
            prev_flat_grad=prev_grad,
            prev_loss=prev_loss,
        )
        return x, orig_loss

    def step(self, closure=None, grads=None):
        """One L-BFGS step on the optimizer's parameter list; ``closure(params) -> (loss, grads)`` with ``grads`` a
        list (or any pytree whose leaves follow the parameter order). Returns the starting loss."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step(closure): pass closure(params) -> (loss, grads)")
        if self._from_model:
            raise _model_step_error(
                "LBFGS",
                "step(closure)",
                "optimizer.update(model, lambda: nn.value_and_grad(model, loss_fn)(model, x, y))",
            )

        def evaluate(params):
            loss, g = closure(params)
            return loss, self._leaves(g, "step")

        x, loss = self._run(evaluate, self._flatten(self.param_groups[0]["params"]))
        self.param_groups[0]["params"] = self._unflatten(x)
        return loss

    def update(self, model: Module, closure=None):
        """One L-BFGS step on ``model`` in place; ``closure() -> (loss, grads)`` evaluates ``model`` as it is
        (for example ``lambda: nn.value_and_grad(model, loss_fn)(model, x, y)``). Returns the starting loss."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.update(model, closure): pass closure() -> (loss, grads)")
        if not self.__dict__.get("_bound") or any(n is None for n in self._names):
            self.bind(model)
        locs = [[self._locate(model, n) for n in names] for names in self._names]

        def install(params):
            for ls, p in zip(locs, params):
                for m, n in ls:
                    m._parameters[n] = p

        def evaluate(params):
            install(params)
            loss, g = closure()
            named = named_grads(g)
            out = []
            for names, p in zip(self._names, params):
                acc = self._sum_named(named, names)
                out.append(fl.zeros_like(p) if acc is None else acc)
            return loss, out

        start = [ls[0][0]._parameters[ls[0][1]] for ls in locs]
        x, loss = self._run(evaluate, self._flatten(start))
        final = self._unflatten(x)
        install(final)
        self.param_groups[0]["params"] = final
        return loss

    def functional_update(self, model, grads, state, hyper=None):
        raise TypeError("LBFGS needs a closure and runs eagerly: use update(model, closure)")

    def state_dict(self) -> dict[str, Any]:
        sd = super().state_dict()
        sd["lbfgs"] = {k: v for k, v in self.lbfgs_state.items()}
        return sd

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "lbfgs"})
        if "lbfgs" in state_dict:
            st = dict(state_dict["lbfgs"])
            for k in ("d", "prev_flat_grad"):
                if st.get(k) is not None:
                    st[k] = np.asarray(st[k])
            for k in ("old_dirs", "old_stps"):
                if st.get(k) is not None:
                    st[k] = [np.asarray(a) for a in st[k]]
            self.lbfgs_state = st
