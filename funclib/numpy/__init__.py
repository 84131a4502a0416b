"""``funclib.numpy``: NumPy's API for differentiable code, ``import funclib.numpy as fnp`` in place of
``import numpy as np``.

Functions take NumPy's names and signatures (positional ``axis``, ``keepdims``, ``ddof``, ``dtype=``,
``where=`` and ``initial=`` on reductions, ``out=None``), accept Tensors, NumPy arrays, nested lists and
scalars, and return Tensors. Every function built from differentiable operations has derivatives, and
everything traces under ``fl.jit`` and ``fl.vmap``, except where an output's shape depends on values
(``nonzero``, ``unique``, boolean masks, ``trim_zeros``, ...): those need concrete values (eagerly, or under
``grad``, whose primal is concrete) and raise ``DataDependentShapeError`` under ``jit``/``vmap``; several take
JAX's ``size=`` (``nonzero``, ``argwhere``, ``flatnonzero``, ``where``) or ``length=`` (``bincount``) to fix
the shape instead. ``fl.*`` stays the Array API namespace; this module adapts NumPy's signatures onto it.

>>> import funclib as fl
>>> import funclib.numpy as fnp
>>> f = lambda x: fnp.var(x, ddof=1) + fnp.linalg.norm(fnp.outer(x, x))
>>> g = fl.grad(f)(fnp.array([1.0, 2.0, 3.0]))

Deliberate differences from NumPy:

- **Immutability.** Tensors cannot be written: ``x[i] = v`` raises and names the fix, ``x = x.at[i].set(v)``
  (``.add``, ``.multiply``, ``.min``, ``.max``, ...). ``out=`` accepts only None. NumPy's in-place functions
  ``put``, ``put_along_axis``, ``place``, ``fill_diagonal`` and ``ufunc.at`` return the updated array and
  require ``inplace=False`` (as in JAX); ``copyto`` and I/O, printing and buffer-sharing functions are absent.
  ``copy`` returns a Tensor unchanged (a copy is indistinguishable from it).
- **Default dtypes follow funclib's.** A Python float, ``fnp.array([1.0])``, ``fnp.zeros(3)``,
  ``fnp.linspace(0, 1)`` and integer means give the default float dtype (float32), not NumPy's float64,
  and mixing integers with floats gives the float's dtype, not a wider one (funclib's Array API promotion).
  One default across ``fl.*``, ``fnp.*``, layers and ``jit`` keeps a model in one precision and one compiled
  program per dtype. Data already in float64 (NumPy arrays, ``dtype=fnp.float64``) stays float64, and these
  functions read funclib's default float dtype when called, so they follow it wherever it is set. Byte-level
  readers (``frombuffer``) keep NumPy's meaning of ``float`` (float64), since it describes the data.
- **Scalars are 0-d Tensors.** Reductions return 0-d Tensors where NumPy returns NumPy scalars;
  ``allclose``/``array_equal`` return 0-d bool Tensors (``bool(...)`` works eagerly); ``isscalar`` is true
  for them. ``fnp.float32(x)`` converts to a 0-d (or n-d) Tensor and traces.
- **Functions are traced, not looped.** ``vectorize``, ``apply_along_axis`` and ``piecewise`` call the user's
  function on whole (batched) arrays via ``fl.vmap``; a Python ``if`` on a value inside them raises a
  ConcretizationError naming the fix (``fnp.where``).
- **Fixed dtypes where NumPy's depend on values.** ``linalg.eig``/``eigvals``/``roots`` are always complex.
- **Sorting.** Sorts are stable; ``partition``/``argpartition`` return a full sort (a valid partition).
- **Not available:** object and string dtypes, structured arrays (``order=`` fields), masked arrays,
  ``np.matrix``, datetime; ``ndmax`` of ``array``; ``qr(mode='raw')``; a callable ``pad`` mode.
"""

from __future__ import annotations

import math as _math

import numpy as _np

from ..core import Tensor as ndarray  # noqa: F401
from ..ops.creation import astype, from_dlpack  # noqa: F401
from . import fft, linalg  # noqa: F401
from ._creation import *  # noqa: F403
from ._creation import __all__ as _a1
from ._dtypes import (  # noqa: F401
    bfloat16,
    bool_,
    can_cast,
    cdouble,
    character,
    complex64,
    complex128,
    complex_,
    complexfloating,
    csingle,
    double,
    dtype,
    finfo,
    flexible,
    float16,
    float32,
    float64,
    float_,
    floating,
    generic,
    iinfo,
    inexact,
    int8,
    int16,
    int32,
    int64,
    int_,
    integer,
    isdtype,
    issubdtype,
    number,
    object_,
    promote_types,
    result_type,
    signedinteger,
    single,
    uint,
    uint8,
    uint16,
    uint32,
    uint64,
    unsignedinteger,
)
from ._elementwise import *  # noqa: F403
from ._elementwise import __all__ as _a2
from ._functional import *  # noqa: F403
from ._functional import __all__ as _a3
from ._index_tricks import *  # noqa: F403
from ._index_tricks import __all__ as _a4
from ._indexing import *  # noqa: F403
from ._indexing import __all__ as _a5
from ._manipulation import *  # noqa: F403
from ._manipulation import __all__ as _a6
from ._pad import pad  # noqa: F401
from ._polynomial import *  # noqa: F403
from ._polynomial import __all__ as _a7
from ._printing import *  # noqa: F403
from ._printing import __all__ as _a13
from ._products import *  # noqa: F403
from ._products import __all__ as _a8
from ._reductions import *  # noqa: F403
from ._reductions import __all__ as _a9
from ._signal import *  # noqa: F403
from ._signal import __all__ as _a10
from ._sorting import *  # noqa: F403
from ._sorting import __all__ as _a11
from ._statistics import *  # noqa: F403
from ._statistics import __all__ as _a12
from ._ufunc import ufunc  # noqa: F401

bool = bool_  # noqa: A001  (NumPy's spelling; shadows the builtin only inside this namespace)
e = _math.e
euler_gamma = 0.5772156649015329
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None
ComplexWarning = _np.exceptions.ComplexWarning

_DTYPE_NAMES = [
    "bfloat16", "bool", "bool_", "cdouble", "character", "complex64", "complex128", "complex_", "complexfloating",
    "csingle", "double", "dtype", "flexible", "float16", "float32", "float64", "float_", "floating", "generic",
    "inexact", "int8", "int16", "int32", "int64", "int_", "integer", "number", "object_", "signedinteger",
    "single", "uint", "uint8", "uint16", "uint32", "uint64", "unsignedinteger",
]

__all__ = sorted(
    set(_a1 + _a2 + _a3 + _a4 + _a5 + _a6 + _a7 + _a8 + _a9 + _a10 + _a11 + _a12 + _a13 + _DTYPE_NAMES)
    | {
        "ComplexWarning", "astype", "can_cast", "e", "euler_gamma", "fft", "finfo", "from_dlpack", "iinfo",
        "inf", "isdtype", "issubdtype", "linalg", "nan", "ndarray", "newaxis", "pad", "pi", "promote_types",
        "result_type", "ufunc",
    }
)
