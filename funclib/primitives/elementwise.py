"""Elementwise primitives: the ``unary`` and ``binary`` families, ``select``, ``convert``, ``integer_pow``.

Binary primitives broadcast implicitly (NumPy rules) and take operands of one dtype: promotion happens in the
public wrappers. Cotangents of a broadcast operand are summed back ("unbroadcast", as in HIPS autograd).
Each public wrapper has an eager fast path: with no transform active and Tensor operands it calls NumPy directly.
Low-precision operands (float8, int4) take the impl instead, which computes in the wide dtype and rounds back
(``kernels.lowp``): NumPy alone would use ml_dtypes' loops, which turn float8 overflow into NaN.
"""

from __future__ import annotations

import builtins
import threading

import numpy as np

from .. import dtypes, namespace
from ..checks import describe
from ..core import (
    Primitive,
    ShapedArray,
    Tensor,
    Tracer,
    Zero,
    _new,
    _state,
    _wrap,
    array_from,
    aval_of,
    check_no_imaginary,
    holds_tracer,
    is_undefined,
    is_weak,
)
from ..errors import DTypeError, NotLinearError, OutOfRangeError, ShapeError
from ..kernels import lowp
from ..kernels.fusion import CONVERT, INTEGER_POW, Lowering
from . import fastpath
from ._util import broadcast_shapes
from .shape import batch_align, broadcast_to, concatenate, expand_dims, instantiate, select, unbroadcast

LOWP = frozenset(dtypes.LOW_PRECISION)
_F8 = frozenset(dtypes.FLOAT8)
_I4 = frozenset(dtypes.INT4)
FAST_FLOAT = frozenset(dtypes.FLOATING)  # floats NumPy computes in directly
FLOAT = FAST_FLOAT | _F8
REAL_FLOAT = frozenset(dtypes.REAL_FLOATING) | _F8
NUMERIC = frozenset(dtypes.NUMERIC) | LOWP
REAL_NUMERIC = frozenset(dtypes.INTEGER + dtypes.REAL_FLOATING) | LOWP
INTEGER = frozenset(dtypes.INTEGER) | _I4
INT_BOOL = frozenset(dtypes.INTEGER + dtypes.BOOL) | _I4
BOOL = frozenset(dtypes.BOOL)
ALL = frozenset(dtypes.ALL) | LOWP
COMPLEX = frozenset(dtypes.COMPLEX)

_SCALARS = (builtins.int, builtins.float, builtins.complex)
_FLOAT, _INT = builtins.float, builtins.int
_ndarray, _asarray = np.ndarray, np.asarray


def _check(name, dtype, ok):
    if dtype not in ok:
        kinds = "a floating-point" if ok <= FLOAT else "a numeric" if ok <= NUMERIC else "an integer or boolean"
        raise DTypeError(f"{name}: unsupported dtype {dtype.name}; expected {kinds} dtype (got {dtype.name})")


def _to_tensor(x, op):
    if isinstance(x, Tensor):
        return x
    try:
        if isinstance(x, (list, tuple)) and holds_tracer(x):
            return stack_values(x)
        return _wrap(array_from(x))
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{op}: expected a tensor (or a Python scalar, NumPy array or nested list), got {describe(x)} ({e})"
        ) from None


def stack_values(seq, dtype=None):
    """A nested list/tuple holding traced values as one tensor, as ``fl.asarray`` makes it: each element converted
    on its own (Python scalars at the default dtypes, or ``dtype``), then stacked along a new leading axis at their
    promoted dtype, as ``fl.stack`` does."""
    items = [_element(e, dtype) for e in seq]
    if not items:
        raise ValueError("stack: needs at least one array")
    d = dtypes.result_type(*items)
    items = [a if a.dtype == d else convert(a, d) for a in items]
    shape = tuple(items[0].shape)
    if any(tuple(a.shape) != shape for a in items):
        raise ShapeError(f"stack: all tensors must have one shape, got {[tuple(a.shape) for a in items]}")
    return concatenate([expand_dims(a, [0]) for a in items], 0)


def _element(e, dtype):
    if isinstance(e, (list, tuple)) and holds_tracer(e):
        return stack_values(e, dtype)
    if isinstance(e, Tracer):
        d = dtypes.canonicalize(dtype) if dtype is not None else e.dtype
        check_no_imaginary(e.dtype in dtypes.COMPLEX, d, "asarray")
        return e if e.dtype == d else convert(e, d)
    return _wrap(array_from(e, dtype))


# ---------------------------------------------------------------------------------------------------------------
# unary family


def _lower(p, lowering, no_lowering):
    if lowering is not None:
        p.def_lowering(lowering)
    elif no_lowering:
        p.no_rule["lowering"] = no_lowering


# why a row has no lowering: jit then runs its impl on whole arrays between fused kernels
NO_F32_MATH = "no branch-free float32 version in kernels/vmath.py yet, so jit runs NumPy's loop for it"
NO_COMPLEX = "its operands or its result are complex, which fused kernels do not take"
NO_SCALAR_SPECIAL = "kernels/special.py computes it on whole arrays; it has no scalar form for a fused loop"
NO_TEMPLATE = "NumPy's edge cases for it (signs, infinities, zero divisors, shift counts) have no scalar template yet"


def _elementwise_vmap(prim):
    def rule(args, dims, **params):
        return prim.bind(*args, **params), dims[0]

    return rule


def unary(
    name: str,
    np_fn,
    *,
    ok=FLOAT,
    jvp=None,
    out_dtype=None,
    promote_int=True,
    linear=False,
    lowering: Lowering | None = None,
    no_lowering: str = "",
    doc: str = "",
    public: str | None = None,
    export: bool = True,
    method: bool | str = False,
    dunder: str | None = None,
    rdunder: str | None = None,
):
    """Define an elementwise unary primitive and its public wrapper. ``jvp(x, y, t)`` gives the output tangent;
    ``lowering`` its scalar expression in jit's fused kernels (or ``no_lowering`` why it has none); ``public`` is
    the wrapper's name where it differs from the primitive's (errors name what the user called). ``export`` makes
    the wrapper ``fl.<public>``, ``method``, ``dunder`` and ``rdunder`` also a Tensor method or operator (see
    ``namespace.public``).

    Returns ``(primitive, wrapper)``.
    """
    public = public or name
    p = Primitive(name, linear=linear)
    p.family = "unary"
    p.ok_dtypes = ok
    _lower(p, lowering, no_lowering)
    fast = ok - LOWP

    @p.def_impl
    def _impl(x):
        if getattr(x, "dtype", None) in LOWP:
            return lowp.compute(np_fn, x)
        return np_fn(x)

    @p.def_abstract_eval
    def _abstract(x):
        _check(name, x.dtype, ok)
        return ShapedArray(x.shape, out_dtype(x.dtype) if out_dtype else x.dtype)

    p.def_vmap(_elementwise_vmap(p))

    if jvp is not None:
        p.diagonal = (np_fn, jvp)

        @p.def_jvp
        def _jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            y = p.bind(x)
            if type(t) is Zero or y.dtype not in FLOAT:
                return y, Zero(aval_of(y))
            return y, jvp(x, y, t)
    elif out_dtype is not None or ok <= INT_BOOL:
        p.no_rule["jvp"] = "its output is integer or boolean, so its tangent is always zero"

        @p.def_jvp
        def _zero_jvp(primals, tangents):
            y = p.bind(*primals)
            return y, Zero(aval_of(y))

    else:
        p.no_rule["jvp"] = "piecewise constant: the derivative is zero almost everywhere"

        @p.def_jvp
        def _pc_jvp(primals, tangents):
            y = p.bind(*primals)
            return y, Zero(aval_of(y))

    if not linear:
        p.no_rule.setdefault("transpose", "not linear")

    def wrapper(x, /):
        if type(x) is Tensor:
            v = x._value
            if v.dtype in fast:  # concrete input: eager even under a transform (see binary)
                r = np_fn(v)
                if type(r) is not _ndarray:
                    r = _asarray(r)  # a 0-d result comes back as a NumPy scalar
                t = _new(Tensor)
                t._value = r
                return t
        elif isinstance(x, Tensor) and x.dtype in ok:
            return p.bind(x)
        return _unary_slow(p, x, ok, promote_int, public)

    wrapper.__name__ = wrapper.__qualname__ = public
    sample = "[0.5]" if ok & FLOAT else "[5, 12]"  # bitwise_invert takes integers only
    wrapper.__doc__ = doc or f"Elementwise ``{public}``.\n\n>>> fl.{public}(fl.tensor({sample}))"
    wrapper = fastpath.unary(wrapper, np_fn, fast)
    if export:
        namespace.public(wrapper, method=method, dunder=dunder, rdunder=rdunder)
    return p, wrapper


def _unary_slow(p, x, ok, promote_int, public):
    x = _to_tensor(x, public)
    d = x.dtype
    if d not in ok:
        if promote_int and ok <= FLOAT and (d in INTEGER or d == dtypes.bool_):
            x = convert(x, dtypes.float_default())
        else:
            _check(public, d, ok)
    return p.bind(x)


# ---------------------------------------------------------------------------------------------------------------
# binary family


def binary_vmap(prim):
    def rule(args, dims, **params):
        x, y = args
        dx, dy = dims
        xs = x.shape if dx is None else x.shape[:dx] + x.shape[dx + 1 :]
        ys = y.shape if dy is None else y.shape[:dy] + y.shape[dy + 1 :]
        rank = max(len(xs), len(ys))
        x = batch_align(x, dx, rank)
        y = batch_align(y, dy, rank)
        return prim.bind(x, y, **params), 0

    return rule


def binary(
    name: str,
    np_fn,
    *,
    ok=NUMERIC,
    jvp=None,
    out_bool=False,
    linear_in=None,
    lowering: Lowering | None = None,
    no_lowering: str = "",
    doc: str = "",
    public: str | None = None,
    export: bool = True,
    method: bool | str = False,
    dunder: str | None = None,
    rdunder: str | None = None,
):
    """Define an elementwise binary primitive with implicit broadcasting and its public wrapper.

    ``jvp`` is a pair ``(dx, dy)`` of functions ``(x, y, out, t) -> tangent contribution`` (``None`` for an
    argument with zero derivative); ``lowering``, ``no_lowering``, ``export``, ``method``, ``dunder``, ``rdunder``
    as for ``unary``; ``public`` names the wrapper where it differs from the primitive. Returns
    ``(primitive, wrapper)``.
    """
    public = public or name
    p = Primitive(name, linear=linear_in is not None)
    p.family = "binary"
    p.ok_dtypes = ok
    _lower(p, lowering, no_lowering)
    fast = ok - LOWP

    @p.def_impl
    def _impl(x, y):
        if getattr(x, "dtype", None) in LOWP or getattr(y, "dtype", None) in LOWP:
            return lowp.compute(np_fn, x, y)
        return np_fn(x, y)

    @p.def_abstract_eval
    def _abstract(x, y):
        d = x.dtype
        if d != y.dtype:
            raise DTypeError(
                f"{name}: operands must have one dtype, got {d.name} and {y.dtype.name}; "
                f"use fl.{name} (which promotes) or .astype"
            )
        if d not in ok:
            _check(name, d, ok)
        xs = x.shape
        shape = xs if xs == y.shape else broadcast_shapes(xs, y.shape, op=name)
        return ShapedArray(shape, dtypes.bool_ if out_bool else d)

    p.def_vmap(binary_vmap(p))

    if jvp is not None:
        dfx, dfy = jvp
        p.diagonal = (np_fn, dfx, dfy)

        @p.def_jvp
        def _jvp(primals, tangents):
            x, y = primals
            tx, ty = tangents
            out = p.bind(x, y)
            if out.dtype not in FLOAT:
                return out, Zero(aval_of(out))
            acc = None
            if type(tx) is not Zero and dfx is not None:
                acc = dfx(x, y, out, tx)
            if type(ty) is not Zero and dfy is not None:
                c = dfy(x, y, out, ty)
                # the sum of both contributions broadcasts to the output's shape by itself
                acc = c if acc is None else acc + c
            return out, Zero(aval_of(out)) if acc is None else _bcast_to(acc, out)
    else:
        p.no_rule["jvp"] = (
            "its output is boolean or integer, so its tangent is always zero"
            if out_bool or ok <= INT_BOOL
            else "piecewise constant: the derivative is zero almost everywhere"
        )

        @p.def_jvp
        def _zero_jvp(primals, tangents):
            out = p.bind(*primals)
            return out, Zero(aval_of(out))

    if linear_in is None:
        p.no_rule["transpose"] = "not linear"

    # Operations on concrete Tensors run eagerly even while a transform is active: a transform only acts on its
    # own tracers, so for these the result is the same and the trace machinery is skipped.
    # NumPy promotes bfloat16 with a Python float to float32, so that case takes the slow path
    fast_float = (fast & FAST_FLOAT) - {dtypes.bfloat16}
    fast_int = fast & NUMERIC
    # a scalar first goes straight to NumPy's own ufuncs only (the row's helpers expect an array first)
    first_float, first_int = (fast_float, fast_int) if isinstance(np_fn, np.ufunc) else (frozenset(), frozenset())

    # the fast paths wrap the result in place: one function call less is a tenth of the eager overhead
    def wrapper(x, y, /):
        tx = type(x)
        ty = type(y)
        if tx is Tensor:
            a = x._value
            d = a.dtype
            if ty is Tensor:
                b = y._value
                if d is b.dtype and d in fast:
                    try:
                        r = np_fn(a, b)
                    except ValueError:
                        broadcast_shapes(a.shape, b.shape, op=public)
                        raise
                    if type(r) is not _ndarray:
                        r = _asarray(r)  # a 0-d result comes back as a NumPy scalar
                    t = _new(Tensor)
                    t._value = r
                    return t
            elif (ty is _FLOAT and d in fast_float) or (ty is _INT and d in fast_int and (d in FLOAT or _fits(y, d))):
                r = np_fn(a, y)
                if type(r) is not _ndarray:
                    r = _asarray(r)
                t = _new(Tensor)
                t._value = r
                return t
        elif ty is Tensor:  # a Python scalar first: ``2 * x``, ``1.0 - x``
            b = y._value
            d = b.dtype
            if (tx is _FLOAT and d in first_float) or (tx is _INT and d in first_int and (d in FLOAT or _fits(x, d))):
                r = np_fn(x, b)
                if type(r) is not _ndarray:
                    r = _asarray(r)
                t = _new(Tensor)
                t._value = r
                return t
        if isinstance(x, Tensor):
            d = x.dtype
            if d in ok:
                if isinstance(y, Tensor):
                    if y.dtype == d:
                        try:
                            return p.bind(x, y)
                        except ShapeError:
                            # the abstract rule names the primitive; the user called the public function
                            broadcast_shapes(x.shape, y.shape, op=public)
                            raise
                elif ty is builtins.float and d in FLOAT and not x.weak_type:
                    return p.bind(x, _scalar_as(y, d, public))
        elif tx is builtins.float and isinstance(y, Tensor):
            d = y.dtype
            if d in ok and d in FLOAT and not y.weak_type:
                return p.bind(_scalar_as(x, d, public), y)
        return _binary_slow(p, x, y, public)

    wrapper.__name__ = wrapper.__qualname__ = public
    a, b = "[1.0, 2.0]", "[0.5, 3.0]"
    if not ok & FLOAT:  # bitwise operations take integers (and booleans), logical ones booleans only
        a, b = ("[True, False]", "[True, True]") if ok <= BOOL else ("[5, 12]", "[3, 2]")
    example = f">>> fl.{public}(fl.tensor({a}), fl.tensor({b}))"
    wrapper.__doc__ = doc or f"Elementwise ``{public}`` with broadcasting and Array API type promotion.\n\n{example}"
    wrapper = fastpath.binary(wrapper, np_fn, fast, fast_float, fast_int, first_float, first_int, FLOAT)
    if export:
        namespace.public(wrapper, method=method, dunder=dunder, rdunder=rdunder)
    return p, wrapper


def _bcast_to(t, out):
    return broadcast_to(t, out.shape) if t.shape != out.shape else t


def promote_pair(op: str, x, y):
    """Apply Array API promotion (weak Python scalars) to a pair of operands; returns two Tensors/Tracers.

    A Python scalar traced by ``jit`` (``is_weak``) promotes as the scalar does; with another such value or a
    Python scalar the result stays weak, as Python arithmetic on the two would."""
    sx, sy = type(x) in _SCALARS or type(x) is builtins.bool, type(y) in _SCALARS or type(y) is builtins.bool
    wx, wy = is_weak(x), is_weak(y)
    if wx or wy:
        return _promote_weak(op, x, y, sx or wx, sy or wy)
    if sx and sy:
        x = _to_tensor(x, op)
        sx = False
    if not sx:
        x = _to_tensor(x, op)
    if not sy:
        y = _to_tensor(y, op)
    if sx:
        d = dtypes.weak_promote(y.dtype, x)
        return _scalar_as(x, d, op), (y if y.dtype == d else convert(y, d))
    if sy:
        d = dtypes.weak_promote(x.dtype, y)
        return (x if x.dtype == d else convert(x, d)), _scalar_as(y, d, op)
    if x.dtype != y.dtype:
        d = dtypes.promote_types(x.dtype, y.dtype)
        if x.dtype != d:
            x = convert(x, d)
        if y.dtype != d:
            y = convert(y, d)
    return x, y


def _promote_weak(op: str, x, y, sx: bool, sy: bool):
    if sx and sy:
        t = x if is_weak(x) else y
        d = dtypes.promote_types(*(v.dtype if is_weak(v) else dtypes.weak_dtype(v) for v in (x, y)))

        def weak(v):
            if not is_weak(v):
                return t._trace.weak_constant(v, d)
            return v if v.dtype == d else v._trace.cast(v, d, True)

        return weak(x), weak(y)
    if sx:
        y = _to_tensor(y, op)
        d = dtypes.weak_promote(y.dtype, dtypes.weak_sample(x.dtype))
        return convert(x, d), convert(y, d)
    x = _to_tensor(x, op)
    d = dtypes.weak_promote(x.dtype, dtypes.weak_sample(y.dtype))
    return convert(x, d), convert(y, d)


def _scalar_as(v, d: np.dtype, op: str):
    if d in INTEGER and not isinstance(v, builtins.bool) and isinstance(v, builtins.int) and not _fits(v, d):
        info = dtypes.iinfo(d)
        raise OutOfRangeError(
            f"{op}: Python integer {v} is out of range for {d.name} [{info.min}, {info.max}]; "
            f"cast the tensor to a wider dtype first"
        )
    if d not in FLOAT and isinstance(v, builtins.float):
        raise DTypeError(f"{op}: cannot combine a Python float with a {d.name} tensor; cast the tensor first")
    if d in LOWP:
        return _wrap(lowp.astype(np.asarray(v), d))
    return _wrap(np.asarray(v, dtype=d))


def _fits(v: int, d: np.dtype) -> bool:
    info = dtypes.iinfo(d)
    return info.min <= v <= info.max


def _binary_slow(p, x, y, public):
    x, y = broadcast_pair(public, x, y)
    _check(public, x.dtype, p.ok_dtypes)
    return p.bind(x, y)


def broadcast_pair(op: str, x, y):
    """``promote_pair``, then a ShapeError naming ``op`` unless the shapes broadcast together."""
    x, y = promote_pair(op, x, y)
    if x.shape != y.shape:
        broadcast_shapes(x.shape, y.shape, op=op)
    return x, y


# ---------------------------------------------------------------------------------------------------------------
# convert (astype)


convert_p = Primitive("convert_element_type", linear=True)
convert_p.family = "unary"
convert_p.kernel = "convert"
convert_p.def_lowering(CONVERT)


@convert_p.def_impl
def _convert_impl(x, *, new_dtype):
    x = np.asarray(x)
    if new_dtype in LOWP or x.dtype in LOWP:
        return lowp.astype(x, new_dtype)
    return x.astype(new_dtype)


@convert_p.def_abstract_eval
def _convert_abstract(x, *, new_dtype):
    return ShapedArray(x.shape, new_dtype)


@convert_p.def_jvp
def _convert_jvp(primals, tangents, *, new_dtype):
    (x,), (t,) = primals, tangents
    y = convert_p.bind(x, new_dtype=new_dtype)
    if type(t) is Zero or new_dtype not in FLOAT or x.dtype not in FLOAT:
        return y, Zero(aval_of(y))
    return y, convert(t, new_dtype)


@convert_p.def_transpose
def _convert_transpose(ct, x, *, new_dtype):
    old = x.aval.dtype
    if old in COMPLEX or new_dtype not in COMPLEX:
        return [convert(ct, old)]
    return [convert(real(ct), old)]  # real -> complex embedding transposes to taking the real part


@convert_p.def_vmap
def _convert_vmap(args, dims, *, new_dtype):
    return convert_p.bind(args[0], new_dtype=new_dtype), dims[0]


def convert(x, dtype):
    """Cast to ``dtype`` (the primitive behind ``astype``)."""
    dtype = dtypes.canonicalize(dtype)
    if type(x) is Tensor:
        if x._value.dtype == dtype:
            return x
        return _wrap(_convert_impl(x._value, new_dtype=dtype))
    x = _to_tensor(x, "astype")
    if x.dtype == dtype and not x.weak_type:
        return x
    return convert_p.bind(x, new_dtype=dtype)  # of a weak value: its full precision, typed from here on


# ---------------------------------------------------------------------------------------------------------------
# The unary primitives. jvp(x, y, t): x the input, y the output, t the input tangent.


def _real_like(d):
    return dtypes.real_dtype(d)


neg_p, negative = unary(
    "neg", np.negative, public="negative", ok=NUMERIC, jvp=lambda x, y, t: negative(t), linear=True,
    lowering=Lowering("(-{0})", wraps=True), dunder="__neg__",
)
neg_p.def_transpose(lambda ct, x: [negative(ct)])
# fl.sign, fl.floor, ... (funclib/ops) also take complex or integer tensors
sign_p, sign = unary("sign", np.sign, ok=NUMERIC, lowering=Lowering("np.sign({0})"), export=False)
floor_p, floor = unary(
    "floor", np.floor, ok=REAL_FLOAT, lowering=Lowering("np.floor({0})", float_inputs=True), export=False
)
ceil_p, ceil = unary(
    "ceil", np.ceil, ok=REAL_FLOAT, lowering=Lowering("np.ceil({0})", float_inputs=True), export=False
)
round_p, round = unary(
    "round", np.round, ok=REAL_FLOAT, lowering=Lowering("np.rint({0})", float_inputs=True), export=False
)
trunc_p, trunc = unary(
    "trunc", np.trunc, ok=REAL_FLOAT, lowering=Lowering("np.trunc({0})", float_inputs=True), export=False
)
is_finite_p, isfinite = unary(
    "is_finite", np.isfinite, public="isfinite", ok=FLOAT, out_dtype=lambda d: dtypes.bool_,
    lowering=Lowering("np.isfinite({0})", float_inputs=True),
)
isnan_p, isnan = unary(
    "isnan", np.isnan, ok=FLOAT, out_dtype=lambda d: dtypes.bool_, lowering=Lowering("np.isnan({0})", float_inputs=True)
)
isinf_p, isinf = unary(
    "isinf", np.isinf, ok=FLOAT, out_dtype=lambda d: dtypes.bool_, lowering=Lowering("np.isinf({0})", float_inputs=True)
)
not_p, bitwise_invert = unary(
    "not", np.invert, public="bitwise_invert", ok=INT_BOOL, promote_int=False,
    lowering=Lowering(boolean="(not {0})", integer="(~{0})"), dunder="__invert__",
)

def _abs_jvp(x, y, t):
    if x.dtype in COMPLEX:
        # d|z| = Re(conj(z) t) / |z|, with 0 at z = 0
        safe = select(y == 0, _wrap(np.ones((), y.dtype)), y)
        return safe_div(real(safe_mul(t, conj(x))), safe)
    # subgradient convention: sign(0) = 0, so d|x| at 0 is 0
    return safe_mul(t, sign(x))


abs_p, abs = unary(
    "abs", np.abs, ok=NUMERIC, jvp=_abs_jvp, out_dtype=_real_like, promote_int=False,
    lowering=Lowering("abs({0})", wraps=True), method=True, dunder="__abs__",
)


real_p, real = unary(
    "real", np.real, ok=COMPLEX, jvp=lambda x, y, t: real(t), out_dtype=_real_like, linear=True,
    no_lowering=NO_COMPLEX, export=False,  # fl.real, fl.imag, fl.conj (funclib/ops) also take real tensors
)
imag_p, imag = unary(
    "imag", np.imag, ok=COMPLEX, jvp=lambda x, y, t: imag(t), out_dtype=_real_like, linear=True,
    no_lowering=NO_COMPLEX, export=False,
)
conj_p, conj = unary(
    "conj", np.conj, ok=COMPLEX, jvp=lambda x, y, t: conj(t), linear=True, no_lowering=NO_COMPLEX, export=False
)
real_p.def_transpose(lambda ct, x: [complex_from(ct, _wrap(np.zeros((), ct.dtype)))])
imag_p.def_transpose(lambda ct, x: [complex_from(_wrap(np.zeros((), ct.dtype)), negative(ct))])
conj_p.def_transpose(lambda ct, x: [conj(ct)])


# ---------------------------------------------------------------------------------------------------------------
# The binary primitives. (dx, dy): contributions of the x and y tangents.


class _Products(threading.local):
    # set by eager reverse mode's first backward pass (``transforms.tape``), which runs under an errstate and
    # redoes the pass with safe products if a NaN reaches a gradient: a plain product differs only there
    plain = False


PRODUCTS = _Products()


def _safe_mul_np(x, y):
    if PRODUCTS.plain:
        return np.multiply(x, y)
    return _safe_mul_checked(x, y)


@np.errstate(invalid="ignore", over="ignore")  # as a decorator it costs half of a with-block per call
def _safe_mul_checked(x, y):
    out = np.multiply(x, y)
    # not dtype.kind: bfloat16's kind is "V"; one pass decides the common, all-finite case
    if out.dtype in FLOAT and not np.isfinite(out).all():
        # an exactly-zero factor annihilates inf/nan in the other: zero cotangents stay zero (DESIGN §5)
        bad = ~np.isfinite(out) & ((np.asarray(x) == 0) | (np.asarray(y) == 0))
        out = np.where(bad, np.zeros((), out.dtype), out)
    return out


def _safe_div_np(x, y):
    if PRODUCTS.plain:
        return _safe_div(x, y)
    return _safe_div_quiet(x, y)


def _safe_div(x, y):
    x, y = np.asarray(x), np.asarray(y)
    shape = x.shape if x.shape == y.shape else np.broadcast_shapes(x.shape, y.shape)
    out = np.zeros(shape, x.dtype if x.dtype is y.dtype else np.result_type(x, y))
    # skipping the zero numerators avoids 0/0 = nan; a nonzero over zero is a genuine infinity, kept silently
    np.divide(x, y, out=out, where=x != 0)
    return out


_safe_div_quiet = np.errstate(divide="ignore", over="ignore", invalid="ignore")(_safe_div)


add_p, add = binary(
    "add", np.add, jvp=(lambda x, y, o, t: t, lambda x, y, o, t: t), linear_in="both",
    lowering=Lowering("({0} + {1})", wraps=True), dunder="__add__", rdunder="__radd__",
)
sub_p, subtract = binary(
    "sub", np.subtract, public="subtract", jvp=(lambda x, y, o, t: t, lambda x, y, o, t: negative(t)), linear_in="both",
    lowering=Lowering("({0} - {1})", wraps=True), dunder="__sub__", rdunder="__rsub__",
)
mul_p, multiply = binary(
    "mul",
    np.multiply,
    public="multiply",
    jvp=(lambda x, y, o, t: safe_mul(t, y), lambda x, y, o, t: safe_mul(t, x)),
    linear_in="either",
    lowering=Lowering("({0} * {1})", wraps=True),
    dunder="__mul__",
    rdunder="__rmul__",
)
div_p, divide = binary(
    "div",
    np.divide,
    ok=FLOAT,
    jvp=(lambda x, y, o, t: safe_div(t, y), lambda x, y, o, t: negative(safe_div(safe_mul(t, o), y))),
    linear_in="first",
    lowering=Lowering(f32="({0} / {1})", f64="({0} / {1})"),
    export=False,  # fl.divide (funclib/ops) promotes integers to float first
)
# in a fused kernel a safe product is a select
safe_mul_p, safe_mul = binary(
    "safe_mul",
    _safe_mul_np,
    ok=FLOAT,
    jvp=(lambda x, y, o, t: safe_mul(t, y), lambda x, y, o, t: safe_mul(x, t)),
    linear_in="either",
    lowering=Lowering(
        f32="(_ZERO_float32 if ({0} == 0 or {1} == 0) else {0} * {1})",
        f64="(_ZERO_float64 if ({0} == 0 or {1} == 0) else {0} * {1})",
    ),
    export=False,
    doc="``x * y`` where a zero in either factor gives exactly 0 (even against inf or nan).",
)
# x / y with 0 / anything = 0: tangent maps divide by coefficients that are 0 at singular points (log, sqrt at 0)
safe_div_p, safe_div = binary(
    "safe_div",
    _safe_div_np,
    ok=FLOAT,
    jvp=(lambda x, y, o, t: safe_div(t, y), lambda x, y, o, t: negative(safe_div(safe_mul(t, o), y))),
    linear_in="first",
    lowering=Lowering(
        f32="(_ZERO_float32 if {0} == 0 else {0} / {1})", f64="(_ZERO_float64 if {0} == 0 else {0} / {1})"
    ),
    export=False,
    doc="``x / y`` where a zero numerator gives exactly 0 (even against a zero or non-finite denominator).",
)


def _max_dx(x, y, o, t):
    # ties split the derivative evenly: d max(x, x) = (tx + ty) / 2
    return t * select(x > y, _one(o), select(x == y, _half(o), _zero(o)))


def _max_dy(x, y, o, t):
    return t * select(y > x, _one(o), select(x == y, _half(o), _zero(o)))


def _min_dx(x, y, o, t):
    return t * select(x < y, _one(o), select(x == y, _half(o), _zero(o)))


def _min_dy(x, y, o, t):
    return t * select(y < x, _one(o), select(x == y, _half(o), _zero(o)))


def _one(o):
    return _wrap(np.ones((), o.dtype))


def _half(o):
    return _wrap(np.full((), 0.5, o.dtype))


def _zero(o):
    return _wrap(np.zeros((), o.dtype))


def _extremum(cmp: str) -> Lowering:
    # floats propagate NaN, as np.maximum/np.minimum do; the result is one of the operands (exact)
    nan_aware = f"({{0}} if ({{0}} {cmp} {{1}} or {{0}} != {{0}}) else {{1}})"
    return Lowering(f"({{0}} if {{0}} {cmp} {{1}} else {{1}})", f32=nan_aware, f64=nan_aware, exact=True)


max_p, maximum = binary(
    "max", np.maximum, public="maximum", ok=REAL_NUMERIC, jvp=(_max_dx, _max_dy), lowering=_extremum(">")
)
min_p, minimum = binary(
    "min", np.minimum, public="minimum", ok=REAL_NUMERIC, jvp=(_min_dx, _min_dy), lowering=_extremum("<")
)
rem_p, remainder = binary(
    "rem",
    np.remainder, public="remainder",
    ok=REAL_NUMERIC,
    jvp=(lambda x, y, o, t: t, lambda x, y, o, t: negative(safe_mul(t, floor_divide(x, y)))),
    no_lowering=NO_TEMPLATE,
    dunder="__mod__",
    rdunder="__rmod__",
)


def _floor_divide_np(x, y):
    out = np.floor_divide(x, y)
    if out.dtype in REAL_FLOAT:
        # the Array API defines x // y as floor(x / y) when exactly one operand is infinite (NumPy gives nan there,
        # and -1.0 for 1 // -inf); x / y already has the right infinity or signed zero
        one_inf = np.isinf(x) != np.isinf(y)
        if one_inf.any():
            out = np.where(one_inf, np.divide(x, y), out)
    return out


floor_divide_p, floor_divide = binary(
    "floor_divide",
    _floor_divide_np,
    ok=REAL_NUMERIC,
    # integers only: numba's // floors and gives 0 for a zero divisor, as NumPy does; a float one would not round
    # as NumPy's does
    lowering=Lowering(integer="({0} // {1})", wraps=True),
    dunder="__floordiv__",
    rdunder="__rfloordiv__",
)
nextafter_p, nextafter = binary("nextafter", np.nextafter, ok=REAL_FLOAT, no_lowering=NO_TEMPLATE)
copysign_p, copysign = binary(
    "copysign",
    np.copysign,
    ok=REAL_FLOAT,
    jvp=(lambda x, y, o, t: safe_mul(t, sign(x) * select(_signbit(y), _neg_one(o), _one(o))), None),
    no_lowering=NO_TEMPLATE,
)


def _neg_one(o):
    return _wrap(np.full((), -1, o.dtype))


def _signbit(y):
    return signbit(y)


signbit_p, signbit = unary(
    "signbit", np.signbit, ok=REAL_FLOAT, out_dtype=lambda d: dtypes.bool_, no_lowering=NO_TEMPLATE
)

eq_p, equal = binary(
    "eq", np.equal, public="equal", ok=ALL, out_bool=True, lowering=Lowering("({0} == {1})"), dunder="__eq__"
)
ne_p, not_equal = binary(
    "ne", np.not_equal, public="not_equal", ok=ALL, out_bool=True, lowering=Lowering("({0} != {1})"),
    dunder="__ne__",
)
lt_p, less = binary("lt", np.less, public="less", ok=REAL_NUMERIC, out_bool=True, lowering=Lowering("({0} < {1})"),
    dunder="__lt__",
)
le_p, less_equal = binary(
    "le", np.less_equal, public="less_equal", ok=REAL_NUMERIC, out_bool=True, lowering=Lowering("({0} <= {1})"),
    dunder="__le__",
)
gt_p, greater = binary(
    "gt", np.greater, public="greater", ok=REAL_NUMERIC, out_bool=True, lowering=Lowering("({0} > {1})"),
    dunder="__gt__",
)
ge_p, greater_equal = binary(
    "ge", np.greater_equal, public="greater_equal", ok=REAL_NUMERIC, out_bool=True, lowering=Lowering("({0} >= {1})"),
    dunder="__ge__",
)
and_p, bitwise_and = binary(
    "and", np.bitwise_and, public="bitwise_and", ok=INT_BOOL, lowering=Lowering("({0} & {1})"),
    dunder="__and__", rdunder="__rand__",
)
or_p, bitwise_or = binary(
    "or", np.bitwise_or, public="bitwise_or", ok=INT_BOOL, lowering=Lowering("({0} | {1})"), dunder="__or__",
    rdunder="__ror__",
)
xor_p, bitwise_xor = binary(
    "xor", np.bitwise_xor, public="bitwise_xor", ok=INT_BOOL, lowering=Lowering("({0} ^ {1})"),
    dunder="__xor__", rdunder="__rxor__",
)


def _shift_left_np(x, y):
    bits = x.dtype.itemsize * 8
    out = np.left_shift(x, np.clip(y, 0, bits - 1).astype(x.dtype))
    return np.where(y >= bits, np.zeros((), x.dtype), out)


def _shift_right_np(x, y):
    bits = x.dtype.itemsize * 8
    out = np.right_shift(x, np.clip(y, 0, bits - 1).astype(x.dtype))
    if x.dtype.kind == "u":  # shifting out every bit leaves 0 (the clip alone would keep the top bit)
        out = np.where(y >= bits, np.zeros((), x.dtype), out)
    return out


shift_left_p, bitwise_left_shift = binary(
    "shift_left", _shift_left_np, ok=INTEGER, public="bitwise_left_shift", no_lowering=NO_TEMPLATE,
    dunder="__lshift__", rdunder="__rlshift__",
)
shift_right_p, bitwise_right_shift = binary(
    "shift_right", _shift_right_np, ok=INTEGER, public="bitwise_right_shift", no_lowering=NO_TEMPLATE,
    dunder="__rshift__", rdunder="__rrshift__",
)


def _complex_np(x, y):
    # set the parts directly: x + 1j * y would turn an infinite y into a nan real part (1j * inf = nan + inf j)
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    out = np.empty(x.shape, dtypes.complex_dtype(x.dtype))
    out.real = x
    out.imag = y
    return out


complex_p = Primitive("complex", linear=True)
complex_p.family = "binary"
complex_p.no_rule["lowering"] = NO_COMPLEX
complex_p.def_impl(_complex_np)


@complex_p.def_abstract_eval
def _complex_abstract(x, y):
    if x.dtype != y.dtype or x.dtype not in (dtypes.float32, dtypes.float64):
        raise DTypeError(f"complex: needs two float32 or two float64 operands, got {x.dtype.name}, {y.dtype.name}")
    return ShapedArray(broadcast_shapes(x.shape, y.shape, op="complex"), dtypes.complex_dtype(x.dtype))


@complex_p.def_jvp
def _complex_jvp(primals, tangents):
    out = complex_p.bind(*primals)
    tx, ty = (instantiate(t) for t in tangents)
    if type(tangents[0]) is Zero and type(tangents[1]) is Zero:
        return out, Zero(aval_of(out))
    return out, _bcast_to(complex_p.bind(tx, ty), out)


@complex_p.def_transpose
def _complex_transpose(ct, x, y):
    # a cotangent c pairs with a tangent as Re(c * t) (JAX's convention, as in imag's transpose): Re(c * i dy)
    # is -Im(c) dy
    return [
        unbroadcast(real(ct), x.aval) if is_undefined(x) else None,
        unbroadcast(negative(imag(ct)), y.aval) if is_undefined(y) else None,
    ]


complex_p.def_vmap(binary_vmap(complex_p))


def complex_from(x, y):
    """``x + 1j * y`` from two real tensors."""
    return complex_p.bind(x, y)


def reciprocal(x):
    return 1.0 / x if not isinstance(x, Tensor) else divide(_wrap(np.ones((), x.dtype)), x)


# --- transposes of the linear binaries ---------------------------------------------------------------------------


@add_p.def_transpose
def _add_transpose(ct, x, y):
    return [
        unbroadcast(ct, x.aval) if is_undefined(x) else None,
        unbroadcast(ct, y.aval) if is_undefined(y) else None,
    ]


@sub_p.def_transpose
def _sub_transpose(ct, x, y):
    return [
        unbroadcast(ct, x.aval) if is_undefined(x) else None,
        unbroadcast(negative(ct), y.aval) if is_undefined(y) else None,
    ]


def _mul_transpose_for(mulfn):
    # coefficients that can be infinite (sqrt, log, ... at 0) enter tangent maps through safe_div, so a plain
    # product is exact here; safe_mul keeps its own semantics under transposition
    def rule(ct, x, y):
        if is_undefined(x) and is_undefined(y):
            raise NotLinearError(
                f"{mulfn.__name__}: both operands depend on the linear input, and a product of two such values is "
                "not linear in it"
            )
        if is_undefined(x):
            return [unbroadcast(mulfn(ct, y), x.aval), None]
        return [None, unbroadcast(mulfn(x, ct), y.aval)]

    return rule


mul_p.def_transpose(_mul_transpose_for(multiply))
safe_mul_p.def_transpose(_mul_transpose_for(safe_mul))


def _div_transpose_for(name):
    def rule(ct, x, y):
        if is_undefined(y):
            raise NotLinearError(f"{name}: the denominator depends on the linear input; {name} is linear in its "
                                 "numerator only")
        return [unbroadcast(safe_div(ct, y), x.aval), None]

    return rule


div_p.def_transpose(_div_transpose_for("div"))
safe_div_p.def_transpose(_div_transpose_for("safe_div"))


# --- integer_pow: x**n for a static integer n, with the exact derivative n x**(n-1) (finite at 0) ------------------

integer_pow_p = Primitive("integer_pow")
integer_pow_p.family = "unary"
integer_pow_p.def_lowering(INTEGER_POW)
integer_pow_p.no_rule["transpose"] = "not linear"


@integer_pow_p.def_impl
def _ipow_impl(x, *, y):
    if x.dtype in LOWP:
        return lowp.compute(lambda w: _ipow_impl(w, y=y), x)
    if y == 2:
        return np.multiply(x, x)
    if y < 0:
        return np.power(x, np.asarray(float(y), x.dtype)) if x.dtype.kind in "fc" else np.power(x, y)
    return np.power(x, np.asarray(y, x.dtype))


@integer_pow_p.def_abstract_eval
def _ipow_abstract(x, *, y):
    _check("integer_pow", x.dtype, NUMERIC)
    if y < 0 and x.dtype not in FLOAT:
        raise ValueError(f"integer_pow: negative exponent {y} on an integer tensor; cast to float first")
    return ShapedArray(x.shape, x.dtype)


@integer_pow_p.def_jvp
def _ipow_jvp(primals, tangents, *, y):
    (x,), (t,) = primals, tangents
    out = integer_pow_p.bind(x, y=y)
    if type(t) is Zero or out.dtype not in FLOAT:
        return out, Zero(aval_of(out))
    if y == 0:
        return out, Zero(aval_of(out))
    if y == 1:
        return out, t
    return out, safe_mul(t, float(y) * integer_pow(x, y - 1))


@integer_pow_p.def_vmap
def _ipow_vmap(args, dims, *, y):
    return integer_pow_p.bind(args[0], y=y), dims[0]


def integer_pow(x, y: int):
    """``x ** y`` for a static Python int ``y``."""
    if _state.trace is None and type(x) is Tensor:
        return _wrap(_ipow_impl(x._value, y=y))
    return integer_pow_p.bind(x, y=y)


# --- stop_gradient: identity whose derivative is zero ----------------------------------------------------------------

stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.family = "unary"
stop_gradient_p.kernel = "copy"
stop_gradient_p.def_lowering(Lowering("{0}", exact=True))
stop_gradient_p.def_impl(lambda x: x)
stop_gradient_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
stop_gradient_p.no_rule["transpose"] = "its tangent is always zero, so no cotangent flows through it"
stop_gradient_p.no_rule["jvp"] = "its derivative is zero by definition"


@stop_gradient_p.def_jvp
def _stop_gradient_jvp(primals, tangents):
    out = stop_gradient_p.bind(primals[0])
    return out, Zero(aval_of(out))


stop_gradient_p.def_vmap(lambda args, dims: (stop_gradient_p.bind(args[0]), dims[0]))


@namespace.public
def stop_gradient(x):
    """The identity, with a zero derivative: gradients do not flow through it.

    >>> fl.grad(lambda x: x * fl.stop_gradient(x))(fl.tensor(3.0))
    Tensor(3., dtype=float32)
    """
    if _state.trace is None:
        return x
    return stop_gradient_p.bind(x)
