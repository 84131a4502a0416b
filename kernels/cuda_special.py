"""CUDA kernels that run the CPU's own scalar functions: the rejection samplers (``random_gamma``,
``random_poisson``), ``random_truncated_normal``, ``random_gamma_grad`` and ``polygamma``.

Their scalar cores are numba functions in ``kernels/threefry.py`` and ``kernels/special.py`` written with ``math``
only, which numba-cuda compiles for the device as they are (the simulator calls them directly). So a sampler on
the device consumes the same Threefry stream in the same order as on the CPU, and every rejection takes the same
branch; results differ from the CPU's only where libdevice's float64 ``log``/``exp``/``erfc`` round differently
from the host's libm (an ulp, which can move an accept/reject decision only at its exact boundary). One thread per
element; ``cuda_prims`` joins this table with the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import special
from .cuda_backend import UnsupportedOnDevice, launch_config
from .cuda_math import F32, F64
from .cuda_math import header as _header
from .cuda_ops import View, _native, broadcast_view

_KEYED = '''
from funclib.kernels.threefry import FUNC as f


def kernel(keys, param, out, lanes, n, low):
    t = cuda.grid(1)
    step = cuda.gridsize(1)
    while t < lanes * n:
        lane = t // n
        i = t - lane * n
        v = OUT(f(keys[2 * lane], keys[2 * lane + 1], i, np.float64(param[t])))
        out[t] = POST
        t += step
'''

_TRUNCATED = '''
from funclib.kernels.threefry import _ctr, _open53, block, truncated_normal_one


def kernel(keys, lower, upper, out, lanes, n):
    t = cuda.grid(1)
    step = cuda.gridsize(1)
    while t < lanes * n:
        lane = t // n
        i = t - lane * n
        c0, c1 = _ctr(i)
        y0, y1 = block(keys[2 * lane], keys[2 * lane + 1], c0, c1)
        lo = lower[t]
        hi = upper[t]
        v = OUT(truncated_normal_one(np.float64(lo), np.float64(hi), _open53(y0, y1)))
        # rounding to the output dtype must not land on a bound
        inside_lo = NEXT(lo, OUT(math.inf))
        inside_hi = NEXT(hi, OUT(-math.inf))
        v = inside_lo if v < inside_lo else v
        out[t] = inside_hi if v > inside_hi else v
        t += step
'''

_PAIR = '''
from funclib.kernels.threefry import gamma_sample_grad


def kernel(a, z, out, count):
    t = cuda.grid(1)
    step = cuda.gridsize(1)
    while t < count:
        out[t] = OUT(gamma_sample_grad(np.float64(a[t]), np.float64(z[t])))
        t += step
'''

_POLYGAMMA = '''
from funclib.kernels.special import _digamma64, _polygamma64

# a global array: a constant on the device, a NumPy array for the CPU function in the simulator
cot = np.array([COT], dtype=np.float64)


def kernel(x, out, count, n, a_min):
    t = cuda.grid(1)
    step = cuda.gridsize(1)
    while t < count:
        v = np.float64(x[t])
        out[t] = OUT(_digamma64(v) if n == 0 else _polygamma64(n, v, a_min, cot))
        t += step
'''


def _name(d) -> str:
    return f"np.{np.dtype(d).name}"


def keyed_source(kind: str, out_dtype, simulated: bool = False) -> str:
    """``random_gamma`` (``kind="gamma"``: samples below the smallest normal number round up to it, as on the CPU)
    or ``random_poisson`` (``"poisson"``): element ``i`` of lane ``l`` from its own stream, the CPU's function."""
    func = {"gamma": "_gamma_element", "poisson": "_poisson_element"}[kind]
    post = "v if (v > low or v != v) else low" if kind == "gamma" else "v"
    body = _KEYED.replace("FUNC", func).replace("OUT", _name(out_dtype)).replace("POST", post)
    return "\n".join(_header(simulated)) + body


def truncated_source(dtype, simulated: bool = False) -> str:
    """``random_truncated_normal`` by the CPU's inverse CDF of element ``i``'s open float64 uniform."""
    nxt = "nextafter32" if np.dtype(dtype) == F32 else "nextafter64"
    return "\n".join(_header(simulated)) + _TRUNCATED.replace("OUT", _name(dtype)).replace("NEXT", nxt)


def pair_source(dtype, simulated: bool = False) -> str:
    """``random_gamma_grad``: the CPU's implicit derivative of a Gamma sample, per element, in float64."""
    return "\n".join(_header(simulated)) + _PAIR.replace("OUT", _name(dtype))


def polygamma_source(dtype, n: int, simulated: bool = False) -> str:
    """``polygamma`` of order ``n``: the CPU's digamma (``n = 0``) or Hurwitz-zeta polygamma, per element, in
    float64 (the derivative coefficients of cot, per order, are the kernel's constants)."""
    coef = special._cot_derivative(n) if n else np.zeros(1)
    cot = ", ".join("np.inf" if v == np.inf else "-np.inf" if v == -np.inf else repr(float(v)) for v in coef)
    return "\n".join(_header(simulated)) + _POLYGAMMA.replace("OUT", _name(dtype)).replace("COT", cot)


def _floats(name, *xs):
    for x in xs:
        if x.dtype not in (F32, F64):
            raise UnsupportedOnDevice(f"'{name}' on the device takes float32 or float64, got {x.dtype.name}")


def _keyed_param(kind: str, name: str):
    def impl(ctx, key, param, **params):
        _native(name, key, param)
        _floats(name, param)
        out_dtype = np.dtype(params.get("dtype", param.dtype))
        lanes = key.size // 2
        n = param.size // lanes if lanes else 0
        if n >= 2**32:
            raise ValueError(f"{name}: random samplers with per-element parameters support at most 2**32 elements "
                             "per key")
        out = ctx.empty(param.shape, out_dtype)
        if out.size:
            low = out_dtype.type(np.finfo(out_dtype).tiny) if out_dtype.kind == "f" else out_dtype.type(0)
            blocks, threads = launch_config(out.size)
            ctx.rt.launch(ctx.rt.compile(keyed_source(kind, out_dtype, ctx.rt.simulated), "kernel"), blocks,
                          threads, [ctx.contiguous(View(key)), param, out, lanes, n, low])
        return out

    return impl


def _truncated_normal(ctx, key, lower, upper):
    _native("random_truncated_normal", key)
    _floats("random_truncated_normal", lower, upper)
    lanes = key.size // 2
    n = lower.size // lanes if lanes else 0
    out = ctx.empty(lower.shape, lower.dtype)
    if out.size:
        blocks, threads = launch_config(out.size)
        ctx.rt.launch(ctx.rt.compile(truncated_source(lower.dtype, ctx.rt.simulated), "kernel"), blocks, threads,
                      [ctx.contiguous(View(key)), lower, upper, out, lanes, n])
    return out


def _gamma_grad(ctx, alpha, z):
    _floats("random_gamma_grad", alpha, z)
    shape = tuple(np.broadcast_shapes(alpha.shape, z.shape))
    a, x = (ctx.contiguous(broadcast_view(v, shape)) for v in (alpha, z))
    out = ctx.empty(shape, np.result_type(alpha.dtype, z.dtype))
    if out.size:
        blocks, threads = launch_config(out.size)
        ctx.rt.launch(ctx.rt.compile(pair_source(out.dtype, ctx.rt.simulated), "kernel"), blocks, threads,
                      [a, x, out, out.size])
    return out


def _polygamma(ctx, x, *, n):
    _floats("polygamma", x)
    out = ctx.empty(x.shape, x.dtype)
    if out.size:
        a_min = float(special._shift_threshold(n)) if n else 0.0
        blocks, threads = launch_config(out.size)
        ctx.rt.launch(ctx.rt.compile(polygamma_source(x.dtype, int(n), ctx.rt.simulated), "kernel"), blocks,
                      threads, [x, out, out.size, int(n), a_min])
    return out


IMPLS: dict[str, Callable[..., Any]] = {
    "random_gamma": _keyed_param("gamma", "random_gamma"),
    "random_poisson": _keyed_param("poisson", "random_poisson"),
    "random_truncated_normal": _truncated_normal,
    "random_gamma_grad": _gamma_grad,
    "polygamma": _polygamma,
}


def catalog() -> list[tuple[str, str, list[str], bool]]:
    """This module's kernel kinds for the PTX check (``cuda_prims.kernel_catalog``). They run float64 scalar code
    by design (the CPU's), so none is checked for float32 purity."""
    i64, u32, f64 = "int64", "uint32[::1]", "float64[::1]"
    cases = []
    for d in ("float32", "float64"):
        cases.append((f"random_gamma:{d}", keyed_source("gamma", np.dtype(d)), [u32, f"{d}[::1]", f"{d}[::1]", i64,
                      i64, d], False))
        cases.append((f"random_truncated_normal:{d}", truncated_source(np.dtype(d)), [u32] + [f"{d}[::1]"] * 3
                      + [i64, i64], False))
    cases.append(("random_poisson:int32", keyed_source("poisson", np.dtype(np.int32)), [u32, f64, "int32[::1]", i64,
                  i64, "int32"], False))
    cases.append(("random_gamma_grad:float64", pair_source(F64), [f64] * 3 + [i64], False))
    cases.append(("polygamma:float64", polygamma_source(F64, 3), [f64] * 2 + [i64, i64, "float64"], False))
    return cases

