"""Eager primitives on a CUDA device: generated kernels launched through ``cuda_backend``.

``run(name, kernel_op, args, params)`` computes one primitive on device buffers (``CudaArray``; 0-d NumPy arrays
and Python numbers for scalars). It is filled from two sources:

- every elementwise primitive with a fused-kernel ``Lowering`` (``fusion.OPS``): the same scalar template jit's
  CPU kernels use, with libm/vmath names replaced by CUDA device math of the operands' precision, in a
  grid-stride kernel over the output that reads broadcast operands through zero strides;
- ``IMPLS``: data movement (broadcast, transpose, reverse, slice, pad, concatenate) as strided copies, reductions
  as one block per output element with a shared-memory tree, ``dot_general`` through cuBLAS, ``iota``, indexing
  (gather, the scatters, dynamic slices, segments), sort and row scans, im2col/col2im, sparse products, the
  random samplers and per-matrix factorizations (lu, qr, cholesky, eigh, svd, triangular solves).

A primitive in neither raises ``UnsupportedOnDevice`` naming it: nothing is copied to the host behind the
caller's back. Kernels compute in the operands' own precision: float32 math stays float32 (``tests/test_cuda.py``
compiles every kind to sm_90 PTX and checks for float64 instructions).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import cuda_cxmath, fusion
from .cuda_backend import COMPLEX_DTYPES, NATIVE_DTYPES, CudaArray, UnsupportedOnDevice, launch_config
from .cuda_math import DEVICE_ONLY, F32, F64, elementwise_expr, integer_expr
from .cuda_math import header as _header


def strided_source(rank: int, operands: Sequence[str], expr: str, out_strided: bool = False,
                   simulated: bool = False) -> str:
    """A grid-stride kernel over an iteration space of ``rank`` axes. ``operands[i]`` is ``"array"`` (read at
    ``offset + sum(index * stride)``: zero strides broadcast, negative ones reverse), ``"flat"`` (read at the flat
    index) or ``"scalar"`` (a kernel argument). The output is written at the flat index, or through its own offset
    and strides when ``out_strided``. ``expr`` uses ``{0}``, ``{1}``, ... for the operands.

    Arguments: operands, output, n, the ``rank`` sizes, then per strided array operand its offset and ``rank``
    strides, then the output's offset and strides."""
    names = [f"x{i}" for i in range(len(operands))]
    params = [*names, "out", "n", *[f"d{k}" for k in range(rank)]]
    loads, vals = [], []
    for i, kind in enumerate(operands):
        if kind == "array":
            params += [f"o{i}", *[f"s{i}_{k}" for k in range(rank)]]
            idx = " + ".join([f"o{i}"] + [f"c{k} * s{i}_{k}" for k in range(rank)])
            loads.append(f"        v{i} = x{i}[{idx}]")
            vals.append(f"v{i}")
        elif kind == "flat":
            loads.append(f"        v{i} = x{i}[i]")
            vals.append(f"v{i}")
        else:
            vals.append(f"x{i}")
    if out_strided:
        params += ["oo", *[f"so_{k}" for k in range(rank)]]
    lines = [*_header(simulated), *([cuda_cxmath.CX_MATH] if cuda_cxmath.uses(expr) else []),
             f"def kernel({', '.join(params)}):", "    i = cuda.grid(1)", "    step = cuda.gridsize(1)",
             "    while i < n:"]
    if any(k == "array" for k in operands) or out_strided:
        lines.append("        r = i")
        for k in range(rank - 1, 0, -1):
            lines += [f"        c{k} = r % d{k}", f"        r = r // d{k}"]
        if rank:
            lines.append("        c0 = r")
    lines += loads
    value = expr.format(*vals)
    if out_strided:
        idx = " + ".join(["oo"] + [f"c{k} * so_{k}" for k in range(rank)])
        lines.append(f"        out[{idx}] = {value}")
    else:
        lines.append(f"        out[i] = {value}")
    lines += ["        i += step", ""]
    return "\n".join(lines)


# the source of each eager kernel kind, generated once (regenerating it cost most of a small op's launch)
_strided_cached = functools.lru_cache(maxsize=4096)(strided_source)


def _contiguous_strides(shape: Sequence[int]) -> list[int]:
    s, acc = [], 1
    for d in reversed(shape):
        s.append(acc)
        acc *= d
    return s[::-1]


class View:
    """How to read a device buffer as an array of ``shape``: ``offset`` and element ``strides`` into it."""

    __slots__ = ("buf", "shape", "offset", "strides")

    def __init__(self, buf: CudaArray, shape=None, offset: int = 0, strides=None):
        self.buf = buf
        self.shape = tuple(buf.shape if shape is None else shape)
        self.offset = offset
        self.strides = list(_contiguous_strides(buf.shape) if strides is None else strides)

    @property
    def contiguous(self) -> bool:
        return self.offset == 0 and self.shape == self.buf.shape and self.strides == _contiguous_strides(self.shape)


def broadcast_view(x, shape: tuple[int, ...]) -> View:
    """``x`` (a buffer or view) read at the trailing-aligned broadcast ``shape`` (NumPy's rule)."""
    v = x if isinstance(x, View) else View(x)
    pad = len(shape) - len(v.shape)
    strides = [0] * pad + [0 if (n == 1 and m != 1) else s for n, m, s in zip(v.shape, shape[pad:], v.strides)]
    return View(v.buf, shape, v.offset, strides)


def launch_strided(rt, rank_shape, operands: Sequence[Any], expr: str, out: CudaArray,
                   out_view: View | None = None) -> CudaArray:
    """Run ``expr`` over ``rank_shape``: ``operands`` are Views (strided reads), buffers of the full shape (flat
    reads) or NumPy/Python scalars (kernel arguments); results go to ``out`` (flat, or through ``out_view``)."""
    rank = len(rank_shape)
    kinds, args, tail = [], [], []
    for o in operands:
        if isinstance(o, View):
            if o.contiguous and o.shape == tuple(rank_shape) and out_view is None:
                kinds.append("flat")
                args.append(o.buf)
            else:
                kinds.append("array")
                args.append(o.buf)
                tail += [o.offset, *o.strides]
        elif isinstance(o, CudaArray):
            kinds.append("flat")
            args.append(o)
        else:
            kinds.append("scalar")
            args.append(o)
    if out_view is not None:
        tail += [out_view.offset, *out_view.strides]
    n = math.prod(rank_shape)
    if n == 0:
        return out
    src = _strided_cached(rank, tuple(kinds), expr, out_view is not None, rt.simulated)
    kern = rt.compile(src, "kernel")
    blocks, threads = launch_config(n)
    rt.launch(kern, blocks, threads, [*args, out, n, *rank_shape, *tail])
    return out


# ---------------------------------------------------------------------------------------- reductions

REDUCE_SOURCE = '''
def kernel(x, out, rows, cols, init):
    buf = cuda.shared.array(BLOCK, DTYPE)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    while row < rows:
        acc = init
        j = t
        while j < cols:
            v = x[row * cols + j]
            acc = COMBINE
            j += BLOCK
        buf[t] = acc
        cuda.syncthreads()
        width = BLOCK // 2
        while width > 0:
            if t < width:
                acc = buf[t]
                v = buf[t + width]
                buf[t] = COMBINE
            cuda.syncthreads()
            width //= 2
        if t == 0:
            out[row] = buf[0]
        cuda.syncthreads()
        row += cuda.gridDim.x
'''

_COMBINE = {
    "sum": "acc + v",
    "prod": "acc * v",
    "and": "acc and v",
    "or": "acc or v",
}


def reduce_block(simulated: bool) -> int:
    """Threads per row of a reduction: 256 on a GPU; one warp in the simulator, which runs each as a thread."""
    return 32 if simulated else 256


def reduce_source(kind: str, dtype: np.dtype, simulated: bool = False) -> str:
    if kind in ("max", "min"):
        cmp = ">" if kind == "max" else "<"
        comb = f"acc if (acc {cmp} v or acc != acc) else v" if dtype.kind == "f" else f"acc if acc {cmp} v else v"
    else:
        comb = _COMBINE[kind]
    dt = "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"
    body = REDUCE_SOURCE.replace("BLOCK", str(reduce_block(simulated))).replace("COMBINE", comb).replace("DTYPE", dt)
    return "\n".join(_header(simulated)) + body


def _identity(kind: str, d: np.dtype):
    if kind == "sum":
        return d.type(0)
    if kind == "prod":
        return d.type(1)
    if kind == "and":
        return np.bool_(True)
    if kind == "or":
        return np.bool_(False)
    if d.kind == "f":
        return d.type(-np.inf if kind == "max" else np.inf)
    if d.kind == "b":
        return np.bool_(kind == "min")
    info = np.iinfo(d)
    return d.type(info.min if kind == "max" else info.max)


# ------------------------------------------------------------------------------------------ primitives


class Context:
    """What a device implementation needs: the runtime and the device index its results go to."""

    __slots__ = ("rt", "index")

    def __init__(self, rt, index: int):
        self.rt = rt
        self.index = index

    def empty(self, shape, dtype) -> CudaArray:
        return self.rt.empty(tuple(shape), np.dtype(dtype), self.index)

    def copy(self, view: View, dtype=None) -> CudaArray:
        out = self.empty(view.shape, dtype or view.buf.dtype)
        return launch_strided(self.rt, view.shape, [view], "{0}", out)

    def contiguous(self, view: View) -> CudaArray:
        return view.buf.reshape(view.shape) if view.contiguous else self.copy(view)


# table kernels also correct on complex operands (``cuda_complex.TABLE_KERNELS`` names the full set)
_COMPLEX_OK = frozenset({"reduce_sum", "reduce_prod", "gather", "cumsum", "dynamic_slice", "dynamic_update_slice",
                         "conv_patches", "conv_patches_transpose", "scatter", "scatter_mul", "scatter_add"})


def _native(name: str, *xs) -> None:
    for x in xs:
        d = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
        if d not in NATIVE_DTYPES and not (d in COMPLEX_DTYPES and name in _COMPLEX_OK):
            raise UnsupportedOnDevice(
                f"'{name}' on {np.dtype(d).name} has no CUDA kernel (device kernels compute in bool, integers, "
                "float32 and float64); cast first, or run it on the CPU with x.to_device('cpu')"
            )


def _operand(x, shape):
    return broadcast_view(x, shape) if isinstance(x, CudaArray) else x


def _device_only_expr(name: str, args) -> str:
    d = args[0].dtype if isinstance(args[0], CudaArray) else np.asarray(args[0]).dtype
    if d not in (F32, F64):
        raise UnsupportedOnDevice(f"'{name}' on {d.name} has no CUDA kernel (float32 and float64 only)")
    return DEVICE_ONLY[name][0 if d == F32 else 1]


def elementwise(ctx: Context, op: str, out_dtype: np.dtype, args: Sequence[Any], param=None,
                expr: str | None = None) -> CudaArray:
    """One elementwise op over broadcast operands (device buffers, or 0-d NumPy values passed as arguments); the
    fused-kernel op ``op``, or the CUDA expression ``expr``."""
    shapes = [np.shape(a) if not isinstance(a, CudaArray) else a.shape for a in args]
    shape = tuple(np.broadcast_shapes(*shapes))
    in_dtypes = [a.dtype if isinstance(a, CudaArray) else np.asarray(a).dtype for a in args]
    if expr is None:
        expr = elementwise_expr(op, in_dtypes, out_dtype, param)
    out = ctx.empty(shape, out_dtype)
    ops = [_operand(a, shape) if isinstance(a, CudaArray) else np.asarray(a).dtype.type(np.asarray(a).reshape(())[()])
           for a in args]
    return launch_strided(ctx.rt, shape, ops, expr, out)


def _transpose_view(x: CudaArray, perm) -> View:
    v = View(x)
    return View(x, tuple(x.shape[p] for p in perm), 0, [v.strides[p] for p in perm])


def _broadcast_in_dim(ctx, x, *, shape, broadcast_dimensions):
    base = _contiguous_strides(x.shape)
    strides = [0] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        if x.shape[src] == shape[dst]:
            strides[dst] = base[src]
    return ctx.copy(View(x, shape, 0, strides))


def _reshape(ctx, x, *, new_sizes):
    return x.reshape(new_sizes)


def _transpose(ctx, x, *, permutation):
    return ctx.copy(_transpose_view(x, permutation))


def _rev(ctx, x, *, dimensions):
    v = View(x)
    off = 0
    for d in dimensions:
        off += (x.shape[d] - 1) * v.strides[d]
        v.strides[d] = -v.strides[d]
    return ctx.copy(View(x, x.shape, off, v.strides))


def _slice_view(x: CudaArray, start, limit, strides) -> View:
    base = _contiguous_strides(x.shape)
    shape = tuple(max(0, -(-(lim - s) // st)) for s, lim, st in zip(start, limit, strides))
    off = sum(s * b for s, b in zip(start, base))
    return View(x, shape, off, [b * st for b, st in zip(base, strides)])


def _slice(ctx, x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return ctx.copy(_slice_view(x, start_indices, limit_indices, strides))


def _concatenate(ctx, *xs, dimension):
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    out = ctx.empty(shape, xs[0].dtype)
    base = _contiguous_strides(shape)
    start = 0
    for x in xs:
        if x.size:
            launch_strided(ctx.rt, x.shape, [View(x)], "{0}", out, View(out, x.shape, start * base[dimension], base))
        start += x.shape[dimension]
    return out


def _pad(ctx, x, padding_value, *, padding_config):
    inner = [d + max(d - 1, 0) * it for d, (_, _, it) in zip(x.shape, padding_config)]
    tmp_shape = [max(lo, 0) + n + max(hi, 0) for n, (lo, hi, _) in zip(inner, padding_config)]
    fill = padding_value if not isinstance(padding_value, CudaArray) else None
    if fill is None:
        tmp = _broadcast_in_dim(ctx, padding_value, shape=tuple(tmp_shape), broadcast_dimensions=())
    else:
        tmp = ctx.empty(tmp_shape, x.dtype)
        launch_strided(ctx.rt, tuple(tmp_shape), [x.dtype.type(np.asarray(fill).reshape(())[()])], "{0}", tmp)
    base = _contiguous_strides(tmp_shape)
    off = sum(max(lo, 0) * b for (lo, _, _), b in zip(padding_config, base))
    strides = [b * (it + 1) for b, (_, _, it) in zip(base, padding_config)]
    if x.size:
        launch_strided(ctx.rt, x.shape, [View(x)], "{0}", tmp, View(tmp, x.shape, off, strides))
    full = [lo + n + hi for n, (lo, hi, _) in zip(inner, padding_config)]
    start = [-min(lo, 0) for lo, _, _ in padding_config]
    if list(full) == tmp_shape:
        return tmp
    return ctx.copy(_slice_view(tmp, start, [s + f for s, f in zip(start, full)], [1] * len(full)))


def _reduce(kind: str) -> Callable:
    def impl(ctx, x, *, axes):
        name = f"reduce_{kind}"
        _native(name, x)
        keep = [i for i in range(x.ndim) if i not in axes]
        out_shape = tuple(x.shape[i] for i in keep)
        rows = math.prod(out_shape)
        cols = math.prod(x.shape[i] for i in axes)
        xt = ctx.contiguous(_transpose_view(x, keep + list(axes))) if axes else x
        out = ctx.empty(out_shape, x.dtype)
        if rows == 0:
            return out
        if cols == 0:
            return launch_strided(ctx.rt, out_shape, [_identity(kind, x.dtype)], "{0}", out)
        kern = ctx.rt.compile(reduce_source(kind, x.dtype, ctx.rt.simulated), "kernel")
        ctx.rt.launch(kern, min(rows, 65535), reduce_block(ctx.rt.simulated),
                      [xt, out, rows, cols, _identity(kind, x.dtype)])
        return out

    return impl


def _dot_general(ctx, x, y, *, dimension_numbers, preferred_element_type=None):
    out_dtype = np.dtype(preferred_element_type or x.dtype)
    if not (x.dtype == y.dtype == out_dtype and (x.dtype in (F32, F64) or x.dtype in COMPLEX_DTYPES)):
        raise UnsupportedOnDevice(
            f"'dot_general' on the device multiplies float32, float64, complex64 or complex128 (cuBLAS), got "
            f"{x.dtype.name} x {y.dtype.name} -> {out_dtype.name}; cast the operands, or run it on the CPU with "
            "x.to_device('cpu')"
        )
    (lc, rc), (lb, rb) = dimension_numbers
    xf = [i for i in range(x.ndim) if i not in lc and i not in lb]
    yf = [i for i in range(y.ndim) if i not in rc and i not in rb]
    B = math.prod(x.shape[i] for i in lb)
    M = math.prod(x.shape[i] for i in xf)
    N = math.prod(y.shape[i] for i in yf)
    K = math.prod(x.shape[i] for i in lc)
    out_shape = tuple([x.shape[i] for i in lb] + [x.shape[i] for i in xf] + [y.shape[i] for i in yf])
    out = ctx.empty((B, M, N), out_dtype)
    if B * M * N == 0:
        return out.reshape(out_shape)
    if K == 0:
        return launch_strided(ctx.rt, (B, M, N), [out_dtype.type(0)], "{0}", out).reshape(out_shape)

    def operand(a, batch, first, second):
        # a (batch, first, second) matrix stack, or its transpose when that is the layout already in memory
        straight = list(batch) + list(first) + list(second)
        swapped = list(batch) + list(second) + list(first)
        rows, cols = math.prod(a.shape[i] for i in first), math.prod(a.shape[i] for i in second)
        if straight == list(range(a.ndim)):
            return a.reshape((B, rows, cols)), False
        if swapped == list(range(a.ndim)):
            return a.reshape((B, cols, rows)), True
        return ctx.contiguous(_transpose_view(a, straight)).reshape((B, rows, cols)), False

    a, ta = operand(x, lb, xf, lc)
    b, tb = operand(y, rb, rc, yf)
    ctx.rt.gemm(a, b, out, ta, tb)
    return out.reshape(out_shape)


def index_source(k: int, mode: str, simulated: bool = False) -> str:
    """The kernel of a gather (``mode="gather"``) or an atomic scatter-add (``"add"``) over ``k`` indexed front axes.
    Each element ``i`` of the result (gather) or of the updates (scatter) is index tuple ``p = i // R`` and rest
    offset ``i % R``; a negative index counts from the end, one out of range sets ``flag[0]`` (the caller raises)."""
    sizes = [f"f{a}" for a in range(k)]
    strides = [f"s{a}" for a in range(k)]
    lines = [*_header(simulated), f"def kernel(x, idx, out, flag, n, R, {', '.join(sizes + strides)}):",
             "    i = cuda.grid(1)", "    step = cuda.gridsize(1)", "    while i < n:", "        p = i // R",
             "        off = i - p * R"]
    for a in range(k):
        lines += [f"        j = idx[p * {k} + {a}]", "        if j < 0:", f"            j += f{a}",
                  f"        if j < 0 or j >= f{a}:", "            flag[0] = 1", "            j = 0",
                  f"        off += j * s{a}"]
    lines.append("        out[i] = x[off]" if mode == "gather" else "        cuda.atomic.add(out, off, x[i])")
    lines += ["        i += step", ""]
    return "\n".join(lines)


_ATOMIC_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64))


def _indexed(ctx, name, x, idx, axes, updates=None):
    _native(name, x, idx)
    rest = [d for d in range(x.ndim) if d not in axes]
    perm = list(axes) + rest
    front = ctx.contiguous(_transpose_view(x, perm))
    R = math.prod(x.shape[d] for d in rest)
    sizes = [x.shape[a] for a in axes]
    strides = [s * R for s in _contiguous_strides(sizes)]
    k = len(axes)
    P = math.prod(idx.shape[:-1])
    out_shape = tuple(idx.shape[:-1]) + tuple(x.shape[d] for d in rest)
    flag = ctx.rt.to_device(np.zeros(1, np.int32), ctx.index)
    kern = ctx.rt.compile(index_source(k, "gather" if updates is None else "add", ctx.rt.simulated), "kernel")
    n = P * R
    if updates is None:
        out = ctx.empty(out_shape, x.dtype)
        src = front
    else:
        # atomics add into ``out``: never into the operand's own buffer (a view of it when no transpose was needed)
        out, src = front if front.handle is not x.handle else ctx.copy(View(x)), updates
    if n:
        blocks, threads = launch_config(n)
        ctx.rt.launch(kern, blocks, threads, [src, idx, out, flag, n, R, *sizes, *strides])
        if ctx.rt.to_host(flag)[0]:  # one int read back: kernels cannot raise, and a clamped index is a wrong answer
            raise IndexError(
                f"{name}: index out of bounds for operand shape {x.shape} along axes {tuple(axes)} (on {x.device})"
            )
    if updates is None:
        return out
    inverse = [perm.index(d) for d in range(x.ndim)]
    return ctx.contiguous(_transpose_view(out.reshape([x.shape[d] for d in perm]), inverse))


def _gather(ctx, x, idx, *, axes):
    return _indexed(ctx, "gather", x, idx, axes)


def _scatter_add(ctx, x, idx, updates, *, axes):
    if x.dtype not in _ATOMIC_DTYPES:
        raise UnsupportedOnDevice(
            f"'scatter_add' on {x.dtype.name}: CUDA atomic adds take float32, float64 and 32/64-bit integers; cast "
            "first, or run it on the CPU with x.to_device('cpu')"
        )
    return _indexed(ctx, "scatter_add", x, idx, axes, updates)


def _block_lines(k0: str, k1: str, c0: str, c1: str, indent: str = "        ") -> list[str]:
    """Threefry-2x32-20 (``kernels/threefry.py``'s block function: the same rotations and key schedule) of key
    words ``k0, k1`` and counter words ``c0, c1`` into ``x0, x1``, uint32 arithmetic wrapping as on the CPU."""
    from .threefry import _PARITY, R0, R1, R2, R3, R4, R5, R6, R7  # the constants the CPU kernel uses

    rot = [int(r) for r in (R0, R1, R2, R3, R4, R5, R6, R7)]
    lines = [f"ka = np.uint32({k0})", f"kb = np.uint32({k1})", f"kc = np.uint32(ka ^ kb ^ np.uint32({int(_PARITY)}))",
             f"x0 = np.uint32(np.uint32({c0}) + ka)", f"x1 = np.uint32(np.uint32({c1}) + kb)"]
    keys = ["ka", "kb", "kc"]
    for s in range(1, 6):
        for r in rot[:4] if s % 2 == 1 else rot[4:]:
            lines += ["x0 = np.uint32(x0 + x1)",
                      f"x1 = np.uint32(np.uint32(np.uint32(x1 << np.uint32({r})) | (x1 >> np.uint32({32 - r}))) ^ x0)"]
        lines += [f"x0 = np.uint32(x0 + {keys[s % 3]})", f"x1 = np.uint32(x1 + {keys[(s + 1) % 3]} + np.uint32({s}))"]
    return [indent + line for line in lines]


def threefry_source(simulated: bool = False) -> str:
    """The ``threefry2x32`` primitive over flat uint32 arrays, bit-identical to the CPU."""
    lines = [*_header(simulated), "def kernel(k0s, k1s, x0s, x1s, out0, out1, n):", "    i = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while i < n:",
             *_block_lines("k0s[i]", "k1s[i]", "x0s[i]", "x1s[i]"),
             "        out0[i] = x0", "        out1[i] = x1", "        i += step", ""]
    return "\n".join(lines)


# how random_bits/random_uniform turn a block into one element, as kernels/threefry.py's samplers do: 32-bit
# results take word (i % 2) of block i // 2 (an odd last element the first word), 64-bit ones block i whole
_SAMPLERS = {
    ("uint32", False): (32, "w"),
    ("float32", False): (32, "np.float32(np.int32(w >> np.uint32(8))) * np.float32(2.0 ** -24)"),
    ("float32", True): (32, "np.float32(np.int32(((w >> np.uint32(9)) << np.uint32(1)) | np.uint32(1)))"
                            " * np.float32(2.0 ** -24)"),
    ("uint64", False): (64, "w"),
    ("float64", False): (64, "np.float64(np.int64(w >> np.uint64(11))) * np.float64(2.0 ** -53)"),
    ("float64", True): (64, "(np.float64(np.int64(w >> np.uint64(12))) * np.float64(2) + np.float64(1))"
                            " * np.float64(2.0 ** -53)"),
}


def sampler_source(dtype: str, open_: bool = False, simulated: bool = False) -> str:
    """Keyed random numbers: ``out[l, i]`` of lane ``l``'s stream (``keys[2 l], keys[2 l + 1]``), bit-identical
    to the CPU samplers."""
    width, value = _SAMPLERS[(dtype, open_)]
    if width == 32:
        ctr = ["        j = np.uint64(i // 2)"]
        word = ["        w = x0 if i % 2 == 0 else x1"]
    else:
        ctr = ["        j = np.uint64(i)"]
        word = ["        w = (np.uint64(x0) << np.uint64(32)) | np.uint64(x1)"]
    lines = [*_header(simulated), "def kernel(keys, out, lanes, m):", "    t = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while t < lanes * m:", "        lane = t // m",
             "        i = t - lane * m",
             *ctr, *_block_lines("keys[2 * lane]", "keys[2 * lane + 1]", "j >> np.uint64(32)",
                                 "j & np.uint64(0xFFFFFFFF)"),
             *word, f"        out[t] = {value}", "        t += step", ""]
    return "\n".join(lines)


def _keyed(name):
    def impl(ctx, key, *, shape, dtype, **flags):
        d = np.dtype(dtype)
        open_ = bool(flags.get("open", False))
        if (d.name, open_) not in _SAMPLERS or set(flags) - {"open"}:
            raise UnsupportedOnDevice(f"'{name}' with dtype {d.name} and {flags} has no CUDA kernel")
        _native(name, key)
        lanes, m = key.size // 2, math.prod(shape)
        out = ctx.empty(tuple(key.shape[:-1]) + tuple(shape), d)
        keys = ctx.contiguous(View(key)) if key.dtype == np.uint32 else None
        if lanes * m:
            blocks, threads = launch_config(lanes * m)
            ctx.rt.launch(ctx.rt.compile(sampler_source(d.name, open_, ctx.rt.simulated), "kernel"), blocks,
                          threads, [keys, out, lanes, m])
        return out

    return impl


def _threefry(ctx, k0, k1, x0, x1):
    _native("threefry2x32", k0, k1, x0, x1)
    shape = tuple(np.broadcast_shapes(*(a.shape for a in (k0, k1, x0, x1))))
    ins = [ctx.contiguous(broadcast_view(a, shape)) for a in (k0, k1, x0, x1)]
    u32 = np.dtype(np.uint32)
    out0, out1 = ctx.empty(shape, u32), ctx.empty(shape, u32)
    n = math.prod(shape)
    if n:
        blocks, threads = launch_config(n)
        ctx.rt.launch(ctx.rt.compile(threefry_source(ctx.rt.simulated), "kernel"), blocks, threads,
                      [*ins, out0, out1, n])
    return [out0, out1]


SORT_MAX_ROW = 16384  # a rank sort compares every pair of a row: past this a row wants a merge sort


def sort_source(n_ops: int, num_keys: int, floats: Sequence[bool], simulated: bool = False) -> str:
    """A stable sort of rows by rank: element ``i`` goes to the number of elements before it in the order (keys
    compared lexicographically, NaN after every number, ties by position), one thread per element."""
    ins = [f"a{k}" for k in range(n_ops)]
    outs = [f"o{k}" for k in range(n_ops)]
    lines = [*_header(simulated), f"def kernel({', '.join(ins + outs)}, rows, n):", "    t = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while t < rows * n:", "        base = (t // n) * n",
             "        i = t - base"]
    lines += [f"        v{k} = a{k}[t]" for k in range(num_keys)]
    lines += ["        rank = 0", "        for j in range(n):", "            before = j < i"]
    for k in reversed(range(num_keys)):
        w = f"a{k}[base + j]"
        if floats[k]:
            lt = f"(({w} < v{k}) or (v{k} != v{k} and {w} == {w}))"
            eq = f"(({w} == v{k}) or ({w} != {w} and v{k} != v{k}))"
        else:
            lt, eq = f"({w} < v{k})", f"({w} == v{k})"
        lines.append(f"            before = {lt} or ({eq} and before)")
    lines += ["            if before:", "                rank += 1"]
    lines += [f"        o{k}[base + rank] = a{k}[t]" for k in range(n_ops)]
    lines += ["        t += step", ""]
    return "\n".join(lines)


def _sort(ctx, *operands, dimension, num_keys):
    _native("sort", *operands)
    x = operands[0]
    n = x.shape[dimension]
    if n > SORT_MAX_ROW:
        raise UnsupportedOnDevice(
            f"'sort' of rows of {n} elements on the device: its rank sort takes rows of up to {SORT_MAX_ROW}; sort "
            "on the CPU (x.to_device('cpu'))"
        )
    perm = [d for d in range(x.ndim) if d != dimension] + [dimension]
    rows_in = [ctx.contiguous(_transpose_view(o, perm)) for o in operands]
    outs = [ctx.empty(r.shape, r.dtype) for r in rows_in]
    rows = x.size // n if n else 0
    if rows * n:
        src = sort_source(len(operands), num_keys, [o.dtype.kind == "f" for o in operands[:num_keys]],
                          ctx.rt.simulated)
        blocks, threads = launch_config(rows * n)
        ctx.rt.launch(ctx.rt.compile(src, "kernel"), blocks, threads, [*rows_in, *outs, rows, n])
    inverse = [perm.index(d) for d in range(x.ndim)]
    return [ctx.contiguous(_transpose_view(o, inverse)) for o in outs]


def row_scan_source(kind: str, dtype: np.dtype, simulated: bool = False) -> str:
    """One thread per row of a (rows, n) array, walking the row in order: ``argmax``/``argmin`` (the first extreme,
    the first NaN if any, as NumPy) or ``cumsum`` (``reverse`` walks from the end). Rows are independent, so a
    batch parallelizes across them; a long single row is serial (a block-wide scan is to come)."""
    lines = [*_header(simulated), "def kernel(x, out, rows, n, reverse):", "    r = cuda.grid(1)",
             "    step = cuda.gridsize(1)", "    while r < rows:", "        base = r * n"]
    if kind == "cumsum":
        lines += [f"        acc = np.{dtype.name}(0)", "        for k in range(n):",
                  "            j = n - 1 - k if reverse else k", "            acc += x[base + j]",
                  "            out[base + j] = acc"]
    else:
        cmp = ">" if kind == "argmax" else "<"
        nan = " or v != v" if dtype.kind == "f" else ""
        keep = " and best == best" if dtype.kind == "f" else ""
        lines += ["        best = x[base]", "        idx = 0", "        for j in range(1, n):",
                  "            v = x[base + j]", f"            if (v {cmp} best{nan}){keep}:",
                  "                best = v", "                idx = j", "        out[r] = idx"]
    lines += ["        r += step", ""]
    return "\n".join(lines)


def _row_scan(kind: str):
    def impl(ctx, x, *, axis, **params):
        name = kind
        _native(name, x)
        n = x.shape[axis]
        perm = [d for d in range(x.ndim) if d != axis] + [axis]
        rows_in = ctx.contiguous(_transpose_view(x, perm))
        rows = x.size // n if n else 0
        if kind == "cumsum":
            out = ctx.empty(rows_in.shape, x.dtype)
        else:
            out = ctx.empty(rows_in.shape[:-1], np.dtype(params["index_dtype"]))
        if rows:
            blocks, threads = launch_config(rows)
            ctx.rt.launch(ctx.rt.compile(row_scan_source(kind, x.dtype, ctx.rt.simulated), "kernel"), blocks,
                          threads, [rows_in, out, rows, n, bool(params.get("reverse", False))])
        if kind != "cumsum":
            return out
        inverse = [perm.index(d) for d in range(x.ndim)]
        return ctx.contiguous(_transpose_view(out, inverse))

    return impl


def _iota(ctx, *, dtype, shape, dimension):
    out = ctx.empty(shape, dtype)
    return launch_strided(ctx.rt, tuple(shape), [], f"np.{np.dtype(dtype).name}(c{dimension})", out,
                          View(out)) if shape else out


IMPLS: dict[str, Callable[..., Any]] = {
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "transpose": _transpose,
    "rev": _rev,
    "slice": _slice,
    "concatenate": _concatenate,
    "pad": _pad,
    "reduce_sum": _reduce("sum"),
    "reduce_max": _reduce("max"),
    "reduce_min": _reduce("min"),
    "reduce_prod": _reduce("prod"),
    "reduce_and": _reduce("and"),
    "reduce_or": _reduce("or"),
    "dot_general": _dot_general,
    "gather": _gather,
    "scatter_add": _scatter_add,
    "threefry2x32": _threefry,
    "random_bits": _keyed("random_bits"),
    "random_uniform": _keyed("random_uniform"),
    "sort": _sort,
    "argmax": _row_scan("argmax"),
    "argmin": _row_scan("argmin"),
    "cumsum": _row_scan("cumsum"),
    "iota": _iota,  # an equation of a device program (a rule's index helper traced into a derived jaxpr)
}


def _on_device(ctx: Context, a, keep_scalar: bool):
    """An operand as a device buffer: a CPU number (a 0-d value, or a view repeating one element) is uploaded as
    that one element and broadcast on the device; 0-d ones stay kernel arguments when ``keep_scalar``."""
    if isinstance(a, CudaArray):
        return a
    v = np.asarray(a)
    if v.ndim == 0 and keep_scalar:
        return v
    one = ctx.rt.to_device(v.reshape(-1)[:1].copy().reshape(()), ctx.index)
    return one if v.ndim == 0 else _broadcast_in_dim(ctx, one, shape=v.shape, broadcast_dimensions=())


def run(ctx: Context, name: str, kernel_op: str | None, args: Sequence[Any], params: dict, out_dtype,
        impls: dict[str, Callable[..., Any]] | None = None) -> Any:
    """Primitive ``name`` on device operands. ``kernel_op`` is its fused-kernel op (elementwise primitives),
    ``out_dtype`` its result dtype (from its abstract rule); ``impls`` the table to look it up in (``IMPLS``)."""
    impl = (IMPLS if impls is None else impls).get(name)
    if impl is not None:
        return impl(ctx, *[_on_device(ctx, a, keep_scalar=name == "pad") for a in args], **params)
    args = [_on_device(ctx, a, keep_scalar=True) for a in args]
    first = args[0].dtype if isinstance(args[0], CudaArray) else np.asarray(args[0]).dtype if args else None
    if name in DEVICE_ONLY and first in (F32, F64):
        return elementwise(ctx, name, np.dtype(out_dtype), args, expr=_device_only_expr(name, args))
    int_expr = integer_expr(name, first) if first is not None and first.kind in "iu" else None
    if int_expr is not None:
        return elementwise(ctx, name, np.dtype(out_dtype), args, expr=int_expr)
    if kernel_op is not None and kernel_op in fusion.OPS:
        param = params.get("new_dtype", params.get("y")) if params else None
        return elementwise(ctx, kernel_op, np.dtype(out_dtype), args, param)
    if name in DEVICE_ONLY:
        return elementwise(ctx, name, np.dtype(out_dtype), args, expr=_device_only_expr(name, args))
    raise UnsupportedOnDevice(
        f"'{name}' has no CUDA implementation yet; move its operands to the CPU (x.to_device('cpu')), run it there "
        "and move the result back"
    )


# ------------------------------------------------------------------------------------------- PTX catalog


def _arity(op: str) -> int:
    lowering = fusion.OPS[op]
    if lowering.emit is not None:
        return 1
    t = next(x for x in (lowering.f32, lowering.expr, lowering.f64, lowering.integer, lowering.boolean) if x)
    return len(set(re.findall(r"\{(\d+)\}", t)))


_BITWISE = frozenset({"and", "or", "xor", "not"})  # integer and boolean operands only
# float64 kernels differ from float32 ones only in the functions named (libdevice's double versions): a sample
_F64_SAMPLE = frozenset({"add", "sin", "exp", "floor", "sign", "logistic", "erf", "pow", "isnan"})


def kernel_catalog() -> list[tuple[str, str, list[str], bool]]:
    """Every kind of kernel this module generates, for compiling without a GPU: ``(label, source, argument types
    as numba type names, whether it is a float32 kernel)``. Elementwise kernels of every op at float32 (flat and
    strided; a sample at float64), each reduction, gather and scatter-add, and the simulator's matmul."""
    cases = []
    i64 = "int64"

    def arr(d):
        return f"{np.dtype(d).name}[::1]" if np.dtype(d) != np.bool_ else "boolean[::1]"

    for op in sorted(fusion.OPS):
        for d in (F32, F64) if op in _F64_SAMPLE else (F32,) if op not in _BITWISE else (np.dtype(np.int32),):
            k = _arity(op)
            ins = [np.dtype(np.bool_)] + [d, d] if op == "select" else [d] * k
            param = {"convert": np.dtype(np.int32), "integer_pow": 3}.get(op)
            out = np.dtype(np.int32) if op == "convert" else np.dtype(np.bool_) if op in (
                "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "is_finite") else d
            try:
                expr = elementwise_expr(op, ins, out, param)
            except UnsupportedOnDevice:
                continue
            src = strided_source(1, ["flat"] * len(ins), expr)
            cases.append((f"{op}:{d.name}", src, [*map(arr, ins), arr(out), i64, i64], d == F32))
    for name, (e32, e64) in sorted(DEVICE_ONLY.items()):
        k = len(set(re.findall(r"\{(\d+)\}", e32)))
        for d, e in ((F32, e32), (F64, e64)):
            out = np.dtype(np.bool_) if name == "signbit" else d
            src = strided_source(1, ["flat"] * k, e)
            cases.append((f"{name}:{d.name}", src, [arr(d)] * k + [arr(out), i64, i64], d == F32))
    for name in ("rem", "shift_left", "shift_right"):
        for d in (np.dtype(np.int32), np.dtype(np.uint64)):
            src = strided_source(1, ["flat"] * 2, integer_expr(name, d))
            cases.append((f"{name}:{d.name}", src, [arr(d)] * 3 + [i64, i64], True))
    # a broadcasting (strided) operand beside a scalar one
    src = strided_source(2, ["array", "scalar"], elementwise_expr("mul", [F32, F32], F32))
    cases.append(("mul:strided", src, [arr(F32), "float32", arr(F32), i64, i64, i64, i64, i64, i64], True))
    for kind in ("sum", "max", "min", "prod"):
        cases.append((f"reduce_{kind}:float32", reduce_source(kind, F32), [arr(F32), arr(F32), i64, i64, "float32"],
                      True))
    for mode in ("gather", "add"):
        cases.append((f"{mode}:float32", index_source(2, mode), [arr(F32), arr(np.int64), arr(F32),
                      arr(np.int32), i64, i64, i64, i64, i64, i64], True))
    cases.append(("threefry2x32:uint32", threefry_source(), [arr(np.uint32)] * 6 + [i64], True))
    for (d, open_) in _SAMPLERS:
        cases.append((f"random:{d}:{'open' if open_ else 'closed'}", sampler_source(d, open_),
                      [arr(np.uint32), arr(d), i64, i64], d != "float64"))
    cases.append(("sort:float32,int64", sort_source(2, 1, [True]), [arr(F32), arr(np.int64)] * 2 + [i64, i64], True))
    for kind in ("argmax", "argmin", "cumsum"):
        out = arr(np.int64) if kind != "cumsum" else arr(F32)
        cases.append((f"{kind}:float32", row_scan_source(kind, F32), [arr(F32), out, i64, i64, "boolean"], True))
    from .cuda_backend import MATMUL_SOURCE, MATMUL_TILE  # the simulator's stand-in for cuBLAS

    src = MATMUL_SOURCE.replace("DTYPE", "np.float32").replace("TILE", str(MATMUL_TILE))
    cases.append(("matmul:float32", src, [arr(F32)] * 3 + [i64] * 10 + ["float32"], True))
    return cases


def compile_catalog(cc: tuple[int, int] = (9, 0), catalog: list | None = None) -> dict[str, str]:
    """The PTX of every ``kernel_catalog`` entry (or of ``catalog``'s) for compute capability ``cc`` (needs
    numba-cuda with its NVVM, ``pip install funclib[cuda]``; no GPU, and not the simulator)."""
    from numba import cuda, types  # optional extra: only for this check
    from numba.cuda import dispatcher  # numba-cuda compiles device functions for "the current device"

    class _Target:
        compute_capability = cc

    out = {}
    current = dispatcher.get_current_device
    # with no GPU there is no current device: name the target so the kernels' device functions compile for it
    dispatcher.get_current_device = lambda: _Target
    try:
        for label, src, argtypes, _ in kernel_catalog() if catalog is None else catalog:
            ns: dict[str, Any] = {}
            exec(compile(src, f"<cuda kernel {label}>", "exec"), ns)
            fn = ns["kernel"] if "kernel" in ns else ns["matmul"]
            sig = tuple(eval(t, {**vars(types), "boolean": types.boolean}) for t in argtypes)
            out[label], _ = cuda.compile_ptx(fn, sig, cc=cc)
    finally:
        dispatcher.get_current_device = current
    return out
