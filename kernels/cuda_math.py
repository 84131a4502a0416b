"""The device side of CUDA kernels: the math generated kernels call and the translation of fused-op templates.

``elementwise_expr`` turns an op's ``fusion.Lowering`` template (the numba CPU expression jit's kernels use) into
a CUDA expression: vmath's float32 functions and NumPy's become libdevice functions of the operands' precision
(``math.*`` on float32 compiles to the ``f`` versions), and sin/cos/tan of float32 are funclib's own
(``DEVICE_MATH``), since libdevice's reach a float64 multiply for huge arguments. ``header`` starts every
generated module: on a GPU it binds libdevice; numba's simulator has no libdevice, so there NumPy stands in for the
few functions named (``_PRELUDE_SIM``).

>>> elementwise_expr("add", [np.dtype(np.float32)] * 2, np.dtype(np.float32))
'({0} + {1})'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

from . import fusion
from .cuda_backend import NATIVE_DTYPES, UnsupportedOnDevice

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

# float32 sin and cos: libdevice's sinf/cosf reach one float64 multiply on their path for huge arguments, so
# these reduce in float32 (pi/2 in four parts, exact for |x| < 128) and, beyond, in 64-bit integer arithmetic on
# the bits of 2/pi (Payne-Hanek), keeping every floating-point instruction in single precision
DEVICE_MATH = '''
# 2/pi's bits after the point, 32 per word, after one zero word for the bits before it
_TWO_OVER_PI = (np.uint32(0), np.uint32(0xA2F9836E), np.uint32(0x4E441529), np.uint32(0xFC2757D1),
                np.uint32(0xF534DDC0), np.uint32(0xDB629599), np.uint32(0x3C439041), np.uint32(0xFE5163AB))


@cuda.jit(device=True, inline="always")
def _word(p, i):
    # 32 bits of the table starting p + 32 * i bits after its start
    k = (p >> np.int32(5)) + np.int32(i)
    s = np.uint64(p & np.int32(31))
    a = np.uint64(_TWO_OVER_PI[k]) if k < np.int32(8) else np.uint64(0)
    b = np.uint64(_TWO_OVER_PI[k + np.int32(1)]) if k + np.int32(1) < np.int32(8) else np.uint64(0)
    return (((a << np.uint64(32)) | b) << s >> np.uint64(32)) & np.uint64(0xFFFFFFFF)


@cuda.jit(device=True, inline="always")
def _reduce_big(x):
    # |x| = m * 2**e (24-bit m). Bits of 2/pi worth 4 or more after multiplying by 2**e are dropped (multiples
    # of 2 pi); the next 96 bits C make x * 2/pi = m * C * 2**-94 (mod 4), whose top 64 bits mod 2**96 hold the
    # quadrant (2 bits) and the fraction, in wrapping 64-bit integer arithmetic
    bits = np.int32(bits32(abs(x)))
    e = ((bits >> np.int32(23)) & np.int32(0xFF)) - np.int32(150)
    m = np.uint64((bits & np.int32(0x7FFFFF)) | np.int32(0x800000))
    p = e - np.int32(1) + np.int32(31)
    hi = m * _word(p, 0)
    mid = m * _word(p, 1)
    lo = m * _word(p, 2)
    top = (hi << np.uint64(32)) + mid + (lo >> np.uint64(32))
    q = np.int32(top >> np.uint64(62))
    f = top << np.uint64(2)
    neg = (f >> np.uint64(63)) != np.uint64(0)
    if neg:
        f = np.uint64(0) - f
        q = q + np.int32(1)
    r = np.float32(np.int64(f >> np.uint64(1))) * np.float32(2.0 ** -63) * np.float32(1.5707963267948966)
    return (-r if neg else r), q


@cuda.jit(device=True, inline="always")
def _sincos_f32(x):
    a = abs(x)
    if a < np.float32(128.0):
        jf = (a * np.float32(0.63661975) + np.float32(12582912.0)) - np.float32(12582912.0)  # rint below 2**22
        r = cuda.fma(jf, np.float32(-1.5703125), a)
        r = cuda.fma(jf, np.float32(-4.8351287841796875e-4), r)
        r = cuda.fma(jf, np.float32(-3.13855707645416259765625e-7), r)
        r = cuda.fma(jf, np.float32(-6.0771006282767103812147e-11), r)
        q = np.int32(jf)
    else:
        r, q = _reduce_big(x)
    z = r * r
    s = r + r * z * cuda.fma(cuda.fma(np.float32(-1.9514632e-04), z, np.float32(0.008332156)), z,
                             np.float32(-0.16666655))
    c = np.float32(1) - np.float32(0.5) * z + z * z * cuda.fma(
        cuda.fma(np.float32(2.4432413e-05), z, np.float32(-0.001388731)), z, np.float32(0.041666646))
    return s, c, q


@cuda.jit(device=True)
def fsin(x):
    if not math.isfinite(x):
        return x - x
    s, c, q = _sincos_f32(x)
    v = c if (q & np.int32(1)) != np.int32(0) else s
    v = -v if (q & np.int32(2)) != np.int32(0) else v
    return -v if x < np.float32(0) else v


@cuda.jit(device=True)
def fcos(x):
    if not math.isfinite(x):
        return x - x
    s, c, q = _sincos_f32(x)
    q = q + np.int32(1)
    v = c if (q & np.int32(1)) != np.int32(0) else s
    return -v if (q & np.int32(2)) != np.int32(0) else v


@cuda.jit(device=True)
def ftan(x):
    if not math.isfinite(x):
        return x - x
    s, c, q = _sincos_f32(x)
    t = -c / s if (q & np.int32(1)) != np.int32(0) else s / c
    return -t if x < np.float32(0) else t


@cuda.jit(device=True)
def flogistic(x):
    return np.float32(1) / (np.float32(1) + math.exp(-x))


@cuda.jit(device=True)
def _logistic64(x):
    return np.float64(1) / (np.float64(1) + math.exp(-x))


@cuda.jit(device=True)
def _sign32(x):
    if x > np.float32(0):
        return np.float32(1)
    return np.float32(-1) if x < np.float32(0) else x


@cuda.jit(device=True)
def _sign64(x):
    if x > np.float64(0):
        return np.float64(1)
    return np.float64(-1) if x < np.float64(0) else x


@cuda.jit(device=True)
def _signi(x):
    return 1 if x > 0 else (-1 if x < 0 else 0)


@cuda.jit(device=True)
def _isfinite(x):
    return math.isfinite(x)
'''

# NumPy's floor division and remainder of floats (npy_divmod: through fmod, so 0.3 // 0.1 is 2 as on the CPU, not
# floor of the rounded quotient), one copy per precision so that every constant has the operands' type
_DIVMOD = '''
@cuda.jit(device=True)
def _divmodT(a, b):
    if b == npT(0):
        return a / b, math.fmod(a, b)
    mod = math.fmod(a, b)
    div = (a - mod) / b
    if mod != npT(0):
        if (b < npT(0)) != (mod < npT(0)):
            mod += b
            div -= npT(1)
    else:
        mod = math.copysign(npT(0), b)
    if div != npT(0):
        fd = floorT(div)
        if div - fd > npT(0.5):
            fd += npT(1)
    else:
        fd = math.copysign(npT(0), a / b)
    return fd, mod


@cuda.jit(device=True)
def _floordivT(a, b):
    if math.isinf(a) != math.isinf(b):  # the Array API's floor(x / y) where one operand is infinite
        return a / b
    return _divmodT(a, b)[0]


@cuda.jit(device=True)
def _remT(a, b):
    return _divmodT(a, b)[1]
'''
EXTRA_MATH = _DIVMOD.replace("npT", "np.float32").replace("floorT", "floor32").replace("T(", "32(") + \
    _DIVMOD.replace("npT", "np.float64").replace("floorT", "floor64").replace("T(", "64(")


def integer_expr(name: str, d: np.dtype) -> str | None:
    """The CUDA expression of integer elementwise primitive ``name`` at dtype ``d`` (NumPy's results: a zero
    divisor gives 0, a shift past the width shifts every bit out), or None."""
    t, bits = f"np.{d.name}", d.itemsize * 8
    u = f"np.uint{bits}"
    if name == "rem":
        return f"({t}(0) if {{1}} == {t}(0) else {t}({{0}} % {{1}}))"
    if name == "shift_left":
        return (f"({t}(0) if {{1}} >= {t}({bits}) else {t}({u}({u}({{0}}) << {u}(max({{1}}, {t}(0))))))")
    if name == "shift_right":
        s = f"{t}(min(max({{1}}, {t}(0)), {t}({bits - 1})))"
        if d.kind == "u":
            return f"({t}(0) if {{1}} >= {t}({bits}) else {t}({{0}} >> {s}))"
        return f"{t}({{0}} >> {s})"
    return None


# libdevice on a GPU; the simulator has no libdevice, so there NumPy stands in for these few functions
_PRELUDE_GPU = """
from numba.cuda import libdevice
floor32, ceil32, rint32 = libdevice.floorf, libdevice.ceilf, libdevice.rintf
trunc32, exp2_32 = libdevice.truncf, libdevice.exp2f
floor64, ceil64, rint64 = libdevice.floor, libdevice.ceil, libdevice.rint
trunc64, exp2_64 = libdevice.trunc, libdevice.exp2
bits32 = libdevice.float_as_int
signbit32, signbit64 = libdevice.signbitf, libdevice.signbitd
nextafter32, nextafter64 = libdevice.nextafterf, libdevice.nextafter
erfinv32, erfinv64 = libdevice.erfinvf, libdevice.erfinv
cbrt32, cbrt64 = libdevice.cbrtf, libdevice.cbrt
"""
_PRELUDE_SIM = """
def _np32(f):
    return lambda x: np.float32(f(np.float32(x)))
def _np64(f):
    return lambda x: np.float64(f(np.float64(x)))
floor32, ceil32, rint32, trunc32, exp2_32 = (_np32(f) for f in (np.floor, np.ceil, np.rint, np.trunc, np.exp2))
floor64, ceil64, rint64, trunc64, exp2_64 = (_np64(f) for f in (np.floor, np.ceil, np.rint, np.trunc, np.exp2))
def bits32(x):
    return np.float32(x).view(np.int32)
signbit32 = signbit64 = np.signbit
nextafter32, nextafter64 = (lambda x, y: np.nextafter(np.float32(x), np.float32(y))), np.nextafter
cbrt32, cbrt64 = _np32(np.cbrt), _np64(np.cbrt)
def erfinv32(x):
    from funclib.kernels.special import erfinv  # the simulator's stand-in for libdevice
    return np.float32(erfinv(np.float64(x)))
def erfinv64(x):
    from funclib.kernels.special import erfinv
    return np.float64(erfinv(np.float64(x)))
"""

# CPU template names -> CUDA names, per result precision
_F32_NAMES = {
    "fexp": "math.exp", "fexpm1": "math.expm1", "flog": "math.log", "flog1p": "math.log1p", "ftanh": "math.tanh",
    "ferf": "math.erf", "fpow": "math.pow", "fsin": "fsin", "fcos": "fcos", "flogistic": "flogistic",
    "np.sqrt": "math.sqrt", "np.floor": "floor32", "np.ceil": "ceil32",
    "np.rint": "rint32", "np.trunc": "trunc32", "np.exp": "math.exp",
    "np.exp2": "exp2_32", "np.expm1": "math.expm1", "np.log": "math.log", "np.log1p": "math.log1p",
    "np.sin": "fsin", "np.cos": "fcos", "np.tanh": "math.tanh", "np.isnan": "math.isnan",
    "np.isinf": "math.isinf", "np.isfinite": "_isfinite", "np.sign": "_sign32", "math.erf": "math.erf",
}
_F64_NAMES = {
    **{k: v for k, v in _F32_NAMES.items() if v.startswith("math.") or v == "_isfinite"},
    "np.sign": "_sign64",
    "np.floor": "floor64", "np.ceil": "ceil64", "np.rint": "rint64",
    "np.trunc": "trunc64", "np.exp2": "exp2_64", "np.sin": "math.sin",
    "np.cos": "math.cos", "_logistic64": "_logistic64",
}
# elementwise primitives the CPU computes with NumPy (no fused-kernel template yet): their CUDA expressions at
# float32 and float64, libdevice's functions of the operands' precision (tan through funclib's own sin/cos reduction)
DEVICE_ONLY = {
    "tan": ("ftan({0})", "math.tan({0})"),
    "sinh": ("math.sinh({0})", "math.sinh({0})"),
    "cosh": ("math.cosh({0})", "math.cosh({0})"),
    "asin": ("math.asin({0})", "math.asin({0})"),
    "acos": ("math.acos({0})", "math.acos({0})"),
    "atan": ("math.atan({0})", "math.atan({0})"),
    "asinh": ("math.asinh({0})", "math.asinh({0})"),
    "acosh": ("math.acosh({0})", "math.acosh({0})"),
    "atanh": ("math.atanh({0})", "math.atanh({0})"),
    "atan2": ("math.atan2({0}, {1})", "math.atan2({0}, {1})"),
    "copysign": ("math.copysign({0}, {1})", "math.copysign({0}, {1})"),
    "nextafter": ("nextafter32({0}, {1})", "nextafter64({0}, {1})"),
    "signbit": ("signbit32({0}) != 0", "signbit64({0}) != 0"),
    "erf_inv": ("erfinv32({0})", "erfinv64({0})"),
    "cbrt": ("cbrt32({0})", "cbrt64({0})"),
    "lgamma": ("math.lgamma({0})", "math.lgamma({0})"),
    "floor_divide": ("_floordiv32({0}, {1})", "_floordiv64({0}, {1})"),
    "rem": ("_rem32({0}, {1})", "_rem64({0}, {1})"),
}

_NAME = re.compile(r"(?<![\w.])((?:np\.|math\.)?[A-Za-z_]\w*)\(")


@functools.lru_cache(maxsize=4096)
def _translate(expr: str, compute: np.dtype) -> str:
    names = _F32_NAMES if compute == F32 else _F64_NAMES if compute == F64 else {"np.sign": "_signi"}

    def sub(m):
        name = m.group(1)
        if name in names:
            return names[name] + "("
        if name.startswith("np.") and hasattr(np, name[3:]) and isinstance(getattr(np, name[3:]), type):
            return name + "("  # a scalar type's constructor: a cast numba-cuda compiles
        if name in ("abs", "min", "max", "bool", "int", "float") or name.startswith("math."):
            return name + "("
        raise UnsupportedOnDevice(f"the CUDA kernels have no version of {name}() (in {expr!r})")

    return _NAME.sub(sub, expr)


def _math_dtype(in_dtypes, out_dtype) -> np.dtype:
    """The precision of the math an op calls: its float operands' (comparisons and tests take floats and return
    bool), else its result's."""
    ds = [np.dtype(d) for d in (*in_dtypes, out_dtype)]
    return F64 if F64 in ds else F32 if F32 in ds else np.dtype(out_dtype)


def elementwise_expr(op: str, in_dtypes: Sequence[np.dtype], out_dtype: np.dtype, param=None) -> str:
    """The CUDA scalar expression of fused op ``op`` on operands ``{0}``, ``{1}``, ... (``UnsupportedOnDevice``
    where it has none at these dtypes)."""
    lowering = fusion.OPS.get(op)
    if lowering is None or not all(d in NATIVE_DTYPES for d in (*in_dtypes, out_dtype)):
        raise UnsupportedOnDevice(
            f"'{op}' from {', '.join(np.dtype(d).name for d in in_dtypes)} to {np.dtype(out_dtype).name} has no CUDA "
            "kernel (device kernels compute in bool, integers, float32 and float64)"
        )
    if not fusion.supports(op, list(in_dtypes), out_dtype):
        raise UnsupportedOnDevice(f"'{op}' has no kernel template for {np.dtype(out_dtype).name}")
    args = [f"{{{i}}}" for i in range(len(in_dtypes))]
    if lowering.emit is not None:
        e = lowering.emit(args, out_dtype, param)
    else:
        e = lowering.template(out_dtype)
    return _translate(e, _math_dtype(in_dtypes, out_dtype))


# ------------------------------------------------------------------------------------------------ kernels


def header(simulated: bool) -> list[str]:
    return ["import math", "import numpy as np", "from numba import cuda", _PRELUDE_SIM if simulated else
            _PRELUDE_GPU, "_ZERO_float32 = np.float32(0)", "_ZERO_float64 = np.float64(0)", DEVICE_MATH, EXTRA_MATH, ""]

