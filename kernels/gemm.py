"""``gemm(a, b, out)``: ``out[:] = a @ b`` on BLAS, callable from numba code (the generated loop kernels and whole
programs of ``loopgen`` call it for every ``dot_general``)."""

from __future__ import annotations

import numpy as np
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


gemm.__doc__ = """``out[:] = a @ b`` for 2-D float32/float64 arrays inside numba code: ``a``, ``b`` C- or F-ordered,
``out`` C-ordered, shapes already checked by the caller."""
