"""Calls of compiled functions on device tensors: until the lowering has a CUDA emitter, a jitted function called
with tensors on a CUDA device runs its optimized jaxpr one primitive at a time on that device (each primitive's
device kernel; constants moved there), so ``jit`` composes with device tensors and gives the eager results."""

from __future__ import annotations

import numpy as np

from funclib.core import DeviceTensor, Tensor, _wrap, set_trace
from funclib.jaxpr import Jaxpr, eval_jaxpr


def on_device(values) -> bool:
    """Whether any of ``values`` (tensors) lives on a CUDA device."""
    return any(type(x) is DeviceTensor for x in values)


def consts_on_device(consts, values) -> list:
    """The constants a jitted function closed over (made on the host) on the device of its device ``values``, which
    they join as operands."""
    device = next(d for d in (getattr(x, "device", "cpu") for x in values) if d != "cpu")
    return [_wrap(c).to_device(device) if isinstance(c, np.ndarray) else c.to_device(device) if isinstance(c, Tensor)
            else c for c in consts]


def run_on_device(jaxpr: Jaxpr, buffers) -> list | None:
    """The outputs (buffers) of ``jaxpr`` on ``buffers``, or None when none of them lives on a device."""
    device = next((b.device for b in buffers if type(b) is not np.ndarray and getattr(b, "device", "cpu") != "cpu"),
                  None)
    if device is None:
        return None
    consts = [_wrap(c).to_device(device) for c in jaxpr.cache.get("consts", [])]
    with set_trace(None):
        outs = eval_jaxpr(jaxpr, consts, *[_wrap(b) for b in buffers])
    return [o._value for o in outs]


def call_impl(program_of):
    """The impl of a call primitive (``jit``): ``program_of(jaxpr)`` run on NumPy operands, ``run_on_device`` on
    device ones."""

    def impl(*args, jaxpr, name):
        outs = run_on_device(jaxpr, args)
        return program_of(jaxpr).run([np.asarray(a) for a in args]) if outs is None else outs

    return impl
