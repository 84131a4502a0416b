"""CUDA factorizations of complex matrices, and the SVD of real and complex ones: ``cholesky``, ``qr`` and
``eigh`` in complex (the real kernels are ``cuda_linalg``'s; ``lu`` and ``triangular_solve`` take complex there),
and ``svd`` by one-sided Jacobi for both, correct for rank-deficient and zero matrices. One thread (``cholesky``:
one block) per matrix of a stack, as in ``cuda_linalg``; ``cuda_prims`` joins this table after it, so these
entries take the complex operands and dispatch the real ones.

The conventions are LAPACK's, as the CPU results have them: ``cholesky`` reads the lower triangle and the real part
of the diagonal (``L L^H``); ``qr`` is zgeqr2/zung2r (zlarfg's reflector: ``beta = -sign(re alpha) |(alpha, x)|``,
a real diagonal of R, none where alpha is real and x zero); ``eigh`` returns real eigenvalues ascending with
unit eigenvectors (each defined up to a phase).

>>> sorted(IMPLS)
['cholesky', 'eigh', 'lu', 'qr', 'svd', 'triangular_solve']
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import cuda_linalg
from .cuda_backend import COMPLEX_DTYPES, UnsupportedOnDevice, launch_config
from .cuda_math import F32, F64
from .cuda_math import header as _header
from .cuda_ops import _concatenate, _slice_view, _transpose, elementwise, reduce_block

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)

CHOLESKY_SOURCE = '''
def kernel(a, out, B, n, flag, zero, rzero, rone):
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
                d = out[base + j * n + j].real
                for k in range(j):
                    v = out[base + j * n + k]
                    d -= v.real * v.real + v.imag * v.imag
                if not d > rzero:
                    flag[0] = 1
                    d = rone
                out[base + j * n + j] = complex(math.sqrt(d), rzero)
            cuda.syncthreads()
            i = j + 1 + t
            while i < n:
                s = out[base + i * n + j]
                for k in range(j):
                    s -= out[base + i * n + k] * out[base + j * n + k].conjugate()
                out[base + i * n + j] = s / out[base + j * n + j].real
                i += BLOCK
            cuda.syncthreads()
        g += cuda.gridDim.x
'''

# zgeqr2 applies H^H = I - conj(tau) v v^H to the trailing columns; zung2r accumulates Q = H_1 ... H_k backwards
QR_SOURCE = '''
def kernel(a, w, tau, q, r, B, m, n, kq, zero, one, rzero):
    g = cuda.grid(1)
    step = cuda.gridsize(1)
    k = m if m < n else n
    while g < B:
        base = g * m * n
        for i in range(m * n):
            w[base + i] = a[base + i]
        for j in range(k):
            alpha = w[base + j * n + j]
            xn = rzero
            for i in range(j + 1, m):
                x = w[base + i * n + j]
                xn += x.real * x.real + x.imag * x.imag
            t = zero
            if xn != rzero or alpha.imag != rzero:
                beta = math.sqrt(alpha.real * alpha.real + alpha.imag * alpha.imag + xn)
                if alpha.real >= rzero:
                    beta = -beta
                t = complex((beta - alpha.real) / beta, -alpha.imag / beta)
                s = one / (alpha - beta)
                for i in range(j + 1, m):
                    w[base + i * n + j] = w[base + i * n + j] * s
                w[base + j * n + j] = complex(beta, rzero)
                tc = t.conjugate()
                for c in range(j + 1, n):
                    d = w[base + j * n + c]
                    for i in range(j + 1, m):
                        d += w[base + i * n + j].conjugate() * w[base + i * n + c]
                    d = d * tc
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
                        d += w[base + i * n + j].conjugate() * q[qb + i * kq + c]
                    d = d * t
                    q[qb + j * kq + c] -= d
                    for i in range(j + 1, m):
                        q[qb + i * kq + c] -= d * w[base + i * n + j]
        g += step
'''

# cyclic Jacobi on the Hermitian matrix the lower triangle defines: each pivot's phase is first moved into
# column q (S <- D^H S D, V <- V D with D = diag(.., conj(phase), ..)), leaving a real symmetric 2x2 block that the
# real rotation of ``cuda_linalg``'s kernel zeroes
EIGH_SOURCE = '''
def kernel(a, w, v, s, B, n, zero, one, rzero, rone, tol):
    g = cuda.grid(1)
    step = cuda.gridsize(1)
    while g < B:
        base = g * n * n
        for i in range(n):
            for c in range(n):
                if c < i:
                    s[base + i * n + c] = a[base + i * n + c]
                elif c == i:
                    s[base + i * n + c] = complex(a[base + i * n + i].real, rzero)
                else:
                    s[base + i * n + c] = a[base + c * n + i].conjugate()
                v[base + i * n + c] = one if i == c else zero
        for sweep in range(60):
            off = rzero
            diag = rzero
            for i in range(n):
                diag += s[base + i * n + i].real * s[base + i * n + i].real
                for c in range(i + 1, n):
                    x = s[base + i * n + c]
                    off += x.real * x.real + x.imag * x.imag
            if not off > tol * tol * diag:
                break
            for p in range(n - 1):
                for qq in range(p + 1, n):
                    apq = s[base + p * n + qq]
                    gg = math.hypot(apq.real, apq.imag)
                    if gg != rzero:
                        ph = apq / gg
                        phc = ph.conjugate()
                        for i in range(n):
                            s[base + i * n + qq] = s[base + i * n + qq] * phc
                        for i in range(n):
                            s[base + qq * n + i] = s[base + qq * n + i] * ph
                        for i in range(n):
                            v[base + i * n + qq] = v[base + i * n + qq] * phc
                        app = s[base + p * n + p].real
                        aqq = s[base + qq * n + qq].real
                        theta = (aqq - app) / (gg + gg)
ROTATION
        for i in range(n):
            w[g * n + i] = s[base + i * n + i].real
SORT
'''.replace("ROTATION\n", cuda_linalg.JACOBI_ROTATION[1:]).replace(
    "SORT\n", cuda_linalg.SORT_ASCENDING[1:]
)

# One-sided (Hestenes) Jacobi on the columns of an m x n matrix, m >= n: each rotation first turns column q by the
# phase of the pair's inner product (a sign for real matrices) so the 2x2 problem is real; u (a copy of a) and v
# take the same column operations, so a v = u throughout. The column norms are the singular values, sorted
# descending. Then u's columns are normalized and orthogonalized against the larger ones (Gram-Schmidt twice);
# a column that has (almost) nothing left, a zero or negligible singular value's, is replaced by the unit vector
# least covered by the columns before it, orthogonalized the same way: U stays orthonormal for rank-deficient and
# zero matrices. CONJ and ABS2 are spelled per field (identity and x*x for real matrices)
SVD_SOURCE = '''
def kernel(a, u, s, v, B, m, n, zero, one, rzero, rone, tol, rhalf):
    g = cuda.grid(1)
    step = cuda.gridsize(1)
    while g < B:
        ub = g * m * n
        vb = g * n * n
        for i in range(m * n):
            u[ub + i] = a[ub + i]
        for i in range(n):
            for c in range(n):
                v[vb + i * n + c] = one if i == c else zero
        for sweep in range(60):
            rotated = False
            for p in range(n - 1):
                for qq in range(p + 1, n):
                    al = rzero
                    be = rzero
                    ga = zero
                    for i in range(m):
                        x = u[ub + i * n + p]
                        y = u[ub + i * n + qq]
                        al += ABS2(x)
                        be += ABS2(y)
                        ga += CONJ(x) * y
                    gg = ABS(ga)
                    if gg > tol * math.sqrt(al * be):
                        rotated = True
                        ph = CONJ(ga / gg)
                        zeta = (be - al) / (gg + gg)
                        t = rone / (abs(zeta) + math.sqrt(rone + zeta * zeta))
                        if zeta < rzero:
                            t = -t
                        c = rone / math.sqrt(rone + t * t)
                        sn = c * t
                        for i in range(m):
                            x = u[ub + i * n + p]
                            y = u[ub + i * n + qq] * ph
                            u[ub + i * n + p] = c * x - sn * y
                            u[ub + i * n + qq] = sn * x + c * y
                        for i in range(n):
                            x = v[vb + i * n + p]
                            y = v[vb + i * n + qq] * ph
                            v[vb + i * n + p] = c * x - sn * y
                            v[vb + i * n + qq] = sn * x + c * y
            if not rotated:
                break
        for j in range(n):
            nrm = rzero
            for i in range(m):
                nrm += ABS2(u[ub + i * n + j])
            s[g * n + j] = math.sqrt(nrm)
        for i in range(n):
            best = i
            for c in range(i + 1, n):
                if s[g * n + c] > s[g * n + best]:
                    best = c
            if best != i:
                tmp = s[g * n + i]
                s[g * n + i] = s[g * n + best]
                s[g * n + best] = tmp
                for r in range(m):
                    tu = u[ub + r * n + i]
                    u[ub + r * n + i] = u[ub + r * n + best]
                    u[ub + r * n + best] = tu
                for r in range(n):
                    tu = v[vb + r * n + i]
                    v[vb + r * n + i] = v[vb + r * n + best]
                    v[vb + r * n + best] = tu
        for j in range(n):
            sj = s[g * n + j]
            for i in range(m):
                u[ub + i * n + j] = u[ub + i * n + j] / sj if sj > rzero else zero
            for attempt in range(2):
                for rep in range(2):
                    for k in range(j):
                        d = zero
                        for i in range(m):
                            d += CONJ(u[ub + i * n + k]) * u[ub + i * n + j]
                        for i in range(m):
                            u[ub + i * n + j] -= d * u[ub + i * n + k]
                nrm = rzero
                for i in range(m):
                    nrm += ABS2(u[ub + i * n + j])
                nrm = math.sqrt(nrm)
                if nrm > rhalf or attempt == 1:
                    break
                best = 0
                low = -rone
                for i in range(m):
                    cover = rzero
                    for k in range(j):
                        cover += ABS2(u[ub + i * n + k])
                    if low < rzero or cover < low:
                        low = cover
                        best = i
                for i in range(m):
                    u[ub + i * n + j] = one if i == best else zero
            for i in range(m):
                u[ub + i * n + j] = u[ub + i * n + j] / nrm
        g += step
'''


def _real(d: np.dtype) -> np.dtype:
    return F32 if d in (F32, C64) else F64


def source(which: str, complex_: bool = True, simulated: bool = False) -> str:
    """The kernel of ``cholesky``, ``qr``, ``eigh`` (complex) or ``svd`` (``complex_`` or real)."""
    if which == "svd":
        conj, abs2, mag = ("_conj(", "_abs2(", "_cabs(") if complex_ else ("(", "_sq(", "abs(")
        body = SVD_SOURCE.replace("ABS2(", abs2).replace("CONJ(", conj).replace("ABS(", mag)
        return "\n".join(_header(simulated)) + _SVD_HELPERS + body
    body = {"cholesky": CHOLESKY_SOURCE, "qr": QR_SOURCE, "eigh": EIGH_SOURCE}[which]
    if which == "cholesky":
        body = body.replace("BLOCK", str(reduce_block(simulated)))
    return "\n".join(_header(simulated)) + body


_SVD_HELPERS = '''
@cuda.jit(device=True, inline="always")
def _abs2(x):
    return x.real * x.real + x.imag * x.imag


@cuda.jit(device=True, inline="always")
def _conj(x):
    return x.conjugate()


@cuda.jit(device=True, inline="always")
def _cabs(x):
    return math.hypot(x.real, x.imag)


@cuda.jit(device=True, inline="always")
def _sq(x):
    return x * x
'''


def _consts(d: np.dtype) -> list:
    r = _real(d).type
    return [d.type(0), d.type(1), r(0)]


def _conj(ctx, x):
    return elementwise(ctx, "conj", x.dtype, [x], expr="{0}.conjugate()") if x.dtype in COMPLEX_DTYPES else x


def _ct(ctx, x):
    """The conjugate transpose of a stack of matrices."""
    return _conj(ctx, _transpose(ctx, x, permutation=tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)))


def _cholesky(ctx, x):
    if x.dtype not in COMPLEX_DTYPES:
        return cuda_linalg._cholesky(ctx, x)
    n = x.shape[-1]
    B = x.size // (n * n) if n else 0
    out = ctx.empty(x.shape, x.dtype)
    if B:
        r = _real(x.dtype).type
        flag = ctx.rt.to_device(np.zeros(1, np.int32), ctx.index)
        ctx.rt.launch(ctx.rt.compile(source("cholesky", simulated=ctx.rt.simulated), "kernel"), min(B, 65535),
                      reduce_block(ctx.rt.simulated), [x, out, B, n, flag, x.dtype.type(0), r(0), r(1)])
        if ctx.rt.to_host(flag)[0]:  # as the real kernel: one int read back, a failed factorization raises
            raise np.linalg.LinAlgError(
                f"cholesky: a matrix of the {x.shape} input is not positive definite (only its lower triangle and "
                "the real part of its diagonal are read); check that it is Hermitian and well conditioned, or add a "
                "small multiple of the identity"
            )
    return out


def _qr(ctx, x, *, full_matrices):
    if x.dtype not in COMPLEX_DTYPES:
        return cuda_linalg._qr(ctx, x, full_matrices=full_matrices)
    *batch, m, n = x.shape
    B, k = math.prod(batch), min(m, n)
    kq = m if full_matrices else k
    q, r = ctx.empty(tuple(batch) + (m, kq), x.dtype), ctx.empty(tuple(batch) + (kq, n), x.dtype)
    if B and q.size + r.size:
        work, tau = ctx.empty(x.shape, x.dtype), ctx.empty((max(B * k, 1),), x.dtype)
        blocks, threads = launch_config(B)
        ctx.rt.launch(ctx.rt.compile(source("qr", simulated=ctx.rt.simulated), "kernel"), blocks, threads,
                      [x, work, tau, q, r, B, m, n, kq, *_consts(x.dtype)])
    return [q, r]


def _eigh(ctx, x):
    if x.dtype not in COMPLEX_DTYPES:
        return cuda_linalg._eigh(ctx, x)
    n = x.shape[-1]
    B = x.size // (n * n) if n else 0
    rd = _real(x.dtype)
    w, v = ctx.empty(x.shape[:-1], rd), ctx.empty(x.shape, x.dtype)
    if B:
        work = ctx.empty(x.shape, x.dtype)
        blocks, threads = launch_config(B)
        ctx.rt.launch(ctx.rt.compile(source("eigh", simulated=ctx.rt.simulated), "kernel"), blocks, threads,
                      [x, w, v, work, B, n, *_consts(x.dtype), rd.type(1), rd.type(np.finfo(rd).eps)])
    return [w, v]


def _svd(ctx, x, *, full_matrices, compute_uv):
    if x.dtype not in (F32, F64, C64, C128):
        raise UnsupportedOnDevice(f"'svd' on the device takes float32, float64, complex64 or complex128, got "
                                  f"{x.dtype.name}; cast first")
    *batch, m, n = x.shape
    wide = m < n  # a wide matrix is its conjugate transpose's svd with the factors swapped
    a = _ct(ctx, x) if wide else x
    rows, cols = (n, m) if wide else (m, n)
    B = math.prod(batch)
    rd = _real(x.dtype)
    u, v = ctx.empty(tuple(batch) + (rows, cols), x.dtype), ctx.empty(tuple(batch) + (cols, cols), x.dtype)
    s = ctx.empty(tuple(batch) + (cols,), rd)
    if B and rows * cols:
        blocks, threads = launch_config(B)
        src = source("svd", x.dtype in COMPLEX_DTYPES, ctx.rt.simulated)
        ctx.rt.launch(ctx.rt.compile(src, "kernel"), blocks, threads,
                      [a, u, s, v, B, rows, cols, *_consts(x.dtype), rd.type(1), rd.type(np.finfo(rd).eps),
                       rd.type(0.5)])
    if not compute_uv:
        return [s]
    if full_matrices and rows != cols:
        # the complement of u's orthonormal columns: the trailing columns of the complete QR of u
        q, _ = _qr(ctx, u, full_matrices=True)
        tail = ctx.copy(_slice_view(q, [0] * (len(batch) + 1) + [cols], list(q.shape), [1] * q.ndim))
        u = _concatenate(ctx, u, tail, dimension=u.ndim - 1)
    if wide:  # x^H = u s v^H, so x = v s u^H
        return [v, s, _ct(ctx, u)]
    return [u, s, _ct(ctx, v)]


IMPLS: dict[str, Callable[..., Any]] = {
    "cholesky": _cholesky,
    "triangular_solve": cuda_linalg._triangular_solve,
    "lu": cuda_linalg._lu,
    "qr": _qr,
    "eigh": _eigh,
    "svd": _svd,
}


def catalog() -> list[tuple[str, str, list[str], bool]]:
    """This module's kernel kinds for the PTX check (``cuda_prims.kernel_catalog``), complex64 and complex128, and
    the real SVD."""
    cases = []
    i64 = "int64"

    def arr(d):
        return f"{np.dtype(d).name}[::1]"

    for d in (C64, C128):
        r, f32 = _real(d), d == C64
        cases.append((f"cholesky:{d.name}", source("cholesky"), [arr(d), arr(d), i64, i64, arr(np.int32), d.name,
                      r.name, r.name], f32))
        cases.append((f"qr:{d.name}", source("qr"), [arr(d)] * 5 + [i64] * 4 + [d.name] * 2 + [r.name], f32))
        cases.append((f"eigh:{d.name}", source("eigh"), [arr(d), arr(r), arr(d), arr(d), i64, i64, d.name, d.name,
                      r.name, r.name, r.name], f32))
    for d in (F32, C64, C128):
        r = _real(d)
        cases.append((f"svd:{d.name}", source("svd", d in COMPLEX_DTYPES), [arr(d), arr(d), arr(r), arr(d), i64, i64,
                      i64, d.name, d.name, r.name, r.name, r.name, r.name], d != C128))
    return cases
