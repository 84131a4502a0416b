"""float8 and int4 storage types: funclib's casts into them (NumPy) and float8 <-> float32 in registers (numba).

ml_dtypes stores every float8 format and ``int4``/``uint4`` in one byte each (an int4 in the low four bits).
funclib computes with them in a wider type and rounds back, as JAX does: float8 in float32, int4 in int8.

Casts into float8 **saturate**: a value beyond the finite range (infinities included) becomes the largest finite
value of its sign, NaN stays NaN, and everything else rounds to nearest even. ml_dtypes alone turns overflow into
NaN (``float8_e4m3fn(465.0)`` is NaN), which is never what a quantized model wants; saturation is what FP8
hardware conversions do (PTX's ``cvt.rn.satfinite``) and what ONNX's ``saturate=1`` means. So
``astype(x, float8_e4m3fn)`` is ml_dtypes' cast of ``clip(x, -448, 448)``. Casts into int4/uint4 wrap modulo 16
like every other integer cast (floats truncate toward zero first).

The numba side (for the fused kernels of ``jit``): a float8 array is passed as its ``uint8`` view;
``<fmt>_to(u) -> float32`` decodes through a 256-entry table and ``<fmt>_from(x) -> uint8`` encodes a float32 or
float64 with the saturating rule above, branch-free (the loops vectorize). Both agree bit for bit with ``astype``.

Example:
    >>> import numpy as np, ml_dtypes
    >>> from funclib.kernels import lowp
    >>> lowp.astype(np.array([500.0, -1e9, 1.1], np.float32), ml_dtypes.float8_e4m3fn)
    array([448, -448, 1.125], dtype=float8_e4m3fn)
"""

from __future__ import annotations

import hashlib
import pathlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from . import diskcache
from .vmath import view_f64, view_i64

__all__ = ["FLOAT8", "INT4", "FORMATS", "VERSION", "astype", "compute", "wide_dtype"]

# generated kernels inline the converters: their source names this, so a change here gives new kernel keys
VERSION: str = hashlib.sha256(pathlib.Path(__file__).read_bytes()).hexdigest()[:16]


@dataclass(frozen=True)
class Float8Format:
    name: str  # the suffix after ``float8_``, also the prefix of the numba converters (``e4m3fn_to``)
    mantissa: int  # explicit mantissa bits
    bias: int  # exponent bias: the smallest normal is 2**(1 - bias)
    max: float  # the largest finite value
    fnuz: bool  # no negative zero and no infinities; 0x80 is the one NaN
    nan: int  # the NaN code without the sign (fnuz: 0x80)


def _format(dtype, nan: int) -> Float8Format:
    fi = ml_dtypes.finfo(dtype)
    name = np.dtype(dtype).name.removeprefix("float8_")
    return Float8Format(name, int(fi.nmant), 1 - int(fi.minexp), float(fi.max), name.endswith("fnuz"), nan)


FORMATS: dict[np.dtype, Float8Format] = {
    np.dtype(d): _format(d, nan)
    for d, nan in (
        (ml_dtypes.float8_e4m3fn, 0x7F),
        (ml_dtypes.float8_e5m2, 0x7E),
        (ml_dtypes.float8_e4m3fnuz, 0x80),
        (ml_dtypes.float8_e5m2fnuz, 0x80),
        (ml_dtypes.float8_e4m3b11fnuz, 0x80),
    )
}
FLOAT8 = tuple(FORMATS)
INT4 = (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4))
_LOWP = frozenset(FLOAT8 + INT4)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_I8 = np.dtype(np.int8)
_U8 = np.dtype(np.uint8)


def wide_dtype(d: np.dtype) -> np.dtype:
    """The dtype a low-precision dtype computes in: float32 for float8, int8 for int4, uint8 for uint4."""
    if d in FORMATS:
        return _F32
    return _I8 if d == INT4[0] else _U8


def astype(a: np.ndarray, dtype) -> np.ndarray:
    """``a.astype(dtype)`` with funclib's rules into float8 (saturating) and int4/uint4 (wrapping).

    The result equals ml_dtypes' cast of ``clip(a, -max, max)`` into float8 (bit for bit, the cast from float64
    rounding once), and ml_dtypes' cast out of float8/int4; it is computed by table lookups and a numba loop,
    several times faster than ml_dtypes' own casts."""
    a = np.asarray(a)
    dtype = np.dtype(dtype)
    if a.dtype == dtype:
        return a.copy()
    table = _DECODE.get(a.dtype)
    if table is not None:  # exact: float8 -> float32, int4 -> int8, uint4 -> uint8
        a = table[a.view(np.uint8)]
        if a.dtype == dtype:
            return a
    src = a.dtype
    fmt = FORMATS.get(dtype)
    if fmt is not None:
        if src not in (_F32, _F64):
            # exact in float64 for integers (they are clipped anyway beyond 2**53), in float32 for narrower floats
            a = a.astype(_F64 if src.kind in "iu" else _F32)
        out = np.empty(a.shape, np.uint8)
        _encode(np.ascontiguousarray(a).reshape(-1), out.reshape(-1), *_params(fmt))
        return out.view(dtype)
    if dtype in INT4:
        if src.kind == "f" or src == np.dtype(ml_dtypes.bfloat16):
            with np.errstate(invalid="ignore"):
                a = a.astype(np.int64)  # truncation toward zero, as every float-to-int cast
        return np.bitwise_and(a, 15).astype(np.uint8).view(dtype)
    return a.astype(dtype)


def compute(fn, *arrays):
    """``fn`` applied to low-precision arrays in their wide dtype, its result rounded back (bool results kept).

    All low-precision operands share one dtype (funclib promotes before it gets here); other operands (shifts,
    scalars) pass through."""
    d = next(x.dtype for x in arrays if getattr(x, "dtype", None) in _LOWP)
    wide = wide_dtype(d)
    out = fn(*[astype(x, wide) if getattr(x, "dtype", None) == d else x for x in arrays])
    return astype(out, d) if np.asarray(out).dtype == wide else out


# --- numba converters ------------------------------------------------------------------------------------------
# The per-format converters close over plain numbers and arrays only (never over another compiled function), so
# their cache keys are the same in every process.


@diskcache.njit(error_model="numpy", inline="always")
def _code(x, m, emin, top, maxv, nan, fnuz):  # pragma: no cover - compiled
    """The float8 code of ``x`` (any float or integer) for the format with these parameters (see ``_converters``).

    In float64, which holds float32 and every integer the clip keeps exactly: one correctly rounded step. The code
    of a finite value is ``(e + bias - 1) << m`` plus its significand scaled to ``m`` fraction bits and rounded;
    with the exponent clamped to the smallest normal's, the same formula gives the subnormals."""
    v = np.float64(x)
    b = view_i64(v)
    sign = (b >> 56) & 0x80
    a = view_f64(b & 0x7FFFFFFFFFFFFFFF)
    a = maxv if a > maxv else a
    e = ((view_i64(a) >> 52) & 0x7FF) - 1023
    e = e if e > emin else emin
    q = np.int64(np.rint(a * view_f64((1023 + m - e) << 52)))
    code = ((e + top) << m) + q
    if fnuz:
        code = nan if v != v else (code | sign if code != 0 else code)
    else:
        code = (nan if v != v else code) | sign
    return np.uint8(code)


@diskcache.njit(nogil=True, error_model="numpy")
def _encode(x, out, m, emin, top, maxv, nan, fnuz):  # pragma: no cover - compiled
    for i in range(x.shape[0]):
        out[i] = _code(x[i], m, emin, top, maxv, nan, fnuz)


def _params(fmt: Float8Format) -> tuple:
    return (np.int64(fmt.mantissa), np.int64(1 - fmt.bias), np.int64(fmt.bias - 1), np.float64(fmt.max),
            np.int64(fmt.nan), fmt.fnuz)


def _converters(fmt: Float8Format, dtype: np.dtype):
    table = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    m, emin, top, maxv, nan, fnuz = _params(fmt)

    def to(u):
        return table[u]

    def from_(x):
        return _code(x, m, emin, top, maxv, nan, fnuz)

    to.__name__ = to.__qualname__ = f"{fmt.name}_to"
    from_.__name__ = from_.__qualname__ = f"{fmt.name}_from"
    jit = diskcache.njit(error_model="numpy", inline="always")
    return jit(to), jit(from_)


for _d, _fmt in FORMATS.items():
    globals()[f"{_fmt.name}_to"], globals()[f"{_fmt.name}_from"] = _converters(_fmt, _d)
    __all__ += [f"{_fmt.name}_to", f"{_fmt.name}_from"]

# byte -> value tables for the exact casts out of the storage types
_DECODE = {d: np.arange(256, dtype=np.uint8).view(d).astype(np.float32) for d in FLOAT8}
_DECODE[INT4[0]] = (((np.arange(256) & 15) ^ 8) - 8).astype(np.int8)
_DECODE[INT4[1]] = (np.arange(256) & 15).astype(np.uint8)
