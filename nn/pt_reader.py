"""Reading PyTorch checkpoints (``torch.save`` files) without PyTorch and without running code from the file.

Two layouts exist. The zip format (PyTorch 1.6 and later) holds ``<stem>/data.pkl``, a pickle that refers to raw
storages ``<stem>/data/<key>`` by persistent id ``('storage', StorageType, key, location, numel)``, and rebuilds
tensors with ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` (``_v3`` adds the dtype, the
storage then being untyped bytes). The legacy format is a stream of pickles (a magic number, a protocol version,
system info, the object, the list of storage keys) followed by each storage as an int64 element count and raw
bytes.

Pickles are run by a small stack machine of our own, not by ``pickle``: it knows only the opcodes that data needs,
resolves only the globals in ``_GLOBALS`` (to our own constructors), builds only dicts, lists, tuples, sets,
numbers, strings and tensors, applies SETITEM(S) to dicts and APPEND(S) to lists only, and refuses anything else
with an error naming what the file asked for. Every storage's declared size must equal its bytes and every tensor
view must lie inside its storage. Tensors share the file's buffer (or its memory map) and are read-only.
"""

from __future__ import annotations

import codecs
import mmap as _mmap
import os
import struct
import zipfile
import zlib
from collections import OrderedDict
from typing import Any

import ml_dtypes
import numpy as np

from funclib import dtypes
from funclib.core import _wrap
from funclib.errors import SerializationError, UnsafePickleError

__all__ = ["is_pytorch_file", "load_pytorch", "UnsafePickleError"]

_ZIP_MAGIC = b"PK\x03\x04"
# the legacy format starts with the pickled magic number 0x1950a86a20f9469cfc6c (protocol 2, LONG1 of 10 bytes)
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"
_LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


def _error(path: str, msg: str) -> SerializationError:
    return SerializationError(f"fl.load: {path!r}: {msg}")


def is_pytorch_file(head: bytes) -> bool:
    """Whether the first bytes of a file are those of a ``torch.save`` file (zip or legacy format)."""
    return head.startswith(_ZIP_MAGIC) or head.startswith(_LEGACY_MAGIC)


# ---------------------------------------------------------------------------------------------------------------
# What the pickle may name


class _Dtype:
    """A ``torch.<dtype>`` global: the NumPy dtype it stands for, or None when NumPy has none."""

    __slots__ = ("name", "np")

    def __init__(self, name: str, np_dtype):
        self.name = name
        self.np = None if np_dtype is None else np.dtype(np_dtype)


class _StorageType:
    """A ``torch.<X>Storage`` global; ``UntypedStorage`` has no dtype (its numel counts bytes)."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: _Dtype | None):
        self.name = name
        self.dtype = dtype


class _Storage:
    """A storage's bytes (a read-only uint8 array) and the dtype its typed storage declared, if any."""

    __slots__ = ("raw", "dtype", "key")

    def __init__(self, raw: np.ndarray, dtype: _Dtype | None, key: str):
        self.raw = raw
        self.dtype = dtype
        self.key = key


_TORCH_DTYPES = {
    n: _Dtype(n, d)
    for n, d in {
        "float32": np.float32,
        "float64": np.float64,
        "float16": np.float16,
        "bfloat16": ml_dtypes.bfloat16,
        "bool": np.bool_,
        "int8": np.int8,
        "int16": np.int16,
        "int32": np.int32,
        "int64": np.int64,
        "uint8": np.uint8,
        "uint16": np.uint16,
        "uint32": np.uint32,
        "uint64": np.uint64,
        "complex64": np.complex64,
        "complex128": np.complex128,
        "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
        "float8_e5m2": ml_dtypes.float8_e5m2,
        "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
        "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
        "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu,
        "complex32": None,
    }.items()
}
_STORAGES = {
    f"{n}Storage": _StorageType(f"torch.{n}Storage", _TORCH_DTYPES[d])
    for n, d in {
        "Float": "float32",
        "Double": "float64",
        "Half": "float16",
        "BFloat16": "bfloat16",
        "Bool": "bool",
        "Char": "int8",
        "Short": "int16",
        "Int": "int32",
        "Long": "int64",
        "Byte": "uint8",
        "ComplexFloat": "complex64",
        "ComplexDouble": "complex128",
    }.items()
}
_UNTYPED = _StorageType("torch.storage.UntypedStorage", None)


def _rebuild_tensor(storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
    return ("tensor", storage, offset, size, stride, None)


def _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
    return ("tensor", storage, offset, size, stride, dtype)


def _rebuild_parameter(data, requires_grad=False, hooks=None, state=None):
    return data


def _bytes_from_latin1(text, encoding="latin1"):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise TypeError("_codecs.encode is allowed only to turn a latin1 string into bytes")
    return codecs.encode(text, "latin1")


def _complex(real=0.0, imag=0.0):
    if not all(isinstance(v, (int, float)) for v in (real, imag)):
        raise TypeError("complex() is allowed only on numbers")
    return complex(real, imag)


def _set(items=()):
    return set(items)


def _frozenset(items=()):
    return frozenset(items)


def _ordered_dict(items=()):
    if items:
        raise TypeError("OrderedDict is allowed only empty (its items follow as SETITEMS)")
    return OrderedDict()


# (module, name) -> a callable the pickle may apply (REDUCE/NEWOBJ), or a value it may push
_GLOBALS: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): _ordered_dict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch.storage", "UntypedStorage"): _UNTYPED,
    ("builtins", "set"): _set,
    ("builtins", "frozenset"): _frozenset,
    ("builtins", "complex"): _complex,
    ("_codecs", "encode"): _bytes_from_latin1,
    **{("torch", n): s for n, s in _STORAGES.items()},
    **{("torch", n): d for n, d in _TORCH_DTYPES.items()},
}
_CALLABLE = {id(v) for v in _GLOBALS.values() if callable(v)}


# ---------------------------------------------------------------------------------------------------------------
# The restricted pickle machine


class _Mark:
    __slots__ = ()


_MARK = _Mark()


class _Reader:
    """Runs one pickle from ``data[pos:]``; ``persistent_load(pid)`` resolves storages."""

    def __init__(self, data, pos: int, path: str, persistent_load):
        self.data = memoryview(data)
        self.pos = pos
        self.path = path
        self.persistent_load = persistent_load

    def _fail(self, msg: str, at: int):
        raise _error(self.path, f"{msg} (pickle byte {at})")

    def _take(self, n: int, at: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            self._fail(f"the pickle is truncated: an opcode needs {n} bytes past the end of the file", at)
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def _line(self, at: int) -> str:
        end = bytes(self.data[self.pos : self.pos + 256]).find(b"\n")
        if end < 0:
            self._fail("the pickle is truncated or corrupt: a text argument has no end of line", at)
        out = bytes(self.data[self.pos : self.pos + end]).decode("utf-8", "strict")
        self.pos += end + 1
        return out

    def _global(self, module: str, name: str, at: int):
        # protocol 2 names builtins by their Python 2 module
        obj = _GLOBALS.get(("builtins" if module == "__builtin__" else module, name))
        if obj is None:
            raise UnsafePickleError(
                f"fl.load: {self.path!r} refers to the Python global {module}.{name} (pickle byte {at}), which "
                "fl.load does not allow: unpickling it could run code from the file, which may be hostile. "
                "fl.load rebuilds only tensors, numbers, strings and dict/list/tuple containers. If you trust the "
                "file, load it with PyTorch and save the tensors alone (torch.save(model.state_dict(), path) or "
                "safetensors)."
            )
        return obj

    def run(self):
        stack: list = []
        marks: list[int] = []
        memo: dict[int, Any] = {}
        data = self.data
        n = len(data)

        def pop_mark(at):
            if not marks:
                self._fail("the pickle is corrupt: no MARK to pop to", at)
            k = marks.pop()
            items = stack[k:]
            del stack[k:]
            return items

        def top(at):
            if not stack:
                self._fail("the pickle is corrupt: the stack is empty", at)
            return stack[-1]

        def setitems(target, items, at, op):
            if type(target) not in (dict, OrderedDict):
                raise UnsafePickleError(
                    f"fl.load: {self.path!r} applies {op} to a {_kind(target)} at pickle byte {at}; data files "
                    "only set items of dicts (CVE-2026-24747 used this to call __setitem__ of other objects). "
                    "The file is corrupt or hostile."
                )
            if len(items) % 2:
                self._fail(f"the pickle is corrupt: {op} has an odd number of items", at)
            for k in range(0, len(items), 2):
                try:
                    target[items[k]] = items[k + 1]
                except TypeError as e:
                    self._fail(f"the pickle is corrupt: {op} with an unhashable key ({e})", at)

        def append(target, items, at, op):
            if type(target) is not list:
                raise UnsafePickleError(
                    f"fl.load: {self.path!r} applies {op} to a {_kind(target)} at pickle byte {at}; data files "
                    "only append to lists. The file is corrupt or hostile."
                )
            target.extend(items)

        def call(fn, args, at, op):
            if id(fn) not in _CALLABLE or type(args) is not tuple:
                raise UnsafePickleError(
                    f"fl.load: {self.path!r} calls a {_kind(fn)} with {op} at pickle byte {at}; only the allowed "
                    "tensor and container constructors can be called. The file is corrupt or hostile."
                )
            try:
                return fn(*args)
            except TypeError as e:
                self._fail(f"the pickle is corrupt: {op} of {getattr(fn, '__name__', fn)} failed ({e})", at)

        while True:
            at = self.pos
            if at >= n:
                self._fail("the pickle is truncated: it ends without STOP", at)
            op = data[at]
            self.pos += 1
            if op == 0x80:  # PROTO
                self._take(1, at)
            elif op == 0x95:  # FRAME
                self._take(8, at)
            elif op == 0x2E:  # STOP
                if len(stack) != 1 or marks:
                    self._fail("the pickle is corrupt: STOP with a malformed stack", at)
                return stack[0]
            elif op == 0x28:  # MARK
                marks.append(len(stack))
            elif op == 0x30:  # POP
                top(at)
                stack.pop()
            elif op == 0x31:  # POP_MARK
                pop_mark(at)
            elif op == 0x32:  # DUP
                stack.append(top(at))
            elif op == 0x4E:  # NONE
                stack.append(None)
            elif op == 0x88:  # NEWTRUE
                stack.append(True)
            elif op == 0x89:  # NEWFALSE
                stack.append(False)
            elif op == 0x4B:  # BININT1
                stack.append(self._take(1, at)[0])
            elif op == 0x4D:  # BININT2
                stack.append(struct.unpack("<H", self._take(2, at))[0])
            elif op == 0x4A:  # BININT
                stack.append(struct.unpack("<i", self._take(4, at))[0])
            elif op == 0x8A:  # LONG1
                k = self._take(1, at)[0]
                stack.append(int.from_bytes(self._take(k, at), "little", signed=True))
            elif op == 0x8B:  # LONG4
                (k,) = struct.unpack("<i", self._take(4, at))
                stack.append(int.from_bytes(self._take(k, at), "little", signed=True))
            elif op == 0x49:  # INT (text; "01"/"00" are booleans in protocol 0)
                s = self._line(at)
                stack.append(True if s == "01" else False if s == "00" else _parse(int, s, self, at))
            elif op == 0x4C:  # LONG (text)
                stack.append(_parse(int, self._line(at).rstrip("L"), self, at))
            elif op == 0x47:  # BINFLOAT
                stack.append(struct.unpack(">d", self._take(8, at))[0])
            elif op == 0x46:  # FLOAT (text)
                stack.append(_parse(float, self._line(at), self, at))
            elif op in (0x58, 0x8C, 0x8D):  # BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
                size = {0x58: ("<I", 4), 0x8C: ("<B", 1), 0x8D: ("<Q", 8)}[op]
                (k,) = struct.unpack(size[0], self._take(size[1], at))
                try:
                    stack.append(str(self._take(k, at), "utf-8", "surrogatepass"))
                except UnicodeDecodeError:
                    self._fail("the pickle is corrupt: a string is not UTF-8", at)
            elif op in (0x42, 0x43, 0x8E):  # BINBYTES, SHORT_BINBYTES, BINBYTES8
                size = {0x42: ("<I", 4), 0x43: ("<B", 1), 0x8E: ("<Q", 8)}[op]
                (k,) = struct.unpack(size[0], self._take(size[1], at))
                stack.append(bytes(self._take(k, at)))
            elif op in (0x54, 0x55):  # BINSTRING, SHORT_BINSTRING (Python 2 str): text as latin1
                size = ("<i", 4) if op == 0x54 else ("<B", 1)
                (k,) = struct.unpack(size[0], self._take(size[1], at))
                stack.append(str(self._take(k, at), "latin1"))
            elif op == 0x7D:  # EMPTY_DICT
                stack.append({})
            elif op == 0x64:  # DICT
                d: dict = {}
                setitems(d, pop_mark(at), at, "DICT")
                stack.append(d)
            elif op == 0x5D:  # EMPTY_LIST
                stack.append([])
            elif op == 0x6C:  # LIST
                stack.append(pop_mark(at))
            elif op == 0x29:  # EMPTY_TUPLE
                stack.append(())
            elif op == 0x74:  # TUPLE
                stack.append(tuple(pop_mark(at)))
            elif op in (0x85, 0x86, 0x87):  # TUPLE1..3
                k = op - 0x84
                if len(stack) - (marks[-1] if marks else 0) < k:
                    self._fail("the pickle is corrupt: a tuple takes more items than the stack holds", at)
                items = tuple(stack[-k:])
                del stack[-k:]
                stack.append(items)
            elif op == 0x8F:  # EMPTY_SET
                stack.append(set())
            elif op == 0x90:  # ADDITEMS
                items = pop_mark(at)
                target = top(at)
                if type(target) is not set:
                    raise UnsafePickleError(
                        f"fl.load: {self.path!r} applies ADDITEMS to a {_kind(target)} at pickle byte {at}"
                    )
                target.update(items)
            elif op == 0x91:  # FROZENSET
                stack.append(frozenset(pop_mark(at)))
            elif op == 0x61:  # APPEND
                v = top(at)
                stack.pop()
                append(top(at), [v], at, "APPEND")
            elif op == 0x65:  # APPENDS
                items = pop_mark(at)
                append(top(at), items, at, "APPENDS")
            elif op == 0x73:  # SETITEM
                if len(stack) < 3:
                    self._fail("the pickle is corrupt: SETITEM needs three stack items", at)
                v, k = stack.pop(), stack.pop()
                setitems(top(at), [k, v], at, "SETITEM")
            elif op == 0x75:  # SETITEMS
                items = pop_mark(at)
                setitems(top(at), items, at, "SETITEMS")
            elif op in (0x71, 0x72, 0x70, 0x94):  # BINPUT, LONG_BINPUT, PUT, MEMOIZE
                if op == 0x71:
                    idx = self._take(1, at)[0]
                elif op == 0x72:
                    (idx,) = struct.unpack("<I", self._take(4, at))
                elif op == 0x70:
                    idx = _parse(int, self._line(at), self, at)
                else:
                    idx = len(memo)
                memo[idx] = top(at)
            elif op in (0x68, 0x6A, 0x67):  # BINGET, LONG_BINGET, GET
                if op == 0x68:
                    idx = self._take(1, at)[0]
                elif op == 0x6A:
                    (idx,) = struct.unpack("<I", self._take(4, at))
                else:
                    idx = _parse(int, self._line(at), self, at)
                if idx not in memo:
                    self._fail(f"the pickle is corrupt: memo entry {idx} is read before it is written", at)
                stack.append(memo[idx])
            elif op == 0x63:  # GLOBAL
                module = self._line(at)
                name = self._line(at)
                stack.append(self._global(module, name, at))
            elif op == 0x93:  # STACK_GLOBAL
                if len(stack) < 2:
                    self._fail("the pickle is corrupt: STACK_GLOBAL needs two strings", at)
                name, module = stack.pop(), stack.pop()
                if not (isinstance(module, str) and isinstance(name, str)):
                    self._fail("the pickle is corrupt: STACK_GLOBAL needs two strings", at)
                stack.append(self._global(module, name, at))
            elif op == 0x52:  # REDUCE
                if len(stack) < 2:
                    self._fail("the pickle is corrupt: REDUCE needs a callable and its arguments", at)
                args, fn = stack.pop(), stack.pop()
                stack.append(call(fn, args, at, "REDUCE"))
            elif op == 0x81:  # NEWOBJ
                if len(stack) < 2:
                    self._fail("the pickle is corrupt: NEWOBJ needs a class and its arguments", at)
                args, cls = stack.pop(), stack.pop()
                stack.append(call(cls, args, at, "NEWOBJ"))
            elif op == 0x62:  # BUILD
                if len(stack) < 2:
                    self._fail("the pickle is corrupt: BUILD needs an object and its state", at)
                state = stack.pop()
                target = top(at)
                # a state_dict is an OrderedDict carrying `_metadata` (module versions) as its state: dropped
                if type(target) is not OrderedDict or not isinstance(state, dict):
                    raise UnsafePickleError(
                        f"fl.load: {self.path!r} applies BUILD (set the state of an object) to a {_kind(target)} "
                        f"at pickle byte {at}; data files only set the metadata of an OrderedDict. The file may run "
                        "code when unpickled; it is corrupt or hostile."
                    )
            elif op == 0x51:  # BINPERSID
                stack.append(self.persistent_load(stack.pop() if stack else None, at))
            elif op == 0x50:  # PERSID (text)
                stack.append(self.persistent_load(self._line(at), at))
            else:
                name = _OPNAMES.get(op, f"0x{op:02x}")
                raise UnsafePickleError(
                    f"fl.load: {self.path!r} uses the pickle opcode {name} at byte {at}, which data files do not "
                    "need and fl.load does not run (it can build arbitrary objects or run code)."
                )


def _parse(kind, s, reader, at):
    try:
        return kind(s)
    except ValueError:
        reader._fail(f"the pickle is corrupt: {s!r} is not a {kind.__name__}", at)


def _kind(obj) -> str:
    if isinstance(obj, tuple) and obj and obj[0] == "tensor":
        return "tensor"
    if isinstance(obj, (_Storage, _StorageType)):
        return "storage"
    if isinstance(obj, _Dtype):
        return "dtype"
    return type(obj).__name__


_OPNAMES = {0x69: "INST", 0x6F: "OBJ", 0x92: "NEWOBJ_EX", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4",
            0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER", 0x96: "BYTEARRAY8", 0x53: "STRING", 0x56: "UNICODE"}


# ---------------------------------------------------------------------------------------------------------------
# Storages and tensors


def _storage_dtype(stype, path, at) -> _Dtype | None:
    if not isinstance(stype, _StorageType):
        raise _error(path, f"a persistent id names a {_kind(stype)} as its storage type (pickle byte {at})")
    return stype.dtype


def _view(storage, path: str, offset, size, stride, dtype: _Dtype | None):
    """The tensor ``storage[offset + sum(i * stride)]`` over ``size``, checked to lie inside the storage."""
    if not isinstance(storage, _Storage):
        raise _error(path, f"a tensor is rebuilt from a {_kind(storage)}, not a storage")
    d = dtype if dtype is not None else storage.dtype
    if not isinstance(d, _Dtype):
        raise _error(path, f"the tensor over storage {storage.key!r} has no dtype")
    if d.np is None:
        raise _error(
            path,
            f"the tensor over storage {storage.key!r} has dtype torch.{d.name}, which has no NumPy equivalent; "
            f"convert it in PyTorch first (e.g. t.to(torch.complex64))",
        )
    ok = (
        isinstance(offset, int)
        and not isinstance(offset, bool)
        and isinstance(size, tuple)
        and isinstance(stride, tuple)
        and len(size) == len(stride)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in size + stride)
    )
    if not ok:
        raise _error(path, f"a tensor over storage {storage.key!r} has a malformed offset/size/stride")
    item = d.np.itemsize
    count = storage.raw.size // item
    if offset < 0 or any(v < 0 for v in size) or any(v < 0 for v in stride):
        raise _error(
            path,
            f"a tensor over storage {storage.key!r} has a negative offset, size or stride "
            f"(offset {offset}, size {list(size)}, stride {list(stride)}); the file is corrupt or hostile",
        )
    numel = 1
    for v in size:
        numel *= v
    if numel == 0:
        out = np.empty(size, d.np)
        out.flags.writeable = False
        return out
    last = offset + sum((s - 1) * st for s, st in zip(size, stride))
    if last >= count:
        raise _error(
            path,
            f"a tensor view (offset {offset}, size {list(size)}, stride {list(stride)}) reaches element {last} of "
            f"storage {storage.key!r}, which holds {count} {d.name} elements; the file is corrupt or hostile "
            "(a view past its storage would read other memory)",
        )
    # the ndarray constructor checks the strides against the buffer once more
    out = np.ndarray(size, d.np, buffer=storage.raw, offset=offset * item, strides=tuple(st * item for st in stride))
    if not out.flags.aligned:
        # numba kernels and BLAS want aligned data; legacy files store storages at arbitrary offsets
        out = out.copy()
    out.flags.writeable = False
    return out


def _to_native(arr: np.ndarray) -> np.ndarray:
    """A big-endian file's values in native order (complex numbers swap each part)."""
    a = np.ascontiguousarray(arr).reshape(-1)
    part = np.dtype(f"u{a.dtype.itemsize // (2 if a.dtype.kind == 'c' else 1)}")
    out = a.view(part).byteswap().view(a.dtype).reshape(arr.shape)
    out.flags.writeable = False
    return out


def _finish(obj, path: str, byteswap: bool):
    """Turn the machine's tensor records into Tensors (or read-only arrays for dtypes funclib lacks), checking
    that the result is a tree: no cycles, no bare storages or dtypes left over."""
    done: dict[int, Any] = {}
    active: set[int] = set()

    def go(x, depth):
        if depth > 500:
            raise _error(path, "the object nests containers more than 500 deep")
        t = type(x)
        if t in (int, float, bool, str, bytes, complex, type(None)):
            return x
        key = id(x)
        if key in done:
            return done[key]
        if key in active:
            raise _error(path, "the object contains itself (a cycle); checkpoints hold trees")
        active.add(key)
        if t is tuple and x and x[0] == "tensor" and len(x) == 6 and isinstance(x[1], _Storage):
            _, storage, offset, size, stride, dtype = x
            arr = _view(storage, path, offset, size, stride, dtype)
            if byteswap:
                arr = _to_native(arr)
            out = _wrap(arr) if arr.dtype in dtypes._KNOWN else arr
        elif t is tuple:
            out = tuple(go(v, depth + 1) for v in x)
        elif t is list:
            out = [go(v, depth + 1) for v in x]
        elif t in (dict, OrderedDict):
            out = t((k, go(v, depth + 1)) for k, v in x.items())
        elif t in (set, frozenset):
            out = x
        elif t is _Dtype and x.np is not None:
            out = x.np
        else:
            raise _error(path, f"the object holds a bare {_kind(x)}, which is not data fl.load returns")
        active.discard(key)
        done[key] = out
        return out

    return go(obj, 0)


# ---------------------------------------------------------------------------------------------------------------
# The two file layouts


def _read_file(f, use_mmap: bool):
    """The file's bytes: a read-only memory map, or one read into a NumPy buffer (large NumPy allocations get
    transparent huge pages, which makes filling them about four times faster than into a ``bytes``)."""
    size = os.fstat(f.fileno()).st_size
    if use_mmap:
        return _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ)
    return _pread(f.fileno(), 0, size, f.name)


def _load_zip(path: str, buf) -> Any:
    raw = np.frombuffer(buf, dtype=np.uint8)
    try:
        # the directory and data.pkl are read through the file (a memory map is no file object for zipfile); the
        # storages are views of the buffer
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise _error(path, f"the zip archive is truncated or corrupt ({e})") from None
    with zf:
        infos = {i.filename: i for i in zf.infolist()}
        pkls = [n for n in infos if n.endswith("/data.pkl") and n.count("/") == 1] or (
            ["data.pkl"] if "data.pkl" in infos else []
        )
        if len(pkls) != 1:
            raise _error(path, f"a PyTorch zip checkpoint holds one <name>/data.pkl; found {len(pkls)}")
        stem = pkls[0][: -len("data.pkl")]
        order = infos.get(stem + "byteorder")
        try:
            byteorder = zf.read(order).decode("ascii", "replace").strip() if order is not None else "little"
        except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as e:
            raise _error(path, f"the zip archive is corrupt ({e})") from None
        if byteorder not in ("little", "big"):
            raise _error(path, f"unknown byte order {byteorder!r}")

        def entry(name: str) -> np.ndarray:
            info = infos.get(name)
            if info is None:
                raise _error(path, f"the pickle refers to storage {name!r}, which the archive does not contain")
            if info.compress_type != zipfile.ZIP_STORED:
                try:
                    return np.frombuffer(zf.read(info), dtype=np.uint8)
                except (zipfile.BadZipFile, EOFError, OSError, zlib.error, NotImplementedError) as e:
                    raise _error(path, f"the zip entry {name!r} cannot be read ({e})") from None
            head = raw[info.header_offset : info.header_offset + 30].tobytes()
            if len(head) < 30 or head[:4] != _ZIP_MAGIC:
                raise _error(path, f"the zip entry {name!r} has a corrupt local header")
            n_name, n_extra = struct.unpack("<HH", head[26:30])
            start = info.header_offset + 30 + n_name + n_extra
            if start + info.file_size > raw.size:
                raise _error(path, f"the zip entry {name!r} runs past the end of the file (truncated)")
            return raw[start : start + info.file_size]

        storages: dict[str, _Storage] = {}

        def persistent_load(pid, at):
            if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
                raise _error(path, f"unknown persistent id {pid!r:.80} at pickle byte {at}")
            _, stype, key, _location, numel = pid
            dtype = _storage_dtype(stype, path, at)
            if not isinstance(key, str) or not isinstance(numel, int) or numel < 0:
                raise _error(path, f"malformed storage reference {pid!r:.80} at pickle byte {at}")
            if dtype is not None and dtype.np is None:
                raise _error(path, f"storage {key!r} has dtype torch.{dtype.name}, which has no NumPy equivalent")
            data = entry(f"{stem}data/{key}")
            want = numel * (1 if dtype is None else dtype.np.itemsize)
            if want != data.size:
                raise _error(
                    path,
                    f"storage {key!r} declares {numel} elements ({want} bytes) but the file holds {data.size} bytes "
                    "for it; the file is corrupt or hostile (CVE-2026-24747)",
                )
            prev = storages.get(key)
            if prev is not None and (prev.dtype is not dtype):
                raise _error(path, f"storage {key!r} is declared twice with different types")
            s = storages[key] = prev or _Storage(data, dtype, key)
            return s

        try:
            pkl = zf.read(infos[pkls[0]])
        except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as e:
            raise _error(path, f"{pkls[0]} cannot be read from the zip archive ({e})") from None
        obj = _Reader(pkl, 0, path, persistent_load).run()
    return _finish(obj, path, byteswap=byteorder == "big")


def _load_legacy(path: str, buf, fd: int | None) -> Any:
    """``buf`` maps the file; with ``fd``, each storage is read from it into a buffer of its own (storages sit at
    unaligned offsets in this format, so views of one buffer would need copying anyway)."""
    def header(pos):
        r = _Reader(buf, pos, path, _no_persistent(path))
        return r.run(), r.pos

    magic, pos = header(0)
    if magic != _LEGACY_MAGIC_NUMBER:
        raise _error(path, "the legacy PyTorch header has a wrong magic number")
    proto, pos = header(pos)
    if proto != _LEGACY_PROTOCOL:
        raise _error(path, f"legacy PyTorch protocol {proto!r} is not supported (only {_LEGACY_PROTOCOL})")
    sys_info, pos = header(pos)
    little = sys_info.get("little_endian", True) if isinstance(sys_info, dict) else True

    # the storages follow the pickles: references resolve to placeholders whose bytes are filled in below
    roots: dict[str, tuple[_Storage, int]] = {}
    views: list[tuple[_Storage, str, int, int]] = []

    def persistent_load(pid, at):
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise _error(path, f"unknown persistent id {pid!r:.80} at pickle byte {at}")
        _, stype, key, _location, numel, view = pid
        dtype = _storage_dtype(stype, path, at)
        if not isinstance(key, str) or not isinstance(numel, int) or numel < 0:
            raise _error(path, f"malformed storage reference {pid!r:.80} at pickle byte {at}")
        if dtype is not None and dtype.np is None:
            raise _error(path, f"storage {key!r} has dtype torch.{dtype.name}, which has no NumPy equivalent")
        prev = roots.get(key)
        if prev is not None and (prev[0].dtype is not dtype or prev[1] != numel):
            raise _error(path, f"storage {key!r} is declared twice with different types or sizes")
        root = prev[0] if prev is not None else _Storage(None, dtype, key)
        roots[key] = (root, numel)
        if view is None:
            return root
        # a pre-1.0 storage view: (view key, element offset, element count) of the root storage
        if not (isinstance(view, tuple) and len(view) == 3 and all(isinstance(v, int) for v in view[1:])):
            raise _error(path, f"malformed storage view {view!r:.80} at pickle byte {at}")
        s = _Storage(None, dtype, f"{key}[{view[1]}:{view[1] + view[2]}]")
        views.append((s, key, view[1], view[2]))
        return s

    r = _Reader(buf, pos, path, persistent_load)
    obj = r.run()
    keys, pos = header(r.pos)
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise _error(path, "the legacy storage key list is malformed")
    raw = np.frombuffer(buf, dtype=np.uint8)
    for key in keys:
        if key not in roots:
            raise _error(path, f"the file stores storage {key!r}, which the object does not use")
        root, numel = roots[key]
        item = 1 if root.dtype is None else root.dtype.np.itemsize
        if pos + 8 > raw.size:
            raise _error(path, f"the file ends before storage {key!r} (truncated)")
        (count,) = struct.unpack("<q" if little else ">q", raw[pos : pos + 8].tobytes())
        pos += 8
        if count != numel:
            raise _error(
                path,
                f"storage {key!r} is declared with {numel} elements but its data says {count}; the file is corrupt "
                "or hostile (CVE-2026-24747)",
            )
        if pos + count * item > raw.size:
            raise _error(path, f"storage {key!r} needs {count * item} bytes but the file ends first (truncated)")
        root.raw = raw[pos : pos + count * item] if fd is None else _pread(fd, pos, count * item, path)
        pos += count * item
    missing = sorted(k for k, (s, _) in roots.items() if s.raw is None)
    if missing:
        raise _error(path, f"the object uses storages {missing[:5]} that the file does not contain")
    for s, key, off, cnt in views:
        root = roots[key][0]
        item = 1 if root.dtype is None else root.dtype.np.itemsize
        if off < 0 or cnt < 0 or (off + cnt) * item > root.raw.size:
            raise _error(path, f"storage view {s.key} lies outside storage {key!r}; the file is corrupt or hostile")
        s.raw = root.raw[off * item : (off + cnt) * item]
    return _finish(obj, path, byteswap=not little)


def _no_persistent(path):
    def f(pid, at):
        raise _error(path, f"a legacy header pickle refers to a storage (pickle byte {at}); the file is corrupt")

    return f


def _pread(fd: int, pos: int, n: int, path: str) -> np.ndarray:
    out = np.empty(n, np.uint8)
    if n and os.preadv(fd, [out], pos) != n:
        raise _error(path, "the file changed size while it was read")
    out.flags.writeable = False
    return out


def load_pytorch(path: str, *, mmap: bool = False) -> Any:
    """Read a ``torch.save`` file: tensors become read-only ``Tensor``s sharing the file's buffer (or its memory map
    with ``mmap=True``); dtypes funclib has no Tensor for (``float8_e8m0fnu``) come back as read-only NumPy arrays
    of the ml_dtypes type. Containers are rebuilt as dict, OrderedDict, list, tuple and set."""
    with open(path, "rb") as f:
        head = f.read(len(_LEGACY_MAGIC))
        if head.startswith(_ZIP_MAGIC):
            return _load_zip(path, _read_file(f, mmap))
        if head.startswith(_LEGACY_MAGIC):
            return _load_legacy(path, _read_file(f, True), None if mmap else f.fileno())
    raise _error(path, "not a PyTorch checkpoint")
