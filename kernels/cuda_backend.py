"""Every call into CUDA goes through this module: device discovery, memory, copies, compiling and launching
generated kernels, and cuBLAS matrix products.

``CudaRuntime`` is the interface the rest of funclib uses; ``NumbaCuda`` implements it with numba-cuda (kernels,
memory) and nvmath-python (cuBLAS on raw device pointers). numba-cuda is in maintenance mode and its successor
(numba-cuda-mlir) would be a second implementation of the same few methods. Nothing here is imported by
``import funclib``: ``runtime()`` imports numba-cuda the first time a CUDA device is asked for, so CPU users pay
nothing.

A device buffer is a ``CudaArray``: a C-contiguous device allocation with funclib's dtype. It refuses to become a
NumPy array implicitly (``__array__``, ufuncs), so no operation can copy it to the host without being asked:
``to_host`` is the one way there.

In numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` in the environment before numba is imported) kernels run as
Python threads on the host; everything here runs the same way except cuBLAS, which the simulator cannot load:
``gemm`` then runs ``MATMUL_SOURCE``, a tiled shared-memory kernel launched through the same ``launch`` path.

>>> rt = runtime()  # doctest: +SKIP
>>> a = rt.to_device(np.arange(3.0))  # doctest: +SKIP
>>> rt.to_host(a)  # doctest: +SKIP
array([0., 1., 2.])
"""

from __future__ import annotations

import hashlib
import importlib
import linecache
import math
import os
import pickle
import sys
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from . import diskcache

INSTALL_HINT = "pip install funclib[cuda]"


class CudaUnavailableError(RuntimeError):
    """CUDA was asked for but cannot be used: the ``cuda`` extra is not installed, or no device is visible."""


class HostTransferError(TypeError):
    """A device buffer was about to be read as a NumPy array; funclib copies to the host only when asked."""


class UnsupportedOnDevice(NotImplementedError):
    """An operation (named in the message) has no implementation on the device."""


# dtypes the device kernels compute in; other dtypes can be stored and moved (as bytes), not computed with
NATIVE_DTYPES = frozenset(
    np.dtype(t)
    for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
) | {np.dtype(np.float32), np.dtype(np.float64)}
# complex buffers are held as themselves: the complex kernels (``cuda_complex``) compute in them, every other one
# refuses them by name
COMPLEX_DTYPES = frozenset({np.dtype(np.complex64), np.dtype(np.complex128)})


class CudaArray:
    """A C-contiguous buffer on a CUDA device, with funclib's dtype and shape.

    ``handle`` is the implementation's device array; dtypes the device kernels do not compute in (bfloat16,
    float16, float8) are held as a same-sized unsigned integer (or byte) view, so they can be moved and
    reshaped, and every compute kernel checks ``dtype`` first. complex64/complex128 are held as themselves.
    """

    __slots__ = ("handle", "shape", "dtype", "device")
    __array_priority__ = 200

    def __init__(self, handle: Any, shape: tuple[int, ...], dtype: np.dtype, device: str):
        self.handle = handle
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.device = device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides of the C-contiguous layout (never zero: a device buffer is no broadcast view)."""
        out, acc = [], self.dtype.itemsize
        for n in reversed(self.shape):
            out.append(acc)
            acc *= max(n, 1)
        return tuple(reversed(out))

    def reshape(self, shape: Sequence[int]) -> CudaArray:
        """The same buffer with another shape (no copy: the buffer is contiguous)."""
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape a device array of shape {self.shape} to {shape}")
        return CudaArray(self.handle, shape, self.dtype, self.device)

    def __repr__(self):
        return f"CudaArray(shape={self.shape}, dtype={self.dtype.name}, device={self.device!r})"

    def _refuse(self, what: str):
        raise HostTransferError(
            f"{what} would copy a {self.dtype.name}{list(self.shape)} tensor from {self.device} to the host; "
            f"funclib moves data only when asked: call x.to_device('cpu') (or x.cpu()) first"
        )

    def __array__(self, dtype=None, copy=None):
        self._refuse("converting to a NumPy array")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self._refuse(f"the NumPy function {ufunc.__name__}")

    def __array_function__(self, func, types, args, kwargs):
        self._refuse(f"the NumPy function {func.__name__}")

    def __len__(self):
        return self.shape[0]

    @property
    def pointer(self) -> int:
        """The device address of the first element."""
        cai = getattr(self.handle, "__cuda_array_interface__", None)
        # numba's simulator keeps "device" memory in host NumPy arrays and has no array interface of its own
        return cai["data"][0] if cai is not None else self.handle.__array_interface__["data"][0]

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA array interface (version 3) of the buffer, for zero-copy exchange with PyTorch, JAX, CuPy.
        Producers' work is on the default stream, which every consumer's stream orders after: no stream is named."""
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.pointer, False), "version": 3,
                "strides": None, "stream": None}


class _Interface:
    """An array interface dict as an object, keeping ``owner`` (the memory's owner) alive as long as it is."""

    def __init__(self, interface: dict, owner: Any, name: str):
        self.owner = owner
        setattr(self, name, interface)


class CudaRuntime(Protocol):
    """What funclib needs from a CUDA implementation (numba-cuda today; numba-cuda-mlir could fill it)."""

    simulated: bool

    def device_count(self) -> int: ...
    def empty(self, shape: tuple[int, ...], dtype: np.dtype, device: int = 0) -> CudaArray: ...
    def to_device(self, a: np.ndarray, device: int = 0) -> CudaArray: ...
    def to_host(self, a: CudaArray) -> np.ndarray: ...
    def compile(self, source: str, name: str) -> Any: ...
    def launch(self, kernel: Any, blocks: int, threads: int, args: Sequence[Any], shared: int = 0) -> None: ...
    def gemm(self, a: CudaArray, b: CudaArray, out: CudaArray, trans_a: bool, trans_b: bool) -> None: ...
    def synchronize(self) -> None: ...
    def share(self, interface: dict, owner: Any, device: int = 0) -> CudaArray: ...


def _carrier(d: np.dtype) -> np.dtype:
    """The dtype a buffer of ``d`` is held in on the device (itself where the kernels compute in it)."""
    if d in NATIVE_DTYPES or d in COMPLEX_DTYPES:
        return d
    return np.dtype(f"u{d.itemsize}") if d.itemsize in (1, 2, 4, 8) else np.dtype(np.uint8)


def _simulator_on() -> bool:
    from numba.core import config  # numba is a core dependency; its config says whether the simulator is on

    return bool(config.ENABLE_CUDASIM)


def device_name(index: int) -> str:
    return f"cuda:{index}"


# Generated source of the simulator's matrix product (batched, row-major, each operand possibly transposed).
# Square tiles through shared memory, as a real GEMM stages them; ``zero`` carries the dtype of the
# accumulator so no float64 literal enters a float32 kernel.
MATMUL_SOURCE = '''
from numba import cuda
import numpy as np

def matmul(a, b, c, batch, m, n, k, sa_b, sa_r, sa_c, sb_b, sb_r, sb_c, zero):
    ta = cuda.shared.array((TILE, TILE), DTYPE)
    tb = cuda.shared.array((TILE, TILE), DTYPE)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tiles_n = (n + TILE - 1) // TILE
    tiles_m = (m + TILE - 1) // TILE
    blk = cuda.blockIdx.x
    g = blk // (tiles_m * tiles_n)
    rest = blk - g * tiles_m * tiles_n
    row = (rest // tiles_n) * TILE + ty
    col = (rest % tiles_n) * TILE + tx
    acc = zero
    for t in range((k + TILE - 1) // TILE):
        kk = t * TILE + tx
        ta[ty, tx] = a[g * sa_b + row * sa_r + kk * sa_c] if (row < m and kk < k) else zero
        kk = t * TILE + ty
        tb[ty, tx] = b[g * sb_b + kk * sb_r + col * sb_c] if (kk < k and col < n) else zero
        cuda.syncthreads()
        for j in range(TILE):
            acc += ta[ty, j] * tb[j, tx]
        cuda.syncthreads()
    if row < m and col < n:
        c[g * m * n + row * n + col] = acc
'''
MATMUL_TILE = 8  # threads per tile side: the simulator runs every thread of a block as a Python thread



class NumbaCuda:
    """``CudaRuntime`` on numba-cuda, with cuBLAS from nvmath-python."""

    def __init__(self, cuda_module):
        self.cuda = cuda_module
        self.simulated = cuda_module.__name__.startswith("numba.cuda.simulator") or _simulator_on()
        self._kernels: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._cublas: dict[int, int] = {}

    @staticmethod
    def _count(cuda_module) -> int:
        try:
            return len(cuda_module.gpus) if cuda_module.is_available() else 0
        except Exception:  # a driver that fails to initialize shows no device
            return 0

    def device_count(self) -> int:
        return self._count(self.cuda)

    def _select(self, device: int):
        if device:
            self.cuda.select_device(device)

    def empty(self, shape, dtype, device: int = 0) -> CudaArray:
        dtype = np.dtype(dtype)
        self._select(device)
        n = math.prod(shape)
        h = self.cuda.device_array(n * dtype.itemsize // _carrier(dtype).itemsize, dtype=_carrier(dtype))
        return CudaArray(h, shape, dtype, device_name(device))

    def to_device(self, a: np.ndarray, device: int = 0) -> CudaArray:
        dtype = a.dtype
        flat = np.ascontiguousarray(a).reshape(-1).view(_carrier(dtype))
        self._select(device)
        return CudaArray(self.cuda.to_device(flat), a.shape, dtype, device_name(device))

    def to_host(self, a: CudaArray) -> np.ndarray:
        return a.handle.copy_to_host().view(a.dtype).reshape(a.shape)

    def share(self, interface: dict, owner: Any, device: int = 0) -> CudaArray:
        """A buffer over the C-contiguous device memory that ``interface`` (``__cuda_array_interface__`` v3)
        describes, without a copy; ``owner`` (what keeps that memory alive) lives as long as the buffer."""
        dtype = np.dtype(interface.get("funclib_dtype") or interface["typestr"])
        shape = tuple(int(s) for s in interface["shape"])
        strides = interface.get("strides")
        if strides is not None and shape and math.prod(shape) > 1:
            want, acc = [], dtype.itemsize
            for s in reversed(shape):
                want.append(acc)
                acc *= s
            if any(n > 1 and st != w for n, st, w in zip(shape, strides, reversed(want))):
                raise BufferError(
                    f"sharing device memory needs a C-contiguous array, got shape {shape} with byte strides "
                    f"{tuple(strides)}; make it contiguous on the producer's side (t.contiguous(), "
                    "cupy.ascontiguousarray)"
                )
        ptr = int(interface["data"][0])
        n = math.prod(shape)
        carrier = _carrier(dtype)
        flat = {"shape": (n * dtype.itemsize // carrier.itemsize,), "typestr": carrier.str, "data": (ptr, False),
                "strides": None, "version": 3}
        self._select(device)
        if self.simulated:
            # the simulator's "device" memory is host memory: the pointer is a host address
            h = self.cuda.cudadrv.devicearray.FakeCUDAArray(np.asarray(_Interface(flat, owner, "__array_interface__")))
        else:
            h = self.cuda.as_cuda_array(_Interface({**flat, "stream": interface.get("stream")}, owner,
                                                   "__cuda_array_interface__"))
        return CudaArray(h, shape, dtype, device_name(device))

    def compile(self, source: str, name: str, filename: str | None = None, cache_key: str | None = None) -> Any:
        """The kernel ``name`` defined by ``source`` (generated Python), compiled once per source. ``filename``
        (a copy of ``source`` on disk) is what tracebacks show; with ``cache_key`` (a hash of ``source``) the
        compiled code of each signature is kept in the private kernel cache on a GPU (``CudaKernelCache``)."""
        key = (source, name)
        k = self._kernels.get(key)
        if k is None:
            with self._lock:
                k = self._kernels.get(key)
                if k is None:
                    ns: dict[str, Any] = {}
                    filename = filename or f"<cuda kernel {name}>"
                    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                    exec(compile(source, filename, "exec"), ns)
                    k = self.cuda.jit(ns[name])
                    if cache_key is not None and not self.simulated:
                        k._cache = CudaKernelCache(f"cu_{cache_key}.{name}", cache_key)
                    self._kernels[key] = k
        return k

    def launch(self, kernel, blocks, threads, args, shared: int = 0) -> None:
        flat = [a.handle if type(a) is CudaArray else a for a in args]
        kernel[blocks, threads, 0, shared](*flat)

    def synchronize(self) -> None:
        self.cuda.synchronize()

    def gemm(self, a: CudaArray, b: CudaArray, out: CudaArray, trans_a: bool, trans_b: bool) -> None:
        """``out[g] = op(a[g]) @ op(b[g])`` for row-major stacks ``a`` (batch, m, k) or (batch, k, m) when
        ``trans_a``, likewise ``b``; float32, float64, complex64 or complex128. cuBLAS on a GPU; ``MATMUL_SOURCE``
        in the simulator."""
        batch, m, n = out.shape
        k = a.shape[1] if trans_a else a.shape[2]
        if self.simulated:
            return self._sim_gemm(a, b, out, trans_a, trans_b, batch, m, n, k)
        from nvmath.bindings import cublas  # optional extra, only on a device

        handle = self._handle()
        d = out.dtype
        alpha, beta = np.ones(1, d), np.zeros(1, d)
        ptr = lambda x: x.handle.__cuda_array_interface__["data"][0]
        # row-major C = A @ B is column-major C^T = B^T A^T: swap operands and sizes
        op = lambda t: cublas.Operation.T if t else cublas.Operation.N
        lda = m if trans_a else k
        ldb = k if trans_b else n
        gemm = {"f4": cublas.sgemm_strided_batched, "f8": cublas.dgemm_strided_batched,
                "c8": cublas.cgemm_strided_batched, "c16": cublas.zgemm_strided_batched}[f"{d.kind}{d.itemsize}"]
        gemm(handle, op(trans_b), op(trans_a), n, m, k, alpha.ctypes.data, ptr(b), ldb, k * n, ptr(a), lda, m * k,
             beta.ctypes.data, ptr(out), n, m * n, batch)

    def _handle(self) -> int:
        from nvmath.bindings import cublas  # optional extra, only on a device

        dev = self.cuda.get_current_device().id
        h = self._cublas.get(dev)
        if h is None:
            h = self._cublas[dev] = cublas.create()
            cublas.set_pointer_mode(h, cublas.PointerMode.HOST)
        return h

    def _sim_gemm(self, a, b, out, trans_a, trans_b, batch, m, n, k) -> None:
        t = MATMUL_TILE
        src = MATMUL_SOURCE.replace("DTYPE", f"np.{out.dtype.name}").replace("TILE", str(t))
        kern = self.compile(src, "matmul")
        sa = (m * k, 1, m) if trans_a else (m * k, k, 1)
        sb = (k * n, 1, k) if trans_b else (k * n, n, 1)
        blocks = batch * ((m + t - 1) // t) * ((n + t - 1) // t)
        flat = [x.handle for x in (a, b, out)]
        kern[blocks, (t, t)](*flat, batch, m, n, k, *sa, *sb, out.dtype.type(0))


class CudaKernelCache:
    """numba-cuda's disk cache of one generated kernel, kept in funclib's private kernel cache
    (``kernels/diskcache.py``: created private, files 0600, written whole and renamed into place): each compiled
    signature is one file ``<name>.<hash>.cubin`` holding a magic header, the SHA-256 of its payload and the
    pickled kernel (numba-cuda's own reduction: its PTX/cubin and launch attributes) with its full key (signature,
    CUDA runtime version and compute capability, the source's hash, numba-cuda's and Python's versions). A file
    that is cut short, corrupt or of another key is a miss: the kernel compiles again and the file is replaced.
    Any failure here is a miss, never an error: the kernel compiles as if there were no cache."""

    def __init__(self, name: str, stamp: str):
        self._name = name
        self._stamp = stamp

    @property
    def cache_path(self) -> str | None:
        return diskcache.private_dir()

    def flush(self) -> None:
        """Nothing to flush: a file is complete once renamed into place."""

    def _key_path(self, d: str, sig, target_context) -> tuple[tuple, str]:
        version = getattr(importlib.import_module("numba_cuda"), "__version__", "?")
        key = (str(sig), target_context.codegen().magic_tuple(), self._stamp, version, sys.version_info[:2])
        return key, os.path.join(d, f"{self._name}.{hashlib.sha256(repr(key).encode()).hexdigest()[:20]}.cubin")

    def load_overload(self, sig, target_context):
        d = diskcache.private_dir()
        if d is None:
            return None
        try:
            key, path = self._key_path(d, sig, target_context)
            try:
                with open(path, "rb") as f:
                    payload = diskcache._unseal(f.read())
            except OSError:
                return None
            if payload is None:
                return None
            stored, states = pickle.loads(payload)
            if stored != key:
                return None
            # numba-cuda's internals, reached only on a GPU
            from numba.cuda import utils
            from numba.cuda.dispatcher import _Kernel

            with utils.numba_target_override():
                return _Kernel._rebuild(**states)
        except Exception as e:  # numba-cuda's internals changed, or the file is not ours: compile again
            diskcache._log.info("kernel cache: cannot load %s (%s); compiling again", self._name, e)
            return None

    def save_overload(self, sig, kernel) -> None:
        from numba.cuda.serialize import dumps  # numba-cuda (the optional extra), only on a GPU

        d = diskcache.private_dir()
        if d is None:
            return
        try:
            key, path = self._key_path(d, sig, _target())
            diskcache.write_atomic(path, diskcache._seal(dumps((key, kernel._reduce_states()))))
        except Exception as e:
            diskcache._log.info("kernel cache: cannot save %s (%s)", self._name, e)


def _target():
    from numba.cuda.descriptor import cuda_target  # numba-cuda (the optional extra), only on a GPU

    return cuda_target.target_context


_runtime: NumbaCuda | None = None
_runtime_lock = threading.Lock()


def runtime() -> NumbaCuda:
    """The CUDA runtime, importing numba-cuda on first use; raises ``CudaUnavailableError`` naming the fix."""
    global _runtime
    if _runtime is not None:
        return _runtime
    with _runtime_lock:
        if _runtime is None:
            try:
                # the optional extra, imported only when a CUDA device is asked for
                cuda = importlib.import_module("numba.cuda")
            except ImportError as e:
                raise CudaUnavailableError(
                    f"CUDA devices need numba-cuda, which is not installed: {INSTALL_HINT} ({e})"
                ) from None
            if getattr(cuda, "implementation", None) != "NVIDIA" and not os.environ.get("NUMBA_ENABLE_CUDASIM"):
                raise CudaUnavailableError(
                    "numba's built-in CUDA target is too old for funclib; install NVIDIA's numba-cuda: "
                    f"{INSTALL_HINT}"
                )
            _runtime = NumbaCuda(cuda)
    return _runtime


def require_device(index: int) -> NumbaCuda:
    """The runtime, once device ``index`` is known to be visible."""
    rt = runtime()
    n = rt.device_count()
    if n == 0:
        raise CudaUnavailableError(
            "no CUDA device is visible (no NVIDIA driver or GPU found; check nvidia-smi and CUDA_VISIBLE_DEVICES). "
            "Without a GPU, numba's simulator runs CUDA code slowly on the CPU: set NUMBA_ENABLE_CUDASIM=1 before "
            "importing funclib"
        )
    if not 0 <= index < n:
        raise CudaUnavailableError(
            f"device 'cuda:{index}' does not exist: {n} CUDA device{'s are' if n > 1 else ' is'} visible "
            f"({', '.join(device_name(i) for i in range(n))})"
        )
    return rt


def launch_config(n: int, threads: int = 256) -> tuple[int, int]:
    """Blocks and threads of a grid-stride launch over ``n`` elements: whole warps, no more than ``n`` needs (the
    simulator runs every thread, needed or not)."""
    threads = min(threads, max(32, (n + 31) // 32 * 32))
    return max(1, min((n + threads - 1) // threads, 65535)), threads

