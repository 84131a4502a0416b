"""Compiled dispatch in front of the elementwise wrappers' eager fast paths (``funclib/_fastops.c``).

The Python wrapper made by ``unary``/``binary`` stays the one definition of an operation: the compiled
``FastOp`` takes only the cases its fast path takes (exactly-``Tensor`` operands of the listed dtypes, or a
``Tensor`` and a Python ``float``/``int`` as listed), calls the same NumPy function and wraps the result the
same way, and hands every other call (tracers, other types and dtypes, broadcasting errors) to the wrapper,
which it exposes as ``__wrapped__``. Without the extension (no C compiler at install time) ``unary`` and
``binary`` return the wrapper itself; ``COMPILED`` says which.

>>> import funclib as fl
>>> fl.add.__wrapped__(fl.tensor([1.0]), 2.0)  # the Python path, whatever COMPILED is
Tensor([3.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from .. import dtypes
from ..core import Tensor

try:
    from .. import _fastops
except ImportError:  # built from funclib/_fastops.c by pip install; the Python wrappers alone are correct
    _fastops = None

COMPILED: bool = _fastops is not None
# whether the extension reads an array's dtype from NumPy's struct (checked here on arrays of every dtype)
DTYPE_FROM_STRUCT: bool = COMPILED and _fastops.configure(
    Tensor,
    np.ndarray,
    np.asarray,
    tuple(np.zeros((2,) * (i % 3), d) for i, d in enumerate(dtypes.ALL)) + (np.zeros(4, ">f4")[::2],),
)


def unary(wrapper: Callable, np_fn: Callable, fast: Iterable[np.dtype]) -> Callable:
    """``wrapper`` with compiled dispatch: ``np_fn`` on a Tensor whose dtype is in ``fast``."""
    if _fastops is None:
        return wrapper
    return _fastops.FastOp(wrapper, np_fn, tuple(fast), arity=1)


def binary(
    wrapper: Callable,
    np_fn: Callable,
    fast: Iterable[np.dtype],
    fast_float: Iterable[np.dtype],
    fast_int: Iterable[np.dtype],
    first_float: Iterable[np.dtype],
    first_int: Iterable[np.dtype],
    unbounded: frozenset[np.dtype],
) -> Callable:
    """``wrapper`` with compiled dispatch: ``np_fn`` on two Tensors of one dtype in ``fast``, on a Tensor and a
    Python float (dtypes ``fast_float``; ``first_float`` with the float first) or int (``fast_int``,
    ``first_int``; the int must fit the dtype unless the dtype is in ``unbounded``)."""
    if _fastops is None:
        return wrapper

    def ranged(ds):
        return tuple((d, None, None) if d in unbounded else (d, dtypes.iinfo(d).min, dtypes.iinfo(d).max) for d in ds)

    return _fastops.FastOp(
        wrapper, np_fn, tuple(fast), tuple(fast_float), ranged(fast_int), tuple(first_float), ranged(first_int)
    )
