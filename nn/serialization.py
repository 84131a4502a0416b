"""``fl.save`` / ``fl.load``: pytrees of tensors in the safetensors format.

The tensors are stored under their dotted tree paths (``fc.weight`` for a state_dict, so PyTorch reads the file with
``safetensors.torch.load_file``); the tree structure and the non-tensor leaves (numbers, strings, booleans, None)
are a JSON document in the file's metadata. Loading parses JSON and raw bytes only: it never executes code (no
pickle). Writes go to a temporary file in the target directory and are renamed into place, so a crash never
leaves a half-written checkpoint. A truncated, corrupt or mismatched file raises ``SerializationError`` naming the
file and the problem.

>>> import funclib as fl, funclib.nn as nn
>>> model = nn.Linear(3, 2)
>>> fl.save(model.state_dict(), "/tmp/linear.safetensors")
>>> model.load_state_dict(fl.load("/tmp/linear.safetensors"))
"""

from __future__ import annotations

import copy
import io
import json
import os
import struct
import tempfile
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np
import safetensors

from funclib import tree as tree_util
from funclib.core import Tensor, Tracer, _wrap
from funclib.errors import SerializationError

from .pt_reader import is_pytorch_file, load_pytorch

__all__ = ["save", "load", "SerializationError"]

_FORMAT = "funclib.tree/1"
_KEY = "funclib.tree"

_ST_DTYPES = {
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F32": np.dtype(np.float32),
    "F64": np.dtype(np.float64),
    "I8": np.dtype(np.int8),
    "I16": np.dtype(np.int16),
    "I32": np.dtype(np.int32),
    "I64": np.dtype(np.int64),
    "U8": np.dtype(np.uint8),
    "U16": np.dtype(np.uint16),
    "U32": np.dtype(np.uint32),
    "U64": np.dtype(np.uint64),
    "BOOL": np.dtype(np.bool_),
    "C64": np.dtype(np.complex64),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8_E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "F8_E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
}
_SUPPORTED = set(_ST_DTYPES.values())


def _stateful(x) -> bool:
    """Modules and optimizers: objects saved through ``state_dict()`` and restored by ``load_state_dict``."""
    return (
        not isinstance(x, (Mapping, type))
        and callable(getattr(x, "state_dict", None))
        and callable(getattr(x, "load_state_dict", None))
    )


# ---------------------------------------------------------------------------------------------------------------
# Encoding


def _path_str(path: tuple) -> str:
    return ".".join(str(p) for p in path) if path else "value"


class _Writer:
    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def tensor(self, arr: np.ndarray, path: tuple) -> dict:
        if arr.dtype not in _SUPPORTED:
            hint = (
                "; store fl.quantization.pack_int4(x) (two values per byte) or x.astype(fl.int8) instead"
                if arr.dtype.name in ("int4", "uint4")
                else ""
            )
            raise TypeError(
                f"fl.save: the array at {_path_str(path)!r} has dtype {arr.dtype}, which safetensors cannot store{hint}"
            )
        name = _path_str(path)
        base, i = name, 1
        while name in self.arrays:
            name = f"{base}#{i}"
            i += 1
        self.arrays[name] = arr if arr.flags.c_contiguous else arr.copy(order="C")
        return {"tensor": name, "dtype": arr.dtype.name, "shape": list(arr.shape)}

    def encode(self, x: Any, path: tuple) -> Any:
        if isinstance(x, Tracer):
            raise TypeError(
                f"fl.save: the value at {_path_str(path)!r} is traced; save outside of transforms"
            )
        if isinstance(x, Tensor):
            return self.tensor(np.asarray(x._value), path)
        if isinstance(x, (np.ndarray, np.generic)) and not isinstance(x, (np.str_, np.bytes_)):
            return self.tensor(np.asarray(x), path)
        if x is None:
            return None
        if isinstance(x, bool):
            return {"bool": x}
        if isinstance(x, int):
            return {"int": x}
        if isinstance(x, float):
            return {"float": x.hex()}
        if isinstance(x, str):
            return {"str": x}
        if _stateful(x):
            return {"module": type(x).__name__, "state": self.encode(x.state_dict(), path)}
        if isinstance(x, Mapping):
            items = []
            for k, v in x.items():
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise TypeError(
                        f"fl.save: dict keys must be str or int, got {type(k).__name__} {k!r} at {_path_str(path)!r}"
                    )
                items.append([{"s": k} if isinstance(k, str) else {"i": k}, self.encode(v, path + (k,))])
            return {"odict" if isinstance(x, OrderedDict) else "dict": items}
        if isinstance(x, list):
            return {"list": [self.encode(v, path + (i,)) for i, v in enumerate(x)]}
        if isinstance(x, tuple):
            return {"tuple": [self.encode(v, path + (i,)) for i, v in enumerate(x)]}
        raise TypeError(
            f"fl.save: cannot store a {type(x).__name__} at {_path_str(path)!r}; files hold tensors, arrays, numbers, "
            "strings, None, dict/list/tuple containers and Modules (as their state_dict)"
        )


def save(tree: Any, path: str | os.PathLike) -> None:
    """Write ``tree`` to ``path`` in the safetensors format, atomically.

    Args:
        tree: tensors (and NumPy arrays) in dicts, lists and tuples, with numbers, strings, booleans and None as
            other leaves; a ``Module`` is stored as its ``state_dict``. For example ``model.state_dict()`` or
            ``{"model": model.state_dict(), "optim": optimizer.state_dict(), "epoch": 3}``.
        path: the file to write (replaced if it exists).

    Example:
        >>> fl.save({"w": fl.ones((2, 2)), "step": 10}, "/tmp/ckpt.safetensors")
    """
    w = _Writer()
    structure = w.encode(tree, ())
    metadata = {"format": _FORMAT, _KEY: json.dumps(structure, separators=(",", ":"))}
    specs = {
        n: safetensors.TensorSpec(
            dtype=a.dtype.name, shape=tuple(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes
        )
        for n, a in w.arrays.items()
    }
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"fl.save: the directory {directory!r} of {path!r} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=directory)
    os.close(fd)
    try:
        safetensors.serialize_file(specs, tmp, metadata)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# ---------------------------------------------------------------------------------------------------------------
# Decoding


def _read(path: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"fl.load: no such file {path!r}") from None
    if not data:
        raise SerializationError(
            f"fl.load: {path!r} is empty (0 bytes), not a safetensors file; was the save interrupted or the path "
            "mistaken? fl.save writes atomically, so a file it wrote is never empty."
        )
    kind, advice = _sniff(data)
    if kind is not None:
        raise SerializationError(f"fl.load: {path!r} is {kind}, not a safetensors file. {advice}")
    if len(data) < 8:
        raise SerializationError(
            f"fl.load: {path!r} is truncated or not a safetensors file ({len(data)} bytes; a safetensors file "
            "starts with an 8-byte header length)"
        )
    (n,) = struct.unpack("<Q", data[:8])
    if data[8:9] != b"{":
        raise SerializationError(
            f"fl.load: {path!r} is not a safetensors file: one starts with an 8-byte header length and a JSON "
            f"header, this one with {data[:12]!r}. fl.load reads files written by fl.save or the safetensors "
            "library."
        )
    if n > len(data) - 8:
        raise SerializationError(
            f"fl.load: {path!r} is truncated: its header announces {n} bytes but only {len(data) - 8} follow"
        )
    try:
        header = json.loads(data[8 : 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SerializationError(
            f"fl.load: {path!r} has a corrupt header ({e}); it is not a safetensors file"
        ) from None
    if not isinstance(header, dict):
        raise SerializationError(f"fl.load: {path!r} has a corrupt header (not a JSON object)")
    try:
        entries = safetensors.deserialize(data)
    except safetensors.SafetensorError as e:
        raise SerializationError(f"fl.load: {path!r} is truncated or corrupt: {e}") from None
    arrays = {}
    for name, info in entries:
        dt = _ST_DTYPES.get(info["dtype"])
        if dt is None:
            raise SerializationError(
                f"fl.load: tensor {name!r} in {path!r} has unsupported dtype {info['dtype']}"
            )
        arrays[name] = np.frombuffer(bytes(info["data"]), dtype=dt).reshape(info["shape"])
    meta = header.get("__metadata__") or {}
    return arrays, meta




def _sniff(data: bytes) -> tuple[str | None, str]:
    """What a file that is not safetensors is, from its magic bytes: ``(description, what to do)``, or
    ``(None, "")`` when it may be safetensors. Reading a zip's directory runs no code."""
    if data[:2] == b"PK":
        try:
            names = zipfile.ZipFile(io.BytesIO(data)).namelist()
        except (zipfile.BadZipFile, OSError, ValueError):
            names = []
        if names and all(n.endswith(".npy") for n in names):
            return "a NumPy .npz archive", "Load it with np.load(path) and convert the arrays with fl.asarray."
        return "a zip archive", "Unpack it, or save the tensors with fl.save."
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return (
            f"a Python pickle (protocol {data[1]})",
            "fl.load never unpickles (unpickling can run arbitrary code); save the tensors with fl.save, or a "
            "PyTorch state_dict with safetensors.torch.save_file.",
        )
    if data.startswith(b"\x93NUMPY"):
        return "a NumPy .npy file", "Load it with fl.asarray(np.load(path))."
    if data.startswith(b"\x89HDF\r\n\x1a\n"):
        return "an HDF5 file (e.g. Keras .h5)", "Read it with h5py and convert the arrays with fl.asarray."
    if data.startswith(b"\x1f\x8b"):
        return "a gzip-compressed file", "Decompress it first."
    if data.startswith(b"GGUF"):
        return "a GGUF model file", "fl.load reads safetensors files written by fl.save or the safetensors library."
    return None, ""


def _decode(node: Any, arrays: dict[str, np.ndarray], path: str, used: set) -> Any:
    if node is None:
        return None
    if not isinstance(node, dict) or len(node) == 0:
        raise SerializationError(f"fl.load: {path!r} has a corrupt tree description ({node!r:.60})")
    if "tensor" in node:
        name = node["tensor"]
        if name not in arrays:
            raise SerializationError(
                f"fl.load: {path!r} describes a tensor {name!r} that the file does not contain"
            )
        a = arrays[name]
        shape, dtype = tuple(node.get("shape", a.shape)), node.get("dtype", a.dtype.name)
        if a.dtype.name != dtype or (a.shape != shape and a.size != int(np.prod(shape, dtype=np.int64))):
            raise SerializationError(
                f"fl.load: tensor {name!r} in {path!r} is {a.dtype.name}{list(a.shape)} but the tree describes "
                f"{dtype}{list(shape)}"
            )
        used.add(name)
        return _wrap(a.reshape(shape))
    (kind, v), *_ = node.items()
    try:
        if kind == "bool":
            return bool(v)
        if kind == "int":
            return int(v)
        if kind == "float":
            return float.fromhex(v)
        if kind == "str":
            return str(v)
        if kind in ("dict", "odict"):
            out = OrderedDict() if kind == "odict" else {}
            for k, child in v:
                key = k["s"] if "s" in k else int(k["i"])
                out[key] = _decode(child, arrays, path, used)
            return out
        if kind == "list":
            return [_decode(c, arrays, path, used) for c in v]
        if kind == "tuple":
            return tuple(_decode(c, arrays, path, used) for c in v)
        if kind == "module":
            return _decode(node["state"], arrays, path, used)
    except (TypeError, ValueError, KeyError) as e:
        if isinstance(e, SerializationError):
            raise
        raise SerializationError(
            f"fl.load: {path!r} has a corrupt tree description near {kind!r}: {e}"
        ) from None
    raise SerializationError(f"fl.load: {path!r} has a corrupt tree description (unknown node {kind!r})")


def _check_like(loaded, like, path):
    lv, lt = tree_util.flatten(loaded)
    rv, rt = tree_util.flatten(like)
    if lt != rt:
        raise SerializationError(
            f"fl.load: the tree in {path!r} does not match `like`:\n  file: {lt}\n  like: {rt}"
        )
    for i, (a, b) in enumerate(zip(lv, rv)):
        if isinstance(b, Tensor) and isinstance(a, Tensor) and (a.shape != b.shape or a.dtype != b.dtype):
            raise SerializationError(
                f"fl.load: leaf {i} in {path!r} is {a.dtype.name}{list(a.shape)} but `like` has "
                f"{b.dtype.name}{list(b.shape)}"
            )


def load(path: str | os.PathLike, *, like: Any = None, mmap: bool = False) -> Any:
    """Read a tree written by ``save``, any safetensors file (as a ``{name: tensor}`` dict), or a PyTorch checkpoint.

    The format is recognized by the file's first bytes, not its name. PyTorch files (``torch.save``'s zip format and
    the legacy pre-1.6 format) are read without PyTorch and without running code from the file: only tensors,
    numbers, strings and dict/OrderedDict/list/tuple containers are rebuilt, and anything else (a pickled
    ``Module``, any other Python global) raises ``UnsafePickleError`` naming it. Tensors of dtypes funclib has no
    Tensor type for (``float8_e8m0fnu``) come back as read-only NumPy arrays of the ml_dtypes type.

    Args:
        path: the file.
        like: optional template. A ``Module`` (anything with ``state_dict``/``load_state_dict``) gives a copy of
            it with the loaded state (strict ``load_state_dict``: missing keys, unexpected keys and shape
            mismatches are errors); any other tree must match the file's structure, shapes and dtypes exactly.
        mmap: map a PyTorch checkpoint's storages from the file instead of reading them (pages are read when
            first used). The file must then not be changed in place while its tensors are alive. Safetensors files
            are always read.

    Returns:
        The tree with its containers as saved (dict, ``OrderedDict``, list, tuple) and tensors as ``Tensor``.

    Raises:
        SerializationError: the file is truncated or corrupt, or does not match ``like``.
        UnsafePickleError: a PyTorch checkpoint asks for a Python global or an operation data never needs.

    Example:
        >>> fl.save({"w": fl.ones((2, 2)), "step": 10}, "/tmp/ckpt.safetensors")
        >>> fl.load("/tmp/ckpt.safetensors")["step"]
        10
        >>> model = nn.Linear(3, 2)
        >>> model.load_state_dict(fl.load("linear.pt"))  # doctest: +SKIP
    """
    path = os.fspath(path)
    if _is_pytorch(path):
        return _fill_like(load_pytorch(path, mmap=mmap), like, path)
    arrays, meta = _read(path)
    if _KEY in meta:
        try:
            structure = json.loads(meta[_KEY])
        except json.JSONDecodeError as e:
            raise SerializationError(f"fl.load: {path!r} has corrupt tree metadata ({e})") from None
        used: set = set()
        tree = _decode(structure, arrays, path, used)
        extra = sorted(set(arrays) - used)
        if extra:
            raise SerializationError(
                f"fl.load: {path!r} holds tensors {extra[:5]} that its tree description does not mention; the file "
                "is corrupt or was edited"
            )
    else:
        tree = {k: _wrap(v) for k, v in arrays.items()}
    return _fill_like(tree, like, path)


def _is_pytorch(path: str) -> bool:
    """Whether ``path`` is a ``torch.save`` file: the legacy stream, or a zip holding a ``data.pkl`` (an ``.npz`` or
    any other zip is not, and gets its own error from ``_sniff``). Reading a zip's directory runs no code."""
    try:
        with open(path, "rb") as f:
            if not is_pytorch_file(f.read(16)):
                return False
            f.seek(0)
            if f.read(2) != b"PK":
                return True
            try:
                names = zipfile.ZipFile(f).namelist()
            except (zipfile.BadZipFile, OSError, ValueError):
                return False
            return any(n == "data.pkl" or n.endswith("/data.pkl") for n in names)
    except OSError:
        return False  # _read reports it


def _fill_like(tree: Any, like: Any, path: str) -> Any:
    if like is None:
        return tree
    if _stateful(like):
        obj = copy.deepcopy(like)
        if not isinstance(tree, Mapping):
            raise SerializationError(
                f"fl.load: {path!r} does not hold a state_dict, so it cannot fill a {type(like).__name__}"
            )
        obj.load_state_dict(tree)
        return obj
    _check_like(tree, like, path)
    return tree
