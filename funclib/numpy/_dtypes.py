"""NumPy's scalar types and dtype utilities over funclib's dtypes.

``fnp.float32`` is a type, as ``np.float32`` is: it works as a ``dtype=`` argument, compares equal to
``np.float32`` and ``fl.float32``, and calling it converts to a Tensor of that dtype (a 0-d Tensor from a
scalar), so ``fnp.float32(x)`` traces where ``np.float32(x)`` would need a concrete value.
"""

from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

from .. import dtypes
from ..core import Tensor
from ..ops.creation import astype as _astype
from ._util import asarray


class _ScalarMeta(type):
    dtype: np.dtype

    def __call__(cls, x=0, /) -> Tensor:
        return _astype(asarray(x, cls.__name__), cls.dtype)

    def __eq__(cls, other) -> bool:
        return cls is other or cls.dtype.type == other or (isinstance(other, np.dtype) and other == cls.dtype)

    def __ne__(cls, other) -> bool:
        return not _ScalarMeta.__eq__(cls, other)

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __instancecheck__(cls, instance) -> bool:
        if isinstance(instance, Tensor):
            return instance.dtype == cls.dtype
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls) -> str:
        return f"<class 'funclib.numpy.{cls.__name__}'>"


def _scalar_type(name: str, dtype: np.dtype) -> type:
    doc = (
        f"The ``{dtype.name}`` scalar type: a ``dtype=`` argument, and a function converting its argument to a "
        f"{dtype.name} Tensor.\n\n>>> fnp.{name}([1, 2]).dtype == fnp.{name}\nTrue"
    )
    return _ScalarMeta(name, (), {"dtype": dtype, "__doc__": doc, "__module__": "funclib.numpy"})


bool_ = _scalar_type("bool", dtypes.bool_)
int8 = _scalar_type("int8", dtypes.int8)
int16 = _scalar_type("int16", dtypes.int16)
int32 = _scalar_type("int32", dtypes.int32)
int64 = _scalar_type("int64", dtypes.int64)
uint8 = _scalar_type("uint8", dtypes.uint8)
uint16 = _scalar_type("uint16", dtypes.uint16)
uint32 = _scalar_type("uint32", dtypes.uint32)
uint64 = _scalar_type("uint64", dtypes.uint64)
float16 = _scalar_type("float16", dtypes.float16)
bfloat16 = _scalar_type("bfloat16", dtypes.bfloat16)
float32 = _scalar_type("float32", dtypes.float32)
float64 = _scalar_type("float64", dtypes.float64)
complex64 = _scalar_type("complex64", dtypes.complex64)
complex128 = _scalar_type("complex128", dtypes.complex128)

# NumPy's aliases: C names and platform defaults (64-bit)
single, double = float32, float64
csingle, cdouble = complex64, complex128
int_, uint = int64, uint64
float_, complex_ = float64, complex128

# the abstract hierarchy, for issubdtype and isinstance checks
generic = np.generic
number = np.number
integer = np.integer
signedinteger = np.signedinteger
unsignedinteger = np.unsignedinteger
inexact = np.inexact
floating = np.floating
complexfloating = np.complexfloating
flexible = np.flexible
character = np.character
object_ = np.object_
dtype = np.dtype

_BF16 = np.dtype(ml_dtypes.bfloat16)


def _np_type(x):
    if isinstance(x, _ScalarMeta):
        return x.dtype.type
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    if x in (builtins.float, builtins.int, builtins.complex, builtins.bool):
        return x
    return np.dtype(x).type


def issubdtype(arg1, arg2) -> bool:
    """Whether ``arg1`` is lower than or equal to ``arg2`` in NumPy's type hierarchy (bfloat16 counts as a
    floating type).

    >>> fnp.issubdtype(fnp.float32, fnp.floating)
    True
    """
    a, b = _np_type(arg1), _np_type(arg2)
    if a is _BF16.type:
        return b is _BF16.type or b in (np.floating, np.inexact, np.number, np.generic)
    return bool(np.issubdtype(a, b))


def promote_types(type1, type2, /) -> np.dtype:
    """The dtype both promote to, by funclib's (Array API) rules: integers with floats give the float, so
    ``promote_types(int64, float32)`` is float32 where NumPy says float64.

    >>> fnp.promote_types(fnp.int8, fnp.uint8)
    dtype('int16')
    """
    return dtypes.promote_types(dtypes.canonicalize(type1), dtypes.canonicalize(type2))


def result_type(*arrays_and_dtypes) -> np.dtype:
    """The dtype of an operation on these arrays and dtypes; Python scalars are weak (they take the array's
    kind and precision), as in ``fl.result_type``.

    >>> fnp.result_type(fnp.float32, 2.0)
    dtype('float32')
    """
    return dtypes.result_type(*(a.dtype if isinstance(a, _ScalarMeta) else a for a in arrays_and_dtypes))


def can_cast(from_, to, casting: str = "safe") -> bool:
    """Whether ``from_`` (a dtype or an array) casts to ``to`` under the ``casting`` rule, as NumPy decides.

    >>> fnp.can_cast(fnp.int32, fnp.float64)
    True
    """
    src = from_.dtype if isinstance(from_, Tensor) else dtypes.canonicalize(from_)
    return bool(np.can_cast(src, dtypes.canonicalize(to), casting=casting))


def isdtype(dtype, kind) -> bool:
    """The Array API's dtype test (``kind`` a dtype, a kind name such as ``'real floating'``, or a tuple).

    >>> fnp.isdtype(fnp.float32, "real floating")
    True
    """
    conv = (lambda k: k.dtype if isinstance(k, _ScalarMeta) else k)
    kind = tuple(conv(k) for k in kind) if isinstance(kind, tuple) else conv(kind)
    return dtypes.isdtype(dtypes.canonicalize(conv(dtype)), kind)


def finfo(dtype):
    """Machine limits of a floating-point dtype (or of an array's dtype): NumPy's ``finfo`` object
    (ml_dtypes' for bfloat16).

    >>> float(fnp.finfo(fnp.float32).eps)
    1.1920928955078125e-07
    """
    d = dtypes.canonicalize(dtype.dtype if isinstance(dtype, (Tensor, _ScalarMeta)) else dtype)
    if d not in dtypes.INEXACT:
        raise ValueError(f"numpy.finfo: {d.name} is not a floating-point dtype; use fnp.iinfo for integers")
    return ml_dtypes.finfo(d) if d == _BF16 else np.finfo(d)


def iinfo(int_type):
    """Machine limits of an integer dtype (or of an array's dtype).

    >>> fnp.iinfo(fnp.int8).max
    127
    """
    d = dtypes.canonicalize(int_type.dtype if isinstance(int_type, (Tensor, _ScalarMeta)) else int_type)
    if d not in dtypes.INTEGER:
        raise ValueError(f"numpy.iinfo: {d.name} is not an integer dtype; use fnp.finfo for floating point")
    return np.iinfo(d)
