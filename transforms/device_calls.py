"""Calls of compiled functions on device tensors: a jitted function called with tensors on a CUDA device runs its
optimized jaxpr lowered for that device, the same plan as on the CPU over the CUDA emitter
(``kernels/cuda_emit.py``): fused and staged regions as generated kernels, ``dot_general`` on cuBLAS, every other
equation its eager device kernel. The program is cached on the jaxpr per device, beside the CPU's.

A program holding a loop (``scan``, ``while``, ``cond``) is not lowered for a device yet: its equations run one
at a time on the device, as eagerly (a loop's body evaluated per iteration on the device values).
"""

from __future__ import annotations

import functools
import threading
from typing import NamedTuple

import numpy as np

from funclib.core import PRIMITIVES, DeviceTensor, Tensor, _wrap, aval_of, set_trace
from funclib.jaxpr import Jaxpr, eval_jaxpr

from .lowering import compile_program

_LOOPS = frozenset({"scan", "while", "cond"})
_lock = threading.RLock()


def on_device(values) -> bool:
    """Whether any of ``values`` (tensors) lives on a CUDA device."""
    return any(type(x) is DeviceTensor for x in values)


def device_consts(entry, args) -> list:
    """A jitted function's constants (``entry.consts``: captured, or made while tracing such as index helpers) on
    the device of its device ``args``, where its program runs: moved once, kept per device on its jaxpr. A constant
    already on a device stays there (a different one raises where it meets the others)."""
    consts = entry.consts
    device = next((x.device for x in args if type(x) is DeviceTensor), None)
    if device is None or not consts:
        return consts
    key = ("consts", device)
    moved = entry.jaxpr.cache.get(key)
    if moved is None:
        moved = entry.jaxpr.cache[key] = [
            c.to_device(device) if type(c) is not DeviceTensor and not isinstance(c, (int, float, bool, complex))
            else c
            for c in map(_as_tensor, consts)
        ]
    return moved


class _Derived(NamedTuple):
    consts: list
    jaxpr: Jaxpr


def call_consts(jaxpr: Jaxpr, consts, args) -> list:
    """The constants of a derived jaxpr (a jit call's transpose, whose rules build masks and weights on the host),
    bound as the leading arguments of its call: as tensors, on the device of ``args`` when one lives on a device
    (moved once per device, as ``device_consts`` moves a jitted function's)."""
    return [c if isinstance(c, Tensor) else _wrap(c) for c in device_consts(_Derived(consts, jaxpr), args)]


def _as_tensor(c):
    return c if isinstance(c, (Tensor, int, float, bool, complex)) else _wrap(c)


def device_of(values) -> str:
    """The device of the first of ``values`` (tensors and tracers) not on the CPU, else ``"cpu"``."""
    for x in values:
        d = x._value.device if type(x) is DeviceTensor else "cpu" if type(x) is Tensor else x.device
        if d != "cpu":
            return d
    return "cpu"


def device_signature(args) -> tuple | None:
    """``(shape, dtype, device)`` per argument when every one is a device tensor (``jit``'s fast path), else None."""
    if not args or any(type(a) is not DeviceTensor for a in args):
        return None
    return tuple([(a._value.shape, a._value.dtype, a._value.device) for a in args])


def remember(fast: dict, sig, entry, args) -> None:
    """Keep in ``jit``'s fast-path table ``fast``, under ``sig`` when it is a device signature, the device program,
    its constant buffers, the output tree, whether there is one output and the weak outputs."""
    if sig is None or not sig[0] or len(sig[0][0]) != 3:
        return
    dp = device_program(entry.jaxpr, args[0]._value.device)
    if dp is not None:
        vals = [dp.emitter.asarray(getattr(c, "_value", c)) for c in device_consts(entry, args)]
        one = entry.out_tree.is_leaf() and entry.weak_out is None
        fast[sig] = (dp.program, vals, entry.out_tree, one, entry.weak_out)


def program_on(jaxpr: Jaxpr, args):
    """The program ``jaxpr`` runs as on the device of ``args`` (what ``jit(f).lower`` shows), or None on the CPU."""
    device = next((x.device for x in args if type(x) is DeviceTensor), None)
    dp = device_program(jaxpr, device) if device is not None else None
    return None if dp is None else dp.program


def _device(buffers) -> str | None:
    return next((b.device for b in buffers if type(b) is not np.ndarray and getattr(b, "device", "cpu") != "cpu"),
                None)


def _run_eagerly(jaxpr: Jaxpr, buffers, device: str) -> list:
    consts = [_wrap(c).to_device(device) for c in jaxpr.cache.get("consts", [])]
    with set_trace(None):
        outs = eval_jaxpr(jaxpr, consts, *[_wrap(b) for b in buffers])
    return [o._value for o in outs]


def run_on_device(jaxpr: Jaxpr, buffers) -> list | None:
    """The outputs (buffers) of ``jaxpr`` on ``buffers``, or None when none of them lives on a device."""
    device = _device(buffers)
    if device is None:
        return None
    prog = device_program(jaxpr, device)
    if prog is None:
        return _run_eagerly(jaxpr, buffers, device)
    emitter = prog.emitter
    return prog.program.run([emitter.asarray(b) for b in buffers])


class _DeviceProgram:
    __slots__ = ("program", "emitter")

    def __init__(self, program, emitter):
        self.program, self.emitter = program, emitter


def device_program(jaxpr: Jaxpr, device: str) -> _DeviceProgram | None:
    """``jaxpr`` lowered for CUDA ``device`` (cached on it), or None when it holds a loop."""
    key = ("program", device)
    prog = jaxpr.cache.get(key)
    if prog is None:
        with _lock:
            prog = jaxpr.cache.get(key)
            if prog is None:
                if any(e.prim.name in _LOOPS for e in jaxpr.eqns):
                    prog = jaxpr.cache[key] = False
                else:
                    emitter = cuda_emitter(device)
                    prog = _DeviceProgram(compile_program(jaxpr, name=jaxpr.cache.get("fun_name", "program"),
                                                          emitter=emitter), emitter)
                    jaxpr.cache[key] = prog
    return prog or None


@functools.cache
def cuda_emitter(device: str):
    """The CUDA emitter of ``device`` (``"cuda:N"``)."""
    from funclib.kernels import cuda_backend, cuda_emit, devices  # only once a tensor lives on a device

    index = devices.cuda_index(device)
    rt = cuda_backend.require_device(index)
    return cuda_emit.CudaEmitter(rt, index, functools.partial(_primitive_step, device, rt, index))


def _primitive_step(device: str, rt, index: int, name: str, impl, params: dict):
    """The step running one non-fused equation of primitive ``name`` on the device: its eager device kernel (a call
    primitive whose impl evaluates funclib operations runs that impl on the device values)."""
    from funclib.kernels import cuda_backend, cuda_ops, cuda_prims, devices  # only once a device is in use

    prim = PRIMITIVES.get(name)
    if prim is None:
        def refuse(*args):
            raise devices.UnsupportedOnDeviceError(
                f"'{name}' (a lowering-only operation) has no CUDA implementation yet (on {device}); run this "
                "function on the CPU (x.to_device('cpu'))"
            )

        return refuse
    if prim.runs_on_devices:
        return functools.partial(impl, **params) if params else impl
    ctx = cuda_ops.Context(rt, index)
    elementwise = prim.family in ("unary", "binary", "select")
    dtypes: dict = {}  # result dtype per operand signature (elementwise kernels are generated for it)

    def step(*args):
        out_dtype = None
        if elementwise:
            sig = tuple([(getattr(a, "shape", ()), getattr(a, "dtype", type(a))) for a in args])
            out_dtype = dtypes.get(sig)
            if out_dtype is None:
                out_dtype = dtypes[sig] = prim.abstract_eval(*map(aval_of, args), **params).dtype
        try:
            return cuda_prims.run(ctx, name, prim.kernel, args, params, out_dtype)
        except cuda_backend.UnsupportedOnDevice as e:
            raise devices.UnsupportedOnDeviceError(f"{e} (primitive '{name}' on {device}, under jit)") from None

    return step


def call_impl(program_of):
    """The impl of a call primitive (``jit``): ``program_of(jaxpr)`` run on NumPy operands, the device program
    (``run_on_device``) on device ones."""

    def impl(*args, jaxpr, name):
        outs = run_on_device(jaxpr, args)
        return program_of(jaxpr).run([np.asarray(a) for a in args]) if outs is None else outs

    return impl
