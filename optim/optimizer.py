"""The optimizer base: a pure per-leaf rule plus a thin stateful facade (PyTorch's API).

An optimizer declares its hyperparameters once, as the class's ``defaults`` table (the constructor's signature is
made from it: ``params``, the table's entries, then keyword-only ``maximize`` and ``fused``), and its rule in three
methods:

- ``init_one(p, group) -> state``: the per-parameter state (besides ``step``);
- ``coefficients(step, h, dtype) -> dict``: every scalar of one step (bias corrections, ``1 - beta``, ...) from the
  step count and the numeric hyperparameters ``h``, in Python doubles when they are Python numbers (as PyTorch);
- ``update_one(g, p, state, c, cfg) -> (new_p, new_state)``: the array arithmetic, with ``c`` the coefficients and
  ``cfg`` the group's choices (booleans and strings, and for each numeric hyperparameter whether it is nonzero).

One implementation per algorithm, one execution path: every leaf runs ``update_one`` on tensors (eagerly, or staged
when the step is traced). The fused helper runs the same ``update_one`` of all leaves of a concrete step as one
compiled call (``fl.jit``, traced once: the coefficients are arguments, each Python number as a 0-d array of the
parameter's dtype, which is the value an array operation rounds it to, so the bits do not change). ``fused=None``
(the default) fuses a concrete step whose parameters hold 65536 elements or more, where one pass over memory beats
an eager operation per line of the rule; ``True`` fuses every concrete step, ``False`` none.

From the rule the base class provides:

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
from typing import Any, ClassVar

import numpy as np

import funclib as fl
from funclib import tree as tree_util
from funclib.checks import describe
from funclib.core import Tensor, Tracer, _wrap

from ..nn.module import Module, _clone, named_grads

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()

_STRUCTURAL = ("params", "param_names", "initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum")
_FUSE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# below this many elements in all, a step's eager operations cost less than one compiled call (measured on the
# nn_optim MLP and a 6k-parameter model, Adam and SGD: benchmarks/nn_optim.py)
_FUSE_MIN_SIZE = 65536


def _is_number(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or (isinstance(v, Tensor) and v.ndim == 0)


def _numeric(v) -> bool:
    if _is_number(v):
        return True
    return isinstance(v, tuple) and len(v) > 0 and all(_is_number(a) for a in v)


# --- helpers for rules: each takes Python numbers (a concrete step) or tensors (a traced one) ----------------------


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
    """``sqrt(x)`` of a Python number (double precision) or a tensor."""
    return fl.sqrt(x) if isinstance(x, Tensor) else math.sqrt(x)


def coef(x, dtype):
    """A coefficient ready to multiply arrays of ``dtype``: a tensor is cast to it; a Python number stays weak (an
    array operation rounds it to the array's dtype)."""
    return x.astype(dtype) if isinstance(x, Tensor) and x.dtype != dtype else x


def select(cond, a, b):
    """``a`` where ``cond`` else ``b``: a Python choice for a Python bool, ``fl.where`` for a traced one."""
    if isinstance(cond, Tensor):
        return fl.where(cond, a, b)
    return a if cond else b


def lerp(a, b, w):
    """``a + w * (b - a)``, PyTorch's ``lerp_`` for the moving averages."""
    return a + (b - a) * w


def decay_coefficient(h: dict[str, Any], decoupled: bool = False):
    """The weight-decay coefficient of ``weight_decay``: ``wd`` (L2) or ``1 - lr * wd`` (decoupled)."""
    return 1 - h["lr"] * h["weight_decay"] if decoupled else h["weight_decay"]


def weight_decay(g, p, c, cfg, decoupled: bool = False):
    """PyTorch's weight decay before an update: ``g + wd * p`` (L2), or with ``decoupled`` ``p * (1 - lr * wd)``
    (AdamW style), with ``c["decay"]`` from ``decay_coefficient``. Returns ``(g, p)``; a no-op when the group's
    ``weight_decay`` is 0."""
    if not cfg["weight_decay"]:
        return g, p
    return (g, p * c["decay"]) if decoupled else (g + p * c["decay"], p)


def hyperparameters(args: dict) -> dict:
    """A constructor's ``locals()`` as the optimizer's defaults: every argument but ``self`` and ``params``,
    ``betas`` as a tuple. Call it before the constructor binds any other name (for constructors written out by
    hand; optimizers with a ``defaults`` table get theirs made).

    >>> from funclib.optim.optimizer import hyperparameters
    >>> def __init__(self, params, lr=0.1, betas=[0.9, 0.99]): return hyperparameters(locals())
    >>> __init__(None, [])
    {'lr': 0.1, 'betas': (0.9, 0.99)}
    """
    out = {k: v for k, v in args.items() if k not in ("self", "params", "__class__")}
    if "betas" in out:
        out["betas"] = tuple(out["betas"])
    return out


def _numeric_hyperparameters(cls) -> dict[str, Any]:
    """The hyperparameters of an optimizer class that take numbers (or tuples of them), with defaults; ``lr``
    always. From the ``defaults`` table, or from the signature of a constructor written out by hand."""
    hit = _NUMERIC_HYPER.get(cls)
    if hit is None:
        table = cls.__dict__.get("defaults")
        if table is None:
            sig = inspect.signature(cls.__init__).parameters
            table = {k: p.default for k, p in sig.items() if k not in ("self", "params")}
        hit = {"lr": 0.0}
        hit.update({k: d for k, d in table.items() if _is_number(d) or (isinstance(d, tuple) and _numeric(d))})
        _NUMERIC_HYPER[cls] = hit
    return hit


_NUMERIC_HYPER: dict[type, dict[str, Any]] = {}


def _choices(group: dict[str, Any]) -> tuple:
    """A group's choices, hashable: booleans, strings and None as they are, each numeric hyperparameter as
    whether it is nonzero (so a rule may branch on ``cfg["weight_decay"]`` but not on a value a schedule moves)."""
    out = []
    for k, v in group.items():
        if k in _STRUCTURAL:
            continue
        if isinstance(v, (bool, str)) or v is None:
            out.append((k, v))
        elif _is_number(v):
            out.append((k, bool(v != 0) if isinstance(v, Tensor) and not isinstance(v, Tracer) else v != 0))
        elif isinstance(v, tuple) and _numeric(v):
            out.append((k, tuple(bool(a != 0) for a in v)))
    return tuple(out)


def _constructor(cls) -> Any:
    """``__init__`` for an optimizer class with a ``defaults`` table: ``params``, the table's entries (those in
    ``keyword_only`` after a ``*``), then ``fused``; the bound arguments become the optimizer's defaults."""
    P = inspect.Parameter
    table = cls.defaults.items()
    sig = inspect.Signature(
        [P("self", P.POSITIONAL_OR_KEYWORD), P("params", P.POSITIONAL_OR_KEYWORD)]
        + [P(k, P.POSITIONAL_OR_KEYWORD, default=v) for k, v in table if k not in cls.keyword_only]
        + [P(k, P.KEYWORD_ONLY, default=v) for k, v in table if k in cls.keyword_only]
        + [P("fused", P.KEYWORD_ONLY, default=None)]
    )

    def __init__(self, *args, **kwargs):
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError as e:
            shown = str(sig).replace("(self, ", "(", 1)
            raise TypeError(f"{cls.__name__}{shown}: {e}") from None
        bound.apply_defaults()
        hyper = dict(bound.arguments)
        del hyper["self"]
        params, fused = hyper.pop("params"), hyper.pop("fused")
        if fused is not None and not isinstance(fused, bool):
            raise TypeError(
                f"{cls.__name__}: fused must be True, False or None (fuse the large leaves), got {describe(fused)}"
            )
        Optimizer.__init__(self, params, hyperparameters(hyper))
        self.fused = fused

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__signature__ = sig
    return __init__


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




def _scalar_arg(v, dtype):
    """A coefficient as an argument of the fused call: a Python number as a 0-d array of the parameter's dtype (the
    value an array operation rounds it to), a bool as a bool, a tensor as it is."""
    if isinstance(v, Tensor):
        return v
    return _wrap(np.asarray(v) if isinstance(v, (bool, np.bool_)) else np.asarray(v, dtype))


class Optimizer:
    """Base class; see the module docstring. A subclass declares ``defaults`` and the rule (``init_one``,
    ``coefficients``, ``update_one``); one with its own constructor calls ``super().__init__(params, defaults)`` as
    in PyTorch.

    Args:
        params: ``model.parameters()``, ``model.named_parameters()``, the model itself, a list or pytree of
            tensors, or parameter groups ``[{"params": ..., "lr": ...}, ...]``.
        defaults: the hyperparameters of groups that do not set their own.

    >>> class SignSGD(optim.Optimizer):
    ...     defaults = {"lr": 0.01, "maximize": False}
    ...     def update_one(self, g, p, s, c, cfg):
    ...         return p - fl.sign(g) * c["lr"], s
    >>> SignSGD([fl.ones(2)], lr=0.5).step([fl.tensor([3.0, -1.0])])
    [Tensor([0.5, 1.5], dtype=float32)]
    """

    defaults: ClassVar[dict[str, Any]] = {}
    keyword_only: ClassVar[tuple[str, ...]] = ("maximize",)
    nonnegative: ClassVar[tuple[str, ...]] = ()  # hyperparameters checked >= 0 besides eps and weight_decay

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "defaults" in cls.__dict__ and "__init__" not in cls.__dict__:
            cls.__init__ = _constructor(cls)

    def __init__(self, params, defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.fused: bool | None = None
        self._validate({k: v for k, v in self.defaults.items() if v is not required})
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
                "got a Tensor; wrap it in a list: [tensor]"
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
            raise ValueError(
                f"{type(self).__name__} got an empty parameter list; pass the tensors to train, e.g. "
                "model.parameters() of a model that has parameters"
            )
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
                f"{where}: some parameters appear more than once (in this or another parameter group); list each "
                "tensor once"
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
            raise ValueError(f"{type(self).__name__}: invalid learning rate {lr}; pass lr >= 0")
        for k in ("eps", "weight_decay", *self.nonnegative):
            v = group.get(k)
            if isinstance(v, (int, float)) and v < 0:
                raise ValueError(f"{type(self).__name__}: invalid {k} {v}; pass a value >= 0")
        betas = group.get("betas")
        if isinstance(betas, tuple):
            for i, b in enumerate(betas):
                if isinstance(b, (int, float)) and not 0.0 <= b < 1.0:
                    raise ValueError(f"{type(self).__name__}: invalid beta parameter at index {i}: {b}")
        self.prepare(group)

    def _init_slot(self, p, group):
        slot = {"step": 0}
        slot.update(self.init_one(p, group))
        return slot


    # --- the rule (subclasses) --------------------------------------------------------------------------------
    def prepare(self, group: dict[str, Any]) -> None:
        """Check a parameter group's hyperparameters beyond their types (and fill derived defaults); raise naming
        the argument and the fix."""

    def init_one(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        """The per-parameter state (besides ``step``)."""
        return {}

    def coefficients(self, step, h: dict[str, Any], dtype) -> dict[str, Any]:
        """The scalars of step ``step`` (a Python int, or a tensor under a transform) from the numeric
        hyperparameters ``h``: Python numbers (weak: an array operation rounds them to the parameter's dtype),
        bools, or tensors, which keep their dtype (cast those meant to multiply arrays of ``dtype`` with
        ``coef``). Scalar-only arithmetic belongs here, so the fused and the eager step compute it alike. The
        default is the numeric hyperparameters as they are (a rule with no derived scalars reads ``c["lr"]``)."""
        return {k: v for k, v in h.items() if _numeric(v)}

    def update_one(self, g: Tensor, p: Tensor, s: dict[str, Any], c: dict[str, Any], cfg: dict[str, Any]):
        """``(new_p, new_state)`` for one leaf from its gradient, parameter, state (without ``step``), this step's
        ``coefficients`` and the group's choices ``cfg``."""
        raise NotImplementedError(f"{type(self).__name__} defines no update rule; define update_one")

    # --- pure API -----------------------------------------------------------------------------------------------
    @property
    def num_params(self) -> int:
        """The number of parameters (tensors) the optimizer updates."""
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
                "parameters (in parameter-group order); pass one entry per parameter, None to skip one"
            )
        return leaves

    def _update_leaves(self, jobs, hyper) -> list:
        """``(new_p, new_slot)`` for each ``(g, p, slot, group_index)`` of one step: the rule per leaf, or for the
        concrete leaves that ``fused`` selects, the fused helper."""
        scalars: dict = {}  # (group, dtype, step) -> (coefficients, choices, concrete), shared by a group's leaves
        leaves = []
        for g, p, s, gi in jobs:
            if self.param_groups[gi].get("maximize"):
                g = -g
            if g.dtype != p.dtype:
                g = g.astype(p.dtype)
            step = s["step"] + 1
            key = (gi, p.dtype, step) if isinstance(step, int) else None
            c, cfg, concrete = scalars.get(key) or self._scalars(gi, hyper, step, p.dtype)
            if key is not None:
                scalars[key] = (c, cfg, concrete)
            s = {n: v for n, v in s.items() if n != "step"}
            leaves.append((g, p, step, s, c, cfg, concrete and self._fusable(g, p, s)))
        if not self._fusing(leaves):
            leaves = [(*leaf[:-1], False) for leaf in leaves]
        fused = iter(self._fused_update([leaf for leaf in leaves if leaf[-1]]))
        out = []
        for g, p, step, s, c, cfg, f in leaves:
            p2, s2 = next(fused) if f else self.update_one(g, p, s, c, dict(cfg))
            out.append((p2, {"step": step, **s2}))
        return out

    def _scalars(self, gi: int, hyper, step, dtype):
        """Group ``gi``'s coefficients for ``step`` (its numeric hyperparameters cast for ``dtype`` first, see
        ``coef``), its choices, and whether all of them are concrete (so its leaves may be fused)."""
        group = self.param_groups[gi]
        h = dict(group) if hyper is None else {**group, **hyper[gi]}
        h = {
            k: tuple(coef(a, dtype) for a in v) if isinstance(v, tuple) else coef(v, dtype)
            for k, v in h.items()
            if k not in _STRUCTURAL
        }
        c, cfg = self.coefficients(step, h, dtype), _choices(group)
        concrete = not any(isinstance(v, Tracer) for v in (step, *c.values(), *(v for _, v in cfg)))
        return c, cfg, concrete

    def _fusing(self, leaves) -> bool:
        if self.fused is None:
            return sum(leaf[1]._value.size for leaf in leaves if leaf[-1]) >= _FUSE_MIN_SIZE
        return bool(self.fused)

    @staticmethod
    def _fusable(g, p, s) -> bool:
        """Whether a leaf can join the fused call: concrete float32/float64 operands and state."""
        if type(g) is not Tensor or type(p) is not Tensor or p._value.dtype not in _FUSE_DTYPES:
            return False
        return not any(isinstance(v, Tracer) for v in s.values())

    def _fused_update(self, leaves) -> list:
        """The fused helper: ``update_one`` of every leaf in one compiled call, traced once for all steps (the
        coefficients enter as 0-d arrays, Python numbers in the parameter's dtype, so the bits are the eager
        rule's). Returns ``(new_p, new_state)`` per leaf, the state without ``step``."""
        if not leaves:
            return []
        fn = self.__dict__.get("_fused")
        if fn is None:
            fn = self.__dict__["_fused"] = fl.jit(self._rule_of_leaves, static_argnums=(4,))
        gs, ps, ss, cs, static = [], [], [], [], []
        index: dict = {}
        for g, p, _, s, c, cfg, _ in leaves:
            ci = index.get(id(c))
            if ci is None:
                ci = index[id(c)] = len(cs)
                cs.append({n: _scalar_arg(v, p._value.dtype) for n, v in c.items()})
            gs.append(g)
            ps.append(p)
            ss.append(s)
            static.append((ci, cfg))
        return list(zip(*fn(gs, ps, ss, cs, tuple(static))))

    def _rule_of_leaves(self, gs, ps, ss, cs, static):
        new_ps, new_ss = [], []
        for g, p, s, (ci, cfg) in zip(gs, ps, ss, static):
            p2, s2 = self.update_one(g, p, dict(s), cs[ci], dict(cfg))
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

        Returns:
            ``(new_params, new_state)``: ``params``'s structure, and the state list.

        >>> opt = optim.SGD([fl.ones(2)], lr=0.5)
        >>> opt.apply([fl.ones(2)], [fl.ones(2)], opt.init([fl.ones(2)]))[0]
        [Tensor([0.5, 0.5], dtype=float32)]
        """
        p_leaves, treedef = tree_util.flatten(params)
        if len(p_leaves) != self.num_params:
            raise ValueError(
                f"{type(self).__name__}.apply: params have {len(p_leaves)} leaves but the optimizer has "
                f"{self.num_params} parameters; pass the parameters the optimizer was built from, in its order"
            )
        g_leaves = self._leaves(grads, "apply")
        if len(state) != self.num_params:
            raise ValueError(
                f"{type(self).__name__}.apply: state has {len(state)} entries, expected {self.num_params}; pass "
                "optimizer.state or optimizer.init(params)"
            )
        new_p, new_s = list(p_leaves), list(state)
        jobs, where = [], []
        for i, (g, p, s) in enumerate(zip(g_leaves, p_leaves, state)):
            if g is None:
                continue
            if tuple(g.shape) != tuple(p.shape):
                raise ValueError(
                    f"{type(self).__name__}: gradient {i} has shape {tuple(g.shape)} but its parameter has shape "
                    f"{tuple(p.shape)}; gradients must follow the parameters' order and shapes"
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
                    f"{type(self).__name__}: parameters {names} are listed twice in the optimizer; list each once"
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
                "model? Build it from this model's parameters()"
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
                    f"{tuple(p.shape)}; pass the gradients of this model's parameters"
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
            raise TypeError(
                f"{type(self).__name__}.update(model, grads): model must be a Module, got {describe(model)}; for "
                "tensors use step(grads)"
            )
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
                    raise ValueError(
                        f"{name}.load_state_dict: state of parameter {i} lacks {k!r}; load a state_dict saved by the "
                        f"same optimizer class ({name})"
                    )
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
