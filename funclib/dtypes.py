"""dtypes, type promotion (Array API standard), and dtype introspection.

funclib dtypes are NumPy ``np.dtype`` objects (``bfloat16`` comes from ml_dtypes), so ``fl.float32 == np.float32``.
Promotion follows the Array API lattice; Python scalars are *weak*: ``float32_tensor * 2.0`` stays float32.

The low-precision storage dtypes (``LOW_PRECISION``: the float8 formats and ``int4``/``uint4``, from ml_dtypes)
compute in a wider type and round back (``funclib.kernels.lowp``); casts into float8 saturate. As in JAX, a float8
never promotes implicitly with another dtype (only with Python scalars): mixing formats or precisions silently is
how low-precision bugs start, so ``float8 + float32`` asks for an explicit cast. ``int4`` promotes to ``int8``,
``uint4`` to ``uint8``.
"""

from __future__ import annotations

import builtins
import threading
from typing import NamedTuple

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e4m3b11fnuz = (
    np.dtype(getattr(ml_dtypes, n))
    for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz")
)
int4, uint4 = np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)

BOOL = (bool_,)
SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
INTEGER = SIGNED + UNSIGNED
REAL_FLOATING = (float16, bfloat16, float32, float64)
COMPLEX = (complex64, complex128)
FLOATING = REAL_FLOATING + COMPLEX
NUMERIC = INTEGER + FLOATING
ALL = BOOL + NUMERIC
FLOAT8 = (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e4m3b11fnuz)
INT4 = (int4, uint4)
LOW_PRECISION = FLOAT8 + INT4  # storage dtypes: not in ALL, which lists the dtypes every op family computes in
INEXACT = frozenset(FLOATING + FLOAT8)

default_int = int64


class _Defaults(threading.local):
    # a thread's override of the process-wide default float dtype (``fl.default_dtype``); None: no override
    float: np.dtype | None = None
    process_float: np.dtype = float32  # a class attribute: one value for every thread (``fl.set_default_dtype``)


_defaults = _Defaults()


def float_default() -> np.dtype:
    """The dtype of Python floats and of floating results that name no dtype (``fl.set_default_dtype``)."""
    d = _defaults.float
    return _Defaults.process_float if d is None else d


def complex_default() -> np.dtype:
    """The complex dtype matching ``float_default()``: complex128 under float64, else complex64."""
    return complex128 if float_default() == float64 else complex64

_BY_NAME = {d.name: d for d in ALL + LOW_PRECISION}
_BY_NAME["bool"] = bool_

# Array API promotion lattice (edges to the next wider type). Pairs with no join here (int64 with uint64, integers
# with floats, bool with numbers) are implementation-defined by the standard; the loop below fixes our choice.
_LATTICE: dict[np.dtype, tuple[np.dtype, ...]] = {
    bool_: (),
    uint8: (uint16, int16),
    uint16: (uint32, int32),
    uint32: (uint64, int64),
    uint64: (),
    int8: (int16,),
    int16: (int32,),
    int32: (int64,),
    int64: (),
    float16: (float32,),
    bfloat16: (float32,),
    float32: (float64, complex64),
    float64: (complex128,),
    complex64: (complex128,),
    complex128: (),
    int4: (int8,),
    uint4: (uint8, int8),
    **{f: () for f in FLOAT8},
}


def _ancestors(d: np.dtype) -> set[np.dtype]:
    out, todo = {d}, [d]
    while todo:
        for p in _LATTICE[todo.pop()]:
            if p not in out:
                out.add(p)
                todo.append(p)
    return out


_ANC = {d: _ancestors(d) for d in _LATTICE}


def _join(a: np.dtype, b: np.dtype) -> np.dtype | None:
    common = _ANC[a] & _ANC[b]
    if not common:
        return None
    # the least upper bound is the common ancestor whose own ancestors cover all the others
    for c in common:
        if common <= _ANC[c]:
            return c
    return None


def _kind(d: np.dtype) -> str:
    if d == bool_:
        return "b"
    if d in INTEGER or d in INT4:
        return "i"
    if d in REAL_FLOATING or d in FLOAT8:
        return "f"
    return "c"


_PROMOTE: dict[tuple[np.dtype, np.dtype], np.dtype] = {}
for _a in ALL + LOW_PRECISION:
    for _b in ALL + LOW_PRECISION:
        _j = _join(_a, _b)
        if _j is None:
            ka, kb = _kind(_a), _kind(_b)
            if (_a in FLOAT8 or _b in FLOAT8) and "b" not in (ka, kb):
                continue  # no implicit promotion: promote_types raises
            if ka == "b" or kb == "b":
                # bool mixed with a number: the number's dtype (implementation-defined in the standard)
                _j = _b if ka == "b" else _a
            elif ka == "i" and kb == "i":
                _j = float64 if int64 in (_a, _b) or uint64 in (_a, _b) else int64
            elif {ka, kb} == {"i", "f"}:
                _j = _b if ka == "i" else _a  # integer mixed with float: the float dtype (as JAX does)
            elif {ka, kb} == {"i", "c"}:
                _j = _b if ka == "i" else _a
            else:  # float16/bfloat16 mixes
                _j = _join(_join(_a, float32) or float32, _join(_b, float32) or float32)
        _PROMOTE[_a, _b] = _j


from .errors import DTypeError  # noqa: E402


def canonicalize(dtype) -> np.dtype:
    """Turn a user dtype spec (``fl.float32``, ``"float32"``, ``np.float32``, ``float``) into a funclib dtype."""
    if isinstance(dtype, np.dtype) and dtype in _KNOWN:
        return dtype
    if dtype is builtins.float:
        return float_default()
    if dtype is builtins.int:
        return default_int
    if dtype is builtins.bool:
        return bool_
    if dtype is builtins.complex:
        return complex_default()
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d is None or d not in _KNOWN:
        raise DTypeError(
            f"unsupported dtype {dtype!r}; funclib supports {', '.join(sorted(_BY_NAME))}"
        )
    return d.newbyteorder("=") if d.byteorder not in ("=", "|") else d


_KNOWN = frozenset(ALL + LOW_PRECISION)


def result_type(*arrays_and_dtypes) -> np.dtype:
    """Array API ``result_type``: promote dtypes and array dtypes; Python scalars are weak.

    >>> fl.result_type(fl.int8, fl.uint8)
    dtype('int16')
    """
    dts = []
    weak = []
    for a in arrays_and_dtypes:
        if isinstance(a, (builtins.bool, builtins.int, builtins.float, builtins.complex)) and not isinstance(
            a, np.generic
        ):
            weak.append(a)
            continue
        if getattr(a, "weak_type", False):  # a traced Python scalar (a jit argument)
            weak.append(weak_sample(a.dtype))
            continue
        dt = getattr(a, "dtype", None)
        dts.append(canonicalize(dt if dt is not None else a))
    if not dts:
        if not weak:
            raise ValueError("result_type requires at least one array or dtype")
        return python_scalar_dtype(weak[0]) if len(weak) == 1 else _weak_join(weak)
    out = dts[0]
    for d in dts[1:]:
        out = _promote(out, d)
    for w in weak:
        out = weak_promote(out, w)
    return out


def _weak_join(ws) -> np.dtype:
    out = python_scalar_dtype(ws[0])
    for w in ws[1:]:
        out = _promote(out, python_scalar_dtype(w))
    return out


def python_scalar_dtype(x) -> np.dtype:
    if isinstance(x, builtins.bool):
        return bool_
    if isinstance(x, builtins.int):
        return default_int
    if isinstance(x, builtins.float):
        return float_default()
    if isinstance(x, builtins.complex):
        return complex_default()
    raise TypeError(f"not a Python scalar: {x!r}")


# A Python scalar traced by jit is held in the widest dtype of its kind until it meets a dtype.
_WEAK_WIDE = {builtins.bool: bool_, builtins.int: int64, builtins.float: float64, builtins.complex: complex128}


def weak_dtype(x) -> np.dtype:
    """The dtype that holds Python scalar ``x`` at full precision while it is weakly typed."""
    for t in (builtins.bool, builtins.int, builtins.float, builtins.complex):
        if isinstance(x, t):
            return _WEAK_WIDE[t]
    raise TypeError(f"not a Python scalar: {x!r}")


def weak_sample(dtype: np.dtype):
    """A Python scalar of the kind of ``dtype``: what a weakly typed value of that dtype stands for."""
    return {"b": False, "i": 0, "f": 0.0, "c": 0j}[_kind(dtype)]


def weak_promote(dtype: np.dtype, scalar) -> np.dtype:
    """The dtype of ``array op scalar`` for a Python scalar (weakly typed, Array API semantics)."""
    k = _kind(dtype)
    if isinstance(scalar, builtins.bool):
        return dtype
    if isinstance(scalar, builtins.int):
        return dtype if k != "b" else default_int
    if isinstance(scalar, builtins.float):
        return dtype if k in "fc" else float_default()
    if isinstance(scalar, builtins.complex):
        if k == "c":
            return dtype
        return complex128 if dtype == float64 else complex_default()
    raise TypeError(f"unsupported scalar {scalar!r} of type {type(scalar).__name__}")


def promote_types(a, b) -> np.dtype:
    return _promote(canonicalize(a), canonicalize(b))


def _promote(a: np.dtype, b: np.dtype) -> np.dtype:
    try:
        return _PROMOTE[a, b]
    except KeyError:
        f8 = a if a in FLOAT8 else b
        raise DTypeError(
            f"no implicit promotion between {a.name} and {b.name}: {f8.name} combines only with itself (and "
            f"Python scalars); cast one operand explicitly, e.g. x.astype(fl.float32)"
        ) from None


def can_cast(from_, to, /) -> bool:
    """Whether ``from_`` can be cast to ``to`` under the Array API promotion rules (no loss).

    >>> fl.can_cast(fl.int8, fl.int32)
    True
    """
    f = canonicalize(getattr(from_, "dtype", from_))
    t = canonicalize(to)
    return t in _ANC[f]


class finfo_object(NamedTuple):
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


class iinfo_object(NamedTuple):
    bits: int
    max: int
    min: int
    dtype: np.dtype


def finfo(type, /) -> finfo_object:
    """Machine limits for a floating dtype.

    >>> fl.finfo(fl.float32).eps
    1.1920928955078125e-07
    """
    d = canonicalize(getattr(type, "dtype", type))
    if d not in INEXACT:
        raise DTypeError(f"finfo expects a floating dtype, got {d.name}; use iinfo for integers")
    fi = ml_dtypes.finfo(d) if d == bfloat16 or d in FLOAT8 else np.finfo(d)
    real = {complex64: float32, complex128: float64}.get(d, d)
    return finfo_object(
        bits=int(fi.bits),
        eps=float(fi.eps),
        max=float(fi.max),
        min=float(fi.min),
        smallest_normal=float(fi.smallest_normal),
        dtype=real,
    )


def iinfo(type, /) -> iinfo_object:
    """Machine limits for an integer dtype.

    >>> fl.iinfo(fl.int8).max
    127
    """
    d = canonicalize(getattr(type, "dtype", type))
    if d not in INTEGER and d not in INT4:
        raise DTypeError(f"iinfo expects an integer dtype, got {d.name}; use finfo for floating dtypes")
    ii = ml_dtypes.iinfo(d) if d in INT4 else np.iinfo(d)
    return iinfo_object(bits=int(ii.bits), max=int(ii.max), min=int(ii.min), dtype=d)


_KINDS = {
    "bool": frozenset(BOOL),
    "signed integer": frozenset(SIGNED + (int4,)),
    "unsigned integer": frozenset(UNSIGNED + (uint4,)),
    "integral": frozenset(INTEGER + INT4),
    "real floating": frozenset(REAL_FLOATING + FLOAT8),
    "complex floating": frozenset(COMPLEX),
    "numeric": frozenset(NUMERIC + LOW_PRECISION),
}


def isdtype(dtype, kind) -> bool:
    """Array API ``isdtype``: is ``dtype`` of ``kind`` (a dtype, a kind name, or a tuple of them)?

    >>> fl.isdtype(fl.float32, "real floating")
    True
    """
    d = canonicalize(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(d, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of {sorted(_KINDS)}")
        return d in _KINDS[kind]
    return d == canonicalize(kind)


def is_float(d: np.dtype) -> bool:
    return d in INEXACT


def short_name(d: np.dtype) -> str:
    return _SHORT[d]


_SHORT = {
    bool_: "bool",
    int8: "i8",
    int16: "i16",
    int32: "i32",
    int64: "i64",
    uint8: "u8",
    uint16: "u16",
    uint32: "u32",
    uint64: "u64",
    float16: "f16",
    bfloat16: "bf16",
    float32: "f32",
    float64: "f64",
    complex64: "c64",
    complex128: "c128",
    int4: "i4",
    uint4: "u4",
    **{f: "f8_" + f.name.removeprefix("float8_") for f in FLOAT8},
}


def real_dtype(d: np.dtype) -> np.dtype:
    return {complex64: float32, complex128: float64}.get(d, d)


def complex_dtype(d: np.dtype) -> np.dtype:
    return complex128 if d in (float64, complex128) else complex64
