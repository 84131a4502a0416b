"""The default floating dtype: ``fl.set_default_dtype``, ``fl.get_default_dtype`` and ``fl.default_dtype``.

It is the dtype of Python floats (``fl.asarray([1.0])``, ``fl.sqrt(2.0)``), of creation functions and random
samplers called without ``dtype=``, and of new layers' parameters; the default complex dtype follows it (complex128
under float64). As with ``torch.set_default_dtype``, ``set_default_dtype`` changes it for the whole process; the
``with fl.default_dtype(...)`` form changes it only in the current thread (as the current trace is per thread), so
two threads can trace in different precisions. ``fl.jit`` keys its cache on it: a function traced under one default
retraces under another rather than reusing a program of the wrong precision.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from .. import dtypes
from ..checks import describe
from ..namespace import public


def _floating(dtype, op: str) -> np.dtype:
    try:
        # None and float would name the default itself (np.dtype(None) is float64)
        d = None if dtype is None or dtype is float else dtypes.canonicalize(dtype)
    except (TypeError, ValueError):
        d = None
    if d is None or d not in dtypes.REAL_FLOATING:
        raise TypeError(
            f"{op}: the default dtype must be a real floating dtype (fl.float16, fl.bfloat16, fl.float32, "
            f"fl.float64), got {describe(dtype)}"
        )
    return d


@public
def set_default_dtype(dtype) -> None:
    """Make ``dtype`` the default floating dtype of the whole process (threads inside a ``fl.default_dtype`` block
    keep the block's until it ends).

    Args:
        dtype: ``fl.float16``, ``fl.bfloat16``, ``fl.float32`` (the initial default) or ``fl.float64``.

    >>> fl.set_default_dtype(fl.float64)
    >>> fl.sqrt(2.0).dtype, fl.zeros(3).dtype
    (dtype('float64'), dtype('float64'))
    >>> fl.set_default_dtype(fl.float32)
    """
    dtypes._Defaults.process_float = _floating(dtype, "set_default_dtype")


@public
def get_default_dtype() -> np.dtype:
    """The default floating dtype in the current thread.

    >>> fl.get_default_dtype()
    dtype('float32')
    """
    return dtypes.float_default()


@public
@contextlib.contextmanager
def default_dtype(dtype) -> Iterator[np.dtype]:
    """A block in which ``dtype`` is the default floating dtype of the current thread; the previous default comes
    back when it ends, also on an exception.

    Args:
        dtype: a real floating dtype.

    >>> with fl.default_dtype(fl.float64):
    ...     fl.asarray([1.0]).dtype
    dtype('float64')
    >>> fl.asarray([1.0]).dtype
    dtype('float32')
    """
    d = _floating(dtype, "default_dtype")
    previous = dtypes._defaults.float
    dtypes._defaults.float = d
    try:
        yield d
    finally:
        dtypes._defaults.float = previous
