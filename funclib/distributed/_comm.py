"""The MPI world: lazy loading of mpi4py, the process axis and its collectives on NumPy arrays.

Every call that communicates (an eager collective, a compiled program) first agrees with the other ranks on what
it is about to do, by a digest of its signature (operation and operand types; a program's whole jaxpr). A
mismatch raises on every rank, naming the ranks and what differs, instead of deadlocking or mixing buffers of
different shapes. Ranks that disagree on a shape would post buffers of different lengths, which MPI may truncate,
mix or wait on, so the digest cannot simply be added to the data: it rides there only where every rank is known
to post the same buffer. That is predicted from the history every rank shares: each rank remembers, for the last
agreed call, the length and dtype of the Allreduce that came next the previous time (none if the next call was
not a sum). Where there is one, every rank posts that Allreduce with a header of its digest after the data: its
own data and digest if its call sums that many elements of that dtype, a dummy marked as such if not. From the
reduced header each rank reads whether every rank carried its own header (``_header``), so all ranks reach the
same verdict: all alike, and the result is the data (or, all dummies, they agree explicitly next); different, and
they all raise. From ``BESIDE_BYTES`` on, copying the data next to the header would cost more than the header
itself, so the header goes as its own 16-byte Iallreduce posted just before the predicted Allreduce, which sums
the operand straight into the output: the same verdict, the same single round trip. Calls that repeat a sequence
(a training loop; eager and jitted sums of one size in any order) therefore cost one round trip each. Otherwise
(a new sequence, a collective that is not a sum) the agreement is its own 16-byte Allreduce before the data, and
a misprediction costs the dummy as well.

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

from ._guard import describe_program, first_collective, program_key
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
        self._headers: dict = {}  # (digest, dtype) -> this rank's header and the sum of every rank's
        self._last = 0  # the digest of the last agreed call
        self._next: dict = {}  # a call's digest -> the Allreduce (count, dtype) of the call after it, if a sum
        self._pending = None  # a program's (digest, describe), agreed in its first collective

    def axis(self, name) -> ProcessAxis:
        ax = self.axes.get(name)
        if ax is None:
            ax = self.axes[name] = ProcessAxis(name, self)
        return ax

    # --- agreement ------------------------------------------------------------------------------------------
    # A call is one eager collective or one compiled program's run. Every rank keeps the same history of agreed
    # calls (it changes only after an agreement), so every rank makes the same prediction of what comes next.

    def agree(self, digest: int, describe) -> None:
        """Raise RankMismatchError on every rank unless every rank passed the same ``digest``; ``describe()``
        gives this rank's readable version of its call, exchanged only on a mismatch."""
        if self.size == 1:
            return
        self._settle()
        predicted = self._next.get(self._last)
        if predicted is not None:
            self._ride(predicted, None, describe)  # returns only if every rank missed the prediction
        self._agree_round(digest, describe)
        self._remember(digest, None)

    def allreduce_agreed(self, digest: int, describe, count: int, dtype: np.dtype, fill, source=None) -> np.ndarray:
        """Sum ``count`` elements of ``dtype`` (header-capable: ``header_capable``) across ranks, agreed on
        ``digest`` as ``agree`` does, in the same round trip when predicted. ``fill(buf)`` writes this rank's
        elements into ``buf``; ``source``, if given, is a C-contiguous array of those elements, summed from where
        it lies. The result is a pooled array of ``count`` elements."""
        self._settle()
        layout = (count, dtype)
        predicted = self._next.get(self._last)
        if predicted is not None:
            out = self._ride(predicted, (digest, layout, fill, source), describe)
            if out is not None:
                return out
        self._agree_round(digest, describe)
        self._remember(digest, layout)
        return self._sum(count, dtype, fill, source)

    def _sum(self, count: int, dtype: np.dtype, fill, source) -> np.ndarray:
        out = self.pool.take((count,), dtype)
        if source is not None:
            self.comm.Allreduce(source, out, op=self.MPI.SUM)
        else:
            fill(out)
            self.comm.Allreduce(self.MPI.IN_PLACE, out, op=self.MPI.SUM)
        return out

    def defer(self, digest: int, describe) -> None:
        """Agree on ``digest`` in the next ``allreduce_agreed`` (a compiled program whose first collective is a
        sum), or explicitly before any other communication."""
        if self.size > 1:
            self._settle()
            self._pending = (digest, describe)

    def take_pending(self):
        """The deferred ``(digest, describe)``, now the caller's to agree on, or None."""
        p, self._pending = self._pending, None
        return p

    def _settle(self) -> None:
        if self._pending is not None:
            self.agree(*self.take_pending())

    def _ride(self, predicted, call, describe):
        """Post the predicted Allreduce with this rank's data and digest (``call`` = (digest, layout, fill,
        source), its layout the predicted one) or a dummy of its size; return the data if every rank carried the
        same digest, None if every rank missed the prediction, and raise on every rank otherwise."""
        p_count, p_dtype = predicted
        hit = call is not None and call[1] == predicted
        code = call[0] if hit else MISSED
        if p_count * p_dtype.itemsize >= BESIDE_BYTES:
            out, agreed = self._ride_beside(p_count, p_dtype, code, call if hit else None)
        else:
            out = self.pool.take((p_count + HEADER,), p_dtype)
            if hit:
                call[2](out[:p_count])
            mine, every = self._header(code, p_dtype)
            out[p_count:] = mine
            self.comm.Allreduce(self.MPI.IN_PLACE, out, op=self.MPI.SUM)
            agreed = out[p_count:].tobytes() == every
            out = out[:p_count]
        if not agreed:
            self._mismatch(describe)
        if hit:
            self._last = code
            return out
        return None

    def _header(self, code: int, dtype: np.dtype) -> tuple:
        """This rank's header for ``code`` in ``dtype``, and the bytes of the sum every rank sending it gives."""
        key = (code, dtype)
        h = self._headers.get(key)
        if h is None:
            if len(self._headers) > 4096:
                self._headers.clear()
            mine = _header(code).astype(dtype)
            h = self._headers[key] = (mine, (self.size * mine).tobytes())
        return h

    def _ride_beside(self, count: int, dtype: np.dtype, code: int, call):
        """The large form of ``_ride``: the digest in a 16-byte Iallreduce posted just before the data (every rank
        posts both in this order, the data at the predicted size), so one round trip carries both and the data
        goes from the operand to the output without a copy next to a header. Returns (the summed data, whether
        every rank sent ``code``)."""
        mine, every = self._mine, self._every
        mine[0] = code
        mine[1] = -code
        req = self.comm.Iallreduce(mine, every, op=self.MPI.MAX)
        try:
            if call is not None:
                out = self._sum(count, dtype, call[2], call[3])
            else:  # the dummy: whatever the buffer holds, summed and dropped
                out = self.pool.take((count,), dtype)
                self.comm.Allreduce(self.MPI.IN_PLACE, out, op=self.MPI.SUM)
        finally:
            req.Wait()
        return out, bool(every[0] == code and every[1] == -code)

    def _agree_round(self, digest: int, describe) -> None:
        mine, every = self._mine, self._every
        mine[0] = digest
        mine[1] = -digest
        self.comm.Allreduce(mine, every, op=self.MPI.MAX)  # max(d) == -max(-d) == d on every rank iff all equal
        if every[0] != digest or every[1] != -digest:
            self._mismatch(describe)

    def _mismatch(self, describe):
        self._pending = None
        self._last = 0  # every rank raises here: the history restarts the same everywhere
        every = self.comm.allgather(describe())
        raise RankMismatchError(_mismatch_message(every, self.rank))

    def _remember(self, digest: int, layout) -> None:
        if len(self._next) > 4096:
            self._next.clear()
        if layout is None:
            self._next.pop(self._last, None)
        else:
            self._next[self._last] = layout
        self._last = digest


# The header: the digest's 14 nibbles x as pairs (x, x*x), or a marker 16 in every nibble for a rank that missed
# the prediction. Summed over N ranks, sum(x) == N*m and sum(x*x) == N*m*m hold only if every x equals m (their
# difference is the sum of (x - m)**2), so each rank checks its own header against the sum and all conclude alike.
# Values stay below 2**24 for N < 65536, exact in every dtype allowed.
HEADER = 28
MISSED = -1
# From this size on the digest travels beside the data instead (``World._ride_beside``): copying the operand next
# to the header costs more than a second, overlapped message (measured crossover 256 KB - 1 MB, 2 ranks).
BESIDE_BYTES = 1 << 19
_HEADER_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128, np.int32,
                                                  np.int64, np.uint32, np.uint64))


def header_capable(dtype: np.dtype) -> bool:
    """Whether a sum in ``dtype`` carries the header exactly (narrow integers would overflow)."""
    return dtype in _HEADER_DTYPES


def _header(code: int) -> np.ndarray:
    x = np.full(HEADER // 2, 16.0) if code == MISSED else np.array([(code >> (4 * i)) & 15 for i in
                                                                     range(HEADER // 2)], np.float64)
    return np.concatenate([x, x * x])


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
    if w is None:
        w = _WIDE[dtype] = np.dtype(np.float32) if dtype.name == "bfloat16" else dtype
    return w


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
        if self.size == 1 or op == "axis_index":  # axis_index sends nothing: nothing to disagree on
            return self.run(op, arrays, params)
        d = self._digest(op, arrays, params)

        def describe():
            return _op_description(op, arrays, params)

        if op == "psum":
            out = self._sum_agreed(arrays, d, describe)
            if out is not None:
                return out
        self.world.agree(d, describe)
        return self.run(op, arrays, params)

    def _sum_agreed(self, arrays: list, digest: int, describe) -> list | None:
        """``psum`` of operands of one dtype as one Allreduce that also carries the agreement on ``digest``
        (``World.allreduce_agreed``); None where the dtypes do not allow it."""
        dtype = arrays[0].dtype if arrays else None
        wide = _wide(dtype) if dtype is not None else None
        if wide is None or not header_capable(wide) or any(a.dtype != dtype for a in arrays):
            return None
        sizes = [a.size for a in arrays]

        def fill(buf):
            k = 0
            for a, n in zip(arrays, sizes):
                np.copyto(buf[k : k + n].reshape(a.shape), a)  # any layout, widened on the way
                k += n

        a = arrays[0]
        source = a.reshape(-1) if len(arrays) == 1 and wide == dtype and a.flags.c_contiguous else None
        flat = self.world.allreduce_agreed(digest, describe, sum(sizes), wide, fill, source)
        if wide != dtype:
            flat = flat.astype(dtype)
        out, k = [], 0
        for a, n in zip(arrays, sizes):
            out.append(flat[k : k + n].reshape(a.shape))
            k += n
        return out

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
        """The step of a compiled program for this collective (the program's guard has checked the ranks agree,
        or left its agreement to this step: ``program_guard``)."""
        run, w = self.run, self.world

        def step(*arrays):
            arrays = [np.asarray(a) for a in arrays]
            if w._pending is not None:
                pending = w.take_pending()
                if op == "psum":
                    out = self._sum_agreed(arrays, *pending)
                    if out is not None:
                        return out
                w.agree(*pending)
            return run(op, arrays, params)

        return step

    def program_guard(self, jaxpr, name: str):
        """A step that checks every rank runs the same program before its first collective (once per call).
        When that collective is a sum of one dtype run by the program itself (not in a loop or a branch), the
        check rides in its Allreduce: the guard only leaves the digest to it."""
        d = digest(program_key(jaxpr))

        def describe():
            return describe_program(jaxpr, name)

        first = first_collective(jaxpr)
        dtypes = {np.dtype(v.aval.dtype) for v in first.inputs} if first is not None else set()
        if (first is not None and first.prim.name == "psum" and tuple(first.params["axes"]) == (self,)
                and len(dtypes) == 1 and header_capable(_wide(dtypes.pop()))):
            defer = self.world.defer
            return lambda: defer(d, describe)
        agree = self.world.agree
        return lambda: agree(d, describe)

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

