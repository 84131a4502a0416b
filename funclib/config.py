"""Global switches, read from the environment at import and settable at run time.

>>> fl.config.explain_retraces = True   # log why every jit retrace happened (FUNCLIB_EXPLAIN_RETRACES=1)
"""

from __future__ import annotations

import os

from .kernels import compile_pool, diskcache


def _env_flag(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() not in ("", "0", "false", "no", "off")


explain_retraces: bool = _env_flag("FUNCLIB_EXPLAIN_RETRACES")
"""Log (logger ``funclib.jit``, level WARNING) which argument changed, from what to what, at every retrace."""

disable_jit: bool = _env_flag("FUNCLIB_DISABLE_JIT")
"""Run jitted functions eagerly (for debugging with print and pdb)."""

fuse_kernels: bool = not _env_flag("FUNCLIB_NO_FUSION")
"""Lower elementwise regions to generated numba kernels under jit (off: every equation runs its NumPy impl)."""

native_loops: bool = not _env_flag("FUNCLIB_NO_NATIVE_LOOPS")
"""Under jit, run a ``scan``, ``while_loop`` or ``fori_loop`` whose whole body lowers to numba as one generated
loop (off: one executor pass over the compiled body per iteration). Read when a jitted function compiles for a new
signature."""

whole_programs: bool = not _env_flag("FUNCLIB_NO_WHOLE_PROGRAMS")
"""Under jit (with ``native_loops``), run a small program whose every step lowers to numba as one generated
function instead of a sequence of kernel calls (see ``transforms/native_loops.py`` for what counts as small).
Read when a jitted function compiles for a new signature."""


background_compile: bool = _env_flag("FUNCLIB_BACKGROUND_COMPILE", True)
"""Under jit, a program whose kernels are not in the disk cache does not wait for numba: its calls run the
optimized program through the NumPy implementations (eager speed) while worker processes compile the kernels into
the cache, and switch to the compiled program once they are there (``FUNCLIB_BACKGROUND_COMPILE=0``: compile at
the first call, as ``jax.jit`` does). ``wait_for_compilation()`` or ``jitted.wait_compiled()`` waits for them.
Read when a jitted function compiles for a new signature."""


def wait_for_compilation(timeout: float | None = None) -> bool:
    """Wait until every kernel compilation started in the background has finished and its kernels are loaded
    (see ``background_compile``); False if ``timeout`` seconds passed first. Each jitted function then runs its
    compiled program from its next call on.

    >>> import funclib as fl
    >>> fl.config.wait_for_compilation(timeout=60)
    True
    """
    return compile_pool.wait_all(timeout)


def _env_number(name: str, default: float) -> float:
    v = os.environ.get(name)
    if v is None or not v.strip():
        return default
    try:
        return float(v)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {v!r}") from None


whole_program_hot_calls: int = int(_env_number("FUNCLIB_WHOLE_PROGRAM_HOT_CALLS", 10))
"""A small-valued program too long to compile as one function at its first call (17-256 steps, e.g. a MAML
update) runs as its steps, and after this many calls is compiled as one function in a background thread, used once
ready (``wait_for_compilation`` waits for it). 0: compile it at the first call, before
running it. Read when a jitted function compiles for a new signature."""

distributed_buffer_pool_mb: float = _env_number("FUNCLIB_DISTRIBUTED_BUFFER_POOL_MB", 256)
"""Memory (MiB) each process keeps for reuse as the outputs of Allreduces across processes (``psum``, ``pmean``,
``pmax``, ``pmin`` over a ``fl.distributed`` axis, DDP's gradient buckets): a buffer is reused once every tensor
made from it is gone, saving the page faults of fresh memory. 0 turns the reuse off."""


def cache_dir() -> str:
    """Where jit keeps compiled kernels: ``FUNCLIB_CACHE_DIR``, else ``$XDG_CACHE_HOME/funclib``, else
    ``~/.cache/funclib``.

    Compiled kernels are loaded by unpickling, which runs code, so the directory is used only while private to
    you: funclib creates it (and missing parents) with mode 0700 and its files with mode 0600 whatever the umask,
    and refuses one owned by another user or writable by group or others (or with such a parent, unless sticky
    like ``/tmp``). A refused or unwritable directory gives one ``fl.errors.KernelCacheWarning``, after which
    kernels compile in memory for the rest of the process. A truncated or corrupt cache file is detected (each
    carries a SHA-256 of its contents) and the kernel compiled again.

    >>> import funclib as fl
    >>> fl.config.cache_dir()  # doctest: +SKIP
    '/home/me/.cache/funclib'
    """
    return diskcache.cache_dir()
