"""The kernel cache: generated kernel modules and their compiled machine code on disk, private to the user.

Compiled numba code is loaded by unpickling, and unpickling runs code: whoever can write to the cache can run code
in every process that reads it. So funclib uses its cache directory (``FUNCLIB_CACHE_DIR``, else
``$XDG_CACHE_HOME/funclib``, else ``~/.cache/funclib``) only when it is private:

- funclib creates the directory, and any missing parents, with mode 0700 and every file in it with mode 0600,
  whatever the umask;
- the directory must be owned by the current user and not writable by group or others, and every existing
  parent must be owned by the user or root and not writable by group or others unless it is sticky (as ``/tmp``);
- otherwise, or when the directory cannot be created or written, funclib warns once (``KernelCacheWarning``) and
  compiles kernels in memory for the rest of the process.

A kernel is a generated module ``k_<key>.py`` (the key hashes its source and funclib's, numba's and the vector
math's versions). It is executed from the source held in memory; the file is there to be read and for tracebacks,
and one that differs from the source is rewritten. Each compiled signature of each numba function in it, and of
funclib's own numba functions (decorated with ``njit``/``vectorize`` from here instead of numba's ``cache=True``),
is one file ``<module>.<function>.<hash>.nbc``: a magic header, the SHA-256 of the payload, then the pickled numba
compile result with its full cache key (signature, CPU, bytecode and module source hashes, numba and Python
versions). A file that is truncated, holds other bytes or belongs to another key is a miss: the function is
compiled again and the file replaced. The digest catches corruption, not tampering: the privacy checks are what
keep others out. Every file is written to a temporary name and renamed into place, so processes compiling the same
kernel at once each leave a complete file, and a reader sees a whole old file or a whole new one.

Example::

    import funclib as fl
    print(fl.config.cache_dir())    # e.g. /home/me/.cache/funclib; FUNCLIB_CACHE_DIR overrides it
"""

from __future__ import annotations

import functools
import hashlib
import linecache
import logging
import os
import pickle
import re
import stat
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Callable

import numba
from numba.core import compiler, serialize
from numba.core.caching import _Cache
from numba.core.dispatcher import Dispatcher

FUNCLIB_KERNEL_VERSION = "2"

_MAGIC = b"funclib-nbc\x01"
_DIGEST = 32
_log = logging.getLogger("funclib.kernels")
# vmath (which imports this module) is inlined into the samplers and the eager ufuncs: a change to it must not leave
# their machine code stale, so every key carries a digest of its source
VMATH_VERSION: str = hashlib.sha256(
    open(os.path.join(os.path.dirname(__file__), "vmath.py"), "rb").read()
).hexdigest()[:16]


class KernelCacheWarning(UserWarning):
    """The kernel cache directory is not private or not writable: kernels are compiled in memory instead."""


def cache_dir() -> str:
    """Where compiled kernels are cached: ``FUNCLIB_CACHE_DIR``, else ``$XDG_CACHE_HOME/funclib``, else
    ``~/.cache/funclib``. It is used only while private to the user (see ``funclib.kernels.diskcache``)."""
    d = os.environ.get("FUNCLIB_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "funclib")


_dirs: dict[str, str | None] = {}  # requested path -> the checked directory, or None when refused
_dirs_lock = threading.Lock()
_loaded: dict = {}
_load_lock = threading.Lock()


def private_dir() -> str | None:
    """The cache directory, created and checked private on first use in this process; None (after one
    ``KernelCacheWarning``) when it is refused or unusable."""
    path = os.path.abspath(cache_dir())
    try:
        return _dirs[path]
    except KeyError:
        pass
    with _dirs_lock:
        if path not in _dirs:
            problem = _prepare(path)
            _dirs[path] = None if problem else path
            if problem:
                _warn(path, problem)
    return _dirs[path]


def _warn(path: str, problem: str) -> None:
    warnings.warn(
        f"funclib's kernel cache {path!r} {problem}. Compiled kernels are loaded by unpickling, which runs code, so "
        "funclib reads them only from a directory private to you; for the rest of this process kernels are compiled "
        "in memory (each first call compiles again). Fix: set FUNCLIB_CACHE_DIR to a directory only you can write "
        "(funclib creates a missing one with mode 0700), or correct this one's ownership and permissions; deleting "
        "the cache is always safe.",
        KernelCacheWarning,
        stacklevel=_outside_stacklevel(),
    )


def _outside_stacklevel() -> int:
    """The ``stacklevel`` of ``_warn``'s first caller outside funclib and numba: the user's line."""
    f, level = sys._getframe(1), 1
    while f is not None:
        name = f.f_globals.get("__name__") or ""
        inside = name == "funclib" or name.startswith(("funclib.", "funclib_kernel_", "numba"))
        if not inside and not f.f_code.co_filename.startswith("<funclib"):
            return level
        f, level = f.f_back, level + 1
    return 1


def _give_up(path: str, err: OSError) -> None:
    """A write failed (read-only file system, disk full, ...): stop using the directory, with one warning."""
    with _dirs_lock:
        if _dirs.get(path) is None:
            return
        _dirs[path] = None
    _warn(path, f"cannot be written ({err.strerror or err})")


def _ancestors(path: str) -> list[str]:
    out = []
    p = os.path.dirname(path)
    while True:
        out.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            return out
        p = parent


def _prepare(path: str) -> str | None:
    """Create ``path`` (mode 0700, parents too) and check it is private. Returns what is wrong, or None."""
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    for m in reversed(missing):
        try:
            os.mkdir(m, 0o700)  # the umask can only remove bits from 0o700
        except FileExistsError:
            pass  # another process made it: checked below like any existing directory
        except OSError as e:
            return f"cannot be created ({e.strerror or e}: {m!r})"
    if not hasattr(os, "geteuid"):  # Windows: access is by ACL, and a user's profile is private by default
        return None if os.path.isdir(path) and os.access(path, os.W_OK) else "is not a writable directory"
    uid = os.geteuid()
    for a in dict.fromkeys(_ancestors(path) + _ancestors(os.path.realpath(path))):
        try:
            st = os.stat(a)
        except OSError as e:
            return f"has a parent that cannot be inspected ({e.strerror or e}: {a!r})"
        if st.st_uid not in (uid, 0):
            return f"has a parent owned by another user (uid {st.st_uid}: {a!r})"
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return f"has a parent writable by group or others (mode {oct(stat.S_IMODE(st.st_mode))}: {a!r})"
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot be inspected ({e.strerror or e})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != uid:
        return f"is owned by another user (uid {st.st_uid}; you are uid {uid})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        return f"is writable by group or others (mode {oct(mode)})"
    if not os.access(path, os.W_OK | os.X_OK):
        return "is not writable"
    return None


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600 through a temporary file renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp_")  # O_EXCL, mode 0600 whatever the umask
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _same_bytes(path: str, data: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read() == data
    except OSError:
        return False


def kernel_key(src: str) -> str:
    """The cache key of a generated kernel module: its source (which names the vmath version it calls) and the
    versions of its generator and of numba."""
    h = hashlib.sha256()
    h.update(src.encode())
    h.update(FUNCLIB_KERNEL_VERSION.encode())
    h.update(numba.__version__.encode())
    return h.hexdigest()[:24]


def load_kernel(src: str):
    """The dispatcher of the function ``kernel`` in the generated module ``src``: from this process's table, else
    by executing ``src`` (its numba functions then load their machine code from the disk cache or compile and
    store it at their first call)."""
    key = kernel_key(src)
    k = _loaded.get(key)
    if k is not None:
        return k
    with _load_lock:
        k = _loaded.get(key)
        if k is not None:
            return k
        d = private_dir()
        stem = f"k_{key}"
        filename = f"<funclib kernel {stem}>"
        if d is not None:
            path = os.path.join(d, f"{stem}.py")
            data = src.encode()
            try:
                if not _same_bytes(path, data):  # missing, cut short or foreign: rewritten, never executed
                    write_atomic(path, data)
                filename = path
            except OSError as e:
                _give_up(d, e)
                d = None
        if d is None:
            linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        name = f"funclib_kernel_{key}"
        mod = types.ModuleType(name)
        mod.__file__ = filename
        code = compile(src, filename, "exec")
        # numba finds a cached function's globals through sys.modules when it rebuilds it
        sys.modules[name] = mod
        try:
            exec(code, mod.__dict__)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        for obj in list(vars(mod).values()):
            if isinstance(obj, Dispatcher) and obj.py_func.__module__ == name:
                obj._cache = DiskCache(obj.py_func, stem, key)
        k = _loaded[key] = mod.kernel
        return k


def compiled_on_disk(src: str, function: str = "kernel") -> bool:
    """Whether the kernel cache holds machine code (for any signature) of ``function`` in the generated module
    ``src``: loading it costs a fraction of compiling it."""
    d = private_dir()
    if d is None:
        return False
    prefix = re.sub(r"[^\w.]", "_", f"k_{kernel_key(src)}.{function}.")
    try:
        return any(n.startswith(prefix) and n.endswith(".nbc") for n in os.listdir(d))
    except OSError:
        return False


def _seal(payload: bytes) -> bytes:
    return _MAGIC + hashlib.sha256(payload).digest() + payload


def _unseal(blob: bytes) -> bytes | None:
    n = len(_MAGIC)
    if len(blob) < n + _DIGEST or blob[:n] != _MAGIC:
        return None
    payload = blob[n + _DIGEST :]
    if hashlib.sha256(payload).digest() != blob[n : n + _DIGEST]:
        return None
    return payload


@functools.cache
def _file_digest(path: str, mtime: float, size: int) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _source_stamp(py_func) -> str | None:
    """A hash of the module file defining ``py_func``: the compiled code depends on its globals too."""
    path = py_func.__code__.co_filename
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _file_digest(path, st.st_mtime, st.st_size)


class DiskCache(_Cache):
    """numba's per-function cache, for one funclib function: one checksummed file per compiled signature in the
    private cache directory (looked up at each load and save), named by a hash of its key; no shared index to
    read, update or race on."""

    def __init__(self, py_func, stem: str, stamp: str | None):
        self._py_func = py_func
        self._name = re.sub(r"[^\w.]", "_", f"{stem}.{py_func.__qualname__}.")
        self._stamp = stamp
        self._enabled = stamp is not None  # a function whose source cannot be read is compiled in memory

    @property
    def cache_path(self) -> str | None:
        return private_dir()

    def enable(self) -> None:
        self._enabled = self._stamp is not None

    def disable(self) -> None:
        self._enabled = False

    def flush(self) -> None:
        d = private_dir()
        if d is None:
            return
        for n in os.listdir(d):
            if n.startswith(self._name) and n.endswith(".nbc"):
                try:
                    os.unlink(os.path.join(d, n))
                except FileNotFoundError:
                    pass

    def _key(self, sig, codegen) -> tuple:
        f = self._py_func
        cells = serialize.dumps(tuple(c.cell_contents for c in f.__closure__)) if f.__closure__ else b""
        code = (hashlib.sha256(f.__code__.co_code).hexdigest(), hashlib.sha256(cells).hexdigest())
        stamp = (self._stamp, VMATH_VERSION)
        return (sig, codegen.magic_tuple(), code, stamp, numba.__version__, sys.version_info[:2])

    def _path(self, d: str, key: tuple) -> str:
        return os.path.join(d, self._name + hashlib.sha256(repr(key).encode()).hexdigest()[:20] + ".nbc")

    def load_overload(self, sig, target_context):
        d = private_dir() if self._enabled else None
        if d is None:
            return None
        target_context.refresh()
        key = self._key(sig, target_context.codegen())
        path = self._path(d, key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError:
            return None
        payload = _unseal(blob)
        if payload is None:
            _log.info("kernel cache: %s is corrupt (bad header or digest); compiling again", path)
            return None
        try:
            stored_key, reduced = pickle.loads(payload)
            if stored_key != key:
                return None
            return compiler.CompileResult._rebuild(target_context, *reduced)
        except Exception as e:  # written by this user's funclib, yet unusable (numba internals changed): recompile
            _log.info("kernel cache: cannot rebuild %s (%s); compiling again", path, e)
            return None

    def save_overload(self, sig, cres) -> None:
        d = private_dir() if self._enabled else None
        if d is None or cres.library.has_dynamic_globals or any(not x.can_cache for x in cres.lifted):
            return
        key = self._key(sig, cres.codegen)
        blob = _seal(serialize.dumps((key, cres._reduce())))
        try:
            write_atomic(self._path(d, key), blob)
        except OSError as e:
            _give_up(d, e)


def njit(fn: Callable | None = None, **options):
    """``numba.njit`` for funclib's own functions: compiled code is cached in the private kernel cache (never in
    numba's ``__pycache__`` or ``NUMBA_CACHE_DIR``). Example: ``@diskcache.njit(nogil=True)``."""
    if fn is None:
        return lambda f: njit(f, **options)
    # nothing calls funclib's numba functions through a C function pointer: skipping that wrapper is ~15% of a
    # small function's compile
    options.setdefault("no_cfunc_wrapper", True)
    disp = numba.njit(**options)(fn)
    disp._cache = DiskCache(disp.py_func, disp.py_func.__module__, _source_stamp(disp.py_func))
    return disp


def vectorize(signatures: list[str], fn: Callable, depends: str = ""):
    """``numba.vectorize(signatures)(fn)`` with its loops cached like ``njit``'s: numba's DUFunc, closed to new
    signatures as numba makes it for explicit ones. ``depends`` names the versions of other modules whose numba
    functions ``fn`` calls (their changes must miss the cache, as only ``fn``'s own module file is hashed).
    Example: ``vectorize(["float64(float64)"], f)(np.ones(3))``."""
    uf = numba.vectorize()(fn)
    stamp = _source_stamp(fn)
    uf._dispatcher.cache = DiskCache(fn, fn.__module__, stamp and stamp + depends)
    for s in signatures:
        uf.add(s)
    uf.disable_compile()
    return uf
