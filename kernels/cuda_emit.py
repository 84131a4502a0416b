"""The CUDA emitter: the jit plan's fused and staged regions as generated numba-cuda kernels, device allocations as
memory, cuBLAS and the eager device kernels for every other step (see ``kernels/backend.py``).

The planner, the steps and the program are the CPU's; only the code differs:

- a fused elementwise region is one grid-stride kernel over the collapsed iteration space, each input read at its
  flat index in its own collapsed shape (broadcast axes skipped), sizes passed as run-time arguments, so a new
  batch size reuses the kernel;
- a region ending in a reduction over its trailing axes is one block per kept row, the threads striding over the
  row and combining in a shared-memory tree; over its leading axes, one thread per kept element walking the
  reduced ones (neighbouring threads read neighbouring elements);
- a staged group (softmax, layer norm, a row reduction and its consumers) is one block per row: each pass strides
  over the row's columns, each reduction finishes in shared memory and is seen by every thread before the next
  pass. Values of an earlier pass are recomputed from the row (read again from cache) instead of held in a row
  buffer, so no scratch memory is needed however many rows run at once;
- scalar math comes from ``cuda_math`` (the CPU templates translated to CUDA math of the operands' precision;
  constants are typed module globals), so a float32 kernel holds no float64 instruction;
- every other equation runs its eager device kernel (``primitive``: ``dot_general`` is cuBLAS).

A kernel's source is its cache key: ``load()`` writes it to the private kernel cache as ``cu_<key>.py`` (read back
for tracebacks; one that differs is rewritten) and compiles it once per process through the runtime, which on a
GPU also keeps the compiled code of each signature in the cache (``cuda_backend.NumbaCuda.compile``).

Whole loops are not generated for the device (``loop_kernel`` raises ``Unsupported``).

>>> import numpy as np
>>> from funclib.kernels import fusion
>>> spec = fusion.KernelSpec(rank=1, inputs=(fusion.InputSpec("float32", (False,)),),
...                          ops=(fusion.OpSpec("mul", (("in", 0), ("in", 0)), "float32"),), outputs=(0,))
>>> print(fused_source(spec, simulated=False).split("def kernel")[1].splitlines()[0])
(in0, out0, n0):
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import cuda_math, diskcache, fusion
from .backend import Kernel, Unsupported
from .cuda_backend import NATIVE_DTYPES, CudaArray, UnsupportedOnDevice, launch_config

# threads of a block that reduces a row: 256 on a GPU; one warp in the simulator, which runs each thread in Python
BLOCK_GPU, BLOCK_SIM = 256, 32
# blocks of a grid-stride launch: enough to fill an H100/H200 (132 SMs) several times over
MAX_BLOCKS = 65535


def block_size(simulated: bool) -> int:
    return BLOCK_SIM if simulated else BLOCK_GPU


def _dtype_name(d: np.dtype) -> str:
    return "bool_" if d == np.bool_ else d.name


class _Names:
    """The typed module constants a kernel's expressions use (``c0``, ``c1``, ...), keyed by text and dtype."""

    def __init__(self):
        self.consts: dict[tuple[str, str], str] = {}

    def const(self, val: str, dtype: np.dtype) -> str:
        key = (val, _dtype_name(dtype))
        if key not in self.consts:
            self.consts[key] = f"c{len(self.consts)}"
        return self.consts[key]

    def lines(self) -> list[str]:
        out = []
        for (val, dt), name in self.consts.items():
            # repr of inf/nan is not Python source; float('inf') is
            v = f"float('{val}')" if val in ("inf", "-inf", "nan") else val
            out.append(f"{name} = np.{dt}({v})")
        return out


def _ref_dtype(ref, in_dtypes: Sequence[np.dtype], op_dtypes: Sequence[np.dtype]) -> np.dtype:
    if ref[0] == "in":
        return in_dtypes[ref[1]]
    if ref[0] == "op":
        return op_dtypes[ref[1]]
    return np.dtype(ref[2])


def _check_dtype(d: np.dtype, what: str) -> np.dtype:
    if d not in NATIVE_DTYPES:
        raise Unsupported(f"{what} of {d.name}: device kernels compute in bool, integers, float32 and float64")
    return d


def _op_expr(name: str, param, args, in_dtypes, op_dtypes, out_dtype: np.dtype, names: _Names) -> str:
    """The CUDA expression of one fused op, its operands named as every generator names them (``x<i>``, ``t<j>``,
    typed constants)."""
    texts, dts = [], []
    for r in args:
        d = _check_dtype(_ref_dtype(r, in_dtypes, op_dtypes), f"'{name}'")
        dts.append(d)
        texts.append(f"x{r[1]}" if r[0] == "in" else f"t{r[1]}" if r[0] == "op" else names.const(r[1], d))
    try:
        e = cuda_math.elementwise_expr(name, dts, _check_dtype(out_dtype, f"'{name}'"), param).format(*texts)
    except UnsupportedOnDevice as err:
        raise Unsupported(str(err)) from None
    if out_dtype.kind in "iu" and out_dtype.itemsize < 8 and fusion.OPS[name].wraps:
        e = f"np.{out_dtype.name}({e})"  # wrap at the op's width before later ops compare or divide (as NumPy)
    return e


def _flat_index(coords: Sequence[str], sizes: Sequence[str], bcast: Sequence[bool]) -> str:
    """The flat index into a C-contiguous array of the loop's shape with size 1 on its ``bcast`` axes."""
    idx = ""
    for c, n, b in zip(coords, sizes, bcast):
        if b:
            continue
        idx = c if not idx else f"({idx}) * {n} + {c}"
    return idx or "0"


def _tree(lines: list[str], ind: str, buf: str, kind: str, dtype: np.dtype, block: int) -> None:
    """A shared-memory tree reduction of ``buf`` (one value per thread ``t``); ``buf[0]`` holds the result and
    every thread may read it after the last ``syncthreads``."""
    comb = fusion._combine(kind, "a", "b", dtype)
    lines += [f"{ind}cuda.syncthreads()", f"{ind}w = {block // 2}", f"{ind}while w > 0:",
              f"{ind}    if t < w:", f"{ind}        a = {buf}[t]", f"{ind}        b = {buf}[t + w]",
              f"{ind}        {buf}[t] = {comb}", f"{ind}    cuda.syncthreads()", f"{ind}    w //= 2"]


def _module(names: _Names, simulated: bool, body: list[str]) -> str:
    return "\n".join([*cuda_math.header(simulated), *names.lines(), "", "", *body, ""])


def fused_source(spec: fusion.KernelSpec, simulated: bool) -> str:
    """The numba-cuda source of a fused region: ``kernel(in..., out..., [red0], n0, ..., n<rank-1>)``."""
    r = max(spec.rank, 1)
    names = _Names()
    in_dtypes = [np.dtype(i.dtype) for i in spec.inputs]
    op_dtypes = [np.dtype(o.dtype) for o in spec.ops]
    for d in in_dtypes:
        _check_dtype(d, "an input")
    exprs = [_op_expr(o.name, o.param, o.args, in_dtypes, op_dtypes, op_dtypes[j], names)
             for j, o in enumerate(spec.ops)]
    coords = [f"ix{k}" for k in range(r)]
    sizes = [f"n{k}" for k in range(r)]
    red = spec.reduction
    args = [f"in{i}" for i in range(len(spec.inputs))] + [f"out{k}" for k in range(len(spec.outputs))]
    args += ["red0"] if red is not None else []
    lines = [f"def kernel({', '.join(args + sizes)}):"]

    strided = spec.rank > 0 and any(any(i.bcast) for i in spec.inputs)

    def element(ind: str, flat: str) -> list[str]:
        """Coordinates of flat index ``flat`` (only when an input broadcasts), the loads, the ops and the stores."""
        out = []
        if strided:
            out.append(f"{ind}q = {flat}")
            for k in range(r - 1, 0, -1):
                out += [f"{ind}ix{k} = q % n{k}", f"{ind}q = q // n{k}"]
            out.append(f"{ind}ix0 = q")
        for i, inp in enumerate(spec.inputs):
            idx = _flat_index(coords, sizes, inp.bcast) if strided and any(inp.bcast) else flat
            out.append(f"{ind}x{i} = in{i}[{idx}]")
        out += [f"{ind}t{j} = {e}" for j, e in enumerate(exprs)]
        out += [f"{ind}out{k}[{flat}] = t{j}" for k, j in enumerate(spec.outputs)]
        return out

    if red is None:
        lines += ["    i = cuda.grid(1)", "    step = cuda.gridsize(1)", f"    total = {' * '.join(sizes)}",
                  "    while i < total:", *element("        ", "i"), "        i += step"]
        return _module(names, simulated, lines)
    d = _check_dtype(np.dtype(red.dtype), "a reduction")
    init = names.const(_init_text(red.kind, d), d)
    m = red.n_reduced
    v = f"t{red.op}"
    if red.leading and m < r:
        # one thread per kept element, walking the reduced leading axes: neighbouring threads read neighbours
        kept = " * ".join(sizes[m:])
        reduced = " * ".join(sizes[:m])
        lines += ["    k = cuda.grid(1)", "    step = cuda.gridsize(1)", f"    kept = {kept}",
                  f"    reduced = {reduced}", "    while k < kept:", f"        acc = {init}",
                  "        j = 0", "        while j < reduced:", *element("            ", "j * kept + k"),
                  f"            acc = {fusion._combine(red.kind, 'acc', v, d)}", "            j += 1",
                  "        red0[k] = acc", "        k += step"]
        return _module(names, simulated, lines)
    # one block per kept row (all of it when every axis is reduced), a shared-memory tree over the row
    block = block_size(simulated)
    kept = "1" if red.leading else " * ".join(sizes[: r - m]) or "1"
    reduced = " * ".join(sizes if red.leading else sizes[r - m :])
    lines += [f"    buf = cuda.shared.array({block}, np.{_dtype_name(d)})", "    t = cuda.threadIdx.x",
              "    row = cuda.blockIdx.x", f"    rows = {kept}", f"    cols = {reduced}", "    while row < rows:",
              f"        acc = {init}", "        j = t", "        while j < cols:",
              *element("            ", "row * cols + j"), f"            acc = {fusion._combine(red.kind, 'acc', v, d)}",
              f"            j += {block}", "        buf[t] = acc"]
    _tree(lines, "        ", "buf", red.kind, d, block)
    lines += ["        if t == 0:", "            red0[row] = buf[0]", "        cuda.syncthreads()",
              "        row += cuda.gridDim.x"]
    return _module(names, simulated, lines)


def _init_text(kind: str, d: np.dtype) -> str:
    """The identity of a reduction as constant text (a typed module global, never a float64 literal)."""
    if kind == "sum":
        return "False" if d == np.bool_ else "0"
    if d.kind == "f":
        return "-inf" if kind == "max" else "inf"
    if d == np.bool_:
        return "False" if kind == "max" else "True"
    info = np.iinfo(d)
    return str(info.min if kind == "max" else info.max)


def staged_source(spec: fusion.StagedSpec, simulated: bool) -> str:
    """The numba-cuda source of a staged group: ``kernel(in..., out..., rows, cols)``, one block per row."""
    names = _Names()
    block = block_size(simulated)
    in_dtypes = [_check_dtype(np.dtype(d), "an input") for d, _ in spec.inputs]
    op_dtypes = [np.dtype(o.dtype) for o in spec.ops]
    ops = spec.ops

    def elementwise(j: int) -> bool:
        return not ops[j].row and ops[j].name != "reduce"

    exprs = {j: _op_expr(o.name, o.param, o.args, in_dtypes, op_dtypes, op_dtypes[j], names)
             for j, o in enumerate(ops) if o.name != "reduce"}
    reds = [j for j, o in enumerate(ops) if o.name == "reduce"]
    for j in reds:
        _check_dtype(op_dtypes[j], "a reduction")
    out_at = {j: k for k, j in enumerate(spec.outputs)}
    args = [f"in{i}" for i in range(len(spec.inputs))] + [f"out{k}" for k in range(len(spec.outputs))]
    lines = [f"def kernel({', '.join(args)}, rows, cols):", "    t = cuda.threadIdx.x", "    row = cuda.blockIdx.x"]
    lines += [f"    sh{j} = cuda.shared.array({block}, np.{_dtype_name(op_dtypes[j])})" for j in reds]
    lines += ["    while row < rows:"]
    ind = "        "
    for i, (_, kind) in enumerate(spec.inputs):
        if kind in ("row", "scalar"):
            lines.append(f"{ind}x{i} = in{i}[{'row' if kind == 'row' else '0'}]")

    def closure(roots) -> list[int]:
        """The elementwise ops ``roots`` need, in program order (earlier passes' values are recomputed)."""
        need: set[int] = set()
        todo = [j for j in roots if elementwise(j)]
        while todo:
            j = todo.pop()
            if j in need:
                continue
            need.add(j)
            todo += [a[1] for a in ops[j].args if a[0] == "op" and elementwise(a[1])]
        return sorted(need)

    for s in range(spec.n_stages + 1):
        for j, op in enumerate(ops):
            if op.row and op.stage == s:
                lines.append(f"{ind}t{j} = {'acc' + str(j) if op.name == 'reduce' else exprs[j]}")
                if j in out_at:
                    lines += [f"{ind}if t == 0:", f"{ind}    out{out_at[j]}[row] = t{j}"]
        if s == spec.n_stages:
            break
        stores = [j for j in out_at if elementwise(j) and ops[j].stage == s]
        pass_reds = [j for j in reds if ops[j].stage - 1 == s]
        sources = [ops[j].args[0] for j in pass_reds]
        todo = closure(stores + [a[1] for a in sources if a[0] == "op"])
        if not stores and not pass_reds:
            continue
        for j in pass_reds:
            lines.append(f"{ind}acc{j} = {names.const(_init_text(ops[j].param, op_dtypes[j]), op_dtypes[j])}")
        used_in = sorted({a[1] for j in todo for a in ops[j].args if a[0] == "in"}
                         | {a[1] for a in sources if a[0] == "in"})
        lines += [f"{ind}c = t", f"{ind}while c < cols:"]
        inner = ind + "    "
        for i in used_in:
            kind = spec.inputs[i][1]
            if kind in ("full", "col"):
                lines.append(f"{inner}x{i} = in{i}[{'row * cols + c' if kind == 'full' else 'c'}]")
        for j in todo:
            lines.append(f"{inner}t{j} = {exprs[j]}")
            if j in stores:
                lines.append(f"{inner}out{out_at[j]}[row * cols + c] = t{j}")
        for j, src in zip(pass_reds, sources):
            v = f"x{src[1]}" if src[0] == "in" else f"t{src[1]}" if src[0] == "op" else names.const(
                src[1], np.dtype(src[2]))
            lines.append(f"{inner}acc{j} = {fusion._combine(ops[j].param, f'acc{j}', v, op_dtypes[j])}")
        lines.append(f"{inner}c += {block}")
        for j in pass_reds:
            lines.append(f"{ind}sh{j}[t] = acc{j}")
        for j in pass_reds:
            _tree(lines, ind, f"sh{j}", ops[j].param, op_dtypes[j], block)
        for j in pass_reds:
            lines.append(f"{ind}acc{j} = sh{j}[0]")
        if pass_reds:
            lines.append(f"{ind}cuda.syncthreads()")  # every thread has its result before the buffers are reused
    lines.append(f"{ind}row += cuda.gridDim.x")
    return _module(names, simulated, lines)


class CudaKernel:
    """Generated numba-cuda source; ``load()`` compiles it (through the kernel cache) and returns the function the
    steps call, ``fn(*arrays, dims)``, which launches it over a grid sized from ``dims``."""

    __slots__ = ("source", "scratch", "argtypes", "_rt", "_grid", "_fn")

    def __init__(self, source: str, rt, grid: Callable[[Sequence[int]], tuple[int, int]], argtypes: Sequence[str]):
        self.source = source
        self.scratch: tuple[np.dtype, ...] = ()
        self.argtypes = tuple(argtypes)  # numba type names of its arguments, to compile it ahead (the PTX check)
        self._rt = rt
        self._grid = grid
        self._fn = None

    def load(self) -> Callable[..., None]:
        if self._fn is None:
            kern = self._rt.compile(self.source, "kernel", filename=source_file(self.source),
                                    cache_key=diskcache.kernel_key(self.source))
            launch, grid = self._rt.launch, self._grid

            # the last dims array seen (a step passes the same one at every call), its sizes and grid, as one tuple
            # replaced whole (threads may share the kernel)
            last = [(None, None, None)]

            def run(*args):
                d = args[-1]
                seen = last[0]
                if seen[0] is not d:
                    dims = [int(n) for n in d]
                    seen = last[0] = (d, dims, grid(dims))
                blocks, threads = seen[2]
                launch(kern, blocks, threads, [*args[:-1], *seen[1]])

            self._fn = run
        return self._fn


def source_file(source: str) -> str | None:
    """The path of ``source`` in the private kernel cache (``cu_<key>.py``, written if missing or different), or
    None when the cache is refused."""
    d = diskcache.private_dir()
    if d is None:
        return None
    path = os.path.join(d, f"cu_{diskcache.kernel_key(source)}.py")
    data = source.encode()
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return path
    except OSError:
        pass
    try:
        diskcache.write_atomic(path, data)
    except OSError:
        return None
    return path


def _arr(d) -> str:
    d = np.dtype(d)
    return "boolean[::1]" if d == np.bool_ else f"{d.name}[::1]"


def _elementwise_grid(dims: Sequence[int]) -> tuple[int, int]:
    return launch_config(math.prod(dims))


class CudaEmitter:
    """The emitter for CUDA device ``index`` (see ``kernels.backend.Emitter`` and the module docstring).

    ``run_primitive(name, impl, params)`` gives the function running one non-fused equation on the device (the
    caller knows the primitives; this layer does not)."""

    carrier: dict = {}  # dtypes the kernels do not compute in are not fused at all
    # one elementwise op is a generated kernel too: its source and launch plan are made once per layout, where
    # the eager path (cuda_ops) rebuilds its operand views at every call
    fuses_single_ops = True

    def __init__(self, rt, index: int, run_primitive: Callable[[str, Callable, dict], Callable]):
        self.rt = rt
        self.index = index
        self.name = f"cuda:{index}"
        self._run_primitive = run_primitive
        self._supports: dict = {}
        self.block = block_size(rt.simulated)

    def supports(self, op: str, dtypes_in: Sequence[np.dtype], dtype_out: np.dtype) -> bool:
        key = (op, tuple(dtypes_in), dtype_out)
        ok = self._supports.get(key)
        if ok is None:
            ok = all(np.dtype(d) in NATIVE_DTYPES for d in (*dtypes_in, dtype_out)) and fusion.supports(
                op, list(dtypes_in), dtype_out)
            if ok and fusion.OPS[op].emit is None:
                try:  # the template must translate to CUDA math (every name it calls has a device version)
                    cuda_math.elementwise_expr(op, list(dtypes_in), dtype_out)
                except UnsupportedOnDevice:
                    ok = False
            self._supports[key] = ok
        return ok

    def reducible(self, dtype: np.dtype) -> bool:
        return np.dtype(dtype) in NATIVE_DTYPES

    def fused_kernel(self, spec: fusion.KernelSpec, cols: int) -> Kernel:
        src = fused_source(spec, self.rt.simulated)
        red = spec.reduction
        r = max(spec.rank, 1)
        types = [_arr(i.dtype) for i in spec.inputs] + [_arr(spec.ops[j].dtype) for j in spec.outputs]
        types += [_arr(red.dtype)] if red is not None else []
        types += ["int64"] * r
        if red is None:
            return CudaKernel(src, self.rt, _elementwise_grid, types)
        m = red.n_reduced
        if red.leading and m < r:
            return CudaKernel(src, self.rt, lambda dims: launch_config(math.prod(dims[m:])), types)
        block = self.block
        kept = (lambda dims: math.prod(dims[: r - m])) if not red.leading else (lambda dims: 1)
        return CudaKernel(src, self.rt, lambda dims: (max(1, min(kept(dims), MAX_BLOCKS)), block), types)

    def staged_kernel(self, spec: fusion.StagedSpec, cols: int) -> Kernel:
        block = self.block
        types = [_arr(d) for d, _ in spec.inputs] + [_arr(spec.ops[j].dtype) for j in spec.outputs]
        return CudaKernel(staged_source(spec, self.rt.simulated), self.rt,
                          lambda dims: (max(1, min(dims[0], MAX_BLOCKS)), block), [*types, "int64", "int64"])

    def loop_kernel(self, spec: Any):
        raise Unsupported("whole loops are not generated for CUDA devices yet")

    def empty(self, shape: tuple[int, ...], dtype) -> CudaArray:
        return self.rt.empty(tuple(shape), np.dtype(dtype), self.index)

    def asarray(self, x: Any) -> CudaArray:
        if type(x) is CudaArray:
            return x
        return self.rt.to_device(np.asarray(x), self.index)

    def placed(self, nbytes: int) -> bool:
        return False

    @staticmethod
    def anchor(arrays: Sequence[Any]) -> None:
        return None

    def empty_near(self, shape: tuple[int, ...], dtype, anchor: Any, k: int) -> CudaArray:
        return self.empty(shape, dtype)

    def scratch(self, n: int, dtype, anchor: Any, k: int) -> CudaArray:
        return self.empty((n,), dtype)

    def primitive(self, name: str, impl: Callable, params: dict) -> Callable:
        return self._run_primitive(name, impl, params)
