"""Complex numbers on a CUDA device: complex64/complex128 buffers are held as themselves (numba-cuda computes in
them), elementwise kernels for the complex arithmetic the device supports, and the list of table kernels that
are correct for complex operands (data movement, sums and products, ``dot_general``, gathers, scatters, ``cumsum``,
col2im, and the factorizations of ``cuda_linalg`` and ``cuda_cxlinalg``).

Everything else on a complex operand raises ``UnsupportedOnDevice`` naming the primitive (``check``), since a
kernel written for real numbers would compute a wrong answer or fail to compile. complex64 math stays in float32:
sines and cosines are funclib's own float32 ones (libdevice's reach float64 for huge arguments), and a result is
built from its parts with ``complex(re, im)``, which numba types in the parts' precision.

>>> elementwise_expr("mul", [np.dtype(np.complex64)] * 2, np.dtype(np.complex64), None)
'{0} * {1}'
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from .cuda_backend import NATIVE_DTYPES, CudaArray, UnsupportedOnDevice
from .cuda_math import F32, F64
from .cuda_ops import elementwise, reduce_source, row_scan_source, strided_source

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
COMPLEX_DTYPES = frozenset({C64, C128})

# table kernels (``cuda_ops``' and the families') that are correct on complex operands: they copy, add, multiply
# or index, which numba-cuda does in complex (a complex scatter_add folds in order: CUDA has no complex atomics);
# every other one refuses a complex operand by name
TABLE_KERNELS = frozenset({
    "broadcast_in_dim", "reshape", "transpose", "rev", "slice", "concatenate", "pad", "reduce_sum", "reduce_prod",
    "dot_general", "gather", "cumsum", "dynamic_slice", "dynamic_update_slice", "conv_patches",
    "conv_patches_transpose", "scatter", "scatter_mul", "scatter_add",
    "cholesky", "triangular_solve", "lu", "qr", "eigh", "svd",  # cuda_cxlinalg's and cuda_linalg's complex kernels
})


def real_of(d: np.dtype) -> np.dtype:
    """The precision of complex ``d``'s parts (``d`` itself when it is real)."""
    return F32 if d == C64 else F64 if d == C128 else d


def _parts(d: np.dtype) -> tuple[str, str, str, str]:
    """The float type, zero, sine and cosine of complex ``d``'s working precision, as kernel source names."""
    if real_of(d) == F32:
        return "np.float32", "_ZERO_float32", "fsin", "fcos"
    return "np.float64", "_ZERO_float64", "math.sin", "math.cos"


def _exp(z: str, d: np.dtype) -> str:
    _, _, sin, cos = _parts(d)
    # a zero imaginary part keeps exp real: inf * sin(0) would be nan
    return (f"(complex(math.exp({z}.real), {z}.imag) if {z}.imag == 0 else "
            f"complex(math.exp({z}.real) * {cos}({z}.imag), math.exp({z}.real) * {sin}({z}.imag)))")


# a = re, b = im; SIN/COS are the working precision's, F( its float type. log's real part is log|z| through
# hypot (no overflow); sqrt is a device function of cuda_cxmath
_A, _B = "{0}.real", "{0}.imag"
_TRANSCENDENTAL = {
    "log": f"complex(math.log(math.hypot({_A}, {_B})), math.atan2({_B}, {_A}))",
    "sin": f"complex(SIN({_A}) * math.cosh({_B}), COS({_A}) * math.sinh({_B}))",
    "cos": f"complex(COS({_A}) * math.cosh({_B}), -(SIN({_A}) * math.sinh({_B})))",
    "sinh": f"complex(math.sinh({_A}) * COS({_B}), math.cosh({_A}) * SIN({_B}))",
    "cosh": f"complex(math.cosh({_A}) * COS({_B}), math.sinh({_A}) * SIN({_B}))",
    # expm1 and log1p keep small arguments' precision: re(e^z - 1) = expm1(a) cos b - 2 sin^2(b / 2) and
    # |1 + z|^2 = 1 + (2a + a^2 + b^2)
    "expm1": (f"complex(math.expm1({_A}) * COS({_B}) - F(2) * SIN({_B} * F(0.5)) * SIN({_B} * F(0.5)), "
              f"math.exp({_A}) * SIN({_B}))"),
    "log1p": f"complex(F(0.5) * math.log1p({_A} * (F(2) + {_A}) + {_B} * {_B}), math.atan2({_B}, F(1) + {_A}))",
    "exp2": (f"complex(math.exp({_A} * F(LN2)) * COS({_B} * F(LN2)), "
             f"math.exp({_A} * F(LN2)) * SIN({_B} * F(LN2)))"),
    # tanh(a + ib) = (sinh 2a + i sin 2b) / (cosh 2a + cos 2b), saturating where cosh 2a would overflow;
    # tan z = -i tanh(iz)
    "tanh": (f"(complex(math.copysign(F(1), {_A}), F(0) * SIN({_B} + {_B})) if abs({_A}) > F(20) else "
             f"complex(math.sinh({_A} + {_A}), SIN({_B} + {_B})) / "
             f"(math.cosh({_A} + {_A}) + COS({_B} + {_B})))"),
    "tan": (f"(complex(F(0) * SIN({_A} + {_A}), math.copysign(F(1), {_B})) if abs({_B}) > F(20) else "
            f"complex(SIN({_A} + {_A}), math.sinh({_B} + {_B})) / "
            f"(COS({_A} + {_A}) + math.cosh({_B} + {_B})))"),
}


# the functions of ``cuda_cxmath`` (device functions, one per precision) by primitive
_DEVICE_FUNCS = {"sqrt": "sqrtz", "asin": "asin", "acos": "acos", "atan": "atan", "asinh": "asinh", "acosh": "acosh",
                 "atanh": "atanh", "pow": "pow"}


def _to_complex(x: str, src: np.dtype, out: np.dtype) -> str:
    if src.kind == "c":
        return x
    f, zero, _, _ = _parts(out)
    return f"complex({f}({x}), {zero})"


def elementwise_expr(name: str, in_dtypes: Sequence[np.dtype], out_dtype: np.dtype, params: dict | None) -> str:
    """The CUDA expression of elementwise primitive ``name`` with a complex operand or result (``{0}``, ``{1}``
    ...), or ``UnsupportedOnDevice`` naming it."""
    ins = [np.dtype(d) for d in in_dtypes]
    out = np.dtype(out_dtype)
    c = next((d for d in (*ins, out) if d.kind == "c"), out)
    z = "{0}"
    if name in ("add", "sub", "mul", "div") and all(d.kind == "c" for d in ins):
        return f"{{0}} {dict(add='+', sub='-', mul='*', div='/')[name]} {{1}}"
    simple = {
        "neg": "-{0}", "conj": "{0}.conjugate()", "real": "{0}.real", "imag": "{0}.imag",
        "abs": "math.hypot({0}.real, {0}.imag)", "eq": "{0} == {1}", "ne": "{0} != {1}",
        "isnan": "({0}.real != {0}.real or {0}.imag != {0}.imag)",
        "isinf": "(math.isinf({0}.real) or math.isinf({0}.imag))",
        "is_finite": "(math.isfinite({0}.real) and math.isfinite({0}.imag))",
        "select": "({1} if {0} else {2})",
        "stop_gradient": "{0}",
    }
    if name in simple and (name != "select" or len(ins) == 3):
        return simple[name]
    if name == "safe_mul" and all(d.kind == "c" for d in ins):  # complex products are plain ones on the CPU too
        return "{0} * {1}"
    if name == "safe_div" and all(d.kind == "c" for d in ins):  # a zero numerator gives zero, not 0/0
        return "({0} - {0} if {0} == 0 else {0} / {1})"
    if name == "exp":
        return _exp(z, c)
    if name in _TRANSCENDENTAL:
        f, _, sin, cos = _parts(c)
        e = _TRANSCENDENTAL[name].replace("SIN", sin).replace("COS", cos).replace("LN2", repr(math.log(2)))
        return e.replace("F(", f + "(")
    if name in _DEVICE_FUNCS and all(d.kind == "c" for d in ins):
        bits = 32 if real_of(c) == F32 else 64
        return f"_c{_DEVICE_FUNCS[name]}{bits}({', '.join(f'{{{i}}}' for i in range(len(ins)))})"
    if name == "sign":
        return "({0} / math.hypot({0}.real, {0}.imag) if {0} != 0 else {0})"
    if name == "complex" and out.kind == "c":
        return "complex({0}, {1})"
    if name == "integer_pow" and params is not None:
        y = int(params["y"])
        f, zero, _, _ = _parts(c)
        if y == 0:
            return f"complex({f}(1), {zero})"
        prod = " * ".join(["{0}"] * abs(y))
        return f"({prod})" if y > 0 else f"(complex({f}(1), {zero}) / ({prod}))"
    if name == "convert_element_type":
        src = ins[0]
        if out.kind == "c":
            return _to_complex(z, src, out)
        if out == np.bool_:
            return "({0} != 0)"
        if out in NATIVE_DTYPES:  # NumPy's cast: the real part
            return "{0}.real"
    raise UnsupportedOnDevice(
        f"'{name}' on {', '.join(d.name for d in ins)} -> {out.name} has no CUDA kernel in complex (the device "
        "computes complex add, sub, mul, div, safe_mul, safe_div, neg, conj, real, imag, abs, exp, exp2, expm1, log, "
        "log1p, sqrt, sin, cos, tan, sinh, cosh, tanh, asin, acos, atan, asinh, acosh, atanh, pow, sign, "
        "integer_pow, comparisons, select, casts, sums, products, dot_general and fft); run it on the CPU with "
        "x.to_device('cpu')"
    )


def _dtype(a: Any) -> np.dtype:
    return a.dtype if isinstance(a, CudaArray) else np.asarray(a).dtype


def involves_complex(args: Sequence[Any], out_dtype) -> bool:
    return any(_dtype(a).kind == "c" for a in args) or (out_dtype is not None and np.dtype(out_dtype).kind == "c")


def run_elementwise(ctx, name: str, args: Sequence[Any], params: dict, out_dtype) -> CudaArray:
    """Elementwise primitive ``name`` with a complex operand or result."""
    if out_dtype is None:
        raise UnsupportedOnDevice(f"'{name}' on complex operands has no CUDA kernel; run it on the CPU with "
                                  "x.to_device('cpu')")
    ins = [_dtype(a) for a in args]
    expr = elementwise_expr(name, ins, np.dtype(out_dtype), params)
    return elementwise(ctx, name, np.dtype(out_dtype), args, expr=expr)


def catalog() -> list[tuple[str, str, list[str], bool]]:
    """The complex kernel kinds, complex64 (float32 parts) and complex128: elementwise, reductions, cumsum."""
    cases = []
    i64 = "int64"
    for d in (C64, C128):
        r = real_of(d)
        for name, ins, out, params in (
            ("add", [d, d], d, None), ("mul", [d, d], d, None), ("div", [d, d], d, None), ("safe_div", [d, d], d, None),
            ("neg", [d], d, None),
            ("conj", [d], d, None), ("real", [d], r, None), ("imag", [d], r, None), ("abs", [d], r, None),
            ("exp", [d], d, None), ("log", [d], d, None), ("sqrt", [d], d, None), ("sin", [d], d, None),
            ("cos", [d], d, None), ("sinh", [d], d, None), ("cosh", [d], d, None), ("sign", [d], d, None),
            ("expm1", [d], d, None), ("log1p", [d], d, None), ("exp2", [d], d, None), ("tanh", [d], d, None),
            ("tan", [d], d, None), ("asin", [d], d, None), ("acos", [d], d, None), ("atan", [d], d, None),
            ("asinh", [d], d, None), ("acosh", [d], d, None), ("atanh", [d], d, None), ("pow", [d, d], d, None),
            ("eq", [d, d], np.dtype(np.bool_), None),
            ("isinf", [d], np.dtype(np.bool_), None), ("integer_pow", [d], d, {"y": -3}),
            ("complex", [r, r], d, None), ("convert_element_type", [r], d, None),
            ("convert_element_type", [d], r, None),
        ):
            expr = elementwise_expr(name, ins, out, params)
            k = len(set(re.findall(r"\{(\d+)\}", expr)))
            types = [f"{x.name}[::1]" if x != np.bool_ else "boolean[::1]" for x in [*ins[:k], out]]
            src = strided_source(1, ["flat"] * k, expr)
            cases.append((f"{name}:{'->'.join(x.name for x in (*ins, out))}", src, [*types, i64, i64], d == C64))
        a = f"{d.name}[::1]"
        for kind in ("sum", "prod"):
            cases.append((f"reduce_{kind}:{d.name}", reduce_source(kind, d), [a, a, i64, i64, d.name], d == C64))
        cases.append((f"cumsum:{d.name}", row_scan_source("cumsum", d), [a, a, i64, i64, "boolean"], d == C64))
    return cases
