"""CUDA kernels of sparse products (``spmm``, ``sddmm``) and dense linear algebra, one thread (``cholesky``: one
block) per matrix of a stack: ``cholesky``, ``qr`` and ``eigh`` of real matrices (complex ones: ``cuda_cxlinalg``,
with ``svd``), ``triangular_solve`` and ``lu`` of real and complex ones. Built on ``cuda_ops``' views and launches;
``cuda_prims`` joins this table with the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .cuda_backend import UnsupportedOnDevice, launch_config
from .cuda_math import F32, F64
from .cuda_math import header as _header
from .cuda_ops import View, _rev, _transpose, elementwise, launch_strided, reduce_block

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)

# ------------------------------------------------------------------------------------------ sparse products

ENTRY_ROWS_SOURCE = '''
def kernel(indptr, rows, m, nse):
    r = cuda.grid(1)
    step = cuda.gridsize(1)
    while r < m:
        lo = indptr[r] if indptr[r] > 0 else 0
        hi = indptr[r + 1] if indptr[r + 1] < nse else nse
        for e in range(lo, hi):
            rows[e] = r
        r += step
'''

SPMM_SOURCE = '''
def kernel(values, rows, cols, dense, out, count, n, nse, m, k, transpose, zero):
    t = cuda.grid(1)
    step = cuda.gridsize(1)
    while t < count:
        i = t // n
        j = t - i * n
        acc = zero
        for e in range(nse):
            r = rows[e]
            c = cols[e]
            if r >= 0 and r < m and c >= 0 and c < k:
                if transpose:
                    if c == i:
                        acc += values[e] * dense[r * n + j]
                elif r == i:
                    acc += values[e] * dense[c * n + j]
        out[t] = acc
        t += step
'''

SDDMM_SOURCE = '''
def kernel(x, y, rows, cols, out, nse, m, k, n, zero):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < nse:
        r = rows[e]
        c = cols[e]
        acc = zero
        if r >= 0 and r < m and c >= 0 and c < k:
            for j in range(n):
                acc += x[r * n + j] * y[c * n + j]
        out[e] = acc
        e += step
'''


def sparse_source(which: str, simulated: bool = False) -> str:
    """``entry_rows`` (the row of each stored entry of a CSR pattern, -1 where none), ``spmm`` (one thread per
    output element, folding the entries in order: deterministic, as on the CPU; a sorted-row kernel is to come) or
    ``sddmm`` (one thread per entry)."""
    body = {"entry_rows": ENTRY_ROWS_SOURCE, "spmm": SPMM_SOURCE, "sddmm": SDDMM_SOURCE}[which]
    return "\n".join(_header(simulated)) + body


def _entry_rows(ctx, idx0, cols, layout):
    """Each entry's row, int64: COO's rows, or CSR's pointers expanded."""
    if layout != "csr":
        return idx0 if idx0.dtype == np.int64 else ctx.copy(View(idx0), np.int64)
    nse, m = cols.shape[0], idx0.shape[0] - 1
    rows = ctx.empty((nse,), np.int64)
    if nse:
        launch_strided(ctx.rt, (nse,), [np.int64(-1)], "{0}", rows)
        if m > 0:
            blocks, threads = launch_config(m)
            ctx.rt.launch(ctx.rt.compile(sparse_source("entry_rows", ctx.rt.simulated), "kernel"), blocks, threads,
                          [idx0, rows, m, nse])
    return rows


def _spmm(ctx, values, idx0, cols, dense, *, shape, layout, transpose):
    _float_only("spmm", values, dense)
    rows = _entry_rows(ctx, idx0, cols, layout)
    m, k = shape
    n = dense.shape[1]
    out = ctx.empty((k if transpose else m, n), values.dtype)
    if out.size:
        blocks, threads = launch_config(out.size)
        ctx.rt.launch(ctx.rt.compile(sparse_source("spmm", ctx.rt.simulated), "kernel"), blocks, threads,
                      [values, rows, cols, dense, out, out.size, n, values.shape[0], m, k, bool(transpose),
                       values.dtype.type(0)])
    return out


def _sddmm(ctx, x, y, idx0, cols, *, shape, layout):
    _float_only("sddmm", x, y)
    rows = _entry_rows(ctx, idx0, cols, layout)
    nse = cols.shape[0]
    out = ctx.empty((nse,), x.dtype)
    if nse:
        blocks, threads = launch_config(nse)
        ctx.rt.launch(ctx.rt.compile(sparse_source("sddmm", ctx.rt.simulated), "kernel"), blocks, threads,
                      [x, y, rows, cols, out, nse, x.shape[0], y.shape[0], x.shape[1], x.dtype.type(0)])
    return out


# ------------------------------------------------------------------------------------------ linear algebra

CHOLESKY_SOURCE = '''
def kernel(a, out, B, n, flag, zero, one):
    g = cuda.blockIdx.x
    t = cuda.threadIdx.x
    while g < B:
        base = g * n * n
        i = t
        while i < n * n:
            r = i // n
            out[base + i] = a[base + i] if i - r * n <= r else zero
            i += BLOCK
        cuda.syncthreads()
        for j in range(n):
            if t == 0:
                d = out[base + j * n + j]
                for k in range(j):
                    d -= out[base + j * n + k] * out[base + j * n + k]
                if not d > zero:
                    flag[0] = 1
                    d = one
                out[base + j * n + j] = math.sqrt(d)
            cuda.syncthreads()
            i = j + 1 + t
            while i < n:
                s = out[base + i * n + j]
                for k in range(j):
                    s -= out[base + i * n + k] * out[base + j * n + k]
                out[base + i * n + j] = s / out[base + j * n + j]
                i += BLOCK
            cuda.syncthreads()
        g += cuda.gridDim.x
'''

LOWER_SOLVE_SOURCE = '''
def kernel(a, b, x, B, n, m, unit):
    t = cuda.grid(1)
    step = cuda.gridsize(1)
    while t < B * m:
        g = t // m
        c = t - g * m
        for i in range(n):
            s = b[(g * n + i) * m + c]
            for k in range(i):
                s -= a[(g * n + i) * n + k] * x[(g * n + k) * m + c]
            x[(g * n + i) * m + c] = s if unit else s / a[(g * n + i) * n + i]
        t += step
'''


LU_SOURCE = '''
def kernel(a, lu, piv, perm, B, m, n, zero):
    g = cuda.grid(1)
    step = cuda.gridsize(1)
    k = m if m < n else n
    while g < B:
        base = g * m * n
        for i in range(m * n):
            lu[base + i] = a[base + i]
        for i in range(m):
            perm[g * m + i] = i
        for j in range(k):
            p = j
            best = abs(lu[base + j * n + j])
            for i in range(j + 1, m):
                v = abs(lu[base + i * n + j])
                if v > best:
                    best = v
                    p = i
            piv[g * k + j] = p
            if p != j:
                for c in range(n):
                    tmp = lu[base + j * n + c]
                    lu[base + j * n + c] = lu[base + p * n + c]
                    lu[base + p * n + c] = tmp
                tp = perm[g * m + j]
                perm[g * m + j] = perm[g * m + p]
                perm[g * m + p] = tp
            d = lu[base + j * n + j]
            if d != zero:
                for i in range(j + 1, m):
                    lu[base + i * n + j] = lu[base + i * n + j] / d
            for i in range(j + 1, m):
                f = lu[base + i * n + j]
                for c in range(j + 1, n):
                    lu[base + i * n + c] -= f * lu[base + j * n + c]
        g += step
'''

# complex pivots are chosen by |re| + |im|, as LAPACK's izamax does
_CABS1 = "(abs(lu[base + R * n + j].real) + abs(lu[base + R * n + j].imag))"
CX_LU_SOURCE = LU_SOURCE.replace("abs(lu[base + j * n + j])", _CABS1.replace("R", "j")).replace(
    "abs(lu[base + i * n + j])", _CABS1.replace("R", "i"))

# Householder QR as LAPACK's geqrf/orgqr compute it (dlarfg's reflector: beta = -sign(alpha) ||x||, none where
# the column below the diagonal is zero), so q and r carry LAPACK's signs
QR_SOURCE = '''
def kernel(a, w, tau, q, r, B, m, n, kq, zero, one):
    g = cuda.grid(1)
    step = cuda.gridsize(1)
    k = m if m < n else n
    while g < B:
        base = g * m * n
        for i in range(m * n):
            w[base + i] = a[base + i]
        for j in range(k):
            alpha = w[base + j * n + j]
            xn = zero
            for i in range(j + 1, m):
                xn += w[base + i * n + j] * w[base + i * n + j]
            t = zero
            if xn != zero:
                beta = math.sqrt(alpha * alpha + xn)
                if alpha >= zero:
                    beta = -beta
                t = (beta - alpha) / beta
                s = one / (alpha - beta)
                for i in range(j + 1, m):
                    w[base + i * n + j] = w[base + i * n + j] * s
                w[base + j * n + j] = beta
                for c in range(j + 1, n):
                    d = w[base + j * n + c]
                    for i in range(j + 1, m):
                        d += w[base + i * n + j] * w[base + i * n + c]
                    d = d * t
                    w[base + j * n + c] -= d
                    for i in range(j + 1, m):
                        w[base + i * n + c] -= d * w[base + i * n + j]
            tau[g * k + j] = t
        for i in range(kq):
            for c in range(n):
                r[(g * kq + i) * n + c] = w[base + i * n + c] if (c >= i and i < k) else zero
        qb = g * m * kq
        for i in range(m):
            for c in range(kq):
                q[qb + i * kq + c] = one if i == c else zero
        for jj in range(k):
            j = k - 1 - jj
            t = tau[g * k + j]
            if t != zero:
                for c in range(kq):
                    d = q[qb + j * kq + c]
                    for i in range(j + 1, m):
                        d += w[base + i * n + j] * q[qb + i * kq + c]
                    d = d * t
                    q[qb + j * kq + c] -= d
                    for i in range(j + 1, m):
                        q[qb + i * kq + c] -= d * w[base + i * n + j]
        g += step
'''

# the Jacobi rotation that zeroes a real symmetric 2x2 pivot block (theta from it; ``rzero``/``rone`` are the real
# field's constants), applied to S's rows and columns and to V's columns; and the ascending sort of the eigenvalues
# with their vectors, as LAPACK's syevd/heevd order them. Spliced into the real and the complex (Hermitian) kernels.
JACOBI_ROTATION = '''
                        t = rone / (abs(theta) + math.sqrt(theta * theta + rone))
                        if theta < rzero:
                            t = -t
                        c = rone / math.sqrt(t * t + rone)
                        sn = t * c
                        for i in range(n):
                            x = s[base + i * n + p]
                            y = s[base + i * n + qq]
                            s[base + i * n + p] = c * x - sn * y
                            s[base + i * n + qq] = sn * x + c * y
                        for i in range(n):
                            x = s[base + p * n + i]
                            y = s[base + qq * n + i]
                            s[base + p * n + i] = c * x - sn * y
                            s[base + qq * n + i] = sn * x + c * y
                        for i in range(n):
                            x = v[base + i * n + p]
                            y = v[base + i * n + qq]
                            v[base + i * n + p] = c * x - sn * y
                            v[base + i * n + qq] = sn * x + c * y
'''
SORT_ASCENDING = '''
        for i in range(n):
            best = i
            for c in range(i + 1, n):
                if w[g * n + c] < w[g * n + best]:
                    best = c
            if best != i:
                tmp = w[g * n + i]
                w[g * n + i] = w[g * n + best]
                w[g * n + best] = tmp
                for r in range(n):
                    tv = v[base + r * n + i]
                    v[base + r * n + i] = v[base + r * n + best]
                    v[base + r * n + best] = tv
        g += step
'''

# cyclic Jacobi on the symmetric matrix the lower triangle defines, then eigenvalues sorted ascending with their
# vectors (columns), as LAPACK's syevd orders them
EIGH_SOURCE = '''
def kernel(a, w, v, s, B, n, zero, one, tol):
    g = cuda.grid(1)
    step = cuda.gridsize(1)
    rzero, rone = zero, one
    while g < B:
        base = g * n * n
        for i in range(n):
            for c in range(n):
                s[base + i * n + c] = a[base + i * n + c] if c <= i else a[base + c * n + i]
                v[base + i * n + c] = one if i == c else zero
        for sweep in range(60):
            off = zero
            diag = zero
            for i in range(n):
                diag += s[base + i * n + i] * s[base + i * n + i]
                for c in range(i + 1, n):
                    off += s[base + i * n + c] * s[base + i * n + c]
            if not off > tol * tol * diag:
                break
            for p in range(n - 1):
                for qq in range(p + 1, n):
                    apq = s[base + p * n + qq]
                    if apq != zero:
                        app = s[base + p * n + p]
                        aqq = s[base + qq * n + qq]
                        theta = (aqq - app) / (apq + apq)
ROTATION
        for i in range(n):
            w[g * n + i] = s[base + i * n + i]
SORT
'''.replace("ROTATION\n", JACOBI_ROTATION[1:]).replace("SORT\n", SORT_ASCENDING[1:])


def factor_source(which: str, simulated: bool = False) -> str:
    """One thread per matrix of a stack: ``lu`` (partial pivoting, LAPACK's first largest pivot; ``cxlu`` the
    complex one), ``qr`` (Householder, LAPACK's signs) or ``eigh`` (cyclic Jacobi). Small matrices, many of them,
    are what these are for; a large single matrix runs serially on one thread (blocked, multi-thread
    factorizations are to come)."""
    body = {"lu": LU_SOURCE, "cxlu": CX_LU_SOURCE, "qr": QR_SOURCE, "eigh": EIGH_SOURCE}[which]
    return "\n".join(_header(simulated)) + body


def _lu(ctx, x):
    _float_only("lu", x, complex_ok=True)
    *batch, m, n = x.shape
    B, k = math.prod(batch), min(m, n)
    lu = ctx.empty(x.shape, x.dtype)
    piv, perm = ctx.empty(tuple(batch) + (k,), np.int32), ctx.empty(tuple(batch) + (m,), np.int32)
    if B and m * n:
        blocks, threads = launch_config(B)
        which = "cxlu" if x.dtype.kind == "c" else "lu"
        ctx.rt.launch(ctx.rt.compile(factor_source(which, ctx.rt.simulated), "kernel"), blocks, threads,
                      [x, lu, piv, perm, B, m, n, x.dtype.type(0)])
    elif B and m:
        launch_strided(ctx.rt, tuple(batch) + (m,), [], "np.int32(c" + str(len(batch)) + ")", perm)
    return [lu, piv, perm]


def _qr(ctx, x, *, full_matrices):
    _float_only("qr", x)
    *batch, m, n = x.shape
    B, k = math.prod(batch), min(m, n)
    kq = m if full_matrices else k
    q, r = ctx.empty(tuple(batch) + (m, kq), x.dtype), ctx.empty(tuple(batch) + (kq, n), x.dtype)
    if B and q.size + r.size:
        work, tau = ctx.empty(x.shape, x.dtype), ctx.empty((max(B * k, 1),), x.dtype)
        blocks, threads = launch_config(B)
        ctx.rt.launch(ctx.rt.compile(factor_source("qr", ctx.rt.simulated), "kernel"), blocks, threads,
                      [x, work, tau, q, r, B, m, n, kq, x.dtype.type(0), x.dtype.type(1)])
    return [q, r]


def _eigh(ctx, x):
    _float_only("eigh", x)
    n = x.shape[-1]
    B = x.size // (n * n) if n else 0
    w, v = ctx.empty(x.shape[:-1], x.dtype), ctx.empty(x.shape, x.dtype)
    if B:
        work = ctx.empty(x.shape, x.dtype)
        blocks, threads = launch_config(B)
        tol = x.dtype.type(np.finfo(x.dtype).eps)
        ctx.rt.launch(ctx.rt.compile(factor_source("eigh", ctx.rt.simulated), "kernel"), blocks, threads,
                      [x, w, v, work, B, n, x.dtype.type(0), x.dtype.type(1), tol])
    return [w, v]


def cholesky_source(simulated: bool = False) -> str:
    """Cholesky of a stack of matrices, one block per matrix (reading the lower triangle): each column's diagonal
    by one thread, the entries below it by the block's threads in parallel; a non-positive pivot sets ``flag``."""
    return "\n".join(_header(simulated)) + CHOLESKY_SOURCE.replace("BLOCK", str(reduce_block(simulated)))


def lower_solve_source(simulated: bool = False) -> str:
    """Forward substitution ``L x = b`` for a stack, one thread per (matrix, right-hand column)."""
    return "\n".join(_header(simulated)) + LOWER_SOLVE_SOURCE


def _float_only(name, *xs, complex_ok=False):
    ok = (F32, F64, C64, C128) if complex_ok else (F32, F64)
    for x in xs:
        if x.dtype not in ok:
            raise UnsupportedOnDevice(
                f"'{name}' on the device takes {', '.join(d.name for d in ok)}, got {x.dtype.name}; cast first"
            )


def _cholesky(ctx, x):
    _float_only("cholesky", x)
    n = x.shape[-1]
    B = x.size // (n * n) if n else 0
    out = ctx.empty(x.shape, x.dtype)
    if B:
        flag = ctx.rt.to_device(np.zeros(1, np.int32), ctx.index)
        ctx.rt.launch(ctx.rt.compile(cholesky_source(ctx.rt.simulated), "kernel"), min(B, 65535),
                      reduce_block(ctx.rt.simulated), [x, out, B, n, flag, x.dtype.type(0), x.dtype.type(1)])
        if ctx.rt.to_host(flag)[0]:  # one int read back: as on the CPU, a failed factorization raises
            raise np.linalg.LinAlgError(
                f"cholesky: a matrix of the {x.shape} input is not positive definite (only its lower triangle is "
                "read); check symmetry and conditioning, or add a small multiple of the identity"
            )
    return out


def _swap_last(ctx, x):
    return _transpose(ctx, x, permutation=tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _triangular_solve(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    _float_only("triangular_solve", a, b, complex_ok=True)
    nd = a.ndim  # every variant becomes a lower left solve, as on the CPU
    if conjugate_a and a.dtype.kind == "c":
        a = elementwise(ctx, "conj", a.dtype, [a], expr="{0}.conjugate()")
    if transpose_a:
        a, lower = _swap_last(ctx, a), not lower
    if not left_side:
        a, lower, b = _swap_last(ctx, a), not lower, _swap_last(ctx, b)
    if not lower:
        a, b = _rev(ctx, a, dimensions=(nd - 2, nd - 1)), _rev(ctx, b, dimensions=(nd - 2,))
    n, m = b.shape[-2], b.shape[-1]
    B = b.size // (n * m) if n * m else 0
    x = ctx.empty(b.shape, b.dtype)
    if B:
        blocks, threads = launch_config(B * m)
        ctx.rt.launch(ctx.rt.compile(lower_solve_source(ctx.rt.simulated), "kernel"), blocks, threads,
                      [a, b, x, B, n, m, bool(unit_diagonal)])
    if not lower:
        x = _rev(ctx, x, dimensions=(nd - 2,))
    return _swap_last(ctx, x) if not left_side else x


IMPLS: dict[str, Callable[..., Any]] = {
    "spmm": _spmm,
    "sddmm": _sddmm,
    "cholesky": _cholesky,
    "triangular_solve": _triangular_solve,
    "lu": _lu,
    "qr": _qr,
    "eigh": _eigh,
}


def catalog() -> list[tuple[str, str, list[str], bool]]:
    """This module's kernel kinds for the PTX check (``cuda_prims.kernel_catalog``)."""
    cases = []
    i64 = "int64"

    def arr(d):
        return f"{np.dtype(d).name}[::1]"

    cases.append(("cholesky:float32", cholesky_source(), [arr(F32), arr(F32), i64, i64, arr(np.int32), "float32",
                  "float32"], True))
    cases.append(("triangular_solve:float32", lower_solve_source(), [arr(F32)] * 3 + [i64] * 3 + ["boolean"], True))
    cases.append(("entry_rows", sparse_source("entry_rows"), [arr(np.int64), arr(np.int64), i64, i64], True))
    cases.append(("spmm:float32", sparse_source("spmm"), [arr(F32), arr(np.int64), arr(np.int32), arr(F32), arr(F32)]
                  + [i64] * 5 + ["boolean", "float32"], True))
    cases.append(("sddmm:float32", sparse_source("sddmm"), [arr(F32), arr(F32), arr(np.int64), arr(np.int32),
                  arr(F32)] + [i64] * 4 + ["float32"], True))
    cases.append(("lu:float32", factor_source("lu"), [arr(F32), arr(F32), arr(np.int32), arr(np.int32)]
                  + [i64] * 3 + ["float32"], True))
    for d, f32 in ((C64, True), (C128, False)):
        cases.append((f"lu:{d.name}", factor_source("cxlu"), [arr(d), arr(d), arr(np.int32), arr(np.int32)]
                      + [i64] * 3 + [d.name], f32))
        cases.append((f"triangular_solve:{d.name}", lower_solve_source(), [arr(d)] * 3 + [i64] * 3 + ["boolean"],
                      f32))
    cases.append(("qr:float32", factor_source("qr"), [arr(F32)] * 5 + [i64] * 4 + ["float32"] * 2, True))
    cases.append(("eigh:float32", factor_source("eigh"), [arr(F32)] * 4 + [i64] * 2 + ["float32"] * 3, True))
    return cases
