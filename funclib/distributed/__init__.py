"""``funclib.distributed``: the same program on several processes (and machines), on MPI.

Each process (a *rank*) runs the whole script on its own data. ``spmd(f, axis_name="data")`` names the processes
as an axis, so the collectives that work across ``fl.vmap`` lanes (``fl.psum``, ``pmean``, ``all_gather``, ...)
work across ranks, with the same derivatives, under ``fl.jit``. ``funclib.nn.parallel`` builds data-parallel
and sharded training on it.

Start ranks with any MPI launcher; on one machine, without a cluster::

    python -m funclib.distributed.launch -n 4 train.py   # mpiexec on the loopback
    python train.py                                       # one rank: the same script, world_size() == 1
    srun -n 64 python train.py                            # a cluster's MPI (mpirun works as well)

An uncaught exception on one rank prints its traceback and aborts every rank (non-zero exit), as
``python -m mpi4py`` does, instead of leaving the others waiting in a collective.

Needs ``pip install funclib[dist]`` (mpi4py and the MPICH wheel); ``import funclib`` never loads MPI.

>>> import funclib as fl
>>> fl.distributed.init()
>>> fl.distributed.rank(), fl.distributed.world_size()
(0, 1)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funclib import tree as tree_util
from funclib.core import Tensor, _wrap

from ._comm import DistributedError, ProcessAxis, RankMismatchError, digest, initialized, world
from ._spmd import spmd
from .data import DistributedSampler

__all__ = [
    "DistributedError",
    "DistributedSampler",
    "ProcessAxis",
    "RankMismatchError",
    "barrier",
    "broadcast",
    "init",
    "is_initialized",
    "process_axis",
    "rank",
    "spmd",
    "world_size",
]


def init() -> None:
    """Initialize MPI and funclib's view of the world. Idempotent; the other functions call it when needed.

    Raises ``DistributedError`` naming ``pip install funclib[dist]`` when mpi4py is missing.

    >>> fl.distributed.init()
    >>> fl.distributed.is_initialized()
    True
    """
    world()


def is_initialized() -> bool:
    """Whether ``init`` has run in this process.

    >>> isinstance(fl.distributed.is_initialized(), bool)
    True
    """
    return initialized()


def rank() -> int:
    """This process's rank, ``0 <= rank() < world_size()``.

    >>> fl.distributed.rank()  # 0 when started without a launcher
    0
    """
    return world().rank


def world_size() -> int:
    """The number of processes in the job (1 when started without a launcher).

    >>> fl.distributed.world_size()
    1
    """
    return world().size


def barrier() -> None:
    """Wait until every rank has reached this call.

    >>> fl.distributed.barrier()  # returns at once in a single process
    """
    world().comm.Barrier()


def process_axis(axis_name="data") -> ProcessAxis:
    """The process axis of that name: what a collective over ``axis_name`` inside ``spmd`` acts on. Library code
    (``nn.parallel``) binds collectives to it directly, without an ``spmd`` frame.

    >>> fl.distributed.process_axis("data")  # in a process started without mpirun: a world of one
    ProcessAxis('data', size=1)
    """
    return world().axis(axis_name)


def broadcast(tree: Any, root: int = 0) -> Any:
    """Every rank gets rank ``root``'s tensors (a tensor or pytree of them; the structure and each leaf's shape
    and dtype must match across ranks). Eager only: it is for initial state (``DistributedDataParallel`` sends
    rank 0's parameters this way), not for traced values.

    >>> fl.distributed.broadcast({"w": fl.ones(2)})
    {'w': Tensor([1., 1.], dtype=float32)}
    """
    w = world()
    if not isinstance(root, int) or not 0 <= root < w.size:
        raise ValueError(f"broadcast: root must be a rank in 0..{w.size - 1}, got {root!r}")
    leaves, treedef = tree_util.flatten(tree)
    for i, v in enumerate(leaves):
        if type(v) is not Tensor:
            raise TypeError(
                f"broadcast: leaf {i} is {type(v).__name__}; broadcast takes concrete tensors (eagerly, not inside "
                "a transform: use fl.all_gather or fl.psum on a traced value)"
            )
    if w.size == 1:
        return tree
    desc = [(v._value.dtype.str, v._value.shape) for v in leaves]
    w.agree(
        digest(repr((str(treedef), desc)).encode()),
        lambda: ("broadcast", [(f"leaf {i}", d) for i, d in enumerate(desc)]),
    )
    out = []
    for v in leaves:
        a = v._value
        buf = np.ascontiguousarray(a).copy() if w.rank == root else np.empty(a.shape, a.dtype)
        if buf.size:
            w.comm.Bcast(buf.reshape(-1).view(np.uint8), root=root)
        out.append(v if w.rank == root else _wrap(buf))
    return tree_util.unflatten(treedef, out)
