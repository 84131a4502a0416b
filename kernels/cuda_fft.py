"""``fft`` on a CUDA device: every variant of the primitive (``fft``/``ifft`` complex to complex, ``rfft`` real to
half spectrum, ``irfft`` half spectrum to real) over its trailing ``len(fft_lengths)`` axes, one axis at a time.

Each axis is a generated kernel computing the discrete Fourier transform of every row directly: one thread per
output element, summing its row's ``n`` terms with twiddles ``exp(-+2 pi i (k t mod n) / n)`` computed in the
working precision (the exponent reduced modulo ``n`` in integers first, so large ``k t`` lose nothing; complex64
in float32 with funclib's own float32 sine and cosine). That is O(n^2) work per row where an FFT is
O(n log n): the kernel is the portable path (it is what runs in numba's simulator and on any runtime), correct
for every length, and meant for the short rows of signal-processing layers; long transforms belong to cuFFT,
which the runtime does not call yet. Scaling is NumPy's ``norm="backward"`` (1/n on the inverse transforms), as
the primitive's; ``funclib.fft`` applies the other norms.

>>> "fft" in IMPLS
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
from .cuda_ops import _transpose_view

_BODY = {
    # complex rows of n to complex rows of n
    "c2c": ["            z = x[base + t]",
            "            re += z.real * c - z.imag * s",
            "            im += z.real * s + z.imag * c"],
    # real rows of n to the n // 2 + 1 bins of their half spectrum
    "r2c": ["            v = x[base + t]",
            "            re += v * c",
            "            im += v * s"],
}


def dft_source(kind: str, dtype: np.dtype, simulated: bool = False) -> str:
    """The kernel of one axis of a transform: ``kind`` is ``"c2c"``, ``"r2c"`` or ``"c2r"``, ``dtype`` the working
    (real) precision. Arguments: ``x`` (rows of ``n_in``), ``out`` (rows of ``n_out``), rows, n_in, n_out, the
    transform length ``n``, the sign of the exponent and the scale (both in the working precision)."""
    f = f"np.{np.dtype(dtype).name}"
    sin, cos = ("fsin", "fcos") if dtype == F32 else ("math.sin", "math.cos")
    zero = f"_ZERO_{np.dtype(dtype).name}"
    lines = [*_header(simulated), f"_TWO_PI = {f}({2 * math.pi!r})", "",
             "def kernel(x, out, rows, n_in, n_out, n, sign, scale):", "    i = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while i < rows * n_out:", "        r = i // n_out",
             "        k = i - r * n_out", "        base = r * n_in", f"        re = {zero}"]
    twiddle = [f"            a = _TWO_PI * {f}(p) / {f}(n)", f"            c = {cos}(a)",
               f"            s = sign * {sin}(a)"]
    if kind == "c2r":
        # out[k] = Re(X[0] + 2 sum_{0<t<n/2} X[t] w^{kt} + X[n/2] (-1)^k): the conjugate-symmetric half counted twice
        lines += ["        for t in range(n_in):", "            p = (k * t) % n", *twiddle,
                  "            z = x[base + t]", "            v = z.real * c - z.imag * s",
                  "            if t == 0 or 2 * t == n:", "                re += v", "            else:",
                  "                re += v + v", "        out[i] = re * scale"]
    else:
        lines += [f"        im = {zero}", "        for t in range(n_in):", "            p = (k * t) % n", *twiddle,
                  *_BODY[kind], "        out[i] = complex(re * scale, im * scale)"]
    lines += ["        i += step", ""]
    return "\n".join(lines)


def _axis(ctx, x, axis: int, kind: str, n: int, inverse: bool, out_dtype: np.dtype):
    """One transform of kind ``kind`` and length ``n`` along ``axis`` of device buffer ``x``."""
    perm = [d for d in range(x.ndim) if d != axis] + [axis]
    rows_in = ctx.contiguous(_transpose_view(x, perm))
    n_in = x.shape[axis]
    n_out = n // 2 + 1 if kind == "r2c" else n
    out = ctx.empty(rows_in.shape[:-1] + (n_out,), out_dtype)
    rows = math.prod(rows_in.shape[:-1])
    if rows * n_out:
        work = real_of(out_dtype)
        blocks, threads = launch_config(rows * n_out)
        kern = ctx.rt.compile(dft_source(kind, work, ctx.rt.simulated), "kernel")
        scale = work.type(1.0 / n if inverse else 1.0)
        ctx.rt.launch(kern, blocks, threads, [rows_in, out, rows, n_in, n_out, n,
                                              work.type(1.0 if inverse else -1.0), scale])
    inverse_perm = [perm.index(d) for d in range(x.ndim)]
    return ctx.contiguous(_transpose_view(out, inverse_perm))


def _fft(ctx, x, *, fft_type, fft_lengths):
    if x.dtype not in (F32, F64, C64, C128):
        raise UnsupportedOnDevice(f"'fft' of {x.dtype.name} has no CUDA kernel (float32/64, complex64/128)")
    lengths = [int(n) for n in fft_lengths]
    axes = list(range(x.ndim - len(lengths), x.ndim))
    complex_out = C64 if real_of(x.dtype) == F32 else C128
    if fft_type in ("fft", "ifft"):
        for ax, n in zip(axes, lengths):
            x = _axis(ctx, x, ax, "c2c", n, fft_type == "ifft", complex_out)
        return x
    if fft_type == "rfft":
        x = _axis(ctx, x, axes[-1], "r2c", lengths[-1], False, complex_out)
        for ax, n in zip(axes[:-1], lengths[:-1]):
            x = _axis(ctx, x, ax, "c2c", n, False, complex_out)
        return x
    for ax, n in zip(axes[:-1], lengths[:-1]):
        x = _axis(ctx, x, ax, "c2c", n, True, complex_out)
    return _axis(ctx, x, axes[-1], "c2r", lengths[-1], True, real_of(x.dtype))


IMPLS: dict[str, Callable[..., Any]] = {"fft": _fft}


def catalog() -> list[tuple[str, str, list[str], bool]]:
    """The three kernel kinds at float32 (complex64) and float64 (complex128) precision."""
    cases = []
    i64 = "int64"
    for work, cplx in ((F32, C64), (F64, C128)):
        r, c = f"{work.name}[::1]", f"{cplx.name}[::1]"
        for kind, ins, out in (("c2c", c, c), ("r2c", r, c), ("c2r", c, r)):
            cases.append((f"fft:{kind}:{work.name}", dft_source(kind, work), [ins, out, i64, i64, i64, i64,
                          work.name, work.name], work == F32))
    return cases
