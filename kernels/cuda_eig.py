"""``eig`` on a CUDA device: eigenvalues and right eigenvectors of a stack of general square matrices, one thread
per matrix, for float32/float64/complex64/complex128 inputs (real ones computed in the matching complex precision:
float32 in complex64, so complex64 kernels stay in single precision).

Each thread runs the path LAPACK's ``zgeev`` takes:

0. Balancing (``zgebal``'s): rows and columns that isolate an eigenvalue are exchanged to the bottom and the top,
   and the rest are scaled by powers of two (exactly) until their row and column norms stop shrinking, which
   keeps badly scaled matrices accurate; the eigenvectors are scaled and exchanged back (``zgebak``'s order).
1. Householder reduction to upper Hessenberg form ``H = Z^H A Z`` (reflectors ``I - beta u u^H`` that map a
   column's tail onto ``-phase(x_0) ||x|| e_1``; a real matrix stays real).
2. The complex shifted QR iteration on ``H`` (``zlahqr``'s scheme): a subdiagonal entry below ``eps`` times its
   two diagonal neighbours (with Ahues and Tisseur's refinement) or below the smallest safe number is set to zero
   and splits the problem; the trailing active block takes an implicit single-shift step with the Wilkinson
   shift (the eigenvalue of its trailing 2 x 2 block nearer its last diagonal entry), chased by complex Givens
   rotations, with an exceptional shift every tenth step; rotations are applied to the whole matrix and
   accumulated in ``Z``, so the result is the Schur form ``T = Z^H A Z``. A position that has not split off after
   ``ITERATIONS * max(10, n)`` steps stops the thread: that matrix's outputs are NaN and a flag is set.
3. Eigenvectors of ``T`` by back substitution (``ztrevc``'s scheme: the diagonal of ``T - w_k I`` is guarded
   from below by ``max(eps |w_k|, smallest safe number)``, so repeated and defective eigenvalues give finite
   vectors, and a growing solution is rescaled before it can overflow), back-transformed by ``Z``.
4. LAPACK's normalization: unit 2-norm, then the first component of largest modulus made real and positive.

Real inputs get what ``dgeev`` returns for them: a complex pair comes out adjacent, positive imaginary part
first, as exact conjugates (the second eigenvalue and vector are the conjugates of the first, which keeps their
residual ``A v - w v`` as small as the first's), and a real eigenvalue (imaginary part within ``n^2 eps max|T|``
of zero) comes out real with a real eigenvector. An eigenvalue that finds no partner (an ill-conditioned cluster
that split asymmetrically beyond the two imaginary parts' span) is returned as computed.

Differences from the CPU (NumPy/LAPACK): the order of the eigenvalues is the order of the Schur form's
diagonal, which is LAPACK's when the deflations happen in the same order (usually for complex inputs and for
reducible ones, which balancing orders as LAPACK does) but is not guaranteed to be (LAPACK's shifts differ in
detail, and for real inputs it iterates on the real Schur form); compare eigenvalues as a multiset. Each
eigenvector is defined up to a phase: the device's largest component is real and positive, while ``dgeev``'s
real vectors keep the sign its Schur form gave them. NumPy computes float32 and complex64 inputs in double
precision and rounds the result; the device computes them in single precision, so they agree to float32
accuracy (times the eigenvalues' condition), not to the last bit. A matrix with NaN or inf entries, or one whose
iteration does not converge, raises ``LinAlgError`` as on the CPU (one flag read back after the launch, as
``cholesky`` does). Small matrices, many of them, are what this is for: a large matrix runs serially on one thread.

>>> "eig" in IMPLS
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .cuda_backend import UnsupportedOnDevice, launch_config
from .cuda_complex import C64, C128, real_of
from .cuda_math import F32, F64
from .cuda_math import header as _header

# QR steps allowed per eigenvalue position, times max(10, n): LAPACK's zlahqr budget
ITERATIONS = 30

_HELPERS = '''

@cuda.jit(device=True, inline="always")
def _cabs1(z):
    return abs(z.real) + abs(z.imag)


@cuda.jit(device=True, inline="always")
def _givens(f, g, zero, one):
    # c (real), s, r with [c, s; -conj(s), c] [f; g] = [r; 0]
    ga = math.hypot(g.real, g.imag)
    if ga == zero:
        return one, complex(zero, zero), f
    fa = math.hypot(f.real, f.imag)
    if fa == zero:
        return zero, complex(g.real / ga, -g.imag / ga), complex(ga, zero)
    d = math.hypot(fa, ga)
    ph = complex(f.real / fa, f.imag / fa)
    return fa / d, ph * complex(g.real / d, -g.imag / d), ph * complex(d, zero)


@cuda.jit(device=True, inline="always")
def _exchange(h, base, n, i, m, l0, k0):
    # columns i and m over rows 0..l0, rows i and m over columns k0..n-1
    for r in range(l0 + 1):
        t = h[base + r * n + i]
        h[base + r * n + i] = h[base + r * n + m]
        h[base + r * n + m] = t
    for c in range(k0, n):
        t = h[base + i * n + c]
        h[base + i * n + c] = h[base + m * n + c]
        h[base + m * n + c] = t


@cuda.jit(device=True, inline="always")
def _amax(h, start, stride, count, zero):
    # the modulus of the first entry of largest |re| + |im| among count entries stride apart
    best = zero
    at = start
    for i in range(count):
        e = h[start + i * stride]
        if abs(e.real) + abs(e.imag) > best:
            best = abs(e.real) + abs(e.imag)
            at = start + i * stride
    return math.hypot(h[at].real, h[at].imag)


@cuda.jit(device=True, inline="always")
def _norm(h, start, stride, count, zero):
    # the 2-norm of count entries stride apart, scaled by their largest part (no overflow)
    mx = zero
    for i in range(count):
        e = h[start + i * stride]
        mx = max(mx, max(abs(e.real), abs(e.imag)))
    if mx == zero:
        return zero
    s = zero
    for i in range(count):
        e = h[start + i * stride]
        s += (e.real / mx) * (e.real / mx) + (e.imag / mx) * (e.imag / mx)
    return mx * math.sqrt(s)


@cuda.jit(device=True, inline="always")
def _csqrt(z, zero, half):
    # the principal square root through t = sqrt((|z| + |re z|) / 2), which cancels nothing
    if z.real == zero and z.imag == zero:
        return z
    t = math.sqrt((math.hypot(z.real, z.imag) + abs(z.real)) * half)
    if z.real >= zero:
        return complex(t, z.imag / (t + t))
    return complex(abs(z.imag) / (t + t), math.copysign(t, z.imag))

'''

_KERNEL = '''
def kernel(a, w, v, h, z, xv, dsc, code, flag, B, n, maxit, eps, small, big, nan, sfmin1):
    g = cuda.grid(1)
    step = cuda.gridsize(1)
    zero = F(0)
    one = F(1)
    half = F(0.5)
    czero = complex(zero, zero)
    cone = complex(one, zero)
    while g < B:
        base = g * n * n
        xb = g * n
        cb = g * 3 * n
        pb = cb + 2 * n
        finite = True
        for i in range(n * n):
            e = LOAD(a[base + i])
            h[base + i] = e
            if not (math.isfinite(e.real) and math.isfinite(e.imag)):
                finite = False
        for i in range(n):
            dsc[xb + i] = one
            code[pb + i] = i
            for c in range(n):
                z[base + i * n + c] = cone if i == c else czero
        # 0. balancing (zgebal's): rows, then columns, that isolate an eigenvalue are permuted to the bottom and
        # the top (code[pb + i]: the exchange made at i), leaving rows and columns k0..l0 to scale by powers of
        # two (dsc) until their norms stop shrinking
        k0 = 0
        l0 = n - 1
        done = not finite
        noconv = True
        while noconv and not done:
            noconv = False
            top = l0
            for ii in range(top + 1):
                i = top - ii
                canswap = True
                for j in range(l0 + 1):
                    if i != j and (h[base + i * n + j].real != zero or h[base + i * n + j].imag != zero):
                        canswap = False
                        break
                if canswap:
                    code[pb + l0] = i
                    if i != l0:
                        _exchange(h, base, n, i, l0, l0, k0)
                    noconv = True
                    if l0 == 0:
                        done = True
                        break
                    l0 -= 1
        noconv = not done
        while noconv:
            noconv = False
            first = k0
            last = l0
            for j in range(first, last + 1):
                canswap = True
                for i in range(k0, l0 + 1):
                    if i != j and (h[base + i * n + j].real != zero or h[base + i * n + j].imag != zero):
                        canswap = False
                        break
                if canswap:
                    code[pb + k0] = j
                    if j != k0:
                        _exchange(h, base, n, j, k0, l0, k0)
                    noconv = True
                    k0 += 1
        sfmax1 = one / sfmin1
        sfmin2 = sfmin1 * F(2)
        sfmax2 = one / sfmin2
        noconv = not done
        sweeps = 0
        while noconv and sweeps < 1000:
            noconv = False
            sweeps += 1
            for i in range(k0, l0 + 1):
                cn = _norm(h, base + k0 * n + i, n, l0 - k0 + 1, zero)
                rn = _norm(h, base + i * n + k0, 1, l0 - k0 + 1, zero)
                ca = _amax(h, base + i, n, l0 + 1, zero)
                ra = _amax(h, base + i * n + k0, 1, n - k0, zero)
                if cn == zero or rn == zero:
                    continue
                gh = rn / F(2)
                fs = one
                s0 = cn + rn
                while cn < gh and max(fs, max(cn, ca)) < sfmax2 and min(rn, min(gh, ra)) > sfmin2:
                    fs *= F(2)
                    cn *= F(2)
                    ca *= F(2)
                    rn /= F(2)
                    gh /= F(2)
                    ra /= F(2)
                gh = cn / F(2)
                while gh >= rn and max(rn, ra) < sfmax2 and min(min(fs, cn), min(gh, ca)) > sfmin2:
                    fs /= F(2)
                    cn /= F(2)
                    gh /= F(2)
                    ca /= F(2)
                    rn *= F(2)
                    ra *= F(2)
                if cn + rn >= F(0.95) * s0:
                    continue
                if fs < one and dsc[xb + i] < one and fs * dsc[xb + i] <= sfmin1:
                    continue
                if fs > one and dsc[xb + i] > one and dsc[xb + i] >= sfmax1 / fs:
                    continue
                dsc[xb + i] *= fs
                noconv = True
                fsi = one / fs
                for j in range(k0, n):
                    h[base + i * n + j] = h[base + i * n + j] * fsi
                for j in range(l0 + 1):
                    h[base + j * n + i] = h[base + j * n + i] * fs
        # 1. Hessenberg form: column k's entries below the subdiagonal folded onto it by a reflector
        for k in range(n - 2):
            mx = zero
            for i in range(k + 1, n):
                mx = max(mx, _cabs1(h[base + i * n + k]))
            tail = zero
            if mx > zero:
                for i in range(k + 2, n):
                    e = h[base + i * n + k]
                    tail += (e.real / mx) * (e.real / mx) + (e.imag / mx) * (e.imag / mx)
            if not tail > zero:
                continue
            al = h[base + (k + 1) * n + k]
            aa = math.hypot(al.real, al.imag)
            nrm = mx * math.sqrt((aa / mx) * (aa / mx) + tail)
            ph = complex(al.real / aa, al.imag / aa) if aa > zero else cone
            xv[xb + k + 1] = ph
            su = one / (aa + nrm)
            for i in range(k + 2, n):
                xv[xb + i] = h[base + i * n + k] * su
            # u scaled by 1 / |u_0| = 1 / (|alpha| + ||x||): u_0 = phase, and beta = 2 / u^H u = |u_0| / ||x||
            beta = (aa + nrm) / nrm
            for c in range(k + 1, n):
                sl = czero
                for i in range(k + 1, n):
                    sl += xv[xb + i].conjugate() * h[base + i * n + c]
                sl = sl * beta
                for i in range(k + 1, n):
                    h[base + i * n + c] -= xv[xb + i] * sl
            h[base + (k + 1) * n + k] = -(ph * complex(nrm, zero))
            for i in range(k + 2, n):
                h[base + i * n + k] = czero
            for r in range(n):
                sl = czero
                t = czero
                for i in range(k + 1, n):
                    sl += h[base + r * n + i] * xv[xb + i]
                    t += z[base + r * n + i] * xv[xb + i]
                sl = sl * beta
                t = t * beta
                for i in range(k + 1, n):
                    h[base + r * n + i] -= sl * xv[xb + i].conjugate()
                    z[base + r * n + i] -= t * xv[xb + i].conjugate()
        # 2. Schur form by the shifted QR iteration on the trailing unreduced block [l, hi]
        ok = finite
        hi = n - 1
        its = 0
        while ok and hi > 0:
            l = hi
            while l > 0:
                sub = _cabs1(h[base + l * n + l - 1])
                if sub <= small:
                    break
                tst = _cabs1(h[base + (l - 1) * n + l - 1]) + _cabs1(h[base + l * n + l])
                if tst == zero:
                    if l >= 2:
                        tst += abs(h[base + (l - 1) * n + l - 2].real)
                    if l + 1 <= hi:
                        tst += abs(h[base + (l + 1) * n + l].real)
                if sub <= eps * tst:
                    # Ahues and Tisseur's test, as zlahqr: the subdiagonal times its transposed neighbour must be
                    # small against the diagonal's spread too, or balanced-away entries deflate too early
                    hu = _cabs1(h[base + (l - 1) * n + l])
                    ab = max(sub, hu)
                    ba = min(sub, hu)
                    da = _cabs1(h[base + l * n + l])
                    db = _cabs1(h[base + (l - 1) * n + l - 1] - h[base + l * n + l])
                    aa = max(da, db)
                    bb = min(da, db)
                    st = aa + ab
                    if ba * (ab / st) <= max(small, eps * (bb * (aa / st))):
                        break
                l -= 1
            if l > 0:
                h[base + l * n + l - 1] = czero
            if l == hi:
                hi -= 1
                its = 0
                continue
            if its >= maxit:
                ok = False
                break
            its += 1
            if its % 10 == 0:
                # exceptional shift: from the top of the block, then from the bottom
                ip = l if (its // 10) % 2 == 1 else hi - 1
                mu = h[base + (ip + 1) * n + ip + 1] if ip == hi - 1 else h[base + ip * n + ip]
                mu += complex(F(0.75) * abs(h[base + (ip + 1) * n + ip].real), zero)
            else:
                ha = h[base + (hi - 1) * n + hi - 1]
                hb = h[base + (hi - 1) * n + hi]
                hc = h[base + hi * n + hi - 1]
                hd = h[base + hi * n + hi]
                sc = _cabs1(ha) + _cabs1(hb) + _cabs1(hc) + _cabs1(hd)
                mu = hd
                if sc > zero:
                    # mu = hd + (hp - root): the eigenvalue of the trailing 2 x 2 block nearer hd, scaled by sc
                    hp = (ha - hd) * complex(half / sc, zero)
                    bc = (hb * complex(one / sc, zero)) * (hc * complex(one / sc, zero))
                    root = _csqrt(hp * hp + bc, zero, half)
                    if hp.real * root.real + hp.imag * root.imag < zero:
                        root = -root
                    den = hp + root
                    if den.real != zero or den.imag != zero:
                        mu = hd - complex(sc, zero) * (bc / den)
            for k in range(l, hi):
                if k == l:
                    f = h[base + l * n + l] - mu
                    gg = h[base + (l + 1) * n + l]
                else:
                    f = h[base + k * n + k - 1]
                    gg = h[base + (k + 1) * n + k - 1]
                gc, gs, gr = _givens(f, gg, zero, one)
                if k > l:
                    h[base + k * n + k - 1] = gr
                    h[base + (k + 1) * n + k - 1] = czero
                gsc = gs.conjugate()
                for j in range(k, n):
                    x = h[base + k * n + j]
                    y = h[base + (k + 1) * n + j]
                    h[base + k * n + j] = gc * x + gs * y
                    h[base + (k + 1) * n + j] = gc * y - gsc * x
                last = k + 2 if k + 2 < hi else hi
                for i in range(last + 1):
                    x = h[base + i * n + k]
                    y = h[base + i * n + k + 1]
                    h[base + i * n + k] = gc * x + gsc * y
                    h[base + i * n + k + 1] = gc * y - gs * x
                for i in range(n):
                    x = z[base + i * n + k]
                    y = z[base + i * n + k + 1]
                    z[base + i * n + k] = gc * x + gsc * y
                    z[base + i * n + k + 1] = gc * y - gs * x
        if not ok:
            flag[0] = 1 if not finite else 2
            for i in range(n):
                w[xb + i] = complex(nan, nan)
            for i in range(n * n):
                v[base + i] = complex(nan, nan)
            g += step
            continue
        # the output order: slot s takes T's eigenvalue code % n, as it is (mode 0), snapped real (1), as the first
        # of a conjugate pair (2, the member with positive imaginary part) or as its conjugate partner (3)
        tmax = zero
        for i in range(n):
            for c in range(i, n):
                tmax = max(tmax, _cabs1(h[base + i * n + c]))
        tolr = F(n * n) * eps * tmax
        for i in range(n):
            code[cb + i] = 0
        ns = 0
        for k in range(n):
            if code[cb + k] != 0:
                continue
            code[cb + k] = 1
            wk = h[base + k * n + k]
            if not REAL_INPUT:
                code[cb + n + ns] = k
                ns += 1
                continue
            if abs(wk.imag) <= tolr:
                code[cb + n + ns] = k + n
                ns += 1
                continue
            # its partner: the nearest conjugate on the other side of the real axis, not farther from conj(wk)
            # than the two imaginary parts span (a cluster of ill-conditioned eigenvalues splits asymmetrically)
            best = -1
            bd = zero
            for j in range(k + 1, n):
                wj = h[base + j * n + j]
                if code[cb + j] == 0 and wj.imag * wk.imag < zero:
                    dist = _cabs1(wj - wk.conjugate())
                    if best < 0 or dist < bd:
                        best = j
                        bd = dist
            if best < 0 or not bd <= abs(wk.imag) + abs(h[base + best * n + best].imag) + tolr:
                code[cb + n + ns] = k
                ns += 1
                continue
            code[cb + best] = 1
            up, down = (k, best) if wk.imag > zero else (best, k)
            code[cb + n + ns] = up + 2 * n
            code[cb + n + ns + 1] = down + 3 * n
            ns += 2
        # 3. and 4. each slot's eigenvector: back substitution in T, back-transformed by Z, normalized
        for q in range(n):
            k = code[cb + n + q] % n
            mode = code[cb + n + q] // n
            lam = h[base + k * n + k]
            if mode == 3:
                # A real: A conj(v) = conj(A v), so the conjugate pair is as accurate as its first member
                w[xb + q] = w[xb + q - 1].conjugate()
                for r in range(n):
                    v[base + r * n + q] = v[base + r * n + q - 1].conjugate()
                continue
            w[xb + q] = complex(lam.real, zero) if mode == 1 else lam
            smin = max(eps * _cabs1(lam), small)
            xv[xb + k] = cone
            for ii in range(k):
                i = k - 1 - ii
                acc = h[base + i * n + k]
                for j in range(i + 1, k):
                    acc += h[base + i * n + j] * xv[xb + j]
                d = h[base + i * n + i] - lam
                dn = _cabs1(d)
                if dn < smin:
                    d = complex(smin, zero)
                    dn = smin
                an = _cabs1(acc)
                if an > dn * big:
                    sc = one / an
                    for j in range(i + 1, k + 1):
                        xv[xb + j] = xv[xb + j] * sc
                    acc = acc * sc
                xv[xb + i] = -(acc / d)
            for r in range(n):
                e = czero
                for j in range(k + 1):
                    e += z[base + r * n + j] * xv[xb + j]
                v[base + r * n + q] = e * dsc[xb + r]
            # undo the balancing's exchanges (zgebak's order)
            for ii in range(n):
                if ii >= k0 and ii <= l0:
                    continue
                i = k0 - 1 - ii if ii < k0 else ii
                pm = code[pb + i]
                if pm != i:
                    e = v[base + i * n + q]
                    v[base + i * n + q] = v[base + pm * n + q]
                    v[base + pm * n + q] = e
            mx = zero
            for r in range(n):
                mx = max(mx, _cabs1(v[base + r * n + q]))
            nrm = zero
            for r in range(n):
                e = v[base + r * n + q]
                nrm += (e.real / mx) * (e.real / mx) + (e.imag / mx) * (e.imag / mx)
            inv = one / (mx * math.sqrt(nrm))
            top = 0
            tm = F(-1)
            for r in range(n):
                e = v[base + r * n + q] * inv
                v[base + r * n + q] = e
                m = e.real * e.real + e.imag * e.imag
                if m > tm:
                    tm = m
                    top = r
            e = v[base + top * n + q]
            ea = math.hypot(e.real, e.imag)
            ph = complex(e.real / ea, -e.imag / ea)
            for r in range(n):
                v[base + r * n + q] = v[base + r * n + q] * ph
            v[base + top * n + q] = complex(ea, zero)
            if mode == 1:
                nrm = zero
                for r in range(n):
                    er = v[base + r * n + q].real
                    nrm += er * er
                inv = one / math.sqrt(nrm)
                for r in range(n):
                    v[base + r * n + q] = complex(v[base + r * n + q].real * inv, zero)
        g += step
'''


def eig_source(dtype: np.dtype, simulated: bool = False) -> str:
    """The kernel for input dtype ``dtype`` (float32/64, complex64/128). Arguments: ``a`` (B matrices n x n),
    ``w`` (B x n) and ``v`` (B x n x n) in the complex precision, scratch ``h``, ``z`` (B x n x n), ``xv`` (B x n)
    complex, ``dsc`` (B x n) real and ``code`` (B x 3n) int32, ``flag`` (int32[1]: 1 non-finite input, 2 no
    convergence), B, n, the iteration cap, and eps, the smallest safe number, the rescaling threshold, NaN and
    the balancing's smallest scale (tiny / eps) in the real precision."""
    d = np.dtype(dtype)
    f = f"np.{real_of(d).name}"
    real_input = d.kind == "f"
    body = (_KERNEL.replace("F(", f + "(").replace("REAL_INPUT", str(real_input))
            .replace("LOAD(a[base + i])", "complex(a[base + i], zero)" if real_input else "a[base + i]"))
    return "\n".join(_header(simulated)) + _HELPERS + body


def _eig(ctx, x):
    if x.dtype not in (F32, F64, C64, C128):
        raise UnsupportedOnDevice(
            f"'eig' on the device takes float32, float64, complex64 or complex128, got {x.dtype.name}; cast first "
            "(x.astype(fl.float32))"
        )
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"eig: expected square matrices (shape [..., n, n]), got shape {x.shape}")
    n = x.shape[-1]
    B = math.prod(x.shape[:-2])
    work = real_of(x.dtype)
    cdt = C64 if work == F32 else C128
    w, v = ctx.empty(x.shape[:-1], cdt), ctx.empty(x.shape, cdt)
    if B and n:
        h, z = ctx.empty((B * n * n,), cdt), ctx.empty((B * n * n,), cdt)
        xv, dsc, code = ctx.empty((B * n,), cdt), ctx.empty((B * n,), work), ctx.empty((B * 3 * n,), np.int32)
        flag = ctx.rt.to_device(np.zeros(1, np.int32), ctx.index)
        fi = np.finfo(work)
        small = work.type(fi.tiny * (n / fi.eps))
        blocks, threads = launch_config(B)
        ctx.rt.launch(ctx.rt.compile(eig_source(x.dtype, ctx.rt.simulated), "kernel"), blocks, threads,
                      [x, w, v, h, z, xv, dsc, code, flag, B, n, ITERATIONS * max(10, n), work.type(fi.eps), small,
                       work.type(math.sqrt(fi.max)), work.type(np.nan), work.type(fi.tiny / fi.eps)])
        bad = int(ctx.rt.to_host(flag)[0])  # one int read back: as on the CPU, a failure raises
        if bad == 1:
            raise np.linalg.LinAlgError(
                f"eig: a matrix of the {x.shape} input has NaN or inf entries (NumPy refuses them too); check "
                "the input with isfinite"
            )
        if bad:
            raise np.linalg.LinAlgError(
                f"eig: the QR iteration did not converge for a matrix of the {x.shape} input within "
                f"{ITERATIONS * max(10, n)} steps per eigenvalue (the CPU's LAPACK raises 'Eigenvalues did not "
                "converge' in the same case); check its scaling, or run it on the CPU with x.to_device('cpu')"
            )
    return [w, v]


IMPLS: dict[str, Callable[..., Any]] = {"eig": _eig}


def catalog() -> list[tuple[str, str, list[str], bool]]:
    """The two kernel kinds (real and complex input) at float32, where the purity check applies; the float64 and
    complex128 kernels are the same source in the other precision (each kernel takes about 7 s to compile)."""
    cases = []
    i64 = "int64"
    for d in (F32, C64):
        r, c = real_of(d), C64 if real_of(d) == F32 else C128
        arrays = [f"{d.name}[::1]"] + [f"{c.name}[::1]"] * 5 + [f"{r.name}[::1]"] + ["int32[::1]"] * 2
        cases.append((f"eig:{d.name}", eig_source(d), arrays + [i64] * 3 + [r.name] * 5, r == F32))
    return cases
