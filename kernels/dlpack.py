"""DLPack capsules of device memory, in ctypes: the producer side (``to_capsule``: a ``DLManagedTensor`` over a
device pointer, kept alive until its consumer calls the deleter) and the consumer side (``from_capsule``: the
pointer, shape, strides and dtype of a ``kDLCUDA`` capsule as a ``__cuda_array_interface__`` dict, and a
``release`` to call once the memory is no longer used).

NumPy reads DLPack of host memory itself; this module is for CUDA memory, which NumPy refuses. Only the
unversioned ``DLManagedTensor`` (capsule name ``"dltensor"``) is spoken: every DLPack consumer accepts it.

>>> import numpy as np
>>> a = np.arange(3.0)
>>> cap = to_capsule(a.ctypes.data, a.shape, a.dtype, (KDLCPU, 0), owner=a)
>>> info, release = from_capsule(cap, (KDLCPU, 0))
>>> info["shape"], info["typestr"], info["data"][0] == a.ctypes.data
((3,), '<f8', True)
>>> release()
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

KDLCPU, KDLCUDA = 1, 2
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool
_KINDS = {v: k for k, v in _CODES.items()}
_BFLOAT = 4  # kDLBfloat


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_NAME = b"dltensor"
_USED = b"used_dltensor"
_NAME_BUF = ctypes.create_string_buffer(_NAME)  # the name a capsule points to lives as long as the module
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# what each exported DLManagedTensor keeps alive (its struct, shape array and owner), until its deleter runs
_live: dict[int, tuple[Any, ...]] = {}
_lock = threading.Lock()


@_DELETER
def _delete(managed):
    addr = ctypes.addressof(managed.contents)
    with _lock:
        _live.pop(addr, None)
        _pending.pop(addr, None)


# A capsule is often dropped while its consumer raises (NumPy refusing device memory), when a destructor written
# in Python cannot run; so capsules carry none. funclib keeps every capsule it made until it is consumed (renamed
# "used_dltensor": the consumer's deleter releases the tensor) or nobody else holds it any more (then its tensor
# is released): ``sweep`` checks, on every export and when asked.
_pending: dict[int, Any] = {}


def sweep() -> None:
    """Release the tensors of capsules that were dropped unconsumed; forget consumed ones."""
    with _lock:
        for addr in list(_pending):
            cap = _pending[addr]
            if not _api.PyCapsule_IsValid(cap, _NAME):
                del _pending[addr]
            elif sys.getrefcount(cap) <= 3:  # the table, ``cap`` and getrefcount's argument
                del _pending[addr]
                _live.pop(addr, None)


def dl_dtype(d: np.dtype) -> tuple[int, int]:
    """DLPack's ``(code, bits)`` of ``d``."""
    d = np.dtype(d)
    if d.name == "bfloat16":
        return _BFLOAT, 16
    if d.kind not in _CODES or d.name.startswith("float8"):
        raise BufferError(f"DLPack has no code for dtype {d.name}")
    return _CODES[d.kind], d.itemsize * 8


def to_capsule(ptr: int, shape: Sequence[int], dtype: np.dtype, device: tuple[int, int], owner: Any) -> Any:
    """A ``"dltensor"`` capsule over the C-contiguous buffer at ``ptr``; ``owner`` is kept alive until the consumer
    releases it."""
    code, bits = dl_dtype(dtype)
    m = _Managed()
    n = len(shape)
    dims = (ctypes.c_int64 * max(n, 1))(*shape)
    m.dl_tensor.data = ptr or None
    m.dl_tensor.device = _Device(*device)
    m.dl_tensor.ndim = n
    m.dl_tensor.dtype = _DType(code, bits, 1)
    m.dl_tensor.shape = dims
    m.dl_tensor.strides = None  # C-contiguous
    m.dl_tensor.byte_offset = 0
    m.deleter = _delete
    addr = ctypes.addressof(m)
    sweep()
    capsule = _api.PyCapsule_New(addr, ctypes.addressof(_NAME_BUF), None)
    with _lock:
        _live[addr] = (m, dims, owner)
        _pending[addr] = capsule
    return capsule


def _dtype_of(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes != 1:
        raise BufferError(f"DLPack tensors with {lanes} lanes per element are not supported")
    if code == _BFLOAT and bits == 16:
        import ml_dtypes  # a core dependency: funclib's bfloat16

        return np.dtype(ml_dtypes.bfloat16)
    kind = _KINDS.get(code)
    if kind is None:
        raise BufferError(f"DLPack dtype code {code} is not supported")
    return np.dtype(np.bool_) if kind == "b" else np.dtype(f"{kind}{bits // 8}")


def from_capsule(capsule: Any, expected_device: tuple[int, int]) -> tuple[dict, Callable[[], None]]:
    """The ``__cuda_array_interface__`` (v3) of a ``"dltensor"`` capsule on ``expected_device``, and the function
    that releases it (call it when the memory is no longer used). The capsule is marked used."""
    if not _api.PyCapsule_IsValid(capsule, _NAME):
        raise BufferError("from_dlpack: the producer did not give an unconsumed 'dltensor' capsule")
    ptr = _api.PyCapsule_GetPointer(capsule, _NAME)
    m = ctypes.cast(ptr, ctypes.POINTER(_Managed)).contents
    t = m.dl_tensor
    dev = (t.device.device_type, t.device.device_id)
    if dev != tuple(expected_device):
        raise BufferError(f"from_dlpack: the capsule's memory is on DLPack device {dev}, expected {expected_device}")
    dtype = _dtype_of(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None if not t.strides else tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
    info = {"shape": shape, "typestr": dtype.str, "data": ((t.data or 0) + t.byte_offset, False),
            "strides": strides, "version": 3, "funclib_dtype": dtype}
    _api.PyCapsule_SetName(capsule, _USED)
    deleter = m.deleter
    done = []

    def release():
        if not done and deleter:
            done.append(True)
            deleter(ctypes.cast(ptr, ctypes.POINTER(_Managed)))

    return info, release
