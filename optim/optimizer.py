"""The optimizer base: a pure per-leaf rule plus a thin stateful facade (PyTorch's API).

Each optimizer defines ``init_one(p, group) -> slot`` (its per-parameter state) and ``update_one(g, p, slot,
group) -> (new_p, new_slot)``, written from the published update equations with arithmetic operators and the
functions of ``namespace(p)`` (funclib for tensors, NumPy for the arrays of a concrete step, see
``Optimizer.numpy_rule``). From those the base class provides:

- ``apply(grads, params, state, hyper=None) -> (params, state)``: pure and jittable; ``hyper`` (from
  ``hyperparams()``) carries the numeric hyperparameters as arguments, so a scheduler changing ``lr`` does not
  retrace a jitted step.
- ``update(model, grads)``: rebinds the new parameters on ``model`` in place (tensors are immutable; the module is
  not) and returns it. ``grads`` is a model-shaped tree (``fl.grad``, ``nn.value_and_grad``) or a
  ``{dotted_name: grad}`` dict. Frozen parameters and parameters without a gradient are skipped, as PyTorch skips
  ``grad is None``; a tensor tied to several attributes gets the sum of their gradients.
- ``functional_update(model, grads, state, hyper) -> (model, state)``: the pure form of ``update`` for use inside
  ``fl.jit``.
- ``step(grads) -> params``: for optimizers built from tensors (a list, ``model.parameters()``, or a pytree, whose
  structure ``step`` takes and returns). Tensors are immutable, so ``step`` cannot change a model: on an optimizer
  built from one (the model, ``named_parameters()``, groups of those) or given model-shaped gradients it raises
  and names ``update(model, grads)``.
- ``state_dict()`` / ``load_state_dict()``, ``param_groups`` with per-group hyperparameters, ``add_param_group``.

>>> import funclib as fl, funclib.nn as nn, funclib.optim as optim
>>> model = nn.Linear(3, 1)
>>> opt = optim.SGD(model.parameters(), lr=0.1)
>>> loss, grads = nn.value_and_grad(model, lambda m, x: (m(x) ** 2).mean())(model, fl.ones((4, 3)))
>>> model = opt.update(model, grads)
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

import funclib as fl
from funclib import tree as tree_util
from funclib.checks import describe
from funclib.core import Tensor, Tracer, _wrap

from ..nn.module import Module, _clone, named_grads

__all__ = ["Optimizer", "namespace", "required"]


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()

_STRUCTURAL = ("params", "param_names", "initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum")


def _is_number(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
        isinstance(v, Tensor) and v.ndim == 0
    )


def _numeric(v) -> bool:
    if _is_number(v):
        return True
    return isinstance(v, tuple) and len(v) > 0 and all(_is_number(a) for a in v)


def pow_(base: float, step):
    """``base ** step`` for a Python int step (double precision, as PyTorch) or a traced step."""
    if isinstance(step, Tensor):
        return fl.pow(fl.asarray(base, dtype=fl.float64), step.astype(fl.float64))
    return base**step


def float_step(step):
    """The step count for scalar arithmetic in double precision, as the NumPy rule and PyTorch do it: a traced
    int64 step as float64 (times a Python float it would be the default float32), a concrete one unchanged."""
    return step.astype(fl.float64) if isinstance(step, Tensor) else step


def sqrt_(x):
    if isinstance(x, (Tensor, np.ndarray, np.generic)):
        return namespace(x).sqrt(x)
    return math.sqrt(x)


def coef(x, p):
    """A scalar coefficient ready to multiply ``p``: Python numbers stay weak; arrays take ``p``'s dtype."""
    if isinstance(x, (Tensor, np.ndarray, np.generic)) and x.dtype != p.dtype:
        return x.astype(p.dtype)
    return x


def namespace(x):
    """The array namespace of an update rule's operands: NumPy for the arrays of a concrete step (see
    ``Optimizer.numpy_rule``), funclib otherwise.

    >>> namespace(np.zeros(3)) is np
    True
    """
    return np if isinstance(x, (np.ndarray, np.generic)) else fl


def first_step(step, first, later):
    """``first`` on the first step and ``later`` afterwards (a select when the step count is traced)."""
    if isinstance(step, Tensor):
        return fl.where(step == 1, first, later)
    return first if step == 1 else later


def hyperparameters(args: dict) -> dict:
    """A constructor's ``locals()`` as the optimizer's defaults: every argument but ``self`` and ``params``,
    ``betas`` as a tuple. Call it before the constructor binds any other name.

    >>> def __init__(self, params, lr=0.1, betas=[0.9, 0.99]): return hyperparameters(locals())
    >>> __init__(None, [])
    {'lr': 0.1, 'betas': (0.9, 0.99)}
    """
    out = {k: v for k, v in args.items() if k not in ("self", "params", "__class__")}
    if "betas" in out:
        out["betas"] = tuple(out["betas"])
    return out


def weight_decay(g, p, lr, h, cfg, decoupled: bool = False):
    """PyTorch's weight decay before an update: ``g + wd * p`` (L2), or with ``decoupled`` ``p * (1 - lr * wd)``
    (AdamW style). Returns ``(g, p)``; a no-op when the group's ``weight_decay`` is 0."""
    if cfg["weight_decay"] == 0:
        return g, p
    if decoupled:
        return g, p * (1 - lr * h["weight_decay"])
    return g + p * h["weight_decay"], p


def lerp(a, b, w):
    """``a + w * (b - a)``, PyTorch's ``lerp_`` for the moving averages."""
    return a + (b - a) * w


_NUMPY_RULE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# below this many elements a leaf's NumPy operations cost less than its share of a compiled call
_FUSE_MIN_SIZE = 4096


def _numpy_ready(g, p, s) -> bool:
    """Whether one leaf's update can run on NumPy arrays: concrete float32/float64 operands and state (and, checked
    by the caller, Python hyperparameters: with tensor ones a rule may take tensor branches, so those stay)."""
    if type(g) is not Tensor or type(p) is not Tensor or p._value.dtype not in _NUMPY_RULE_DTYPES:
        return False
    for v in s.values():
        if isinstance(v, Tensor) and type(v) is not Tensor:
            return False
    return True


def _numeric_hyperparameters(cls) -> dict[str, Any]:
    """The constructor arguments of an optimizer class that take numbers (or tuples of them), with defaults;
    ``lr`` always."""
    hit = _NUMERIC_HYPER.get(cls)
    if hit is None:
        hit = {"lr": 0.0}
        for k, p in inspect.signature(cls.__init__).parameters.items():
            d = p.default
            if k not in ("self", "params") and (_is_number(d) or (isinstance(d, tuple) and _numeric(d))):
                hit[k] = d
        _NUMERIC_HYPER[cls] = hit
    return hit


_NUMERIC_HYPER: dict[type, dict[str, Any]] = {}


def _as_param(x, where: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, Module):
        raise TypeError(
            f"{where}: got a Module inside a parameter list; pass model.parameters() or the model itself"
        )
    if isinstance(x, (np.ndarray, np.generic)):
        return fl.asarray(x)
    raise TypeError(
        f"{where}: expected tensors as parameters, got {type(x).__name__} ({x!r:.60}); pass model.parameters(), "
        "model.named_parameters(), a list or a dict of tensors, or parameter groups [{'params': [...], 'lr': ...}]"
    )


def _model_step_error(
    name: str,
    what: str = "step(grads)",
    example: str = "loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)\n    optimizer.update(model, grads)",
) -> TypeError:
    return TypeError(
        f"{name}.{what}: this optimizer was built from a model (the model, its named_parameters() or parameter "
        "groups of them). Tensors are immutable, so step could only return new tensors and the model would keep "
        "its old parameters: it would not train. Call optimizer.update(model, ...), which rebinds the new "
        f"parameters on the model:\n    {example}"
    )


class Optimizer:
    """Base class; see the module docstring. Subclasses set ``defaults`` and the per-leaf rule.

    A rule written with arithmetic operators, the helpers of this module and functions of ``namespace(p)``
    (instead of ``fl.``) can set ``numpy_rule = True``: a step whose operands are all concrete (eager, Python
    hyperparameters) then runs it on the NumPy arrays directly, the same operations without the per-operation
    dispatch, and NumPy reuses the large temporaries in place.

    A rule split into ``coefficients`` (all of its scalar arithmetic) and ``update_arrays`` can also set
    ``fused_rule = True``: a concrete step then computes the coefficients in Python and runs the array part of its
    large leaves as one compiled computation (``fl.jit``, traced once: the coefficients are arguments, each a 0-d
    array of the parameter's dtype, the value NumPy rounds a Python float operand to, so the bits do not change).
    """

    numpy_rule = False
    fused_rule = False

    def __init__(self, params, defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: list[dict[str, Any]] = []
        self._names: list[list[str] | None] = []
        self._group_of: list[int] = []
        # built from a model (the Module, its named_parameters(), groups of those): only update(model, ...) can
        # train it, so step refuses
        self._from_model = False
        self._tree = None  # the structure of a pytree of tensors given as params; step takes and returns it
        if isinstance(params, Module):
            params = list(params.trainable_parameters())
        elif isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params should be an iterable of tensors or dicts (e.g. model.parameters()), "
                "got a Tensor"
            )
        elif isinstance(params, Mapping):
            params, self._tree = tree_util.flatten(params, is_leaf=lambda v: isinstance(v, Module))
        elif not hasattr(params, "__iter__"):
            raise TypeError(
                f"{type(self).__name__}: params should be an iterable of tensors or of parameter groups (e.g. "
                f"model.parameters()), got {type(params).__name__}"
            )
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], Mapping) else [{"params": params}]
        for g in groups:
            self.add_param_group(dict(g))

    # --- groups -------------------------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group ``{"params": [...], **hyperparameters}``; missing hyperparameters take the defaults."""
        where = f"{type(self).__name__}.add_param_group"
        if not isinstance(param_group, Mapping) or "params" not in param_group:
            raise ValueError(
                f"{where}: a parameter group must be a dict with a 'params' entry (and optional hyperparameters), "
                f"got {describe(param_group)}"
            )
        raw = param_group["params"]
        if isinstance(raw, Module):
            raw = list(raw.trainable_parameters())
        elif isinstance(raw, Tensor) or isinstance(raw, tuple) and len(raw) == 2 and isinstance(raw[0], str):
            raw = [raw]
        elif not hasattr(raw, "__iter__"):
            raise TypeError(f"{where}: 'params' must be an iterable of tensors, got {type(raw).__name__}")
        raw = list(raw)
        tensors, names = [], []
        if isinstance(param_group.get("params"), Module) or any(
            isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) for item in raw
        ):
            self._from_model = True
        for item in raw:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                names.append([item[0]])
                tensors.append(_as_param(item[1], where))
            else:
                names.append(None)
                tensors.append(_as_param(item, where))
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in tensors) or len({id(p) for p in tensors}) != len(tensors):
            raise ValueError(
                f"{where}: some parameters appear more than once (in this or another parameter group)"
            )
        group = dict(param_group)
        group["params"] = tensors
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise ValueError(
                    f"{where}: parameter group didn't specify a value of required argument {k!r}"
                )
            group.setdefault(k, v)
        self._validate(group)
        gi = len(self.param_groups)
        self.param_groups.append(group)
        for p, n in zip(tensors, names):
            self.state.append(self._init_slot(p, group))
            self._names.append(n)
            self._group_of.append(gi)

    def _validate(self, group: dict[str, Any]) -> None:
        name = type(self).__name__
        for k, default in _numeric_hyperparameters(type(self)).items():
            if k not in group or group[k] is required:
                continue
            v = group[k]
            if isinstance(default, tuple):
                if not (isinstance(v, tuple) and len(v) == len(default) and _numeric(v)):
                    raise TypeError(f"{name}: {k} must be a tuple of {len(default)} numbers, got {describe(v)}")
            elif not _is_number(v):
                raise TypeError(f"{name}: {k} must be a number, got {describe(v)}")
        lr = group.get("lr")
        if isinstance(lr, (int, float)) and lr < 0:
            raise ValueError(f"{type(self).__name__}: invalid learning rate {lr} (must be >= 0)")
        for k in ("eps", "weight_decay"):
            v = group.get(k)
            if isinstance(v, (int, float)) and v < 0:
                raise ValueError(f"{type(self).__name__}: invalid {k} {v} (must be >= 0)")
        betas = group.get("betas")
        if isinstance(betas, tuple):
            for i, b in enumerate(betas):
                if isinstance(b, (int, float)) and not 0.0 <= b < 1.0:
                    raise ValueError(f"{type(self).__name__}: invalid beta parameter at index {i}: {b}")

    def _init_slot(self, p, group):
        slot = {"step": 0}
        slot.update(self.init_one(p, group))
        return slot

    # --- the rule (subclasses) --------------------------------------------------------------------------------
    def init_one(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        """The per-parameter state (besides ``step``)."""
        return {}

    def update_one(self, g: Tensor, p: Tensor, s: dict[str, Any], h: dict[str, Any], cfg: dict[str, Any]):
        """``(new_p, new_state)`` for one leaf; ``s["step"]`` is already incremented.

        ``h`` holds the numeric hyperparameters (traced under ``fl.jit``, cast to ``p``'s dtype); ``cfg`` is the
        parameter group itself, for Python-level choices (``cfg["weight_decay"] != 0``, flags).
        """
        raise NotImplementedError

    def coefficients(self, step, h: dict[str, Any], cfg: dict[str, Any], p) -> dict[str, Any]:
        """A ``fused_rule``'s scalar coefficients for ``step`` (Python floats on a concrete step)."""
        raise NotImplementedError

    def update_arrays(self, g, p, s: dict[str, Any], c: dict[str, Any], flags: tuple):
        """A ``fused_rule``'s array part: ``(new_p, new_state)`` from ``coefficients`` and ``rule_flags``."""
        raise NotImplementedError

    def rule_flags(self, cfg: dict[str, Any]) -> tuple:
        """A ``fused_rule``'s Python-level choices for a group, hashable (one compiled rule per value)."""
        return ()

    # --- pure API -----------------------------------------------------------------------------------------------
    @property
    def num_params(self) -> int:
        return len(self._group_of)

    def hyperparams(self) -> list[dict[str, Any]]:
        """The numeric hyperparameters of each group (pass them to ``apply`` under ``fl.jit``)."""
        return [
            {k: v for k, v in g.items() if k not in _STRUCTURAL and _numeric(v)} for g in self.param_groups
        ]

    def init(self, params) -> list[dict[str, Any]]:
        """Fresh state for ``params`` (a pytree whose leaves follow the optimizer's parameter order)."""
        leaves = self._leaves(params, "init")
        return [self._init_slot(p, self.param_groups[gi]) for p, gi in zip(leaves, self._group_of)]

    def _leaves(self, tree, what):
        leaves = (
            tree_util.leaves(tree, is_leaf=lambda x: x is None)
            if not isinstance(tree, (list, tuple))
            else list(tree)
        )
        if len(leaves) != self.num_params:
            raise ValueError(
                f"{type(self).__name__}.{what}: got {len(leaves)} leaves but the optimizer has {self.num_params} "
                "parameters (in parameter-group order)"
            )
        return leaves

    def _group_hyper(self, gi: int, hyper) -> dict[str, Any]:
        h = dict(self.param_groups[gi])
        if hyper is not None:
            h.update(hyper[gi])
        return h

    def _leaf_hyper(self, gi: int, hyper, p, cache: dict):
        """Group ``gi``'s numeric hyperparameters cast for ``p`` (see ``coef``), and whether all are Python
        numbers; computed once per group and dtype in a step."""
        key = (gi, p.dtype)
        hit = cache.get(key)
        if hit is None:
            h = {
                k: (tuple(coef(a, p) for a in v) if isinstance(v, tuple) else coef(v, p))
                for k, v in self._group_hyper(gi, hyper).items()
                if k not in _STRUCTURAL
            }
            python = not any(
                isinstance(v, Tensor) or (isinstance(v, tuple) and any(isinstance(a, Tensor) for a in v))
                for v in h.values()
            )
            hit = cache[key] = (h, python)
        return hit

    def _update_leaves(self, jobs, hyper) -> list:
        """``(new_p, new_slot)`` for each ``(g, p, slot, group_index)`` of one step."""
        cache: dict = {}
        out: list = [None] * len(jobs)
        fused = []
        for k, (g, p, s, gi) in enumerate(jobs):
            cfg = self.param_groups[gi]
            if cfg.get("maximize"):
                g = -g
            if g.dtype != p.dtype:
                g = g.astype(p.dtype)
            s = dict(s)
            s["step"] = s["step"] + 1
            h, python = self._leaf_hyper(gi, hyper, p, cache)
            h = dict(h)
            if python and (self.fused_rule or self.numpy_rule) and _numpy_ready(g, p, s):
                if self.fused_rule and p._value.size >= _FUSE_MIN_SIZE:
                    fused.append((k, g, p, s, gi, h, cfg))
                    continue
                if self.numpy_rule:
                    sv = {k2: v._value if type(v) is Tensor else v for k2, v in s.items()}
                    pv = p._value
                    p2, s2 = self.update_one(g._value, pv, sv, h, cfg)
                    wrapped = {k2: _wrap(v) if isinstance(v, (np.ndarray, np.generic)) else v for k2, v in s2.items()}
                    out[k] = ((p if p2 is pv else _wrap(p2)), wrapped)
                    continue
            out[k] = self.update_one(g, p, s, h, cfg)
        if fused:
            self._run_fused(fused, out)
        return out

    def _run_fused(self, fused, out) -> None:
        """The array part of every leaf in one compiled call; each scalar coefficient enters as a 0-d array of the
        parameter's dtype, the value NumPy would round a Python float operand to, so the bits are those of the
        eager rule."""
        fn = self.__dict__.get("_fused")
        if fn is None:
            fn = self.__dict__["_fused"] = fl.jit(self._fused_arrays, static_argnums=(4,))
        gs, ps, ss, cs, static = [], [], [], [], []
        shared: dict = {}  # leaves of one group, dtype and step share their coefficients
        for _, g, p, s, gi, h, cfg in fused:
            dt = p._value.dtype
            key = (gi, dt, s["step"])
            ci = shared.get(key)
            if ci is None:
                c = self.coefficients(s["step"], h, cfg, p)
                ci = shared[key] = len(cs)
                cs.append({n: _wrap(np.asarray(v, dt)) for n, v in c.items()})
            gs.append(g)
            ps.append(p)
            ss.append({n: v for n, v in s.items() if type(v) is Tensor})
            static.append((ci, self.rule_flags(cfg)))
        new_ps, new_ss = fn(gs, ps, ss, cs, tuple(static))
        for (k, _, _, s, _, _, _), p2, s2 in zip(fused, new_ps, new_ss):
            s = dict(s)
            s.update(s2)
            out[k] = (p2, s)

    def _fused_arrays(self, gs, ps, ss, cs, static):
        new_ps, new_ss = [], []
        for g, p, s, (ci, flags) in zip(gs, ps, ss, static):
            p2, s2 = self.update_arrays(g, p, dict(s), cs[ci], flags)
            new_ps.append(p2)
            new_ss.append(s2)
        return new_ps, new_ss

    def __getstate__(self):
        d = dict(self.__dict__)
        d.pop("_fused", None)  # a compiled-function cache, rebuilt on demand
        return d

    def apply(self, grads, params, state, hyper=None):
        """One update, purely: ``(new_params, new_state)``. Leaves of ``grads`` that are None are skipped.

        Args:
            grads, params: pytrees of the same structure, leaves in the optimizer's parameter order.
            state: from ``init`` (or ``optimizer.state``).
            hyper: per-group numeric hyperparameters (``hyperparams()``); default: the current ``param_groups``.
        """
        p_leaves, treedef = tree_util.flatten(params)
        if len(p_leaves) != self.num_params:
            raise ValueError(
                f"{type(self).__name__}.apply: params have {len(p_leaves)} leaves but the optimizer has "
                f"{self.num_params} parameters"
            )
        g_leaves = self._leaves(grads, "apply")
        if len(state) != self.num_params:
            raise ValueError(
                f"{type(self).__name__}.apply: state has {len(state)} entries, expected {self.num_params}"
            )
        new_p, new_s = list(p_leaves), list(state)
        jobs, where = [], []
        for i, (g, p, s) in enumerate(zip(g_leaves, p_leaves, state)):
            if g is None:
                continue
            if tuple(g.shape) != tuple(p.shape):
                raise ValueError(
                    f"{type(self).__name__}: gradient {i} has shape {tuple(g.shape)} but its parameter has shape "
                    f"{tuple(p.shape)}"
                )
            jobs.append((g, p, s, self._group_of[i]))
            where.append(i)
        for i, (p2, s2) in zip(where, self._update_leaves(jobs, hyper)):
            new_p[i] = p2
            new_s[i] = s2
        return tree_util.unflatten(treedef, new_p), new_s

    # --- facade -------------------------------------------------------------------------------------------------
    def _flat_params(self) -> list[Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def _set_params(self, new: list[Tensor]) -> None:
        it = iter(new)
        for g in self.param_groups:
            g["params"] = [next(it) for _ in g["params"]]

    def step(self, grads=None, closure=None):
        """Update the optimizer's own parameters (built from tensors, not from a model) and return them.

        A model is trained with ``update(model, grads)``: tensors are immutable, so only rebinding them on the
        model changes it, and ``step`` on an optimizer built from a model (or given model-shaped gradients)
        raises instead of leaving the model untrained.

        Args:
            grads: for an optimizer built from a list of tensors (``model.parameters()`` included), one gradient
                per parameter in parameter-group order (None entries skipped); for one built from a pytree of
                tensors (``{"w": w, "b": b}``), a pytree of that structure.

        Returns:
            The new parameters: a list, or the pytree structure the optimizer was built from.

        >>> w = fl.ones(2)
        >>> opt = optim.SGD({"w": w}, lr=0.5)
        >>> opt.step({"w": fl.ones(2)})
        {'w': Tensor([0.5, 0.5], dtype=float32)}
        """
        name = type(self).__name__
        if grads is None:
            raise TypeError(
                f"{name}.step(grads): gradients are returned by fl.grad / nn.value_and_grad, not "
                "stored on tensors; pass them here (or use optimizer.update(model, grads))"
            )
        if self._from_model:
            raise _model_step_error(name)
        params = self._flat_params()
        if isinstance(grads, Module):
            raise TypeError(
                f"{name}.step(grads): got model-shaped gradients ({type(grads).__name__}); tensors are immutable, "
                "so step could only return new tensors and the model would keep its old parameters. Call "
                "optimizer.update(model, grads), which rebinds them on the model."
            )
        if self._tree is not None:
            g_leaves, g_tree = tree_util.flatten(grads)
            if g_tree != self._tree:
                raise ValueError(
                    f"{name}.step(grads): grads must have the structure of the parameters the optimizer was built "
                    f"from:\n  params: {self._tree}\n  grads:  {g_tree}"
                )
            new_p, self.state = self.apply(g_leaves, params, self.state)
            self._set_params(new_p)
            return tree_util.unflatten(self._tree, new_p)
        if isinstance(grads, Mapping):
            raise TypeError(
                f"{name}.step(grads): got gradients by name ({type(grads).__name__}) for an optimizer built from a "
                "list of tensors; pass a list in parameter order, or train the model they belong to with "
                "optimizer.update(model, grads)."
            )
        if not isinstance(grads, (list, tuple)):
            raise TypeError(
                f"{name}.step(grads): grads must be a list with one gradient per parameter, got "
                f"{type(grads).__name__}"
            )
        new_p, self.state = self.apply(list(grads), params, self.state)
        self._set_params(new_p)
        return new_p

    @staticmethod
    def _sum_named(named, names):
        acc = None
        for n in names:
            g = named.get(n)
            if g is not None:
                acc = g if acc is None else acc + g
        return acc

    def bind(self, model: Module) -> Optimizer:
        """Record where each parameter lives in ``model`` (matched by identity); needed once before
        ``functional_update`` runs under a transform. Returns ``self``."""
        where: dict[int, list[str]] = {}
        for mp, m in model.named_modules(remove_duplicate=False):
            for name, v in m._parameters.items():
                if v is not None:
                    full = f"{mp}.{name}" if mp else name
                    lst = where.setdefault(id(v), [])
                    if full not in lst:
                        lst.append(full)
        known = {n for names in self._names if names for n in names}
        for i, p in enumerate(self._flat_params()):
            given = self._names[i]
            if given is not None:
                found = [self._find(model, n) for n in given]
                if all(t is p for t in found):
                    self._names[i] = given + [n for n in where.get(id(p), []) if n not in given]
                    continue
                if where.get(id(p)):
                    # names relative to a submodule (groups of model.fc.named_parameters()), or naming another
                    # tensor of this model: where the tensor itself lives wins
                    known.difference_update(given)
                elif all(t is not None for t in found):
                    continue  # the model holds other tensors under these names (a loaded checkpoint, a trace)
            names = where.get(id(p))
            if not names:
                if isinstance(p, Tracer) or any(isinstance(v, Tracer) for v in model.parameters()):
                    raise ValueError(
                        f"{type(self).__name__}: cannot match parameters to a traced model; call "
                        "optimizer.bind(model) once outside the transform, or build the optimizer from "
                        "model.named_parameters()"
                    )
                raise ValueError(
                    f"{type(self).__name__}: parameter {i} (shape {tuple(p.shape)}) is not a parameter of the given "
                    f"{type(model).__name__}; build the optimizer from this model's parameters()"
                )
            if any(n in known for n in names):
                raise ValueError(
                    f"{type(self).__name__}: parameters {names} are listed twice in the optimizer"
                )
            self._names[i] = names
            known.update(names)
        self._bound = True
        return self

    @staticmethod
    def _find(model, name):
        """The parameter of ``model`` at dotted ``name``, or None."""
        mod, _, leaf = name.rpartition(".")
        try:
            m = model.get_submodule(mod)
        except AttributeError:
            return None
        return m._parameters.get(leaf) if isinstance(m, Module) else None

    def _locate(self, model, name):
        mod, _, leaf = name.rpartition(".")
        try:
            m = model.get_submodule(mod)
        except AttributeError:
            m = None
        if m is None or leaf not in m._parameters:
            raise ValueError(
                f"{type(self).__name__}: the model has no parameter {name!r}; was the optimizer built for another "
                "model?"
            )
        return m, leaf

    def _model_update(self, model, grads, state, hyper):
        if not self.__dict__.get("_bound") or any(n is None for n in self._names):
            self.bind(model)
        named = named_grads(grads)
        new_state = list(state)
        jobs, found = [], []
        for i, names in enumerate(self._names):
            locs = [self._locate(model, n) for n in names]
            m0, n0 = locs[0]
            if n0 in m0.__dict__["_frozen"]:
                continue
            g = self._sum_named(named, names)
            if g is None:
                continue
            p = m0._parameters[n0]
            if tuple(g.shape) != tuple(p.shape):
                raise ValueError(
                    f"{type(self).__name__}: the gradient of {names[0]} has shape {tuple(g.shape)}, the parameter "
                    f"{tuple(p.shape)}"
                )
            jobs.append((g, p, state[i], self._group_of[i]))
            found.append((i, locs))
        results = []
        for (i, locs), (p2, s2) in zip(found, self._update_leaves(jobs, hyper)):
            new_state[i] = s2
            results.append((i, locs, p2))
        return results, new_state

    def update(self, model: Module, grads) -> Module:
        """Apply one step to ``model``'s parameters in place (rebinding them) and return ``model``.

        Args:
            model: the module whose parameters this optimizer was built from.
            grads: a model-shaped tree (``fl.grad(loss)(model, ...)``, ``nn.value_and_grad``), a
                ``{dotted_name: grad}`` dict or nested dicts.
        """
        if not isinstance(model, Module):
            raise TypeError(f"{type(self).__name__}.update(model, grads): model must be a Module")
        results, self.state = self._model_update(model, grads, self.state, None)
        flat = self._flat_params()
        for i, locs, p2 in results:
            for m, n in locs:
                m._parameters[n] = p2
            flat[i] = p2
        self._set_params(flat)
        return model

    def functional_update(self, model: Module, grads, state, hyper=None):
        """Pure ``update``: ``(new_model, new_state)`` without touching ``model``, this optimizer's state or
        groups. Use it inside ``fl.jit`` with ``state=optimizer.state`` and ``hyper=optimizer.hyperparams()`` as
        arguments (call ``bind(model)`` once beforehand when the optimizer was built from ``model.parameters()``).
        """
        new_model = _clone(model, {})
        results, new_state = self._model_update(new_model, grads, state, hyper)
        for _, locs, p2 in results:
            for m, n in locs:
                m._parameters[n] = p2
        return new_model, new_state

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to clear (gradients are values, not fields on tensors); kept so PyTorch loops run unchanged."""

    # --- checkpoints --------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: slot}, "param_groups": [{hyperparameters..., "params": [indices]}]}`` as in
        PyTorch (parameters by index in group order)."""
        groups = []
        idx = 0
        for g in self.param_groups:
            entry = {k: v for k, v in g.items() if k != "params"}
            entry["params"] = list(range(idx, idx + len(g["params"])))
            names = [self._names[i][0] if self._names[i] else None for i in entry["params"]]
            if all(n is not None for n in names):
                entry["param_names"] = names
            idx += len(g["params"])
            groups.append(entry)
        return {"state": {i: dict(s) for i, s in enumerate(self.state)}, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore hyperparameters and per-parameter state saved by ``state_dict`` (checked before any change)."""
        name = type(self).__name__
        if "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected keys 'state' and 'param_groups'")
        groups = list(state_dict["param_groups"])
        if len(groups) != len(self.param_groups):
            raise ValueError(
                f"{name}.load_state_dict: loaded state dict has {len(groups)} parameter groups, the optimizer "
                f"{len(self.param_groups)}"
            )
        for g, mine in zip(groups, self.param_groups):
            if len(g["params"]) != len(mine["params"]):
                raise ValueError(
                    f"{name}.load_state_dict: loaded state dict contains a parameter group with {len(g['params'])} "
                    f"parameters, which doesn't match the optimizer's group of {len(mine['params'])}"
                )
        saved = state_dict["state"]
        new_state = []
        for i, cur in enumerate(self.state):
            s = saved.get(i, saved.get(str(i)))
            if s is None:
                new_state.append(cur)
                continue
            slot = {}
            for k, v in cur.items():
                if k not in s:
                    raise ValueError(f"{name}.load_state_dict: state of parameter {i} lacks {k!r}")
                nv = s[k]
                if isinstance(v, Tensor):
                    nv = fl.asarray(np.asarray(nv)) if not isinstance(nv, Tensor) else nv
                    if tuple(nv.shape) != tuple(v.shape):
                        raise ValueError(
                            f"{name}.load_state_dict: state {k!r} of parameter {i} has shape {tuple(nv.shape)}, "
                            f"expected {tuple(v.shape)}"
                        )
                    nv = nv.astype(v.dtype) if nv.dtype != v.dtype else nv
                elif isinstance(v, (int, float)) and not isinstance(nv, (int, float)):
                    nv = type(v)(np.asarray(nv).item())
                slot[k] = nv
            new_state.append(slot)
        self.state = new_state
        for g, mine in zip(groups, self.param_groups):
            for k, v in g.items():
                if k in ("params", "param_names"):
                    continue
                mine[k] = tuple(v) if isinstance(v, list) else v
        for i, g in enumerate(groups):
            if "param_names" in g:
                base = sum(len(x["params"]) for x in self.param_groups[:i])
                for j, n in enumerate(g["param_names"]):
                    if n is not None and self._names[base + j] is None:
                        self._names[base + j] = [n]

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k not in ("params", "param_names"):
                    lines.append(f"    {k}: {g[k]}")
        lines.append(")")
        return "\n".join(lines)
