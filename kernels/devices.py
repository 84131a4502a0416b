"""Devices: where a tensor's buffer lives (``"cpu"``, ``"cuda:0"``, ...), moving buffers between them, and running
a primitive on device operands.

A tensor on a CUDA device is a ``DeviceTensor`` (a ``Tensor`` whose buffer is a ``kernels.cuda_backend.CudaArray``).
Data moves only when asked (``to_device``, ``device=`` on creation); an operation whose operands live on different
devices raises ``DeviceMismatchError`` naming both, except that 0-d CPU values (Python scalars, the scalars
wrappers make of them) join any device as kernel arguments, as in PyTorch. numba-cuda is imported the first time a
CUDA device is asked for, never by ``import funclib``.

>>> canonical("cuda"), device_of(np.zeros(2))
('cuda:0', 'cpu')
"""

from __future__ import annotations

import importlib.util
import re
import weakref
from typing import Any

import numpy as np


class DeviceMismatchError(ValueError):
    """The operands of one operation live on different devices (``funclib.errors.DeviceMismatchError``)."""


class UnsupportedOnDeviceError(NotImplementedError):
    """A primitive (named in the message) has no implementation on the device its operands live on."""

CPU = "cpu"
_SPELLING = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


def canonical(device: Any, op: str = "device") -> str | None:
    """``device`` as funclib names it (``"cpu"``, ``"cuda:N"``), or None for None. Accepts ``"cuda"`` (device 0),
    ``"cuda:1"`` and objects with ``type``/``index`` (``torch.device``).

    >>> canonical("cuda"), canonical("cpu:0")
    ('cuda:0', 'cpu')
    """
    if device is None:
        return None
    if not isinstance(device, str):
        kind, index = getattr(device, "type", None), getattr(device, "index", None)
        if not isinstance(kind, str):
            raise TypeError(f"{op}: a device is a string such as 'cpu' or 'cuda:0', got {type(device).__name__}")
        device = kind if index is None else f"{kind}:{index}"
    m = _SPELLING.match(device.strip().lower())
    if m is None:
        raise ValueError(f"{op}: unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N' (see fl.devices())")
    if m.group(1) == "cpu":
        return CPU
    return f"cuda:{int(m.group(2) or 0)}"


def _runtime():
    from . import cuda_backend  # numba-cuda is imported only when a CUDA device is asked for

    return cuda_backend


def cuda_index(device: str) -> int:
    return int(device.split(":")[1])


def devices() -> list[str]:
    """The devices tensors can live on: ``"cpu"``, then every visible CUDA device when the ``cuda`` extra is
    installed (``pip install funclib[cuda]``).

    >>> fl.devices()[0]
    'cpu'
    """
    if importlib.util.find_spec("numba_cuda") is None:
        return [CPU]
    cb = _runtime()
    try:
        n = cb.runtime().device_count()
    except cb.CudaUnavailableError:
        n = 0
    return [CPU, *(f"cuda:{i}" for i in range(n))]


def device_of(value) -> str:
    """The device of a buffer (a NumPy array lives on the CPU)."""
    return CPU if type(value) is np.ndarray else getattr(value, "device", CPU)


def transfer(value, device: str):
    """``value`` (a NumPy array or a device buffer) as a buffer on ``device``; the same object if it is there."""
    src = device_of(value)
    if src == device:
        return value
    cb = _runtime()
    if device == CPU:
        return cb.runtime().to_host(value)
    rt = cb.require_device(cuda_index(device))
    if src != CPU:
        value = rt.to_host(value)
    return rt.to_device(np.asarray(value), cuda_index(device))


def cuda_interface(obj) -> dict | None:
    """The ``__cuda_array_interface__`` of a foreign CUDA array, or None. numba's simulated device arrays have
    none; theirs is their host interface (simulated device memory is host memory)."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return dict(cai)
    if getattr(obj, "__cuda_ndarray__", False) and hasattr(obj, "__array_interface__"):
        return dict(obj.__array_interface__)
    return None


def is_foreign_cuda(obj) -> bool:
    """Whether ``obj`` is another library's array in CUDA memory (the CUDA array interface, or DLPack on kDLCUDA)."""
    if cuda_interface(obj) is not None:
        return True
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None or not hasattr(obj, "__dlpack__"):
        return False
    try:
        return int(dev()[0]) == 2
    except Exception:  # a producer that cannot say where it lives is not read as CUDA memory
        return False


class _Owner:
    """Holds a DLPack import: its producer's deleter runs when the last buffer over the memory is gone."""

    __slots__ = ("__weakref__",)


def share_foreign(obj, op: str, copy: bool | None = None):
    """A device buffer over a foreign CUDA array's memory (no copy; ``copy=True``: a copy made on the device)."""
    cb = _runtime()
    cai = cuda_interface(obj)
    index = 0
    if hasattr(obj, "__dlpack_device__"):
        index = int(obj.__dlpack_device__()[1])
    rt = cb.require_device(index)
    if cai is not None:
        owner = obj
    else:
        from . import dlpack  # ctypes structures: only for a DLPack import of device memory

        capsule = obj.__dlpack__()
        cai, release = dlpack.from_capsule(capsule, (2, index))
        owner = _Owner()
        weakref.finalize(owner, release)
    try:
        buf = rt.share(cai, owner, index)
    except BufferError as e:
        raise BufferError(f"{op}: {e}") from None
    if copy:
        from . import cuda_ops  # beside cuda_backend: only once a CUDA device is in use

        buf = cuda_ops.Context(rt, index).copy(cuda_ops.View(buf))
    return buf


def synchronize(device: str) -> None:
    """Wait for the work queued on CUDA ``device``."""
    cb = _runtime()
    cb.require_device(cuda_index(device)).synchronize()


def is_broadcast_scalar(v) -> bool:
    """Whether a CPU value is one number: a Python or 0-d value, or a NumPy view repeating one element (the zeros
    and fills funclib's rules broadcast). Such values join an operation on any device as that number."""
    if type(v) is not np.ndarray:
        return np.ndim(v) == 0
    return v.ndim == 0 or (v.size > 0 and all(st == 0 or n == 1 for st, n in zip(v.strides, v.shape)))


def _describe(prim_name: str, devs: dict[str, list[int]]) -> str:
    parts = [f"argument{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))} on {d}" for d, ix in devs.items()]
    return f"'{prim_name}' got operands on different devices ({'; '.join(parts)})"


def run_on_device(prim, values: list, params: dict, device: str, out_dtype=None):
    """Primitive ``prim`` on ``values`` (buffers; NumPy for 0-d CPU scalars) on CUDA ``device``; ``out_dtype`` is
    the result dtype of an elementwise primitive."""
    cb = _runtime()
    from . import cuda_prims  # beside cuda_backend: only once a CUDA device is in use

    rt = cb.require_device(cuda_index(device))
    try:
        return cuda_prims.run(cuda_prims.Context(rt, cuda_index(device)), prim.name, prim.kernel, values, params,
                              out_dtype)
    except cb.UnsupportedOnDevice as e:
        raise UnsupportedOnDeviceError(f"{e} (primitive '{prim.name}' on {device})") from None


def operands_device(prim_name: str, values: list) -> str:
    """The one device of ``values``' non-scalar buffers (0-d CPU values go anywhere); ``DeviceMismatchError``
    naming both devices and the fix otherwise."""
    seen: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        d = device_of(v)
        if d != CPU or not is_broadcast_scalar(v):
            seen.setdefault(d, []).append(i)
    if len(seen) > 1:
        target = next(d for d in seen if d != CPU)
        raise DeviceMismatchError(
            f"{_describe(prim_name, seen)}; move them to one device first, e.g. x.to_device({target!r}) "
            "(x.to('cuda') on the facade)"
        )
    return next(iter(seen), CPU)
