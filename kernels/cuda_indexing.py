"""CUDA kernels of the indexing family that fold or move windows: ``scatter`` (the last write wins) and
``scatter_mul/max/min``, ``segment_sum/max/min``, ``dynamic_slice``/``dynamic_update_slice`` (starts read on the
device), and ``conv_patches`` (im2col) with its transpose (col2im). Built on ``cuda_ops``' views and launches;
``cuda_prims`` joins this table with the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .cuda_backend import COMPLEX_DTYPES, UnsupportedOnDevice, launch_config
from .cuda_math import F32
from .cuda_math import header as _header
from .cuda_ops import View, _contiguous_strides, _identity, _native, _scatter_add, _transpose_view

# how scatter_* and segment_* fold one update into the value so far (NumPy's ufunc.at: a NaN propagates)
_FOLD = {
    "set": "u",
    "mul": "acc * u",
    "max": "acc if (acc > u or acc != acc) else u",
    "min": "acc if (acc < u or acc != acc) else u",
    "sum": "acc + u",
}


def combine_source(k: int, mode: str, dtype: np.dtype, simulated: bool = False) -> str:
    """A scatter that folds updates in order (``mode``: ``set``, the last write wins; ``mul``, ``max``, ``min``):
    one thread per element of the operand (its ``k`` indexed axes in front, ``R`` elements after them) walks the
    ``P`` index tuples in order and folds in every update aimed at it, so the result is deterministic and equal to
    NumPy's ``ufunc.at``. ``P`` reads per element: meant for few updates (a sorted segment scan is to come)."""
    t = "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"
    sizes = [f"f{a}" for a in range(k)]
    strides = [f"s{a}" for a in range(k)]
    lines = [*_header(simulated), f"def kernel(x, idx, upd, out, flag, n, R, P, {', '.join(sizes + strides)}):",
             "    t = cuda.grid(1)", "    step = cuda.gridsize(1)", "    while t < n:", "        f = t // R",
             "        r = t - f * R", "        acc = x[t]", "        for p in range(P):", "            row = 0",
             "            ok = True"]
    for a in range(k):
        lines += [f"            j = idx[p * {k} + {a}]", "            if j < 0:", f"                j += f{a}",
                  f"            if j < 0 or j >= f{a}:", "                flag[0] = 1", "                ok = False",
                  f"            row += j * s{a}"]
    lines += ["            if ok and row == f:", "                u = upd[p * R + r]",
              f"                acc = {t}({_FOLD[mode]})", "        out[t] = acc", "        t += step", ""]
    return "\n".join(lines)


def segment_source(kind: str, dtype: np.dtype, simulated: bool = False) -> str:
    """``segment_{kind}`` of ``(N, R)`` data into ``(S, R)``: one thread per output element folds the rows whose id
    is its segment, in order (ids out of range are dropped; an empty segment keeps ``init``)."""
    t = f"np.{dtype.name}"
    lines = [*_header(simulated), "def kernel(data, ids, out, n, R, N, init):", "    t = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while t < n:", "        s = t // R", "        r = t - s * R",
             "        acc = init", "        for i in range(N):", "            if ids[i] == s:",
             "                u = data[i * R + r]", f"                acc = {t}({_FOLD[kind]})", "        out[t] = acc",
             "        t += step", ""]
    return "\n".join(lines)


def _scatter_fold(mode: str, name: str):
    def impl(ctx, x, idx, updates, *, axes):
        _native(name, x, idx, updates)
        if mode != "set" and x.dtype.kind == "b":
            raise UnsupportedOnDevice(f"'{name}' on bool has no CUDA kernel; cast to an integer dtype first")
        rest = [d for d in range(x.ndim) if d not in axes]
        perm = list(axes) + rest
        front = ctx.contiguous(_transpose_view(x, perm))
        R = math.prod(x.shape[d] for d in rest)
        sizes = [x.shape[a] for a in axes]
        P = math.prod(idx.shape[:-1])
        out = ctx.empty(front.shape, x.dtype)
        n = x.size
        if n:
            flag = ctx.rt.to_device(np.zeros(1, np.int32), ctx.index)
            src = combine_source(len(axes), mode, x.dtype, ctx.rt.simulated)
            blocks, threads = launch_config(n)
            ctx.rt.launch(ctx.rt.compile(src, "kernel"), blocks, threads,
                          [front, idx, updates, out, flag, n, R, P, *sizes, *_contiguous_strides(sizes)])
            if ctx.rt.to_host(flag)[0]:  # one int read back, as gather's
                raise IndexError(
                    f"{name}: index out of bounds for operand shape {x.shape} along axes {tuple(axes)} "
                    f"(on {x.device})"
                )
        inverse = [perm.index(d) for d in range(x.ndim)]
        return ctx.contiguous(_transpose_view(out, inverse))

    return impl


_scatter_sum = _scatter_fold("sum", "scatter_add")


def _scatter_add_any(ctx, x, idx, updates, *, axes):
    """Atomic adds where CUDA has them; complex has none, so its updates fold in order (deterministic, NumPy's
    ``add.at`` order)."""
    if x.dtype in COMPLEX_DTYPES:
        return _scatter_sum(ctx, x, idx, updates, axes=axes)
    return _scatter_add(ctx, x, idx, updates, axes=axes)


def _segment(kind: str):
    def impl(ctx, data, ids, *, num_segments):
        name = f"segment_{kind}"
        _native(name, data, ids)
        R = math.prod(data.shape[1:])
        out = ctx.empty((num_segments,) + tuple(data.shape[1:]), data.dtype)
        n = out.size
        if n:
            src = segment_source(kind, data.dtype, ctx.rt.simulated)
            blocks, threads = launch_config(n)
            ctx.rt.launch(ctx.rt.compile(src, "kernel"), blocks, threads,
                          [data, ids, out, n, R, data.shape[0], _identity(kind, data.dtype)])
        return out

    return impl


def dynamic_source(rank: int, update: bool, simulated: bool = False) -> str:
    """``dynamic_slice`` (``update=False``: ``out`` is the window) or ``dynamic_update_slice`` (``out`` is a copy of
    the operand and ``src`` the window written into it) over a window of sizes ``w0, w1, ...``. Each start is a
    one-element device array read in the kernel, clamped so the window fits (as on the CPU): no host round trip."""
    w = [f"w{k}" for k in range(rank)]
    st = [f"st{k}" for k in range(rank)]
    full = [f"n{k}" for k in range(rank)]
    lines = [*_header(simulated), f"def kernel(src, out, count, {', '.join(w + st + full)}):", "    i = cuda.grid(1)",
             "    step = cuda.gridsize(1)"]
    for k in range(rank):
        lines += [f"    b{k} = st{k}[0]", f"    b{k} = 0 if b{k} < 0 else b{k}",
                  f"    b{k} = n{k} - w{k} if b{k} > n{k} - w{k} else b{k}"]
    lines += ["    while i < count:", "        r = i", "        off = 0", "        stride = 1"]
    for k in range(rank - 1, -1, -1):
        lines += [f"        c = r % w{k}", f"        r = r // w{k}", f"        off += (b{k} + c) * stride",
                  f"        stride *= n{k}"]
    lines.append("        out[off] = src[i]" if update else "        out[i] = src[off]")
    lines += ["        i += step", ""]
    return "\n".join(lines)


def _dynamic(ctx, x, window, starts, update):
    name = "dynamic_update_slice" if update else "dynamic_slice"
    _native(name, x, *starts)
    shape = window.shape if update else window
    if update:
        out = ctx.copy(View(x))
        src = window
    else:
        out = ctx.empty(shape, x.dtype)
        src = x
    count = math.prod(shape)
    if count:
        blocks, threads = launch_config(count)
        ctx.rt.launch(ctx.rt.compile(dynamic_source(x.ndim, update, ctx.rt.simulated), "kernel"), blocks, threads,
                      [src, out, count, *shape, *starts, *x.shape])
    return out


def _dynamic_slice(ctx, x, *starts, slice_sizes):
    return _dynamic(ctx, x, tuple(slice_sizes), starts, update=False)


def _dynamic_update_slice(ctx, x, update, *starts):
    return _dynamic(ctx, x, update, starts, update=True)


def conv_source(nd: int, channels_last: bool, transpose: bool, simulated: bool = False) -> str:
    """im2col (``conv_patches``) and its adjoint col2im (``conv_patches_transpose``) for an ``nd``-d input ``(N, C,
    *S)`` with patches ``(N, *O, *K, C)`` (``channels_last``) or ``(N, C, *K, *O)``. im2col: one thread per patch
    element reads its input element (zero in the padding); col2im: one thread per input element sums the patch
    elements that read it, kernel positions in order (as the CPU adds them), so no atomics are needed."""
    S, O, K = ([f"{a}{i}" for i in range(nd)] for a in "SOK")
    st, dl, lo = ([f"{a}{i}" for i in range(nd)] for a in ("st", "dl", "lo"))
    params = ["x", "out", "count", "N", "C", *S, *O, *K, *st, *dl, *lo, "zero"]
    lines = [*_header(simulated), f"def kernel({', '.join(params)}):", "    i = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while i < count:", "        r = i"]

    def split(names_sizes):
        out = []
        for name, size in reversed(names_sizes):
            out += [f"        {name} = r % {size}", f"        r = r // {size}"]
        return out

    if channels_last:
        patch = [("n", "N"), *[(f"o{i}", O[i]) for i in range(nd)], *[(f"k{i}", K[i]) for i in range(nd)], ("c", "C")]
    else:
        patch = [("n", "N"), ("c", "C"), *[(f"k{i}", K[i]) for i in range(nd)], *[(f"o{i}", O[i]) for i in range(nd)]]

    def patch_offset():
        off = "0"
        for name, size in patch:
            off = f"({off}) * {size} + {name}"
        return off

    if not transpose:
        lines += split(patch)
        lines += ["        inside = True", "        off = n * C + c"]
        for i in range(nd):
            lines += [f"        p = o{i} * st{i} + k{i} * dl{i} - lo{i}", f"        if p < 0 or p >= S{i}:",
                      "            inside = False", f"        off = off * S{i} + p"]
        lines.append("        out[i] = x[off] if inside else zero")
    else:
        lines += split([("n", "N"), ("c", "C"), *[(f"p{i}", S[i]) for i in range(nd)]])
        lines += ["        acc = zero", f"        for kk in range({' * '.join(K) or '1'}):", "            q = kk",
                  "            ok = True"]
        for i in reversed(range(nd)):
            lines += [f"            k{i} = q % K{i}", f"            q = q // K{i}",
                      f"            t = p{i} + lo{i} - k{i} * dl{i}", f"            o{i} = t // st{i}",
                      f"            if t < 0 or t - o{i} * st{i} != 0 or o{i} >= O{i}:", "                ok = False"]
        lines += ["            if ok:", f"                acc += x[{patch_offset()}]", "        out[i] = acc"]
    lines += ["        i += step", ""]
    return "\n".join(lines)


def _conv_args(x_shape, out_shape, kernel_shape, osz, strides, padding, dilation, zero):
    return [math.prod(out_shape), x_shape[0], x_shape[1], *x_shape[2:], *osz, *kernel_shape, *strides,
            *dilation, *(lo for lo, _ in padding), zero]


def _conv_patches(ctx, x, *, kernel_shape, strides, padding, dilation, channels_last=True):
    _native("conv_patches", x)
    nd = len(kernel_shape)
    osz = [(x.shape[2 + i] + lo + hi - dilation[i] * (kernel_shape[i] - 1) - 1) // strides[i] + 1
           for i, (lo, hi) in enumerate(padding)]
    shape = ((x.shape[0], *osz, *kernel_shape, x.shape[1]) if channels_last else
             (x.shape[0], x.shape[1], *kernel_shape, *osz))
    out = ctx.empty(shape, x.dtype)
    if out.size:
        blocks, threads = launch_config(out.size)
        ctx.rt.launch(ctx.rt.compile(conv_source(nd, channels_last, False, ctx.rt.simulated), "kernel"), blocks,
                      threads, [x, out, *_conv_args(x.shape, shape, kernel_shape, osz, strides, padding, dilation,
                                                    x.dtype.type(0))])
    return out


def _conv_patches_transpose(ctx, cols, *, input_shape, strides, padding, dilation, channels_last=True):
    _native("conv_patches_transpose", cols)
    nd = len(input_shape)
    if channels_last:
        n, c, osz, ksz = cols.shape[0], cols.shape[-1], cols.shape[1:1 + nd], cols.shape[1 + nd:1 + 2 * nd]
    else:
        n, c, ksz, osz = cols.shape[0], cols.shape[1], cols.shape[2:2 + nd], cols.shape[2 + nd:]
    shape = (n, c, *input_shape)
    out = ctx.empty(shape, cols.dtype)
    if out.size:
        blocks, threads = launch_config(out.size)
        args = _conv_args(shape, shape, ksz, osz, strides, padding, dilation, cols.dtype.type(0))
        ctx.rt.launch(ctx.rt.compile(conv_source(nd, channels_last, True, ctx.rt.simulated), "kernel"), blocks,
                      threads, [cols, out, *args])
    return out


IMPLS: dict[str, Callable[..., Any]] = {
    "scatter_add": _scatter_add_any,
    "scatter": _scatter_fold("set", "scatter"),
    "scatter_mul": _scatter_fold("mul", "scatter_mul"),
    "scatter_max": _scatter_fold("max", "scatter_max"),
    "scatter_min": _scatter_fold("min", "scatter_min"),
    "segment_sum": _segment("sum"),
    "segment_max": _segment("max"),
    "segment_min": _segment("min"),
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "conv_patches": _conv_patches,
    "conv_patches_transpose": _conv_patches_transpose,
}


def catalog() -> list[tuple[str, str, list[str], bool]]:
    """This module's kernel kinds for the PTX check (``cuda_prims.kernel_catalog``)."""
    cases = []
    i64 = "int64"

    def arr(d):
        return f"{np.dtype(d).name}[::1]"

    for mode in ("set", "mul", "max", "min"):
        cases.append((f"scatter_{mode}:float32", combine_source(1, mode, F32), [arr(F32), arr(np.int64), arr(F32),
                      arr(F32), arr(np.int32), i64, i64, i64, i64, i64], True))
    for d, r in ((np.dtype(np.complex64), True), (np.dtype(np.complex128), False)):
        for mode in ("set", "mul", "sum"):
            cases.append((f"scatter_{mode}:{d.name}", combine_source(1, mode, d), [arr(d), arr(np.int64), arr(d),
                          arr(d), arr(np.int32), i64, i64, i64, i64, i64], r))
        for last in (True, False):
            cases.append((f"conv_patches_transpose:{'last' if last else 'first'}:{d.name}", conv_source(2, last, True),
                          [arr(d), arr(d)] + [i64] * 15 + [d.name], r))
    for kind in ("sum", "max", "min"):
        cases.append((f"segment_{kind}:float32", segment_source(kind, F32), [arr(F32), arr(np.int32), arr(F32),
                      i64, i64, i64, "float32"], True))
    for update in (False, True):
        cases.append((f"dynamic_{'update_' if update else ''}slice:float32", dynamic_source(2, update),
                      [arr(F32), arr(F32), i64, i64, i64, arr(np.int32), arr(np.int64), i64, i64], True))
    for last in (True, False):
        for t in (False, True):
            cases.append((f"conv_patches{'_transpose' if t else ''}:{'last' if last else 'first'}:float32",
                          conv_source(2, last, t), [arr(F32), arr(F32)] + [i64] * 15 + ["float32"], True))
    return cases
