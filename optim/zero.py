"""``ZeroRedundancyOptimizer``: optimizer state sharded over the ranks (ZeRO-1), as PyTorch's
``torch.distributed.optim.ZeroRedundancyOptimizer``.

The parameters of each group (and dtype) are flattened into one vector, padded to a multiple of the world size
and cut into equal pieces; rank ``r`` keeps the optimizer state of piece ``r`` only and updates only that piece,
then an Allgather gives every rank the whole new parameters. State memory per rank falls by the number of ranks.
Pieces are cut at the same offsets on every rank and this rank's is chosen with ``axis_index``, so every rank
runs the same program and a jitted step with ``functional_update`` compiles once for any rank.

The update rule runs on flat pieces, so it must act element by element (SGD, Adam, AdamW, RMSprop, Adagrad,
Lion, ...): the same numbers as the unsharded optimizer. LBFGS, which needs whole gradients, is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

import funclib as fl
from funclib.core import Tensor
from funclib.distributed import process_axis
from funclib.primitives.collectives import all_gather_p, axis_index_p

from ..nn.module import Module, _clone, named_grads
from .lbfgs import LBFGS
from .optimizer import Optimizer

__all__ = ["ZeroRedundancyOptimizer"]


def _named_groups(params, where: str) -> list[dict]:
    if isinstance(params, Module):
        return [{"params": list(params.trainable_parameters())}]
    params = list(params)
    if not params:
        raise ValueError(f"{where}: got an empty parameter list")
    groups = [dict(g) for g in params] if isinstance(params[0], Mapping) else [{"params": params}]
    for g in groups:
        ps = g["params"]
        ps = list(ps.trainable_parameters()) if isinstance(ps, Module) else list(ps)
        if not all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in ps):
            raise TypeError(
                f"{where}: parameters must come with their names, to match gradients and the model: pass the model, "
                "model.named_parameters(), or groups {'params': model.fc.named_parameters(prefix='fc'), ...}"
            )
        g["params"] = ps
    return groups


class _Bucket:
    """One group's parameters of one dtype: their names and shapes, and the length of each rank's piece."""

    def __init__(self, group: int, names, shapes, n: int):
        self.group = group
        self.names = tuple(names)
        self.shapes = tuple(shapes)
        self.numel = sum(math.prod(s) for s in shapes)
        self.piece = max(1, math.ceil(self.numel / n))


class ZeroRedundancyOptimizer:
    """Wrap an optimizer class so that each rank keeps the state of ``1 / world_size`` of the parameters.

    Args:
      params: the model, ``model.named_parameters()``, or groups of named parameters (with per-group
        hyperparameters).
      optimizer_class: an elementwise ``funclib.optim`` optimizer class (``optim.AdamW``, ...).
      axis_name: the name of the process axis.
      **defaults: the optimizer's hyperparameters (``lr=...``).

    Use it with gradients that are already averaged over the ranks (``nn.parallel.DistributedDataParallel``).
    ``update(model, grads)`` trains the model in place; ``functional_update(model, grads, state, hyper)`` is the
    pure form for ``fl.jit``, with ``state=opt.state`` and ``hyper=opt.hyperparams()``.

    >>> import funclib.nn as nn, funclib.optim as optim
    >>> model = nn.parallel.DistributedDataParallel(nn.Linear(3, 1))
    >>> opt = optim.ZeroRedundancyOptimizer(model, optim.AdamW, lr=1e-2)
    >>> loss, grads = nn.value_and_grad(model, lambda m, x: (m(x) ** 2).mean())(model, fl.ones((4, 3)))
    >>> model = opt.update(model, grads)
    """

    def __init__(self, params, optimizer_class: type, *, axis_name: Any = "data", **defaults):
        where = "ZeroRedundancyOptimizer"
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(
                f"{where}: optimizer_class must be a funclib.optim optimizer class, got {optimizer_class!r}"
            )
        if issubclass(optimizer_class, LBFGS):
            raise TypeError(
                f"{where}: LBFGS needs whole gradients (line search, curvature pairs), so its state cannot be split "
                "over ranks; use it unsharded, or an elementwise optimizer (SGD, Adam, AdamW, ...)"
            )
        self.axis = process_axis(axis_name)
        n, me = self.axis.size, self.axis.index
        self.buckets: list[_Bucket] = []
        inner_groups = []
        for gi, g in enumerate(_named_groups(params, where)):
            hyper = {k: v for k, v in g.items() if k != "params"}
            by_dtype: dict = {}
            for name, p in g["params"]:
                by_dtype.setdefault(np.dtype(p.dtype), []).append((name, p))
            for dtype, named in by_dtype.items():
                b = _Bucket(gi, [nm for nm, _ in named], [tuple(p.shape) for _, p in named], n)
                flat = np.zeros(b.piece * n, dtype)
                flat[: b.numel] = np.concatenate([p.numpy().reshape(-1) for _, p in named])
                self.buckets.append(b)
                inner_groups.append({**hyper, "params": [fl.asarray(flat[me * b.piece : (me + 1) * b.piece])]})
        self.optimizer = optimizer_class(inner_groups, **defaults)

    # --- the inner optimizer's state, hyperparameters and groups --------------------------------------------
    @property
    def state(self) -> list:
        """This rank's optimizer state: one slot per bucket, for this rank's piece."""
        return self.optimizer.state

    @state.setter
    def state(self, value) -> None:
        self.optimizer.state = value

    @property
    def param_groups(self) -> list[dict]:
        """The inner optimizer's groups (one per group and dtype): schedulers change ``lr`` here."""
        return self.optimizer.param_groups

    def hyperparams(self) -> list[dict]:
        return self.optimizer.hyperparams()

    def state_dict(self) -> dict:
        """This rank's piece of the state (each rank saves its own, as with PyTorch's sharded checkpoints)."""
        return {"rank": self.axis.index, "world_size": self.axis.size, "inner": self.optimizer.state_dict()}

    def load_state_dict(self, state_dict: Mapping) -> None:
        if state_dict.get("world_size") != self.axis.size or state_dict.get("rank") != self.axis.index:
            raise ValueError(
                f"ZeroRedundancyOptimizer.load_state_dict: the state was saved by rank {state_dict.get('rank')} of "
                f"{state_dict.get('world_size')}; this is rank {self.axis.index} of {self.axis.size}: load each "
                "rank's own piece with the same number of ranks"
            )
        self.optimizer.load_state_dict(state_dict["inner"])

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to clear (gradients are values); kept so PyTorch loops run unchanged."""

    # --- the step -------------------------------------------------------------------------------------------
    def _step(self, model: Module, grads, state, hyper) -> tuple[Module, list]:
        if not isinstance(model, Module):
            raise TypeError(f"ZeroRedundancyOptimizer.update(model, grads): model must be a Module, got {model!r}")
        named_g = named_grads(grads)
        named_p = dict(model.named_parameters(remove_duplicate=False))
        index = axis_index_p.bind(axes=(self.axis,))[0]
        g_pieces, p_pieces = [], []
        for b in self.buckets:
            for name in b.names:
                if name not in named_p:
                    raise ValueError(
                        f"ZeroRedundancyOptimizer: the model has no parameter {name!r}; was the optimizer built for "
                        "another model?"
                    )
                if name not in named_g:
                    raise ValueError(
                        f"ZeroRedundancyOptimizer: no gradient for {name!r}. Sharded state is updated for whole "
                        "flattened groups, so every parameter needs one (freeze parameters before building the "
                        "optimizer to leave them out)"
                    )
            g_pieces.append(self._piece([named_g[nm] for nm in b.names], b, index))
            p_pieces.append(self._piece([named_p[nm] for nm in b.names], b, index))
        new_pieces, new_state = self.optimizer.apply(g_pieces, p_pieces, state, hyper)
        new = {}
        for b, piece in zip(self.buckets, new_pieces):
            (whole,) = all_gather_p.bind(piece, axes=(self.axis,), axis_size=self.axis.size)
            flat = fl.reshape(whole, (-1,))
            off = 0
            for name, shape in zip(b.names, b.shapes):
                k = math.prod(shape)
                new[name] = fl.reshape(flat[off : off + k], shape)
                off += k
        where: dict = {}
        for _, m in model.named_modules(remove_duplicate=False):
            for n, v in m._parameters.items():
                if v is not None:
                    where.setdefault(id(v), []).append((m, n))
        for name, v in new.items():
            for m, n in where[id(named_p[name])]:
                m._parameters[n] = v
        return model, new_state

    def _piece(self, tensors: list, b: _Bucket, index) -> Tensor:
        flat = fl.concat([fl.reshape(t, (-1,)) for t in tensors]) if len(tensors) > 1 else fl.reshape(tensors[0], (-1,))
        total = b.piece * self.axis.size
        if total > b.numel:
            flat = fl.concat([flat, fl.zeros((total - b.numel,), dtype=flat.dtype)])
        return fl.dynamic_slice(flat, (index * b.piece,), (b.piece,))

    def update(self, model: Module, grads) -> Module:
        """One step on ``model``'s parameters (rebound in place); returns ``model``."""
        model, self.optimizer.state = self._step(model, grads, self.optimizer.state, None)
        return model

    def functional_update(self, model: Module, grads, state, hyper=None) -> tuple[Module, list]:
        """Pure ``update``: ``(new_model, new_state)``, for ``fl.jit``."""
        return self._step(_clone(model, {}), grads, state, hyper)
