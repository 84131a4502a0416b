"""Data-parallel and sharded training across processes: ``DistributedDataParallel`` and
``FullyShardedDataParallel``, on ``funclib.distributed``'s process axis (MPI).

Both are modules that wrap a model, so the training code of one process runs unchanged on N ranks: each rank
feeds its own shard of every batch (``DistributedSampler``), and ``nn.value_and_grad`` / ``fl.grad`` of the
wrapped model return gradients averaged over the ranks, as if the whole batch had been seen by one process.
The averaging happens in the backward pass: the wrapper reads the parameters through an identity whose
derivative rule is the collective, so it works eagerly and under ``fl.jit`` (the collective is a step of the
compiled program, in program order on every rank).

- ``DistributedDataParallel``: every rank holds the whole model; gradients are averaged with one Allreduce per
  bucket of about 25 MB, as PyTorch does. ``no_sync()`` turns the averaging off for gradient accumulation.
- ``FullyShardedDataParallel`` (ZeRO-3): each unit (a child module with parameters) keeps only its rank's
  shard of its flattened parameters. A unit gathers its parameters (Allgather) just before use and drops them
  after; its backward pass gathers them again (the unit's forward is recomputed, as with ``fl.checkpoint``) and
  reduce-scatters the gradients, so each rank gets the averaged gradient of its own shard. Parameter, gradient
  and optimizer-state memory per rank fall by the number of ranks; one unit's parameters are whole at a time.

``funclib.optim.ZeroRedundancyOptimizer`` shards only the optimizer state (ZeRO-1), beside a plain DDP.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

import funclib as fl
from funclib.core import Tensor
from funclib.distributed import broadcast, process_axis
from funclib.primitives.collectives import all_gather_p, psum_p, psum_scatter_p

from .layers import _BatchNorm
from .module import Module, Parameter, _rng_state, _trainable_locations, next_key, rng, store_state

__all__ = ["DistributedDataParallel", "FullyShardedDataParallel", "SyncBatchNorm"]


def _check_module(module, where: str) -> Module:
    if not isinstance(module, Module):
        raise TypeError(f"{where}: expected the model to wrap (an nn.Module), got {type(module).__name__}")
    return module


def _swap(module: Module, tensors: list, values: list, locs: dict) -> list:
    """Rebind each tensor's attributes in ``module`` to its new value; returns what to restore."""
    saved = []
    for t, v in zip(tensors, values):
        for m, n in locs[id(t)]:
            saved.append((m, n, m._parameters[n]))
            m._parameters[n] = v
    return saved


def _restore(saved: list) -> None:
    for m, n, v in reversed(saved):
        m._parameters[n] = v


# ---------------------------------------------------------------------------------------------------------------
# Gradient averaging in the backward pass


def _mean_allreduce(axis, cts):
    summed = psum_p.bind(*cts, axes=(axis,))
    return tuple(s * (1.0 / axis.size) for s in summed)


def _identity(axis, *params):
    return params


_averaged_grads = fl.custom_vjp(_identity, nondiff_argnums=(0,))


def _avg_fwd(axis, *params):
    return params, None


def _avg_bwd(axis, _, cts):
    return _mean_allreduce(axis, cts)


_averaged_grads.defvjp(_avg_fwd, _avg_bwd)


def _buckets(sizes: list[int], cap_bytes: int) -> list[list[int]]:
    """Parameter indices in buckets of at most ``cap_bytes`` (one larger parameter gets a bucket of its own),
    filled from the last parameter back, the order in which the backward pass produces gradients."""
    out, cur, used = [], [], 0
    for i in reversed(range(len(sizes))):
        if cur and used + sizes[i] > cap_bytes:
            out.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += sizes[i]
    if cur:
        out.append(cur)
    return out


class DistributedDataParallel(Module):
    """Data parallelism, as PyTorch's ``DistributedDataParallel``: the wrapped model's gradients are averaged
    over the ranks.

    At wrap time rank 0's parameters and buffers are sent to every rank, so all start identical. Each forward
    reads the parameters through an identity whose backward averages their gradients with one Allreduce per
    bucket (``bucket_cap_mb``, 25 MB by default, filled from the last parameter, the order gradients come out of
    the backward pass). Build the optimizer after wrapping (``ddp.parameters()``), as in PyTorch.

    Args:
      module: the model.
      bucket_cap_mb: the size of one Allreduce, in megabytes.
      broadcast_buffers: also send rank 0's buffers (running statistics) at wrap time.
      axis_name: the name of the process axis (collectives in the model that name it reduce over the ranks).

    Gradient accumulation: inside ``with ddp.no_sync():`` gradients stay per rank. Tensors are immutable, so
    there is no ``.grad`` for a later backward to add to: sum the micro-batches' gradients yourself and average
    the sum once with ``ddp.reduce_gradients(grads)``.

    Returns:
        A module computing what ``module`` computes, with gradients averaged over the ranks.

    >>> import funclib.nn as nn
    >>> ddp = nn.parallel.DistributedDataParallel(nn.Linear(3, 1))
    >>> loss, grads = nn.value_and_grad(ddp, lambda m, x: (m(x) ** 2).mean())(ddp, fl.ones((4, 3)))
    >>> grads.module.weight.shape  # averaged over the ranks
    (1, 3)
    """

    def __init__(
        self,
        module: Module,
        *,
        bucket_cap_mb: float = 25.0,
        broadcast_buffers: bool = True,
        axis_name: Any = "data",
    ):
        super().__init__()
        _check_module(module, "DistributedDataParallel")
        if not (isinstance(bucket_cap_mb, (int, float)) and bucket_cap_mb > 0):
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be a positive number, got {bucket_cap_mb!r}")
        axis = process_axis(axis_name)
        self._sync_initial_state(module, broadcast_buffers)
        self.module = module
        self.axis = axis
        self.bucket_cap_mb = float(bucket_cap_mb)
        self.require_backward_grad_sync = True

    @staticmethod
    def _sync_initial_state(module: Module, buffers: bool) -> None:
        """Every rank takes rank 0's parameters (tied ones stay tied) and, with ``buffers``, its buffers."""
        for reg in ("_parameters", "_buffers") if buffers else ("_parameters",):
            where: dict = {}
            tensors = []
            for _, m in module.named_modules(remove_duplicate=False):
                for n, v in m.__dict__[reg].items():
                    if v is not None:
                        if id(v) not in where:
                            where[id(v)] = []
                            tensors.append(v)
                        where[id(v)].append((m, n))
            for t, v in zip(tensors, broadcast(tensors, root=0)):
                for m, n in where[id(t)]:
                    m.__dict__[reg][n] = v

    def _bucket_plan(self, tensors: list) -> list[list[int]]:
        sizes = [int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in tensors]
        return _buckets(sizes, int(self.bucket_cap_mb * (1 << 20)))

    def forward(self, *args, **kwargs):
        if not self.require_backward_grad_sync or self.axis.size == 1:
            return self.module(*args, **kwargs)
        order, locs = _trainable_locations(self.module)
        tensors = [t for _, t in order]
        synced = list(tensors)
        for bucket in self._bucket_plan(tensors):
            outs = _averaged_grads(self.axis, *[tensors[i] for i in bucket])
            for i, o in zip(bucket, outs):
                synced[i] = o
        saved = _swap(self.module, tensors, synced, locs)
        try:
            return self.module(*args, **kwargs)
        finally:
            _restore(saved)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients computed inside the block are this rank's own (no Allreduce); see the class doc.

        A jitted step that takes the model as an argument traces once more for this mode (the flag is part of
        the module's structure); a step that closes over the model keeps the mode it was traced in.
        """
        before = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = before

    def reduce_gradients(self, grads):
        """Average a model-shaped gradient tree (or any pytree of tensors) over the ranks, bucketed like the
        backward pass: for gradients accumulated under ``no_sync``."""
        leaves, treedef = fl.tree.flatten(grads)
        idx = [i for i, g in enumerate(leaves) if g is not None]
        tensors = [leaves[i] for i in idx]
        if self.axis.size > 1:
            for bucket in self._bucket_plan(tensors):
                outs = _mean_allreduce(self.axis, [tensors[i] for i in bucket])
                for i, o in zip(bucket, outs):
                    tensors[i] = o
        for i, t in zip(idx, tensors):
            leaves[i] = t
        return fl.tree.unflatten(treedef, leaves)


# ---------------------------------------------------------------------------------------------------------------
# Sharded parameters (ZeRO-3)


def _gather_params(axis, numel: int, shard):
    (full,) = all_gather_p.bind(shard, axes=(axis,), axis_size=axis.size)
    return fl.reshape(full, (-1,))[:numel]


_gather_averaging = fl.custom_vjp(_gather_params, nondiff_argnums=(0, 1))


def _gather_fwd(axis, numel, shard):
    return _gather_params(axis, numel, shard), None


def _gather_bwd(axis, numel, _, ct):
    k = axis.size * _shard_len(numel, axis.size)
    padded = fl.concat([ct, fl.zeros((k - numel,), dtype=ct.dtype)]) if k > numel else ct
    (mine,) = psum_scatter_p.bind(fl.reshape(padded, (axis.size, -1)), axes=(axis,), axis_size=axis.size)
    return (mine * (1.0 / axis.size),)


_gather_averaging.defvjp(_gather_fwd, _gather_bwd)


def _shard_len(numel: int, n: int) -> int:
    return max(1, math.ceil(numel / n))


class _ShardedUnit(Module):
    """One FSDP unit: ``flat_param`` is this rank's shard of the unit's flattened trainable parameters."""

    def __init__(self, module: Module, axis, path: str):
        super().__init__()
        order, locs = _trainable_locations(module)
        dtypes = {np.dtype(t.dtype) for _, t in order}
        if len(dtypes) > 1:
            raise TypeError(
                f"FullyShardedDataParallel: unit {path or '<root>'!r} has parameters of several dtypes "
                f"({sorted(d.name for d in dtypes)}); one flat shard holds one dtype: cast the model (model.to(...)) "
                "or make each dtype's layers separate children"
            )
        path_of = {id(m): p for p, m in module.named_modules(remove_duplicate=False)}
        # every attribute that holds each tensor (tied weights: several)
        self.param_locations = tuple(
            tuple(f"{path_of[id(m)]}.{n}" if path_of[id(m)] else n for m, n in locs[id(t)]) for _, t in order
        )
        names = tuple(n for n, _ in order)
        shapes = tuple(tuple(t.shape) for _, t in order)
        sizes = [math.prod(s) for s in shapes]
        numel = sum(sizes)
        k = _shard_len(numel, axis.size)
        flat = np.zeros(axis.size * k, dtypes.pop())
        off = 0
        for (_, t), n in zip(order, sizes):
            flat[off : off + n] = t.numpy().reshape(-1)
            off += n
        mine = flat[axis.index * k : (axis.index + 1) * k].copy()
        for _, t in order:
            for m, n in locs[id(t)]:
                m._parameters[n] = None  # the whole tensor lives only while the unit runs
        self.flat_param = Parameter(fl.asarray(mine))
        self.module = module
        self.axis = axis
        self.param_names = names
        self.param_shapes = shapes
        self.numel = numel

    def full_parameters(self) -> dict[str, Tensor]:
        """The unit's whole parameters by name (an Allgather): for checkpoints and evaluation on one rank."""
        return self._split(_gather_params(self.axis, self.numel, self.flat_param))

    def _split(self, full) -> dict:
        out, off = {}, 0
        for name, shape in zip(self.param_names, self.param_shapes):
            n = math.prod(shape)
            out[name] = fl.reshape(full[off : off + n], shape)
            off += n
        return out

    def _run(self, shard, key, args, kwargs):
        params = self._split(_gather_averaging(self.axis, self.numel, shard))
        mods = dict(self.module.named_modules(remove_duplicate=False))
        saved = []
        for name, where in zip(self.param_names, self.param_locations):
            for full in where:
                mp, _, n = full.rpartition(".")
                m = mods[mp]
                saved.append((m, n, m._parameters[n]))
                m._parameters[n] = params[name]
        try:
            if key is None:
                return self.module(*args, **kwargs)
            with rng(key):
                return self.module(*args, **kwargs)
        finally:
            _restore(saved)

    def forward(self, *args, **kwargs):
        # the backward pass runs the unit again (to gather its parameters again instead of keeping them): the
        # same dropout key both times
        key = next_key("FullyShardedDataParallel") if _rng_state.stack else None
        leaves, treedef = fl.tree.flatten((args, kwargs))
        dynamic = [i for i, v in enumerate(leaves) if isinstance(v, Tensor)]

        def run(shard, key, *tensors):
            full = list(leaves)
            for i, t in zip(dynamic, tensors):
                full[i] = t
            a, kw = fl.tree.unflatten(treedef, full)
            return self._run(shard, key, a, kw)

        tensors = [leaves[i] for i in dynamic]
        if key is None:
            return fl.checkpoint(lambda shard, *ts: run(shard, None, *ts))(self.flat_param, *tensors)
        return fl.checkpoint(run)(self.flat_param, key, *tensors)


class FullyShardedDataParallel(Module):
    """Sharded data parallelism (ZeRO-3, as PyTorch's FSDP): parameters, gradients and optimizer state are split
    over the ranks; see the module doc.

    Each child of ``module`` that has trainable parameters becomes a unit (the whole model is one unit if it has
    no such child); the model's own direct parameters form one more. A unit's parameters are flattened, padded
    to a multiple of the world size and split: ``flat_param`` of each unit is this rank's piece, and the only
    trainable parameters of the wrapper, so an optimizer built from ``fsdp.parameters()`` keeps state for the
    shards only. Rank 0's initial parameters are used on every rank.

    Args:
      module: the model (its tensors are replaced: keep using the wrapper).
      axis_name: the name of the process axis.

    Returns:
        A module computing what ``module`` computes from the gathered shards.

    >>> import funclib.nn as nn
    >>> fsdp = nn.parallel.FullyShardedDataParallel(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)))
    >>> loss, grads = nn.value_and_grad(fsdp, lambda m, x: (m(x) ** 2).mean())(fsdp, fl.ones((2, 3)))
    >>> [n for n, _ in fsdp.named_parameters()]
    ['module.0.flat_param', 'module.2.flat_param']
    """

    def __init__(self, module: Module, *, axis_name: Any = "data"):
        super().__init__()
        _check_module(module, "FullyShardedDataParallel")
        axis = process_axis(axis_name)
        DistributedDataParallel._sync_initial_state(module, True)
        children = [(n, c) for n, c in module._modules.items() if c is not None and any(c.trainable_parameters())]
        own = [n for n, p in module._parameters.items() if p is not None and n not in module._frozen]
        if not children or (own and not children):
            self.module = _ShardedUnit(module, axis, "")
        else:
            for name, child in children:
                module._modules[name] = _ShardedUnit(child, axis, name)
            if own:
                raise TypeError(
                    f"FullyShardedDataParallel: {type(module).__name__} has parameters of its own ({own}) besides "
                    "children with parameters; move them into a child module, or wrap the model in a container "
                    "(nn.Sequential(model)) so it is one unit"
                )
            self.module = module
        self.axis = axis

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def full_state_dict(self) -> dict[str, Tensor]:
        """The model's whole parameters and buffers by their names in the unwrapped model (Allgathers: call it
        on every rank, e.g. to save a checkpoint from rank 0)."""
        out: dict = {}

        def walk(m: Module, prefix: str):
            if isinstance(m, _ShardedUnit):
                for name, v in m.full_parameters().items():
                    for full in m.param_locations[m.param_names.index(name)]:
                        out[prefix + full] = v
                walk(m.module, prefix)
                return
            for n, v in list(m._parameters.items()) + list(m._buffers.items()):
                if v is not None:
                    out[prefix + n] = v
            for n, c in m._modules.items():
                if c is not None:
                    walk(c, f"{prefix}{n}.")

        walk(self.module, "")
        return out


# ---------------------------------------------------------------------------------------------------------------
# Batch statistics over every rank's batch


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose training statistics are those of the global batch (every rank's share), as
    PyTorch's ``SyncBatchNorm``: with it, N ranks compute what one process computes on the whole batch. Two
    Allreduces per call (the mean, then the variance about it); their derivative is exact, since a ``psum``'s
    transpose is a ``psum``. In eval mode, or on one rank, it is ``BatchNorm``. Every rank's batch must have the
    same size.

    Args:
        num_features, eps, momentum, affine, track_running_stats, device, dtype: as ``nn.BatchNorm2d``.
        axis_name: the name of the process axis.

    Returns:
        A module mapping ``(N, C, *)`` to the same shape.

    >>> model = nn.parallel.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)))
    """

    _ndims = (2, 3, 4, 5)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, axis_name: Any = "data"):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.axis = process_axis(axis_name)

    def forward(self, input):
        if not self.training or self.axis.size == 1:
            return super().forward(input)
        if input.ndim not in self._ndims or input.shape[1] != self.num_features:
            return super().forward(input)  # its shape errors
        axes = (0,) + tuple(range(2, input.ndim))
        total = math.prod(input.shape[i] for i in axes) * self.axis.size
        (s,) = psum_p.bind(fl.sum(input, axis=axes, keepdims=True), axes=(self.axis,))
        mean = s / total
        xc = input - mean
        (ss,) = psum_p.bind(fl.sum(xc * xc, axis=axes, keepdims=True), axes=(self.axis,))
        var = ss / total
        shape = (1, self.num_features) + (1,) * (input.ndim - 2)
        scale = fl.rsqrt(var + self.eps)
        if self.weight is not None:
            scale = scale * fl.reshape(self.weight, shape)
        y = xc * scale
        if self.bias is not None:
            y = y + fl.reshape(self.bias, shape)
        if self.track_running_stats:
            nbt = self.num_batches_tracked + 1.0
            factor = self.momentum if self.momentum is not None else 1.0 / fl.astype(nbt, input.dtype)
            bm = fl.reshape(mean, (self.num_features,))
            bv = fl.reshape(var, (self.num_features,)) * (total / (total - 1))
            rm, rv = self.running_mean, self.running_var
            store_state(self, {"num_batches_tracked": nbt, "running_mean": rm + (bm - rm) * factor,
                               "running_var": rv + (bv - rv) * factor})
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, axis_name: Any = "data") -> Module:
        """``module`` with every ``BatchNorm1d/2d/3d`` replaced by a ``SyncBatchNorm`` holding the same parameters,
        buffers and settings (the module itself if it is one)."""
        if isinstance(module, _BatchNorm) and not isinstance(module, cls):
            new = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      axis_name=axis_name)
            for reg in ("_parameters", "_buffers"):
                new.__dict__[reg].update(module.__dict__[reg])
            new.__dict__["_frozen"] = module.__dict__["_frozen"]
            new.training = module.training
            return new
        for name, child in module._modules.items():
            if child is not None:
                module._modules[name] = cls.convert_sync_batchnorm(child, axis_name)
        return module
