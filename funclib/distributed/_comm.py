"""The MPI world: lazy loading of mpi4py, the process axis and its collectives on NumPy arrays.

Every collective first agrees with the other ranks on what it is about to do: an eager collective exchanges a
hash of its operation and operand types, a compiled program one hash of its whole jaxpr per call (the guard step
that ``transforms/lowering.py`` puts first). A mismatch raises on every rank, naming the ranks and what differs,
instead of deadlocking or mixing buffers of different shapes. The agreement cannot ride on the data collective
itself: ranks that disagree on a shape would post buffers of different lengths, which MPI may truncate, mix or
wait on forever. So it is one 16-byte Allreduce of a digest computed once per signature (per program when
compiled), a few microseconds on an idle machine.

Allreduce outputs come from a pool (``_pool.py``) and are reused once the tensors made from them are gone.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
import traceback

import numpy as np

from funclib.errors import FunclibError
from funclib.primitives.collectives import ExternalAxis

from ._guard import describe_program, program_key
from ._pool import BufferPool

INSTALL_HINT = "pip install funclib[dist]"


class DistributedError(FunclibError, RuntimeError):
    """A distributed operation failed or cannot run (MPI missing, ranks that disagree)."""


class RankMismatchError(DistributedError):
    """Ranks traced or called the same collective code differently (a shape, a dtype, the program itself)."""


_lock = threading.Lock()
_world = None  # the World after init()


def mpi():
    """The ``mpi4py.MPI`` module (importing it initializes MPI), or a DistributedError naming the extra."""
    try:
        from mpi4py import MPI  # the dist extra; importing it initializes MPI, so only on first use
    except ImportError as e:
        raise DistributedError(
            f"funclib.distributed needs mpi4py and an MPI library: {INSTALL_HINT} (brings mpi4py and the MPICH "
            f"wheel with its mpiexec), or install mpi4py against your cluster's MPI ({e})"
        ) from None
    return MPI


class World:
    """This process's view of the MPI world: a private duplicate of ``COMM_WORLD`` (so user code that also uses
    mpi4py cannot interleave with funclib's messages), its rank and size."""

    def __init__(self):
        MPI = mpi()
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.axes: dict = {}
        self._max_ops: dict = {}
        self.pool = BufferPool()
        self._mine = np.zeros(2, np.int64)
        self._every = np.zeros(2, np.int64)
        self._digests: dict = {}  # an eager collective's signature -> digest

    def axis(self, name) -> ProcessAxis:
        ax = self.axes.get(name)
        if ax is None:
            ax = self.axes[name] = ProcessAxis(name, self)
        return ax

    # --- agreement ------------------------------------------------------------------------------------------
    def agree(self, digest: int, describe) -> None:
        """Raise RankMismatchError on every rank unless every rank passed the same ``digest`` (of ``digest()``);
        ``describe()`` gives this rank's readable version of it, exchanged only on a mismatch."""
        if self.size == 1:
            return
        mine, every = self._mine, self._every
        mine[0] = digest
        mine[1] = -digest
        self.comm.Allreduce(mine, every, op=self.MPI.MAX)  # max(d) == -max(-d) == d on every rank iff all equal
        if every[0] == digest and every[1] == -digest:
            return
        every = self.comm.allgather(describe())
        raise RankMismatchError(_mismatch_message(every, self.rank))


def digest(key: bytes) -> int:
    """A 56-bit digest of ``key``, the same in every process (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=7).digest(), "little")


def _mismatch_message(every: list, me: int) -> str:
    """The first difference between rank 0's description and the others'. A description is
    ``(what, [(label, value), ...])``: ``what`` names the call, each label an argument or step."""
    what0, items0 = every[0]
    lines = []
    for r, (what, items) in enumerate(every):
        if r == 0 or (what, items) == (what0, items0):
            continue
        if what != what0:
            lines.append(f"rank {r} ran {what} where rank 0 ran {what0}")
            continue
        d0, d = dict(items0), dict(items)
        diffs = [
            f"{label} is {d.get(label, 'absent')} on rank {r} but {d0.get(label, 'absent')} on rank 0"
            for label in [k for k, _ in items0] + [k for k, _ in items if k not in d0]
            if d.get(label) != d0.get(label)
        ]
        if not diffs:
            diffs = ["the same arguments, a different sequence of operations"]
        lines.append(f"rank {r}: " + "; ".join(diffs[:3]))
    return (
        f"ranks disagree on {what0} (seen from rank {me}): " + ". ".join(lines) + ". Every rank must trace the "
        "same program and issue the same collectives in the same order: give each rank batches of one shape "
        "(DistributedSampler pads the last one), and do not branch on fl.distributed.rank() around collectives."
    )


def world() -> World:
    global _world
    if _world is None:
        with _lock:
            if _world is None:
                _world = World()
                if _world.size > 1:
                    _install_abort(_world)
    return _world


def initialized() -> bool:
    return _world is not None


def _install_abort(w: World) -> None:
    """An uncaught exception on one rank aborts the whole job (after printing it), as ``python -m mpi4py`` does:
    otherwise the other ranks would wait in their next collective forever."""
    previous = sys.excepthook

    def hook(etype, value, tb):
        try:
            if previous is sys.__excepthook__:
                # one write, then a moment for mpiexec to forward it: the abort kills the ranks and their pipes, and
                # a traceback written piecewise arrived cut short under load
                sys.stderr.write("".join(traceback.format_exception(etype, value, tb)))
            else:
                previous(etype, value, tb)
            sys.stderr.write(f"funclib.distributed: rank {w.rank} of {w.size} raised {etype.__name__}; aborting "
                             "every rank\n")
            sys.stderr.flush()
            time.sleep(0.5)
        finally:
            w.MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


# ---------------------------------------------------------------------------------------------------------------
# The process axis


_WIDE = {np.dtype(np.float16): np.dtype(np.float32)}  # dtypes MPI cannot reduce: reduced in a wider one


def _wide(dtype: np.dtype) -> np.dtype:
    w = _WIDE.get(dtype)
    if w is None and dtype.name == "bfloat16":
        return np.dtype(np.float32)
    return w or dtype


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


class ProcessAxis(ExternalAxis):
    """The ranks of the MPI world as a named axis: collectives over it are MPI collectives.

    >>> fl.distributed.process_axis("data").size  # in a process started without mpirun
    1
    """

    def __init__(self, name, w: World):
        self.name = name
        self.world = w
        self.size = w.size

    def __repr__(self):
        return f"ProcessAxis({self.name!r}, size={self.size})"

    @property
    def index(self) -> int:
        return self.world.rank

    # --- the collectives ------------------------------------------------------------------------------------
    def collective(self, op: str, arrays: list, **params) -> list:
        arrays = [np.asarray(a) for a in arrays]
        if self.size > 1 and op != "axis_index":  # axis_index sends nothing: nothing to disagree on
            self.world.agree(self._digest(op, arrays, params), lambda: _op_description(op, arrays, params))
        return self.run(op, arrays, params)

    def _digest(self, op, arrays, params) -> int:
        cache = self.world._digests
        try:
            sig = (op, tuple(sorted(params.items())), tuple((a.dtype, a.shape) for a in arrays))
            d = cache.get(sig)
        except TypeError:  # an unhashable parameter: no caching
            return digest(_op_key(op, arrays, params))
        if d is None:
            if len(cache) > 4096:
                cache.clear()
            d = cache[sig] = digest(_op_key(op, arrays, params))
        return d

    def program_step(self, op: str, params: dict):
        """The step of a compiled program for this collective (the program's guard has checked the ranks agree)."""
        run = self.run

        def step(*arrays):
            return run(op, [np.asarray(a) for a in arrays], params)

        return step

    def program_guard(self, jaxpr, name: str):
        """A step that checks every rank runs the same program before its first collective (once per call)."""
        d = digest(program_key(jaxpr))
        agree = self.world.agree

        def guard():
            agree(d, lambda: describe_program(jaxpr, name))

        return guard

    def run(self, op: str, arrays: list, params: dict) -> list:
        if op == "axis_index":
            return [np.asarray(self.world.rank, np.int64)]
        if self.size == 1:
            if op == "all_gather":
                return [a[None] for a in arrays]
            if op == "psum_scatter":
                return [a[0] for a in arrays]
            if op == "ppermute":
                return [a if (0, 0) in params["perm"] else np.zeros_like(a) for a in arrays]
            return list(arrays)
        return getattr(self, "_" + op)(arrays, **params)

    def _psum(self, arrays):
        return self._reduce(arrays, self.world.MPI.SUM)

    def _pmax(self, arrays):
        return self._extremum(arrays, np.maximum, self.world.MPI.MAX, self.world.MPI.LOR)

    def _pmin(self, arrays):
        return self._extremum(arrays, np.minimum, self.world.MPI.MIN, self.world.MPI.LAND)

    def _extremum(self, arrays, fn, int_op, bool_op):
        out = []
        for a in arrays:
            if a.dtype == np.bool_:
                out.append(self._reduce([a.astype(np.uint8)], self.world.MPI.BOR if fn is np.maximum else
                                        self.world.MPI.BAND)[0].astype(np.bool_))
            elif a.dtype.kind in "iu":
                out.append(self._reduce([a], int_op)[0])
            else:
                # MPI's MAX on floats drops NaN depending on the order of operands: NumPy's maximum keeps it
                out.append(self._reduce([a], self._float_op(fn))[0])
        return out

    def _float_op(self, fn):
        op = self.world._max_ops.get(fn)
        if op is None:
            from mpi4py.util import dtlib  # the dist extra, loaded with MPI (above)

            def combine(inbuf, inoutbuf, datatype):
                dt = dtlib.to_numpy_dtype(datatype)
                a = np.frombuffer(inbuf, dt)
                b = np.frombuffer(inoutbuf, dt)
                fn(a, b, out=b)

            op = self.world._max_ops[fn] = self.world.MPI.Op.Create(combine, commute=True)
        return op

    def _reduce(self, arrays, op):
        """Allreduce each dtype's operands as one flat buffer (one message per dtype, not per array), received
        into pooled memory."""
        comm, MPI, pool = self.world.comm, self.world.MPI, self.world.pool
        out = [None] * len(arrays)
        groups: dict = {}
        for i, a in enumerate(arrays):
            groups.setdefault(a.dtype, []).append(i)
        for dtype, idx in groups.items():
            wide = _wide(dtype)
            if len(idx) == 1:
                a = arrays[idx[0]]
                recv = pool.take(a.shape, wide)
                if wide == dtype and a.flags.c_contiguous:
                    comm.Allreduce(a, recv, op=op)
                else:  # the conversion or the copy goes straight into the output
                    recv[...] = a
                    comm.Allreduce(MPI.IN_PLACE, recv, op=op)
                out[idx[0]] = recv if wide == dtype else recv.astype(dtype)
                continue
            sizes = [arrays[i].size for i in idx]
            flat = pool.take((sum(sizes),), wide)
            k = 0
            for i, n in zip(idx, sizes):
                flat[k : k + n] = arrays[i].reshape(-1)
                k += n
            comm.Allreduce(MPI.IN_PLACE, flat, op=op)
            if wide != dtype:
                flat = flat.astype(dtype)
            k = 0
            for i, n in zip(idx, sizes):
                out[i] = flat[k : k + n].reshape(arrays[i].shape)
                k += n
        return out

    def _all_gather(self, arrays, axis_size):
        comm = self.world.comm
        out = []
        for a in arrays:
            recv = np.empty((self.size,) + a.shape, a.dtype)
            if a.size:
                comm.Allgather(_bytes(a), recv.reshape(-1).view(np.uint8))
            out.append(recv)
        return out

    def _psum_scatter(self, arrays, axis_size):
        comm, MPI = self.world.comm, self.world.MPI
        out = []
        for a in arrays:
            wide = _wide(a.dtype)
            recv = np.empty(a.shape[1:], wide)
            if a.size:
                comm.Reduce_scatter_block(np.ascontiguousarray(a, wide), recv, op=MPI.SUM)
            out.append(recv if wide == a.dtype else recv.astype(a.dtype))
        return out

    def _ppermute(self, arrays, perm):
        comm, MPI, me = self.world.comm, self.world.MPI, self.world.rank
        dst = next((d for s, d in perm if s == me), None)
        src = next((s for s, d in perm if d == me), None)
        out = []
        for tag, a in enumerate(arrays):
            recv = np.zeros(a.shape, a.dtype)
            reqs = []
            if src == me:
                recv[...] = a
            else:
                if src is not None:
                    reqs.append(comm.Irecv(recv.reshape(-1).view(np.uint8), source=src, tag=tag))
                if dst is not None:
                    reqs.append(comm.Isend(_bytes(a), dest=dst, tag=tag))
                MPI.Request.Waitall(reqs)
            out.append(recv)
        return out


def _param_text(params: dict) -> str:
    return ",".join(f"{k}={v!r}" for k, v in sorted(params.items()) if k != "axes")


def _op_key(op, arrays, params) -> bytes:
    sig = ";".join(f"{a.dtype.str}{a.shape}" for a in arrays)
    return f"{op}|{_param_text(params)}|{sig}".encode()


def _op_description(op, arrays, params):
    items = [(f"operand {i}", f"{a.dtype.name}{list(a.shape)}") for i, a in enumerate(arrays)]
    extra = _param_text(params)
    return (f"{op}({extra})" if extra else op, items)

