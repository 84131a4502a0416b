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
    def scratch(n: int, dtype, anchor: np.ndarray | None, k: int) -> np.ndarray:
        """Row buffer ``k`` of a kernel's passes over a row, half a page from the previous one modulo 4 KiB (the
        first half a page from ``anchor``): each pass loads from one and stores into the next."""
        return np.empty(n, dtype) if anchor is None else NumbaCPU.empty_near((n,), dtype, anchor, k + 1)

    @staticmethod
    def primitive(name: str, impl: Callable, params: dict) -> Callable:
        # NumPy is this device's library: dot_general's impl is NumPy's matmul on BLAS (transposes as strided views)
        return functools.partial(impl, **params) if params else impl


CPU = NumbaCPU()
