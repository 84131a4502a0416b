"""float16 and bfloat16 <-> float32 conversions in registers, for numba kernels.

numba cannot compute with float16 arrays and rejects bfloat16 arrays, so kernels take ``arr.view(np.uint16)``
and convert each element to float32 on load and back on store:

- ``h2f(u16) -> float32``: IEEE half to float (exact; F16C ``vcvtph2ps`` on x86).
- ``f2h(float32) -> uint16``: float to half, round to nearest even (``vcvtps2ph``).
- ``bf2f(u16) -> float32``: bfloat16 to float (exact: the bits move up 16 places).
- ``f2bf(float32) -> uint16``: float to bfloat16, round to nearest even; NaN becomes the quiet NaN
  ``0x7fc0`` with the sign kept, as ml_dtypes does.

All four are branch-free, so loops using them vectorize. Results equal NumPy (float16) and ml_dtypes
(bfloat16) ``astype`` bit for bit, NaN payloads included.

Example:
    >>> import numpy as np, numba
    >>> from funclib.kernels.halfconv import h2f, f2h
    >>> @numba.njit
    ... def square(x, out):
    ...     for i in range(x.shape[0]):
    ...         v = h2f(x[i])
    ...         out[i] = f2h(v * v)
    >>> x = np.array([1.5, -3.0], np.float16); out = np.empty_like(x)
    >>> square(x.view(np.uint16), out.view(np.uint16)); out
    array([2.25, 9.  ], dtype=float16)
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["bf2f", "f2bf", "f2h", "h2f"]

_I16 = ir.IntType(16)
_I32 = ir.IntType(32)


def _c32(v: int) -> ir.Constant:
    return ir.Constant(_I32, v)


def _to_i16(builder: ir.IRBuilder, v: ir.Value) -> ir.Value:
    width = v.type.width
    if width > 16:
        return builder.trunc(v, _I16)
    if width < 16:
        return builder.zext(v, _I16)
    return v


@intrinsic
def h2f(typingctx, u):
    """float16 bits (any integer type; the low 16 bits are used) -> float32."""
    if not isinstance(u, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        h = _to_i16(builder, args[0])
        converted = builder.fpext(builder.bitcast(h, ir.HalfType()), ir.FloatType())
        # NumPy moves a NaN payload over unchanged (signaling NaNs stay signaling); the hardware would
        # quiet it
        w = builder.zext(h, _I32)
        is_nan = builder.icmp_unsigned(">", builder.and_(w, _c32(0x7FFF)), _c32(0x7C00))
        nan = builder.or_(
            builder.or_(builder.shl(builder.and_(w, _c32(0x8000)), _c32(16)), _c32(0x7F800000)),
            builder.shl(builder.and_(w, _c32(0x3FF)), _c32(13)),
        )
        return builder.select(is_nan, builder.bitcast(nan, ir.FloatType()), converted)

    return types.float32(u), codegen


@intrinsic
def f2h(typingctx, x):
    """float32 -> float16 bits as uint16, round to nearest even."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        (v,) = args
        converted = builder.bitcast(builder.fptrunc(v, ir.HalfType()), _I16)
        # NaN as NumPy converts it: the top 10 payload bits, made nonzero
        bits = builder.bitcast(v, _I32)
        payload = builder.lshr(builder.and_(bits, _c32(0x7FFFFF)), _c32(13))
        payload = builder.or_(payload, builder.zext(builder.icmp_unsigned("==", payload, _c32(0)), _I32))
        nan = builder.or_(builder.or_(builder.and_(builder.lshr(bits, _c32(16)), _c32(0x8000)), _c32(0x7C00)), payload)
        is_nan = builder.fcmp_unordered("uno", v, v)
        return builder.select(is_nan, builder.trunc(nan, _I16), converted)

    return types.uint16(types.float32), codegen


@intrinsic
def bf2f(typingctx, u):
    """bfloat16 bits (any integer type; the low 16 bits are used) -> float32."""
    if not isinstance(u, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        wide = builder.zext(_to_i16(builder, args[0]), _I32)
        return builder.bitcast(builder.shl(wide, _c32(16)), ir.FloatType())

    return types.float32(u), codegen


@intrinsic
def f2bf(typingctx, x):
    """float32 -> bfloat16 bits as uint16, round to nearest even; NaN -> quiet NaN with the sign kept."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        (v,) = args
        bits = builder.bitcast(v, _I32)
        high = builder.lshr(bits, _c32(16))
        odd = builder.and_(high, _c32(1))
        rounded = builder.lshr(builder.add(builder.add(bits, _c32(0x7FFF)), odd), _c32(16))
        quiet_nan = builder.or_(builder.and_(high, _c32(0x8000)), _c32(0x7FC0))
        is_nan = builder.fcmp_unordered("uno", v, v)
        return builder.trunc(builder.select(is_nan, quiet_nan, rounded), _I16)

    return types.uint16(types.float32), codegen
