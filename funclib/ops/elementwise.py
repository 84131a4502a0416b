"""Array API elementwise functions that are compositions (or wrappers adding promotion) over the elementwise
primitives; the primitives' own public wrappers come from their rows in ``funclib/primitives/elementwise.py``."""

from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes
from ..checks import describe
from ..core import Tensor, _state, _wrap
from ..errors import DTypeError
from ..namespace import public
from ..primitives import elementwise as E
from ..primitives import transcendental as T
from ..primitives.elementwise import (
    _to_tensor,
    abs,
    add,
    convert,
    equal,
    integer_pow,
    isfinite,
    isinf,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    subtract,
)
from ..primitives.shape import select
from ..primitives.transcendental import exp, log, log1p, sqrt

_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046


def _float(x, op):
    x = _to_tensor(x, op)
    if x.dtype not in dtypes.INEXACT:
        x = convert(x, dtypes.default_float)
    return x


@public(dunder="__truediv__", rdunder="__rtruediv__")
def divide(x1, x2, /):
    """True division; integer operands are promoted to the default float dtype.

    >>> fl.divide(fl.tensor([1, 2]), 2)
    Tensor([0.5, 1. ], dtype=float32)
    """
    if _state.trace is None and type(x1) is Tensor and type(x2) is Tensor:
        a, b = x1._value, x2._value
        if a.dtype is b.dtype and a.dtype in E.FAST_FLOAT:
            try:
                return _wrap(np.divide(a, b))
            except ValueError:
                E.broadcast_shapes(a.shape, b.shape, op="divide")
                raise
    x1, x2 = E.broadcast_pair("divide", x1, x2)
    if x1.dtype not in dtypes.INEXACT:
        x1, x2 = convert(x1, dtypes.default_float), convert(x2, dtypes.default_float)
    return E.div_p.bind(x1, x2)


@public(dunder="__pow__", rdunder="__rpow__")
def pow(x1, x2, /):
    """``x1 ** x2`` with Array API promotion.

    >>> fl.pow(fl.tensor([2.0]), 3)
    Tensor([8.], dtype=float32)
    """
    if isinstance(x2, builtins.int) and not isinstance(x2, builtins.bool) and isinstance(x1, Tensor):
        if x1.dtype in dtypes.INEXACT or x2 >= 0:
            return integer_pow(x1, x2)
    return T.pow(x1, x2)


def _real_identity(name, complex_fn, real_fn, doc):
    def f(x, /):
        x = _to_tensor(x, name)
        if x.dtype in dtypes.COMPLEX:
            return complex_fn(x)
        if x.dtype == dtypes.bool_:
            raise DTypeError(f"{name}: unsupported dtype bool; expected a numeric dtype")
        return real_fn(x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


conj = public(_real_identity(
    "conj",
    E.conj,
    lambda x: x,
    "Complex conjugate (the identity on real tensors).\n\n>>> fl.conj(fl.asarray([1 + 2j]))\n"
    "Tensor([1.-2.j], dtype=complex64)",
), method=True)
real = public(_real_identity(
    "real",
    E.real,
    lambda x: x,
    "Real part (the identity on real tensors).\n\n>>> fl.real(fl.asarray([1 + 2j]))\nTensor([1.], dtype=float32)",
), prop="real")
imag = public(_real_identity(
    "imag",
    E.imag,
    lambda x: select(_wrap(np.zeros((), dtypes.bool_)), x, _wrap(np.zeros((), x.dtype))),
    "Imaginary part (zeros on real tensors).\n\n>>> fl.imag(fl.asarray([1 + 2j]))\nTensor([2.], dtype=float32)",
), prop="imag")


@public(dunder="__pos__")
def positive(x, /):
    """``+x``."""
    x = _to_tensor(x, "positive")
    if x.dtype == dtypes.bool_:
        raise DTypeError("positive: unsupported dtype bool; expected a numeric dtype")
    return x


@public
def square(x, /):
    """``x * x``."""
    x = _to_tensor(x, "square")
    if x.dtype == dtypes.bool_:
        raise DTypeError("square: unsupported dtype bool; expected a numeric dtype")
    return integer_pow(x, 2)


def _log_base(x, ln_base, name):
    x = _float(x, name)
    y = log(x)
    if x.dtype in dtypes.COMPLEX:
        # scale the parts separately: a complex division would turn log(inf + 0j) = inf + 0j into inf + nan j
        c = _wrap(np.asarray(ln_base, dtypes.real_dtype(x.dtype)))
        return E.complex_from(divide(E.real(y), c), divide(E.imag(y), c))
    return divide(y, _wrap(np.asarray(ln_base, x.dtype)))


@public
def log2(x, /):
    """Base-2 logarithm, ``log(x) / log(2)``.

    >>> fl.log2(fl.asarray([1.0, 8.0]))
    Tensor([0., 3.], dtype=float32)
    """
    return _log_base(x, _LN2, "log2")


@public
def log10(x, /):
    """Base-10 logarithm, ``log(x) / log(10)``.

    >>> fl.log10(fl.asarray([1.0, 100.0]))
    Tensor([0., 2.], dtype=float32)
    """
    return _log_base(x, _LN10, "log10")


@public
def logaddexp(x1, x2, /):
    """``log(exp(x1) + exp(x2))`` without overflow."""
    x1, x2 = E.broadcast_pair("logaddexp", x1, x2)
    x1, x2 = _float(x1, "logaddexp"), _float(x2, "logaddexp")
    if x1.dtype in dtypes.REAL_FLOATING and x1.dtype != dtypes.float64:
        # exp and log1p each round; in float32 their errors stack to 4 ulp, one float64 evaluation rounds once
        return convert(logaddexp(convert(x1, np.dtype(np.float64)), convert(x2, np.dtype(np.float64))), x1.dtype)
    m = maximum(x1, x2)
    # where both are -inf (or +inf) the difference is nan; the max alone is the answer there
    finite = isfinite(m)
    safe_m = select(finite, m, _wrap(np.zeros((), m.dtype)))
    res = add(safe_m, log1p(exp(negative(abs(subtract(x1, x2))))))
    return select(finite, res, m)


@public
def hypot(x1, x2, /):
    """``sqrt(x1**2 + x2**2)`` without undue overflow."""
    x1, x2 = E.broadcast_pair("hypot", x1, x2)
    x1, x2 = abs(_float(x1, "hypot")), abs(_float(x2, "hypot"))
    big = maximum(x1, x2)
    small = minimum(x1, x2)
    zero = _wrap(np.zeros((), big.dtype))
    safe = select(equal(big, zero), _wrap(np.ones((), big.dtype)), big)
    r = divide(small, safe)
    out = multiply(big, sqrt(add(multiply(r, r), 1.0)))
    # an infinite side wins even against NaN (the standard's special case)
    return select(logical_or(isinf(x1), isinf(x2)), _wrap(np.full((), np.inf, big.dtype)), out)


@public
def sign(x, /):
    """The sign of ``x`` (``x / |x|`` for complex, 0 at 0)."""
    x = _to_tensor(x, "sign")
    if x.dtype in dtypes.COMPLEX:
        a = abs(x)
        safe = select(equal(a, _wrap(np.zeros((), a.dtype))), _wrap(np.ones((), a.dtype)), a)
        return divide(x, convert(safe, x.dtype))
    return E.sign(x)


def _int_identity(fn, name):
    def f(x, /):
        x = _to_tensor(x, name)
        if x.dtype in dtypes.INTEGER or x.dtype == dtypes.bool_:
            if x.dtype == dtypes.bool_:
                raise DTypeError(f"{name}: unsupported dtype bool; expected a real numeric dtype")
            return x
        return fn(x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise ``{name}`` (identity on integers)."
    return f


floor = public(_int_identity(E.floor, "floor"), method=True)
ceil = public(_int_identity(E.ceil, "ceil"), method=True)
trunc = public(_int_identity(E.trunc, "trunc"))


@public(method=True)
def round(x, /):
    """Round half to even; complex rounds both parts; identity on integers."""
    x = _to_tensor(x, "round")
    if x.dtype in dtypes.COMPLEX:
        return E.complex_from(E.round(real(x)), E.round(imag(x)))
    if x.dtype in dtypes.INTEGER:
        return x
    return E.round(x)


def _logical(p, name):
    def f(x1, x2, /):
        x1, x2 = _to_tensor(x1, name), _to_tensor(x2, name)
        if x1.shape != x2.shape:
            E.broadcast_shapes(x1.shape, x2.shape, op=name)
        if x1.dtype != dtypes.bool_:
            x1 = not_equal(x1, 0)
        if x2.dtype != dtypes.bool_:
            x2 = not_equal(x2, 0)
        return p.bind(x1, x2)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise ``{name}`` of boolean tensors."
    return f


logical_and = public(_logical(E.and_p, "logical_and"))
logical_or = public(_logical(E.or_p, "logical_or"))
logical_xor = public(_logical(E.xor_p, "logical_xor"))


@public
def logical_not(x, /):
    x = _to_tensor(x, "logical_not")
    if x.dtype != dtypes.bool_:
        x = not_equal(x, 0)
    return E.not_p.bind(x)


@public(method=True)
def clip(x, /, min=None, max=None):
    """Clamp ``x`` to ``[min, max]`` (either may be None). The result keeps ``x``'s dtype."""
    x = _to_tensor(x, "clip")
    if x.dtype in dtypes.COMPLEX or x.dtype == dtypes.bool_:
        raise DTypeError(f"clip: unsupported dtype {x.dtype.name}; expected a real numeric dtype")
    out = x
    if min is not None:
        lo = _bound(min, x, "min")
        out = maximum(out, lo)
    if max is not None:
        hi = _bound(max, x, "max")
        out = minimum(out, hi)
    return out


def _bound(b, x, which):
    if isinstance(b, Tensor):
        return convert(b, x.dtype) if b.dtype != x.dtype else b
    if isinstance(b, builtins.bool) or not isinstance(b, (builtins.int, builtins.float, np.integer, np.floating)):
        raise TypeError(f"clip: {which} must be a real number, a tensor or None, got {describe(b)}")
    if x.dtype in dtypes.INTEGER:
        info = np.iinfo(x.dtype)
        b = builtins.min(builtins.max(b, info.min), info.max) if isinstance(b, builtins.int) else b
    return _wrap(np.asarray(b, dtype=x.dtype))


@public
def reciprocal(x, /):
    x = _float(x, "reciprocal")
    return divide(_wrap(np.ones((), x.dtype)), x)


@public
def rsqrt(x, /):
    """``1 / sqrt(x)``."""
    return reciprocal(sqrt(_float(x, "rsqrt")))
