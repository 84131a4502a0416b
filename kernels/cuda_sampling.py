"""CUDA samplers beyond raw bits and uniforms: ``random_normal`` and ``random_standard`` (the CPU's Threefry words bit
for bit, the device's transcendental functions) and ``random_uniform_rows`` (bit-identical to the CPU). Built on
``cuda_ops``' Threefry block; ``cuda_prims`` joins this table with the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .cuda_backend import UnsupportedOnDevice, launch_config
from .cuda_math import F32, F64
from .cuda_math import header as _header
from .cuda_ops import _SAMPLERS, View, _block_lines, _native

# ``value`` of the element's uniform ``u`` in (0, 1) (open24 / open53, the CPU's open uniforms), per distribution
_STANDARD = {
    "exponential": "-math.log(ONE - u)",
    "gumbel": "-math.log(-math.log(u))",
    "laplace": "(math.log(ONE - abs(TWO * u - ONE)) if TWO * u - ONE < ZERO else -math.log(ONE - abs(TWO * u - ONE)))",
    "logistic": "math.log(u) - math.log(ONE - u)",
}


def distribution_source(kind: str, dtype: str, simulated: bool = False) -> str:
    """Keyed samples of ``random_normal`` (``kind="normal"``, Box-Muller as the CPU pairs words: float32 takes the
    radius and angle from the two words of block ``i // 2``, float64 from blocks ``2 (i // 2)`` and its successor)
    or ``random_standard`` (``kind`` the distribution, by inversion of element ``i``'s open uniform). The words are
    the CPU's bit for bit; the transcendental functions are the device's, so samples agree with the CPU's to a few
    ulp, not bit for bit."""
    t = f"np.{dtype}"
    one, two, zero = f"{t}(1)", f"{t}(2)", f"{t}(0)"
    lines = [*_header(simulated), "def kernel(keys, out, lanes, m):", "    t = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while t < lanes * m:", "        lane = t // m",
             "        i = t - lane * m", "        k0 = keys[2 * lane]", "        k1 = keys[2 * lane + 1]"]
    blk = lambda c: _block_lines("k0", "k1", f"({c}) >> np.uint64(32)", f"({c}) & np.uint64(0xFFFFFFFF)")
    if kind == "normal" and dtype == "float32":
        lines += ["        j = np.uint64(i // 2)", *blk("j"),
                  "        u = np.float32(np.int32(x0 >> np.uint32(1))) * np.float32(2.0 ** -31)"
                  " + np.float32(2.0 ** -32)",
                  "        r = math.sqrt(np.float32(-2) * math.log(u))",
                  "        a = np.float32(np.int32(x1 >> np.uint32(8))) * np.float32(2.0 ** -24)"
                  " * np.float32(6.283185307179586)",
                  "        v = r * (fcos(a) if i % 2 == 0 else fsin(a))"]
    elif kind == "normal":
        lines += ["        j = np.uint64(i // 2) * np.uint64(2)", *blk("j"),
                  "        w = (np.uint64(x0) << np.uint64(32)) | np.uint64(x1)",
                  "        u = (np.float64(np.int64(w >> np.uint64(12))) * np.float64(2) + np.float64(1))"
                  " * np.float64(2.0 ** -53)", *blk("j + np.uint64(1)"),
                  "        w = (np.uint64(x0) << np.uint64(32)) | np.uint64(x1)",
                  "        a = np.float64(np.int64(w >> np.uint64(11))) * np.float64(2.0 ** -53)"
                  " * np.float64(6.283185307179586)",
                  "        r = math.sqrt(np.float64(-2) * math.log(u))",
                  "        v = r * (math.cos(a) if i % 2 == 0 else math.sin(a))"]
    else:
        if dtype == "float32":
            lines += ["        j = np.uint64(i // 2)", *blk("j"), "        w = x0 if i % 2 == 0 else x1",
                      "        u = np.float32(np.int32(((w >> np.uint32(9)) << np.uint32(1)) | np.uint32(1)))"
                      " * np.float32(2.0 ** -24)"]
        else:
            lines += ["        j = np.uint64(i)", *blk("j"),
                      "        w = (np.uint64(x0) << np.uint64(32)) | np.uint64(x1)",
                      "        u = (np.float64(np.int64(w >> np.uint64(12))) * np.float64(2) + np.float64(1))"
                      " * np.float64(2.0 ** -53)"]
        expr = _STANDARD[kind].replace("ONE", one).replace("TWO", two).replace("ZERO", zero)
        lines.append(f"        v = {expr}")
    lines += ["        out[t] = v", "        t += step", ""]
    return "\n".join(lines)


def _distribution(name: str):
    def impl(ctx, key, *, shape, dtype, **flags):
        d = np.dtype(dtype)
        kind = "normal" if name == "random_normal" else flags.get("dist")
        if d not in (F32, F64) or (kind != "normal" and kind not in _STANDARD):
            raise UnsupportedOnDevice(f"'{name}' with dtype {d.name} and {flags} has no CUDA kernel")
        _native(name, key)
        lanes, m = key.size // 2, math.prod(shape)
        out = ctx.empty(tuple(key.shape[:-1]) + tuple(shape), d)
        if lanes * m:
            blocks, threads = launch_config(lanes * m)
            ctx.rt.launch(ctx.rt.compile(distribution_source(kind, d.name, ctx.rt.simulated), "kernel"), blocks,
                          threads, [ctx.contiguous(View(key)), out, lanes, m])
        return out

    return impl


def rows_source(dtype: str, simulated: bool = False) -> str:
    """``random_uniform_rows``: element ``i`` of row ``rows[lane, r]`` of lane ``lane``'s uniform stream, i.e. the
    element at ``rows[lane, r] * m + i`` of ``random_uniform``'s, bit for bit (a negative row sets ``flag``)."""
    width, value = _SAMPLERS[(dtype, False)]
    lines = [*_header(simulated), "def kernel(keys, rows, out, flag, lanes, R, m):", "    t = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while t < lanes * R * m:", "        lane = t // (R * m)",
             "        rest = t - lane * R * m", "        r = rest // m", "        i = rest - r * m",
             "        row = rows[lane * R + r]", "        if row < 0:", "            flag[0] = 1",
             "            row = 0", "        g = row * m + i"]
    if width == 32:
        lines += ["        j = np.uint64(g // 2)"]
        word = ["        w = x0 if g % 2 == 0 else x1"]
    else:
        lines += ["        j = np.uint64(g)"]
        word = ["        w = (np.uint64(x0) << np.uint64(32)) | np.uint64(x1)"]
    lines += [*_block_lines("keys[2 * lane]", "keys[2 * lane + 1]", "j >> np.uint64(32)", "j & np.uint64(0xFFFFFFFF)"),
              *word, f"        out[t] = {value}", "        t += step", ""]
    return "\n".join(lines)


def _uniform_rows(ctx, key, rows, *, row_shape, dtype):
    d = np.dtype(dtype)
    if (d.name, False) not in _SAMPLERS or d.kind != "f":
        raise UnsupportedOnDevice(f"'random_uniform_rows' with dtype {d.name} has no CUDA kernel")
    _native("random_uniform_rows", key, rows)
    lanes = key.size // 2
    R = rows.size // lanes if lanes else 0
    m = math.prod(row_shape)
    out = ctx.empty(tuple(rows.shape) + tuple(row_shape), d)
    if out.size:
        flag = ctx.rt.to_device(np.zeros(1, np.int32), ctx.index)
        idx = rows if rows.dtype == np.int64 else ctx.copy(View(rows), np.int64)
        blocks, threads = launch_config(out.size)
        ctx.rt.launch(ctx.rt.compile(rows_source(d.name, ctx.rt.simulated), "kernel"), blocks, threads,
                      [ctx.contiguous(View(key)), idx, out, flag, lanes, R, m])
        if ctx.rt.to_host(flag)[0]:
            raise ValueError("random_uniform_rows: row indices must be in [0, 2**63), got a negative one")
    return out


IMPLS: dict[str, Callable[..., Any]] = {
    "random_normal": _distribution("random_normal"),
    "random_standard": _distribution("random_standard"),
    "random_uniform_rows": _uniform_rows,
}


def catalog() -> list[tuple[str, str, list[str], bool]]:
    """This module's kernel kinds for the PTX check (``cuda_prims.kernel_catalog``)."""
    cases = []
    i64 = "int64"

    def arr(d):
        return f"{np.dtype(d).name}[::1]"

    for d in ("float32", "float64"):
        for kind in ("normal", *_STANDARD):
            cases.append((f"random_{kind}:{d}", distribution_source(kind, d), [arr(np.uint32), arr(d), i64, i64],
                          d == "float32"))
        cases.append((f"random_uniform_rows:{d}", rows_source(d), [arr(np.uint32), arr(np.int64), arr(d),
                      arr(np.int32), i64, i64, i64], d == "float32"))
    return cases
