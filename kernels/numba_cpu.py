"""The numba CPU emitter: fused, staged and loop kernels as generated numba source, NumPy arrays as memory.

Source generation is ``fusion`` (loop nests and staged row kernels) and ``loopgen`` (whole loops); compiled code
comes from the private disk cache (``diskcache.load_kernel``). What is specific to this CPU target is decided here:
long rows whose float32 math needs more vector constants than AVX2 has registers run in a function of their own
and may be split into several loops over the row (``fusion.row_calls_pay``, ``fusion.split_passes``), and large
outputs are placed so that a kernel's loads and stores do not alias modulo 4 KiB.

>>> import numpy as np
>>> from funclib.kernels import fusion
>>> spec = fusion.KernelSpec(rank=1, inputs=(fusion.InputSpec("float32", (False,)),),
...                          ops=(fusion.OpSpec("mul", (("in", 0), ("in", 0)), "float32"),), outputs=(0,))
>>> k = CPU.fused_kernel(spec, cols=4)
>>> x, out = np.arange(4, dtype=np.float32), CPU.empty((4,), np.float32)
>>> k.load()(x, out, np.array([4]))
>>> out
array([0., 1., 4., 9.], dtype=float32)
"""

from __future__ import annotations

import functools
import math
import sys
import threading
from collections.abc import Callable, Sequence

import numpy as np

from . import diskcache, fusion, loopgen
from .backend import Kernel


class NumbaKernel:
    """Generated numba source, loaded through the disk cache at the first ``load()``."""

    __slots__ = ("source", "scratch")

    def __init__(self, source: str, scratch) -> None:
        self.source = source
        self.scratch = tuple(scratch)

    def load(self):
        return diskcache.load_kernel(self.source)


# outputs at least this large are placed against an input (smaller ones hardly stall, and cost a page more)
_PLACE_MIN_BYTES = 1 << 16
# outputs below this are recycled across calls; from 4 MiB NumPy asks for transparent huge pages, whose faults are few
_RECYCLE_MAX_BYTES = 1 << 22
# sys.getrefcount of a buffer only a recycler holds: its list slot and the call's argument. Without a GIL (free-
# threaded builds) reference counts are not a safe test of sharing, so nothing is recycled there.
_FREE_REFS = 2
_RECYCLES = getattr(sys, "_is_gil_enabled", lambda: True)()


class Recycler:
    """The buffers of one output of a compiled step, reused across calls once nothing else refers to them.

    A program's fresh outputs of 64 KiB to 4 MiB come from glibc's ``mmap`` or from heap top it trims after every
    call, so each call faults their pages in again: 750 faults and 1.5 ms of a 0.5 ms Adam update over 235k float32
    parameters. A buffer is reused only when its reference count shows that no array, view (a view refers to its
    base) or exported buffer holds it, so a result the caller kept is never overwritten; two buffers per output
    cover the common ``state = step(state)`` loop, where the previous call's result is this call's input.

    >>> r = Recycler((2, 3), np.dtype(np.float32), placed=False)
    >>> a = r.take(None)
    >>> address = a.ctypes.data
    >>> del a
    >>> kept = r.take(None)  # nothing held the buffer: handed out again
    >>> kept.ctypes.data == address
    True
    >>> r.take(None).ctypes.data == address  # held by ``kept``: another buffer
    False
    """

    __slots__ = ("shape", "dtype", "nbytes", "placed", "owners", "next", "lock")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, placed: bool) -> None:
        self.shape, self.dtype, self.placed = shape, dtype, placed
        self.nbytes = math.prod(shape) * dtype.itemsize
        self.owners: list = [None, None]
        self.next = 0
        self.lock = threading.Lock()

    def take(self, anchor: np.ndarray | None, k: int = 1) -> np.ndarray:
        """An array of the output's shape and dtype, placed against ``anchor`` (see ``NumbaCPU.empty_near``)."""
        owners = self.owners
        with self.lock:
            owner = None
            for i in range(len(owners)):
                if owners[i] is not None and sys.getrefcount(owners[i]) == _FREE_REFS:
                    owner = owners[i]
                    break
            if owner is None:
                # no buffer free: a new one takes the slot of the older, which its holders keep alive
                owner = np.empty(self.nbytes + 4096, np.uint8) if self.placed else np.empty(self.shape, self.dtype)
                owners[self.next] = owner
                self.next ^= 1
        if not self.placed:
            return owner
        off = 0 if anchor is None else (anchor.ctypes.data + 2048 * k - owner.ctypes.data) % 4096
        return owner[off : off + self.nbytes].view(self.dtype).reshape(self.shape)


class NumbaCPU:
    """The emitter for the host CPU (see ``kernels.backend.Emitter``)."""

    name = "cpu"
    carrier = fusion.CARRIER

    def supports(self, op: str, dtypes_in: Sequence[np.dtype], dtype_out: np.dtype) -> bool:
        return fusion.supports(op, list(dtypes_in), dtype_out)

    def reducible(self, dtype: np.dtype) -> bool:
        return dtype in fusion.REDUCIBLE_DTYPES

    def fused_kernel(self, spec: fusion.KernelSpec, cols: int) -> Kernel:
        row_calls = spec.reduction is None and spec.rank >= 2 and fusion.row_calls_pay(spec, cols)
        return NumbaKernel(fusion.generate_source(spec, row_calls), fusion.fused_buffer_dtypes(spec, row_calls))

    def staged_kernel(self, spec: fusion.StagedSpec, cols: int) -> Kernel:
        row_calls = fusion.row_calls_pay(spec, cols)
        # long rows whose math spills are also split into several passes over the row
        spec = fusion.split_passes(spec) if row_calls else spec
        return NumbaKernel(fusion.generate_staged_source(spec, row_calls=row_calls), fusion.staged_buffer_dtypes(spec))

    def loop_kernel(self, spec: loopgen.LoopSpec) -> loopgen.LoopKernel:
        return loopgen.build(spec)

    empty = staticmethod(np.empty)
    asarray = staticmethod(np.asarray)

    def placed(self, nbytes: int) -> bool:
        return nbytes >= _PLACE_MIN_BYTES

    @staticmethod
    def anchor(arrays: Sequence) -> np.ndarray | None:
        for a in arrays:
            if type(a) is np.ndarray and a.nbytes >= _PLACE_MIN_BYTES:
                return a
        return None

    @staticmethod
    def empty_near(shape: tuple[int, ...], dtype, anchor: np.ndarray, k: int) -> np.ndarray:
        """``np.empty(shape, dtype)`` whose address modulo 4 KiB is ``anchor``'s plus ``k`` half pages.

        A loop storing into an array whose address modulo 4 KiB sits just below that of an array it loads from
        stalls on false store-to-load dependencies (4K aliasing): 35 % slower for a row kernel over (1024, 1024)
        float32, depending only on where malloc happened to put the output.
        """
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        raw = np.empty(nbytes + 4096, np.uint8)
        off = (anchor.ctypes.data + 2048 * k - raw.ctypes.data) % 4096
        return raw[off : off + nbytes].view(dtype).reshape(shape)

    @staticmethod
    def recycler(shape: tuple[int, ...], dtype) -> Recycler | None:
        """Reusable buffers for one output of a step, or None where fresh ones cost little (see ``Recycler``)."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if not (_RECYCLES and _PLACE_MIN_BYTES <= nbytes < _RECYCLE_MAX_BYTES):
            return None
        return Recycler(tuple(shape), dtype, placed=True)

    @staticmethod
    def scratch(n: int, dtype, anchor: np.ndarray | None, k: int) -> np.ndarray:
        """Row buffer ``k`` of a kernel's passes over a row, half a page from the previous one modulo 4 KiB (the
        first half a page from ``anchor``): each pass loads from one and stores into the next."""
        return np.empty(n, dtype) if anchor is None else NumbaCPU.empty_near((n,), dtype, anchor, k + 1)

    @staticmethod
    def primitive(name: str, impl: Callable, params: dict) -> Callable:
        # NumPy is this device's library: dot_general's impl is NumPy's matmul on BLAS (transposes as strided views)
        return functools.partial(impl, **params) if params else impl


CPU = NumbaCPU()
