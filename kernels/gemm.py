"""``gemm(a, b, out)``: ``out[:] = a @ b`` inside numba code (the generated loop kernels and whole programs of
``loopgen`` call it for every ``dot_general``), on BLAS or, for float32 on CPUs with AVX-512, on funclib's own
product (``_gemm.c``) where that measures faster.

OpenBLAS chooses its kernels by CPU model and runs its AVX2 ones where it does not know the model (an AMD EPYC of
the Zen 5 generation, for one): there the AVX-512 product takes about 0.6 of BLAS's time. Where OpenBLAS runs
AVX-512 kernels of its own the two are close, and BLAS may win. So the first matrix product a generated kernel
asks for times the two once, interleaved, on a 128 x 256 x 256 float32 product (about two milliseconds), and
``choose`` names ``gemm_avx512`` for the products of the process only when it won; ``FUNCLIB_GEMM=blas`` or
``=avx512`` fixes the choice. The choice is written into the generated source, so a kernel compiled under one
choice is never reused under the other.

Example::

    from funclib.kernels import gemm
    gemm.choose("float32", 128, 256, 784)   # "gemm_avx512" or "gemm", by this CPU
"""

from __future__ import annotations

import ctypes
import functools
import os
import time

import numpy as np
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from . import diskcache


def _gemm_intrinsic():
    # numba's own BLAS entry (scipy's cython_blas behind ``numba_xxgemm``), without np.dot's typing machinery,
    # which costs about a second of compile time per operand layout. Imported here: numba.np.arrayobj takes 0.2 s
    # and loads scipy, needed only once a loop kernel multiplies matrices
    from numba.np.arrayobj import make_array
    from numba.np.linalg import call_xxgemm, ensure_blas

    floats = (types.float32, types.float64)

    @intrinsic
    def gemm(typingctx, a, b, out):
        arrs = (a, b, out)
        if not all(isinstance(t, types.Array) and t.ndim == 2 and t.dtype == a.dtype for t in arrs):
            return None
        if a.dtype not in floats or a.layout not in "CF" or b.layout not in "CF" or out.layout != "C":
            return None
        if not out.mutable:
            return None
        ensure_blas()

        def codegen(context, builder, sig, args):
            vals = []
            for ty, v in zip(sig.args, args):
                arr = make_array(ty)(context, builder, v)
                vals += [ty, cgutils.unpack_tuple(builder, arr.shape), arr.data]
            call_xxgemm(context, builder, *vals)
            return context.get_dummy_value()

        return types.void(a, b, out), codegen

    return gemm


try:
    _gemm = _gemm_intrinsic()

    # a function of its own (cached per operand layout), so each loop kernel only emits a call
    @diskcache.njit(nogil=True, no_cpython_wrapper=True)
    def gemm(a, b, out):
        _gemm(a, b, out)

except ImportError:  # numba moved its BLAS helpers: np.dot does the same, compiling more slowly

    @diskcache.njit(nogil=True)
    def gemm(a, b, out):
        np.dot(a, b, out)


def _load_avx512():
    """The extension module (its ``sgemm`` is the Python entry) where it was built and this CPU runs AVX-512, with
    its C symbol made known to numba-compiled code; else None."""
    try:
        from . import _gemm as ext  # an optional extension: absent where the install had no C compiler
    except ImportError:
        return None
    lib = ctypes.CDLL(ext.__file__)
    if not lib.funclib_sgemm_supported():
        return None
    binding.add_symbol("funclib_sgemm", ctypes.cast(lib.funclib_sgemm, ctypes.c_void_p).value)
    return ext


_ext = _load_avx512()


def _sgemm_intrinsic():
    from numba.np.arrayobj import make_array  # 0.2 s, and loads scipy: only where the product is used

    @intrinsic
    def sgemm(typingctx, a, b, out):
        """``funclib_sgemm`` on three float32 2-D arrays; returns its status (0, or -1 where it did nothing, as
        it does for float64 without a call)."""
        arrs = (a, b, out)
        if not all(isinstance(t, types.Array) and t.ndim == 2 and t.dtype == a.dtype for t in arrs):
            return None
        if a.dtype not in (types.float32, types.float64):
            return None

        def codegen(context, builder, sig, args):
            if sig.args[0].dtype != types.float32:
                return context.get_constant(types.int32, -1)
            i64 = context.get_value_type(types.int64)
            size = context.get_constant(types.intp, 4)
            vals = []
            for ty, v in zip(sig.args, args):
                arr = make_array(ty)(context, builder, v)
                vals.append(
                    (
                        cgutils.unpack_tuple(builder, arr.shape),
                        cgutils.unpack_tuple(builder, arr.strides),
                        builder.ptrtoint(arr.data, i64),
                    )
                )
            (sa, ta, pa), (sb, tb, pb), (_, tc, pc) = vals
            params = [
                sa[0],
                sb[1],
                sa[1],
                pa,
                builder.sdiv(ta[0], size),
                builder.sdiv(ta[1], size),
                pb,
                builder.sdiv(tb[0], size),
                builder.sdiv(tb[1], size),
                pc,
                builder.sdiv(tc[0], size),
            ]
            fnty = ir.FunctionType(ir.IntType(32), [i64] * 11)
            fn = cgutils.get_or_insert_function(builder.module, fnty, "funclib_sgemm")
            return builder.call(fn, params)

        return types.int32(a, b, out), codegen

    return sgemm


if _ext is not None:
    _sgemm = _sgemm_intrinsic()

    @diskcache.njit(nogil=True, no_cpython_wrapper=True)
    def gemm_avx512(a, b, out):
        # float64, and the never-expected failed allocation of the packing buffers, go to BLAS
        if _sgemm(a, b, out) != 0:
            gemm(a, b, out)

else:
    gemm_avx512 = gemm

def _measure() -> str:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, 256), dtype=np.float32) for n in (128, 256))
    c = np.empty((128, 256), np.float32)
    own, blas = [], []
    for _ in range(7):
        t0 = time.perf_counter()
        _ext.sgemm(a, b, c)
        t1 = time.perf_counter()
        np.matmul(a, b, out=c)
        blas.append(time.perf_counter() - t1)
        own.append(t1 - t0)
    return "gemm_avx512" if min(own) < min(blas) else "gemm"


# Below these the packing does not pay: a row vector times a matrix copies the matrix once to use it once, and
# products at most 16 wide fill a quarter of the AVX-512 tile (BLAS was 1.1-3x faster on them, measured)
MIN_M, MIN_N, MIN_WORK = 2, 17, 1 << 16
# the timed product's m * n * k: where BLAS may run on several threads, the one-thread product is used only up to
# the size where it was measured faster
_MEASURED_WORK = 128 * 256 * 256


def _blas_threads_pinned() -> bool:
    if any(os.environ.get(v) == "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
        return True
    return len(os.sched_getaffinity(0)) == 1 if hasattr(os, "sched_getaffinity") else os.cpu_count() == 1


@functools.cache
def _auto() -> tuple[str, int | None]:
    """The timed choice, and the largest m * n * k it holds for (None: any)."""
    return _measure(), None if _blas_threads_pinned() else _MEASURED_WORK


def choose(dtype, m: int, n: int, k: int) -> str:
    """The name of the function a generated kernel calls for ``(m, k) @ (k, n)`` in ``dtype``."""
    work = m * n * k
    if _ext is None or m < MIN_M or n < MIN_N or work < MIN_WORK or np.dtype(dtype) != np.float32:
        return "gemm"
    mode = os.environ.get("FUNCLIB_GEMM", "auto")
    if mode == "auto":
        name, limit = _auto()
        return "gemm" if limit is not None and work > limit else name
    if mode not in ("blas", "avx512"):
        raise ValueError(f"FUNCLIB_GEMM={mode!r}: expected 'auto', 'blas' or 'avx512'")
    return "gemm" if mode == "blas" else "gemm_avx512"


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for 2-D floating operands outside generated kernels (eager calls and a program's steps), on the
    product ``choose`` names: NumPy's matmul, or the AVX-512 one for float32."""
    if a.dtype == np.float32 and b.dtype == np.float32:
        (m, k), n = a.shape, b.shape[1]
        if choose(a.dtype, m, n, k) == "gemm_avx512":
            out = np.empty((m, n), np.float32)
            _ext.sgemm(a, b, out)
            return out
    return np.matmul(a, b)


gemm.__doc__ = """``out[:] = a @ b`` for 2-D float32/float64 arrays inside numba code: ``a``, ``b`` C- or F-ordered,
``out`` C-ordered, shapes already checked by the caller."""
