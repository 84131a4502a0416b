"""Text forms of arrays. A Tensor prints with NumPy's formatting, so NumPy's print options (re-exported here)
govern it too."""

from __future__ import annotations

import numpy as np

from ._util import asarray, concrete

__all__ = ["array_repr", "array_str", "get_printoptions", "set_printoptions", "printoptions"]

get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
printoptions = np.printoptions


def _values(a, op):
    return concrete(asarray(a, op), op, "print the value outside the transform (or return it)")


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None) -> str:
    """The ``repr`` of an array: ``Tensor([...], dtype=...)``, formatted by NumPy's rules.

    >>> fnp.array_repr(fnp.array([1.0, 2.5]))
    'Tensor([1. , 2.5], dtype=float32)'
    """
    v = _values(arr, "array_repr")
    body = np.array2string(v, max_line_width=max_line_width, precision=precision, suppress_small=suppress_small,
                           separator=", ", prefix="Tensor(")
    return f"Tensor({body}, dtype={v.dtype.name})"


def array_str(a, max_line_width=None, precision=None, suppress_small=None) -> str:
    """The ``str`` of an array's values, as NumPy writes it.

    >>> fnp.array_str(fnp.array([1, 2]))
    '[1 2]'
    """
    return np.array_str(_values(a, "array_str"), max_line_width, precision, suppress_small)
