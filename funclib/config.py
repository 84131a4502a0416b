"""Global switches, read from the environment at import and settable at run time.

>>> fl.config.explain_retraces = True   # log why every jit retrace happened (FUNCLIB_EXPLAIN_RETRACES=1)
"""

from __future__ import annotations

import os


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
"""Under jit, run a ``scan`` whose whole body lowers to numba as one generated loop (off: one executor pass over
the compiled body per iteration). Read when a jitted function compiles for a new signature."""


def cache_dir() -> str:
    """Where compiled kernels are cached: ``FUNCLIB_CACHE_DIR``, else the user cache dir."""
    from .kernels.fusion import cache_dir as _kernel_cache_dir

    return _kernel_cache_dir()
