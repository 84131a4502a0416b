"""Exhaustive accuracy check of ``funclib.kernels.vmath``: every float32 input, against libm in float64.

Not part of the test suite (it takes minutes per function); ``tests/test_vmath.py`` holds samples to the maxima
this measures. Each function runs as a vectorized loop over all 2**32 bit patterns (the code fused kernels run),
and the error is in float32 ulps of the float64 reference, as ``tests.test_vmath.ulp_error`` measures it: NaN must
meet NaN, infinities count as 2**128. ``pow`` has two arguments and is checked on random pairs instead.

    python -m tests.exhaustive_vmath                  # all functions, with FMA where the CPU has it
    python -m tests.exhaustive_vmath tanh exp --no-fma --jobs 2

``--no-fma`` recompiles the functions with the plain ``a*b + c`` that CPUs without FMA get. A function takes a few
minutes of one core (exp: 85 s of CPU time, most of it the float64 libm reference).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numba
import numpy as np
from funclib.kernels import vmath

CHUNK = 1 << 24
_BIG = 2.0**128


@numba.njit(error_model="numpy", nogil=True)
def _ulp(got, ref):
    """``tests.test_vmath.ulp_error`` for one value."""
    g64 = np.float64(got)
    if math.isnan(g64) or math.isnan(ref):
        return 0.0 if (math.isnan(g64) and math.isnan(ref)) else math.inf
    g = min(max(g64, -_BIG), _BIG)
    r = min(max(ref, -_BIG), _BIG)
    e = math.frexp(r)[1]
    return abs(g - r) / math.ldexp(1.0, min(max(e - 24, -149), 104))


@numba.njit(error_model="numpy", nogil=True)
def _ref_logistic(x):
    e = math.exp(-abs(x))
    return (1.0 if x >= 0 else e) / (1.0 + e)


@numba.njit(error_model="numpy", nogil=True)
def _reference(which, x):
    if which == 0:
        return math.exp(x)
    if which == 1:
        return math.expm1(x)
    if which == 2:
        return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
    if which == 3:
        return math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)
    if which == 4:
        return math.tanh(x)
    if which == 5:
        return _ref_logistic(x)
    if which == 6:
        return math.erf(x)
    if which == 7:
        return math.sin(x) if abs(x) < math.inf else math.nan
    return math.cos(x) if abs(x) < math.inf else math.nan


_WHICH = {"exp": 0, "expm1": 1, "log": 2, "log1p": 3, "tanh": 4, "logistic": 5, "erf": 6, "sin": 7, "cos": 8}


@functools.cache
def _function(name: str, no_fma: bool):
    """The vmath function, or a copy compiled with the plain multiply-add of CPUs without FMA."""
    f = vmath.FUNCS[name]
    if not no_fma:
        return f
    vmath._HAS_FMA = False  # read by the _fma intrinsic and fexp's branch when the copy compiles
    return numba.njit(error_model="numpy", fastmath=False)(f.py_func)


@functools.cache
def _block_kernel(name: str, no_fma: bool):
    f = _function(name, no_fma)

    @numba.njit(error_model="numpy", nogil=True)
    def fill(start, out):
        for i in range(out.shape[0]):
            out[i] = f(vmath.view_f32(np.int32(np.uint32(start + i))))

    @numba.njit(error_model="numpy", nogil=True)
    def block(which, start, out, hist):
        """Max error over bit patterns [start, start + out.size), its position, and a histogram by 1/4 ulp."""
        fill(start, out)
        worst, at = -1.0, 0
        for i in range(out.shape[0]):
            x = np.float64(vmath.view_f32(np.int32(np.uint32(start + i))))
            err = _ulp(out[i], _reference(which, x))
            if err > worst:
                worst, at = err, i
            hist[hist.shape[0] - 1 if err >= 2.75 else int(err * 4.0)] += 1  # err may be inf
        return worst, start + at

    return block


def scan(name: str, start: int, stop: int, no_fma: bool = False) -> tuple[float, int, np.ndarray]:
    """Max ulp error of ``name`` over the bit patterns ``[start, stop)``, the pattern where it occurs, and a
    histogram of the errors in quarter ulps (the last bin holds everything from 2.75 up)."""
    block = _block_kernel(name, no_fma)
    hist = np.zeros(12, np.int64)
    worst, at = -1.0, start
    out = np.empty(min(CHUNK, stop - start), np.float32)
    for lo in range(start, stop, CHUNK):
        w, a = block(_WHICH[name], lo, out[: min(CHUNK, stop - lo)], hist)
        if w > worst:
            worst, at = w, a
    return worst, at, hist


def _scan_part(args: tuple[str, int, int, bool]) -> tuple[float, int, np.ndarray]:
    return scan(*args)


def check(name: str, no_fma: bool = False, jobs: int = 1) -> dict:
    """Max ulp error of ``vmath``'s ``name`` over all float32 inputs, where it occurs, and its histogram."""
    bounds = np.linspace(0, (1 << 32) // CHUNK, jobs + 1).astype(np.int64) * CHUNK
    parts = [(name, int(a), int(b), no_fma) for a, b in zip(bounds[:-1], bounds[1:])]
    t0 = time.perf_counter()
    if jobs == 1:
        results = [_scan_part(p) for p in parts]
    else:
        with ProcessPoolExecutor(jobs) as ex:
            results = list(ex.map(_scan_part, parts))
    worst, at, _ = max(results, key=lambda r: r[0])
    hist = sum(r[2] for r in results)
    x = np.array([at], np.uint32).view(np.float32)[0]
    got = _function(name, no_fma)(x)
    ref = _reference(_WHICH[name], np.float64(x))
    return {"name": name, "max_ulp": worst, "x": x, "got": got, "ref": ref, "hist": hist,
            "seconds": time.perf_counter() - t0}  # fmt: skip


def check_pow(no_fma: bool = False, n: int = 1 << 26, seed: int = 0) -> dict:
    """Max ulp error of ``fpow`` over ``n`` random bit-pattern pairs and ``n`` pairs from typical ranges."""
    f = _function("pow", no_fma)

    @numba.njit(error_model="numpy")
    def loop(x, y, out):
        for i in range(x.shape[0]):
            out[i] = f(x[i], y[i])

    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    worst = (-1.0, 0.0, 0.0)
    for _ in range(n // CHUNK):
        for typical in (False, True):
            if typical:  # moderate magnitudes of both signs; integer exponents (odd and even) and fractional ones
                x = (np.exp(rng.uniform(-20, 20, CHUNK)) * rng.choice([-1, 1], CHUNK)).astype(np.float32)
                y = np.where(
                    np.arange(CHUNK) % 2 == 0, rng.uniform(-4, 4, CHUNK), np.round(rng.uniform(-30, 30, CHUNK))
                )
                y = y.astype(np.float32)
            else:
                x, y = (rng.integers(0, 2**32, CHUNK, dtype=np.uint64).astype(np.uint32).view(np.float32) for _ in "xy")
            out = np.empty_like(x)
            loop(x, y, out)
            with np.errstate(all="ignore"):
                ref = np.power(x.astype(np.float64), y.astype(np.float64))
            err = _ulp_array(out, ref)
            i = int(np.argmax(err))
            if err[i] > worst[0]:
                worst = (float(err[i]), x[i], y[i])
    return {"name": "pow", "max_ulp": worst[0], "x": worst[1], "y": worst[2], "seconds": time.perf_counter() - t0}


@numba.njit(error_model="numpy")
def _ulp_array(got, ref):
    out = np.empty(got.shape[0])
    for i in range(got.shape[0]):
        out[i] = _ulp(got[i], ref[i])
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.exhaustive_vmath", description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help=f"functions ({', '.join(vmath.FUNCS)}); default all")
    ap.add_argument("--no-fma", action="store_true", help="compile with the plain multiply-add of CPUs without FMA")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    args = ap.parse_args(argv)
    names = args.names or list(vmath.FUNCS)
    unknown = [n for n in names if n not in vmath.FUNCS]
    if unknown:
        ap.error(f"unknown function {', '.join(unknown)}; choose from {', '.join(vmath.FUNCS)}")
    fma = "without FMA" if args.no_fma else ("with FMA" if vmath._HAS_FMA else "without FMA (CPU has none)")
    print(f"vmath {vmath.VERSION}, {fma}, numba {numba.__version__}, {os.cpu_count()} CPUs, {args.jobs} job(s)")
    for name in names:
        if name == "pow":
            r = check_pow(args.no_fma)
            print(f"pow      max {r['max_ulp']:.4f} ulp on random pairs, at pow({r['x']!r}, {r['y']!r})  "
                  f"[{r['seconds']:.0f} s]", flush=True)  # fmt: skip
            continue
        r = check(name, args.no_fma, args.jobs)
        h = r["hist"]
        over = ", ".join(f">={k / 4:g}: {int(h[k:].sum())}" for k in (2, 4, 6, 8) if h[k:].sum())
        print(f"{name:8s} max {r['max_ulp']:.4f} ulp at x={r['x']!r}: got {r['got']!r}, float64 {r['ref']!r}"
              f"  (inputs with error {over or '<= 0.5: all'})  [{r['seconds']:.0f} s]", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
