"""The op table: one row per registered primitive, with everything the registry tests need to check it.

A row says how to apply its primitive to Tensors (``apply(cfg, *args)``, through ``bind`` with static params from
a drawn configuration ``cfg``), how to draw a configuration (shapes, axes, params) and inputs for a dtype, a NumPy
reference, the dtypes it supports, whether and why it is not differentiable, and in which groups of arguments it
is linear. ``tests/test_op_registry.py`` runs every check over every row; ``tests/test_meta.py`` fails when a
registered primitive has no row.

Inputs are drawn by ``sample(draw, cfg, dtype, smooth)``. With ``smooth=True`` (the float64 derivative tests)
inputs stay away from kinks, ties and discontinuities, so finite differences are meaningful there.
"""

from __future__ import annotations

import importlib
import pathlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special as sps
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
import funclib.primitives
from funclib import dtypes as D
from funclib.core import PRIMITIVES

for _m in pkgutil.iter_modules(funclib.primitives.__path__):
    importlib.import_module(f"funclib.primitives.{_m.name}")

F = D.REAL_FLOATING
C = D.COMPLEX
FC = D.FLOATING
I = D.INTEGER
B = D.BOOL
REAL = I + F
NUM = D.NUMERIC
ALL = D.ALL


# ---------------------------------------------------------------------------------------------------------------
# Rows


@dataclass(frozen=True, eq=False)
class Row:
    """How to test one primitive. See the module docstring."""

    name: str
    apply: Callable[..., Any]
    config: Callable[[np.dtype], st.SearchStrategy]
    sample: Callable[..., list]
    ref: Callable[..., Any] | None
    dtypes: tuple
    nondiff: str = ""  # why the primitive has no derivative to check ("" = differentiable in its float inputs)
    linear: Any = ()  # groups of argument positions it is jointly linear in, or "all"
    order: int = 2  # highest derivative order checked
    tol: float = 1.0  # multiplier on the per-dtype eager tolerances
    grad_tol: tuple[float, float] = (1e-5, 1e-5)  # (rtol, atol) of the derivative checks
    fd_ref: Callable[..., Any] | None = None  # fd_ref(cfg, args) -> function whose finite differences are J
    upcast: bool = True  # the reference sees float inputs as float64 (complex128)
    check: Callable[..., None] | None = None  # a property check for rows without a reference
    staged: bool = True  # make_jaxpr of apply records an equation of this primitive

    def __repr__(self) -> str:
        return self.name

    def linear_groups(self, n_args: int) -> tuple[tuple[int, ...], ...]:
        return (tuple(range(n_args)),) if self.linear == "all" else tuple(self.linear)


def bind(name: str, *args, **params):
    return PRIMITIVES[name].bind(*args, **params)


# ---------------------------------------------------------------------------------------------------------------
# Drawing inputs


@dataclass(frozen=True)
class Dom:
    """Where values are drawn: float intervals (also the real parts of complexes), imaginary-part intervals,
    integer ranges, and variants for derivative tests (``smooth``) and for eager tests (``special``, ``discrete``)."""

    real: tuple = ((-2.0, 2.0),)
    smooth: tuple | None = None
    imag: tuple = ((-1.0, 1.0),)
    ints: tuple = ((-5, 5),)
    special: bool = False  # mix NaN, +-inf and +-0 into eager float samples
    discrete: bool = False  # eager float samples from a small set, so ties and equalities happen


_DISCRETE = (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0)


def _floats(draw, shape, intervals, special=False, discrete=False) -> np.ndarray:
    if discrete:
        el = st.sampled_from([v for v in _DISCRETE if any(a <= v <= b for a, b in intervals)] or [intervals[0][0]])
    else:
        el = st.one_of(*[st.floats(a, b, allow_nan=False, allow_infinity=False) for a, b in intervals])
    if special:
        el = el | st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0])
    return draw(hnp.arrays(np.float64, shape, elements=el))


def values(draw, dtype, shape, dom: Dom = Dom(), smooth: bool = False) -> np.ndarray:
    """An array of ``dtype`` and ``shape`` drawn from ``dom``."""
    d = np.dtype(dtype)
    shape = tuple(shape)
    if d == D.bool_:
        return draw(hnp.arrays(np.bool_, shape))
    if d in I:
        info = np.iinfo(d)
        ranges = [(max(a, int(info.min)), min(b, int(info.max))) for a, b in dom.ints]
        ranges = [(a, b) for a, b in ranges if a <= b] or [(0, min(3, int(info.max)))]
        el = st.one_of(*[st.integers(a, b) for a, b in ranges])
        return draw(hnp.arrays(d, shape, elements=el))
    intervals = (dom.smooth or dom.real) if smooth else dom.real
    special = dom.special and not smooth
    discrete = dom.discrete and not smooth
    re = _floats(draw, shape, intervals, special, discrete)
    if d in C:
        out = np.empty(shape, d)
        out.real, out.imag = re, _floats(draw, shape, dom.imag, special, discrete)
        return out
    return re.astype(d)


def distinct(draw, dtype, shape, spacing: float = 0.25) -> np.ndarray:
    """Values at least ``spacing`` apart (no ties anywhere), centred on 0."""
    n = int(np.prod(shape, dtype=np.int64))
    perm = np.asarray(draw(st.permutations(range(n))), np.float64)
    jitter = draw(hnp.arrays(np.float64, (n,), elements=st.floats(0.0, 0.5)))
    v = (perm + jitter) * (2 * spacing) - spacing * n
    return v.reshape(shape).astype(dtype)


def ints(draw, dtype, shape, lo: int, hi: int) -> np.ndarray:
    return draw(hnp.arrays(np.dtype(dtype), tuple(shape), elements=st.integers(lo, hi)))


SHAPES = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)
SHAPES_1 = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)
PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3).map(
    lambda r: r.input_shapes
)
TRIPLES = hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=1, max_side=3).map(
    lambda r: r.input_shapes
)


def _cfg(**strategies) -> Callable[[np.dtype], st.SearchStrategy]:
    return lambda dtype: st.fixed_dictionaries(strategies)


@st.composite
def _axes_subset(draw, shape_st=SHAPES, nonempty=False):
    shape = draw(shape_st)
    axes = (
        draw(st.lists(st.sampled_from(range(len(shape))), unique=True, min_size=int(nonempty and len(shape) > 0)))
        if shape
        else []
    )
    return {"shape": shape, "axes": tuple(sorted(axes))}


def _up(a: np.ndarray) -> np.ndarray:
    if a.dtype in C:
        return a.astype(np.complex128)
    if a.dtype in F:
        return a.astype(np.float64)
    return a


# ---------------------------------------------------------------------------------------------------------------
# Elementwise families

ROWS: list[Row] = []


def add_row(row: Row) -> Row:
    ROWS.append(row)
    return row


def unary(
    name,
    ref,
    dtypes,
    dom: Dom = Dom(),
    *,
    params=None,
    nondiff="",
    linear=(),
    tol=1.0,
    upcast=True,
    config=None,
    order=2,
):
    def apply(cfg, x):
        return bind(name, x, **(params(cfg) if callable(params) else params or {}))

    def sample(draw, cfg, dtype, smooth):
        return [values(draw, dtype, cfg["shape"], dom, smooth)]

    return add_row(
        Row(
            name,
            apply,
            config or _cfg(shape=SHAPES),
            sample,
            lambda cfg, x: ref(cfg, x) if config else ref(x),
            tuple(dtypes),
            nondiff=nondiff,
            linear=linear,
            tol=tol,
            upcast=upcast,
            order=order,
        )
    )


def binary(name, ref, dtypes, dx: Dom = Dom(), dy: Dom = Dom(), *, nondiff="", linear=(), tol=1.0, upcast=True):
    def apply(cfg, x, y):
        return bind(name, x, y)

    def sample(draw, cfg, dtype, smooth):
        sx, sy = cfg["shapes"]
        return [values(draw, dtype, sx, dx, smooth), values(draw, dtype, sy, dy, smooth)]

    return add_row(
        Row(
            name,
            apply,
            _cfg(shapes=PAIRS),
            sample,
            lambda cfg, x, y: ref(x, y),
            tuple(dtypes),
            nondiff=nondiff,
            linear=linear,
            tol=tol,
            upcast=upcast,
        )
    )


POS = Dom(real=((0.1, 3.0),), imag=((-1.0, 1.0),))
UNIT = Dom(real=((-0.9, 0.9),), imag=((-0.5, 0.5),))
AWAY0 = ((-3.0, -0.2), (0.2, 3.0))
PIECEWISE = "piecewise constant: the derivative is zero almost everywhere"
BOOL_OUT = "its output is integer or boolean, so its tangent is always zero"

unary("exp", np.exp, FC)
unary("exp2", np.exp2, FC)
unary("log", np.log, FC, POS)
unary("log1p", np.log1p, FC, Dom(real=((-0.8, 2.0),), imag=((-0.5, 0.5),)))
unary("expm1", np.expm1, FC)
unary("sin", np.sin, FC, Dom(real=((-3.0, 3.0),)))
unary("cos", np.cos, FC, Dom(real=((-3.0, 3.0),)))
unary("tan", np.tan, FC, Dom(real=((-1.2, 1.2),), imag=((-0.5, 0.5),)))
unary("asin", np.arcsin, FC, UNIT)
unary("acos", np.arccos, FC, UNIT)
unary("atan", np.arctan, FC, Dom(real=((-3.0, 3.0),), imag=((-0.5, 0.5),)))
unary("sinh", np.sinh, FC)
unary("cosh", np.cosh, FC)
unary("tanh", np.tanh, FC)
unary("asinh", np.arcsinh, FC, Dom(real=((-3.0, 3.0),), imag=((-0.5, 0.5),)))
unary("acosh", np.arccosh, FC, Dom(real=((1.1, 3.0),), imag=((-0.5, 0.5),)))
unary("atanh", np.arctanh, FC, UNIT)
unary("sqrt", np.sqrt, FC, POS)
unary("cbrt", np.cbrt, F, Dom(real=((-3.0, 3.0),), smooth=AWAY0))
unary("abs", np.abs, NUM, Dom(real=((-3.0, 3.0),), smooth=AWAY0, imag=AWAY0))
unary("logistic", sps.expit, F, Dom(real=((-6.0, 6.0),)))
unary("erf", sps.erf, F)
unary("erf_inv", sps.erfinv, F, UNIT)
unary("lgamma", sps.gammaln, F, Dom(real=((0.2, 4.0),)), tol=4.0)
unary(
    "polygamma",
    lambda cfg, x: sps.polygamma(cfg["n"], x),
    F,
    Dom(real=((0.5, 4.0),)),
    params=lambda cfg: {"n": cfg["n"]},
    config=_cfg(shape=SHAPES, n=st.integers(0, 2)),
    tol=4.0,
)
unary("neg", np.negative, NUM, linear="all")
unary("sign", np.sign, NUM, Dom(real=((-2.0, 2.0),), discrete=True), nondiff=PIECEWISE)
unary("floor", np.floor, F, Dom(real=((-3.0, 3.0),), discrete=True), nondiff=PIECEWISE)
unary("ceil", np.ceil, F, Dom(real=((-3.0, 3.0),), discrete=True), nondiff=PIECEWISE)
unary("round", np.round, F, Dom(real=((-3.0, 3.0),), discrete=True), nondiff=PIECEWISE)
unary("trunc", np.trunc, F, Dom(real=((-3.0, 3.0),), discrete=True), nondiff=PIECEWISE)
unary("is_finite", np.isfinite, FC, Dom(special=True), nondiff=BOOL_OUT)
unary("isnan", np.isnan, FC, Dom(special=True), nondiff=BOOL_OUT)
unary("isinf", np.isinf, FC, Dom(special=True), nondiff=BOOL_OUT)
unary("signbit", np.signbit, F, Dom(special=True), nondiff=BOOL_OUT)
unary("not", np.invert, I + B, nondiff=BOOL_OUT)
unary("real", np.real, C, linear="all")
unary("imag", np.imag, C, linear="all")
unary("conj", np.conj, C, linear="all")
unary("stop_gradient", lambda x: x, ALL, nondiff="the identity with a zero derivative by definition")


@st.composite
def _ipow_cfg(draw, dtype):
    ys = [0, 1, 2, 3] + ([-1, -2] if dtype in FC else [])
    return {"shape": draw(SHAPES), "y": draw(st.sampled_from(ys))}


def _ipow_ref(cfg, x):
    y = cfg["y"]
    if y < 0:
        return 1.0 / x ** (-y)
    return x**y if x.dtype.kind in "fc" else np.power(x, np.asarray(y, x.dtype))


unary(
    "integer_pow",
    _ipow_ref,
    NUM,
    Dom(real=AWAY0, ints=((-3, 3),)),
    params=lambda cfg: {"y": cfg["y"]},
    config=_ipow_cfg,
    tol=2.0,
)

binary("add", np.add, NUM, linear="all")
binary("sub", np.subtract, NUM, linear="all")
binary("mul", np.multiply, NUM, linear=((0,), (1,)))
binary("div", np.divide, FC, dy=Dom(real=((-2.0, -0.5), (0.5, 2.0)), imag=((0.5, 1.0),)), linear=((0,),))


def _safe_mul_ref(x, y):
    with np.errstate(invalid="ignore"):
        return np.where((x == 0) | (y == 0), 0, x * y)


binary("safe_mul", _safe_mul_ref, FC, Dom(real=((-2.0, 2.0),), special=True), Dom(discrete=True), linear=((0,), (1,)))
binary("pow", np.power, NUM, Dom(real=((0.2, 2.0),), ints=((0, 3),)), Dom(ints=((0, 3),)), tol=4.0)
# the two operands are drawn from interleaved intervals, so smooth samples never tie
_MAX_X = Dom(real=((-2.0, 2.0),), smooth=((-2.0, -1.1), (0.1, 1.0)), discrete=True)
_MAX_Y = Dom(real=((-2.0, 2.0),), smooth=((-1.0, -0.1), (1.1, 2.0)), discrete=True)
binary("max", np.maximum, REAL, _MAX_X, _MAX_Y)
binary("min", np.minimum, REAL, _MAX_X, _MAX_Y)
binary("atan2", np.arctan2, F, Dom(real=AWAY0), Dom(real=AWAY0))
_NONZERO = Dom(real=((-2.0, -0.5), (0.5, 2.0)), smooth=((1.5, 2.0),), ints=((-5, -1), (1, 5)))
# smooth remainders stay inside one branch: 0 < x / y < 1
binary("rem", np.remainder, REAL, Dom(real=((-3.0, 3.0),), smooth=((0.1, 1.4),)), _NONZERO)
binary("floor_divide", np.floor_divide, REAL, Dom(real=((-3.0, 3.0),)), _NONZERO, nondiff=PIECEWISE)
binary("nextafter", np.nextafter, F, Dom(discrete=True), Dom(discrete=True), nondiff=PIECEWISE, upcast=False)
binary("copysign", np.copysign, F, Dom(real=AWAY0), Dom(real=AWAY0, special=True))
for _n, _f in (("eq", np.equal), ("ne", np.not_equal)):
    binary(_n, _f, ALL, Dom(discrete=True), Dom(discrete=True), nondiff=BOOL_OUT)
for _n, _f in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
    binary(_n, _f, REAL, Dom(discrete=True), Dom(discrete=True), nondiff=BOOL_OUT)
for _n, _f in (("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor)):
    binary(_n, _f, I + B, nondiff=BOOL_OUT)
_SHIFT = Dom(ints=((0, 9),))
binary("shift_left", np.left_shift, I, Dom(ints=((-20, 20),)), _SHIFT, nondiff=BOOL_OUT)
binary("shift_right", np.right_shift, I, Dom(ints=((-100, 100), (200, 250))), _SHIFT, nondiff=BOOL_OUT)
binary("complex", lambda x, y: x + 1j * y, (D.float32, D.float64), linear="all")


def _safe_div_ref(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0, x / np.where(x == 0, 1, y))


binary(
    "safe_div",
    _safe_div_ref,
    FC,
    Dom(real=((-2.0, 2.0),), discrete=True),
    Dom(real=((-2.0, -0.5), (0.5, 2.0)), special=True),
    linear=((0,),),
)


def _select_sample(draw, cfg, dtype, smooth):
    sp, sx, sy = cfg["shapes"]
    return [draw(hnp.arrays(np.bool_, sp)), values(draw, dtype, sx), values(draw, dtype, sy)]


add_row(
    Row(
        "select",
        lambda cfg, p, x, y: bind("select", p, x, y),
        _cfg(shapes=TRIPLES),
        _select_sample,
        lambda cfg, p, x, y: np.where(p, x, y),
        ALL,
        linear=((1, 2),),
    )
)

# each dtype converts to a different one; float64 -> complex128 exercises the real-to-complex transpose
_CONVERT = {
    D.bool_: D.int32,
    D.int8: D.float32,
    D.int16: D.int64,
    D.int32: D.int8,
    D.int64: D.float64,
    D.uint8: D.int16,
    D.uint16: D.bool_,
    D.uint32: D.uint64,
    D.uint64: D.float32,
    D.float16: D.float32,
    D.bfloat16: D.float64,
    D.float32: D.float16,
    D.float64: D.complex128,
    D.complex64: D.complex128,
    D.complex128: D.complex64,
}
add_row(
    Row(
        "convert_element_type",
        lambda cfg, x: bind("convert_element_type", x, new_dtype=cfg["to"]),
        lambda dtype: st.fixed_dictionaries({"shape": SHAPES, "to": st.just(_CONVERT[dtype])}),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["shape"], Dom(ints=((0, 127),)))],
        lambda cfg, x: x.astype(cfg["to"]),
        ALL,
        linear="all",
    )
)


# ---------------------------------------------------------------------------------------------------------------
# dot_general: einsum patterns whose output order is batch, lhs free, rhs free

_DOT_SPECS = ("k,k->", "ik,kj->ij", "i,j->ij", "bik,bkj->bij", "ibk,kb->bi", "akl,lkc->ac", "ik,jk->ij")


@st.composite
def _dot_cfg(draw, dtype):
    spec = draw(st.sampled_from(_DOT_SPECS))
    ins, out = spec.split("->")
    lhs, rhs = ins.split(",")
    size = {c: draw(st.integers(1, 3)) for c in sorted(set(lhs + rhs))}
    batch = [c for c in out if c in lhs and c in rhs]
    contract = [c for c in lhs if c in rhs and c not in out]
    dn = (
        (tuple(lhs.index(c) for c in contract), tuple(rhs.index(c) for c in contract)),
        (tuple(lhs.index(c) for c in batch), tuple(rhs.index(c) for c in batch)),
    )
    return {"spec": spec, "dn": dn, "shapes": (tuple(size[c] for c in lhs), tuple(size[c] for c in rhs))}


add_row(
    Row(
        "dot_general",
        lambda cfg, x, y: bind("dot_general", x, y, dimension_numbers=cfg["dn"]),
        _dot_cfg,
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, s, Dom(ints=((-3, 3),))) for s in cfg["shapes"]],
        lambda cfg, x, y: np.einsum(cfg["spec"], x, y),
        NUM,
        linear=((0,), (1,)),
        tol=10.0,
    )
)


# ---------------------------------------------------------------------------------------------------------------
# Reductions, argmax/argmin, cumsum


def reduction(name, ref, dtypes, dom=Dom(), *, nondiff="", linear=(), nonempty=False, smooth_distinct=False, tol=10.0):
    def sample(draw, cfg, dtype, smooth):
        if smooth and smooth_distinct and dtype in F:
            return [distinct(draw, dtype, cfg["shape"])]
        return [values(draw, dtype, cfg["shape"], dom, smooth)]

    def cfg(dtype):
        return _axes_subset(nonempty=nonempty)

    def r(c, x):
        out = ref(x, c["axes"])
        return np.asarray(out).astype(x.dtype) if x.dtype in I + B else out

    return add_row(
        Row(
            name,
            lambda c, x: bind(name, x, axes=c["axes"]),
            cfg,
            sample,
            r,
            tuple(dtypes),
            nondiff=nondiff,
            linear=linear,
            tol=tol,
        )
    )


def _sum_ref(x, axes):
    return np.sum(x, axis=axes, dtype=x.dtype if x.dtype in I else None)


def _prod_ref(x, axes):
    return np.prod(x, axis=axes, dtype=x.dtype if x.dtype in I else None)


reduction("reduce_sum", _sum_ref, NUM, linear="all")
reduction("reduce_max", lambda x, a: np.max(x, axis=a), REAL + B, Dom(discrete=True), smooth_distinct=True)
reduction("reduce_min", lambda x, a: np.min(x, axis=a), REAL + B, Dom(discrete=True), smooth_distinct=True)
# zeros are exact in products (a polynomial), so they stay in smooth samples and exercise the zero branches
reduction(
    "reduce_prod",
    _prod_ref,
    NUM,
    Dom(real=((0.5, 1.5), (0.0, 0.0)), smooth=((0.5, 1.5), (0.0, 0.0), (-1.5, -0.5)), ints=((-2, 2),)),
)
reduction("reduce_and", lambda x, a: np.all(x, axis=a), B, nondiff="boolean output")
reduction("reduce_or", lambda x, a: np.any(x, axis=a), B, nondiff="boolean output")


@st.composite
def _axis_cfg(draw, extra=None):
    shape = draw(SHAPES_1)
    out = {"shape": shape, "axis": draw(st.integers(0, len(shape) - 1))}
    for k, s in (extra or {}).items():
        out[k] = draw(s)
    return out


for _n, _f in (("argmax", np.argmax), ("argmin", np.argmin)):
    add_row(
        Row(
            _n,
            lambda cfg, x, _n=_n: bind(_n, x, axis=cfg["axis"], index_dtype=cfg["index_dtype"]),
            lambda dtype: _axis_cfg({"index_dtype": st.sampled_from((D.int32, D.int64))}),
            lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["shape"], Dom(discrete=True))],
            lambda cfg, x, _f=_f: _f(x, axis=cfg["axis"]).astype(cfg["index_dtype"]),
            REAL,
            nondiff="integer output",
        )
    )


def _cumsum_ref(cfg, x):
    ax, kw = cfg["axis"], {"dtype": x.dtype} if x.dtype in I else {}
    if cfg["reverse"]:
        return np.flip(np.cumsum(np.flip(x, ax), axis=ax, **kw), ax)
    return np.cumsum(x, axis=ax, **kw)


add_row(
    Row(
        "cumsum",
        lambda cfg, x: bind("cumsum", x, axis=cfg["axis"], reverse=cfg["reverse"]),
        lambda dtype: _axis_cfg({"reverse": st.booleans()}),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["shape"])],
        _cumsum_ref,
        NUM,
        linear="all",
        tol=10.0,
    )
)


# ---------------------------------------------------------------------------------------------------------------
# Shape primitives


def shape_row(name, apply, config, ref, n_args=1, dtypes=ALL, **kw):
    def sample(draw, cfg, dtype, smooth):
        shapes = cfg["shapes"] if "shapes" in cfg else (cfg["shape"],)
        return [values(draw, dtype, s) for s in shapes[:n_args]]

    return add_row(Row(name, apply, lambda dtype: config, sample, ref, tuple(dtypes), linear="all", **kw))


@st.composite
def _bid_cfg(draw):
    s = draw(st.lists(st.integers(1, 3), max_size=2).map(tuple))
    rank = len(s) + draw(st.integers(0, 2))
    bdims = tuple(sorted(draw(st.permutations(range(rank)))[: len(s)]))
    out = [draw(st.integers(1, 3)) for _ in range(rank)]
    for src, dst in enumerate(bdims):
        out[dst] = s[src] if s[src] != 1 else draw(st.integers(1, 3))
    return {"shape": s, "out": tuple(out), "bdims": bdims}


def _bid_ref(cfg, x):
    new = tuple(d for d in range(len(cfg["out"])) if d not in cfg["bdims"])
    return np.broadcast_to(np.expand_dims(x, new), cfg["out"])


shape_row(
    "broadcast_in_dim",
    lambda cfg, x: bind("broadcast_in_dim", x, shape=cfg["out"], broadcast_dimensions=cfg["bdims"]),
    _bid_cfg(),
    _bid_ref,
)


@st.composite
def _reshape_cfg(draw):
    s = draw(SHAPES)
    n = int(np.prod(s, dtype=np.int64))
    return {"shape": s, "new": draw(st.sampled_from([(n,), (1, n), s[::-1], s + (1,), (1,) + s]))}


shape_row(
    "reshape",
    lambda cfg, x: bind("reshape", x, new_sizes=cfg["new"]),
    _reshape_cfg(),
    lambda cfg, x: np.reshape(x, cfg["new"]),
)


@st.composite
def _perm_cfg(draw):
    s = draw(SHAPES)
    return {"shape": s, "perm": tuple(draw(st.permutations(range(len(s)))))}


shape_row(
    "transpose",
    lambda cfg, x: bind("transpose", x, permutation=cfg["perm"]),
    _perm_cfg(),
    lambda cfg, x: np.transpose(x, cfg["perm"]),
)
shape_row(
    "rev",
    lambda cfg, x: bind("rev", x, dimensions=cfg["axes"]),
    _axes_subset(),
    lambda cfg, x: np.flip(x, cfg["axes"]) if cfg["axes"] else x,
)


@st.composite
def _concat_cfg(draw):
    base = draw(SHAPES_1)
    d = draw(st.integers(0, len(base) - 1))
    k = draw(st.integers(1, 3))
    shapes = tuple(base[:d] + (draw(st.integers(1, 3)),) + base[d + 1 :] for _ in range(k))
    return {"shapes": shapes, "dim": d}


def _concat_sample(draw, cfg, dtype, smooth):
    return [values(draw, dtype, s) for s in cfg["shapes"]]


add_row(
    Row(
        "concatenate",
        lambda cfg, *xs: bind("concatenate", *xs, dimension=cfg["dim"]),
        lambda dtype: _concat_cfg(),
        _concat_sample,
        lambda cfg, *xs: np.concatenate(xs, cfg["dim"]),
        ALL,
        linear="all",
    )
)


@st.composite
def _pad_cfg(draw):
    shape = draw(st.lists(st.integers(1, 3), max_size=2).map(tuple))
    config = []
    for n in shape:
        interior = draw(st.integers(0, 2))
        inner = n + (n - 1) * interior
        lo = draw(st.integers(-1, 2))
        hi = draw(st.integers(max(-1, -inner - lo), 2))
        config.append((lo, hi, interior))
    return {"shape": shape, "config": tuple(config)}


def _pad_ref(cfg, x, v):
    out = x
    for ax, (lo, hi, interior) in enumerate(cfg["config"]):
        n = out.shape[ax]
        if interior and n > 1:
            shape = list(out.shape)
            shape[ax] = n + (n - 1) * interior
            spread = np.full(shape, v, out.dtype)
            idx = [slice(None)] * out.ndim
            idx[ax] = slice(None, None, interior + 1)
            spread[tuple(idx)] = out
            out = spread
        parts = []
        for amount in (lo, hi):
            shape = list(out.shape)
            shape[ax] = max(amount, 0)
            parts.append(np.full(shape, v, out.dtype))
        out = np.concatenate([parts[0], out, parts[1]], axis=ax)
        idx = [slice(None)] * out.ndim
        idx[ax] = slice(-min(lo, 0), out.shape[ax] + min(hi, 0))
        out = out[tuple(idx)]
    return out


add_row(
    Row(
        "pad",
        lambda cfg, x, v: bind("pad", x, v, padding_config=cfg["config"]),
        lambda dtype: _pad_cfg(),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["shape"]), values(draw, dtype, ())],
        _pad_ref,
        ALL,
        linear="all",
    )
)


@st.composite
def _slice_cfg(draw):
    shape = draw(SHAPES)
    start, limit, strides = [], [], []
    for n in shape:
        s = draw(st.integers(0, n))
        start.append(s)
        limit.append(draw(st.integers(s, n)))
        strides.append(draw(st.integers(1, 3)))
    return {"shape": shape, "start": tuple(start), "limit": tuple(limit), "strides": tuple(strides)}


shape_row(
    "slice",
    lambda cfg, x: bind("slice", x, start_indices=cfg["start"], limit_indices=cfg["limit"], strides=cfg["strides"]),
    _slice_cfg(),
    lambda cfg, x: x[tuple(slice(a, b, c) for a, b, c in zip(cfg["start"], cfg["limit"], cfg["strides"]))],
)


@st.composite
def _dyn_cfg(draw):
    shape = draw(SHAPES)
    sizes = tuple(draw(st.integers(1, n)) for n in shape)
    return {"shape": shape, "sizes": sizes, "index_dtype": draw(st.sampled_from((D.int32, D.int64)))}


def _starts(draw, cfg):
    return [ints(draw, cfg["index_dtype"], (), -2, n + 1) for n in cfg["shape"]]


def _clamp(shape, starts, sizes):
    return tuple(int(min(max(int(s), 0), n - z)) for n, s, z in zip(shape, starts, sizes))


def _ds_ref(cfg, x, *starts):
    st_ = _clamp(x.shape, starts, cfg["sizes"])
    return x[tuple(slice(s, s + z) for s, z in zip(st_, cfg["sizes"]))]


add_row(
    Row(
        "dynamic_slice",
        lambda cfg, x, *s: bind("dynamic_slice", x, *s, slice_sizes=cfg["sizes"]),
        lambda dtype: _dyn_cfg(),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["shape"])] + _starts(draw, cfg),
        _ds_ref,
        ALL,
        linear=((0,),),
    )
)


def _dus_ref(cfg, x, u, *starts):
    out = np.array(x, copy=True)
    st_ = _clamp(x.shape, starts, u.shape)
    out[tuple(slice(s, s + z) for s, z in zip(st_, u.shape))] = u
    return out


add_row(
    Row(
        "dynamic_update_slice",
        lambda cfg, x, u, *s: bind("dynamic_update_slice", x, u, *s),
        lambda dtype: _dyn_cfg(),
        lambda draw, cfg, dtype, smooth: (
            [values(draw, dtype, cfg["shape"]), values(draw, dtype, cfg["sizes"])] + _starts(draw, cfg)
        ),
        _dus_ref,
        ALL,
        linear=((0, 1),),
    )
)


def _iota_ref(cfg):
    shape, dim = cfg["shape"], cfg["dim"]
    r = np.arange(shape[dim]).reshape([-1 if i == dim else 1 for i in range(len(shape))])
    return np.broadcast_to(r, shape).astype(cfg["dtype"])


@st.composite
def _iota_cfg(draw, dtype):
    shape = draw(SHAPES_1)
    return {"shape": shape, "dim": draw(st.integers(0, len(shape) - 1)), "dtype": dtype}


add_row(
    Row(
        "iota",
        lambda cfg: bind("iota", dtype=cfg["dtype"], shape=cfg["shape"], dimension=cfg["dim"]),
        _iota_cfg,
        lambda draw, cfg, dtype, smooth: [],
        _iota_ref,
        I + F,
        nondiff="it has no inputs",
    )
)


# ---------------------------------------------------------------------------------------------------------------
# gather / scatter / sort


@st.composite
def _gather_cfg(draw, unique_room=False):
    shape = draw(SHAPES_1)
    axes = tuple(sorted(draw(st.lists(st.sampled_from(range(len(shape))), min_size=1, unique=True))))
    room = int(np.prod([shape[a] for a in axes]))
    batch = draw(st.lists(st.integers(1, 3), max_size=2).map(tuple))
    if unique_room:  # scatter: enough distinct index tuples for every update
        while int(np.prod(batch, dtype=np.int64)) > room:
            batch = batch[1:] if len(batch) > 1 else (room,)
    rest = tuple(n for i, n in enumerate(shape) if i not in axes)
    return {
        "shape": shape,
        "axes": axes,
        "batch": batch,
        "rest": rest,
        "index_dtype": draw(st.sampled_from((D.int32, D.int64))),
    }


def _indices(draw, cfg, unique=False):
    sizes = [cfg["shape"][a] for a in cfg["axes"]]
    n = int(np.prod(cfg["batch"], dtype=np.int64))
    if unique:
        flat = draw(st.permutations(range(int(np.prod(sizes)))))[:n]
    else:
        flat = draw(st.lists(st.integers(0, int(np.prod(sizes)) - 1), min_size=n, max_size=n))
    tuples = np.array([np.unravel_index(f, sizes) for f in flat], dtype=np.int64).reshape(cfg["batch"] + (len(sizes),))
    return tuples.astype(cfg["index_dtype"])


def _gather_ref(cfg, x, idx):
    axes = cfg["axes"]
    out = np.empty(cfg["batch"] + cfg["rest"], x.dtype)
    for b in np.ndindex(*cfg["batch"]):
        key = tuple(int(idx[b][axes.index(a)]) if a in axes else slice(None) for a in range(x.ndim))
        out[b] = x[key]
    return out


def _scatter_ref_for(combine):
    def ref(cfg, x, idx, upd):
        out = np.array(x, copy=True)
        axes = cfg["axes"]
        for b in np.ndindex(*cfg["batch"]):
            key = tuple(int(idx[b][axes.index(a)]) if a in axes else slice(None) for a in range(x.ndim))
            out[key] = upd[b] if combine is None else combine(out[key], upd[b])
        return out

    return ref


add_row(
    Row(
        "gather",
        lambda cfg, x, i: bind("gather", x, i, axes=cfg["axes"]),
        lambda dtype: _gather_cfg(),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["shape"]), _indices(draw, cfg)],
        _gather_ref,
        ALL,
        linear=((0,),),
    )
)
for _n, _add, _dt in (("scatter_add", True, NUM), ("scatter", False, ALL)):
    add_row(
        Row(
            _n,
            lambda cfg, x, i, u, _n=_n: bind(_n, x, i, u, axes=cfg["axes"]),
            lambda dtype, _add=_add: _gather_cfg(unique_room=not _add),
            # repeated indices where they are well defined; the transpose of scatter assumes unique ones (as XLA)
            lambda draw, cfg, dtype, smooth, _add=_add: [
                values(draw, dtype, cfg["shape"]),
                _indices(draw, cfg, unique=smooth and not _add),
                values(draw, dtype, cfg["batch"] + cfg["rest"]),
            ],
            _scatter_ref_for(np.add if _add else None),
            _dt,
            linear=((0, 2),),
            tol=4.0,
        )
    )

add_row(
    Row(
        "scatter_mul",
        lambda cfg, x, i, u: bind("scatter_mul", x, i, u, axes=cfg["axes"]),
        lambda dtype: _gather_cfg(),
        # repeated indices always: every update to an element multiplies it; zeros among them are drawn too
        lambda draw, cfg, dtype, smooth: [
            values(draw, dtype, cfg["shape"]),
            _indices(draw, cfg),
            values(draw, dtype, cfg["batch"] + cfg["rest"], Dom(discrete=True)),
        ],
        _scatter_ref_for(np.multiply),
        NUM,
        linear=((0,),),
        tol=4.0,
    )
)


def _extremum_sample(draw, cfg, dtype, smooth):
    """Operand and updates; in derivative tests all distinct (no ties between any two of them)."""
    xs, us = cfg["shape"], cfg["batch"] + cfg["rest"]
    idx = _indices(draw, cfg)
    if not smooth:
        return [values(draw, dtype, xs, Dom(discrete=True)), idx, values(draw, dtype, us, Dom(discrete=True))]
    n = int(np.prod(xs, dtype=np.int64))
    both = distinct(draw, dtype, (n + int(np.prod(us, dtype=np.int64)),))
    return [both[:n].reshape(xs), idx, both[n:].reshape(us)]


for _n, _fn in (("scatter_max", np.maximum), ("scatter_min", np.minimum)):
    add_row(
        Row(
            _n,
            lambda cfg, x, i, u, _n=_n: bind(_n, x, i, u, axes=cfg["axes"]),
            lambda dtype: _gather_cfg(),
            _extremum_sample,
            _scatter_ref_for(_fn),
            REAL,
        )
    )


@st.composite
def _sort_cfg(draw):
    shape = draw(SHAPES_1)
    n_ops = draw(st.integers(1, 2))
    return {
        "shape": shape,
        "dim": draw(st.integers(0, len(shape) - 1)),
        "n": n_ops,
        "keys": draw(st.integers(1, n_ops)),
    }


def _sort_sample(draw, cfg, dtype, smooth):
    first = distinct(draw, dtype, cfg["shape"]) if smooth else values(draw, dtype, cfg["shape"], Dom(discrete=True))
    return [first] + [values(draw, dtype, cfg["shape"], Dom(discrete=True)) for _ in range(cfg["n"] - 1)]


def _sort_ref(cfg, *ops):
    dim, k = cfg["dim"], cfg["keys"]
    moved = [np.moveaxis(o, dim, -1) for o in ops]
    outs = [np.empty_like(m) for m in moved]
    for b in np.ndindex(*moved[0].shape[:-1]):
        order = sorted(range(moved[0].shape[-1]), key=lambda i: tuple(m[b][i] for m in moved[:k]))
        for o, m in zip(outs, moved):
            o[b] = m[b][order]
    return [np.moveaxis(o, -1, dim) for o in outs]


add_row(
    Row(
        "sort",
        lambda cfg, *ops: bind("sort", *ops, dimension=cfg["dim"], num_keys=cfg["keys"]),
        lambda dtype: _sort_cfg(),
        _sort_sample,
        _sort_ref,
        REAL + B,
    )
)


# ---------------------------------------------------------------------------------------------------------------
# Random numbers


def _u32(draw, shape) -> np.ndarray:
    return ints(draw, D.uint32, shape, 0, 2**32 - 1)


_ROT = (13, 15, 26, 6, 17, 29, 16, 24)


def _threefry_ref(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds (Salmon et al., SC'11), in NumPy uint32 arithmetic."""
    k0, k1, x0, x1 = np.broadcast_arrays(*(np.asarray(a, np.uint32) for a in (k0, k1, x0, x1)))
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    with np.errstate(over="ignore"):
        x0, x1 = x0 + ks[0], x1 + ks[1]
        for i in range(20):
            r = np.uint32(_ROT[i % 8])
            x0 = x0 + x1
            x1 = ((x1 << r) | (x1 >> (np.uint32(32) - r))) ^ x0
            if i % 4 == 3:
                s = i // 4 + 1
                x0 = x0 + ks[s % 3]
                x1 = x1 + ks[(s + 1) % 3] + np.uint32(s)
    return [x0, x1]


QUADS = hnp.mutually_broadcastable_shapes(num_shapes=4, min_dims=0, max_dims=2, min_side=1, max_side=3).map(
    lambda r: r.input_shapes
)
add_row(
    Row(
        "threefry2x32",
        lambda cfg, *a: bind("threefry2x32", *a),
        _cfg(shapes=QUADS),
        lambda draw, cfg, dtype, smooth: [_u32(draw, s) for s in cfg["shapes"]],
        lambda cfg, *a: _threefry_ref(*a),
        (D.uint32,),
        nondiff="integer outputs",
    )
)

_LANES = st.lists(st.integers(1, 2), max_size=1).map(tuple)
_SAMPLE = st.lists(st.integers(1, 3), max_size=2).map(tuple)


def _prefix_check(name, cfg, key, out, **params):
    """Each lane's numbers are a prefix of the same lane's longer stream: they depend only on the key and the
    element's index, not on how many are drawn."""
    n = int(np.prod(cfg["shape"], dtype=np.int64))
    longer = np.asarray(bind(name, fl.asarray(key), **{**params, "shape": (n + 3,)}))
    lanes = key.shape[:-1]
    np.testing.assert_array_equal(
        np.asarray(out).reshape(lanes + (n,)), longer[..., :n], err_msg=f"{name}: not a prefix of a longer draw"
    )


def keyed_row(name, dtypes, flags=None, lo=None, hi=None, open_lo=False):
    """A sampler ``(key; shape, dtype, **flags)``: checked for range, dtype and stream prefixes (no reference)."""
    flag_st = st.fixed_dictionaries(flags or {})

    def config(dtype):
        return st.fixed_dictionaries({"lanes": _LANES, "shape": _SAMPLE, "dtype": st.just(dtype), "flags": flag_st})

    def params(cfg):
        return {"shape": cfg["shape"], "dtype": cfg["dtype"], **cfg["flags"]}

    def check(cfg, args, outs):
        (out,) = outs
        v = np.asarray(out).astype(np.float64) if lo is not None else None
        if v is not None:
            assert np.all(np.isfinite(v)), f"{name}: non-finite samples {v}"
            strict_lo = open_lo or cfg["flags"].get("open", False)
            assert np.all(v > lo if strict_lo else v >= lo), f"{name}: samples below {lo}: {v}"
            if hi is not None:
                assert np.all(v < hi), f"{name}: samples not below {hi}: {v}"
        _prefix_check(name, cfg, args[0], out, **{k: w for k, w in params(cfg).items() if k != "shape"})

    return add_row(
        Row(
            name,
            lambda cfg, key: bind(name, key, **params(cfg)),
            config,
            lambda draw, cfg, dtype, smooth: [_u32(draw, cfg["lanes"] + (2,))],
            None,
            tuple(dtypes),
            nondiff="random bits have no derivative with respect to the key",
            check=check,
        )
    )


keyed_row("random_bits", (D.uint32, D.uint64))
keyed_row("random_uniform", (D.float32, D.float64), {"open": st.booleans()}, lo=0.0, hi=1.0)
keyed_row("random_normal", (D.float32, D.float64), lo=-np.inf)
keyed_row(
    "random_standard",
    (D.float32, D.float64),
    {"dist": st.sampled_from(("exponential", "gumbel", "laplace", "logistic"))},
    lo=-np.inf,
)


@st.composite
def _param_cfg(draw, dtype, param_dtype=None):
    lanes = draw(_LANES)
    return {"lanes": lanes, "shape": lanes + draw(_SAMPLE), "dtype": dtype, "param_dtype": param_dtype or dtype}


def _gamma_fd_ref(cfg, xs):
    # a sample is F^-1(u; alpha) for the element's uniform u: hold u fixed and invert the CDF at other alphas
    key, alpha = xs
    u = sps.gammainc(np.asarray(alpha), np.asarray(bind("random_gamma", key, alpha)))

    def sample_at(a):
        return fl.asarray(sps.gammaincinv(np.asarray(a), u))

    return sample_at


def _positive_check(name):
    def check(cfg, args, outs):
        v = np.asarray(outs[0]).astype(np.float64)
        assert np.all(np.isfinite(v) & (v >= 0)), f"{name}: samples must be finite and non-negative, got {v}"

    return check


add_row(
    Row(
        "random_gamma",
        lambda cfg, key, a: bind("random_gamma", key, a),
        _param_cfg,
        lambda draw, cfg, dtype, smooth: [
            _u32(draw, cfg["lanes"] + (2,)),
            values(draw, dtype, cfg["shape"], Dom(real=((0.8, 3.0),))),
        ],
        None,
        (D.float32, D.float64),
        order=1,
        fd_ref=_gamma_fd_ref,
        grad_tol=(1e-4, 1e-4),
        check=_positive_check("random_gamma"),
    )
)


def _gamma_grad_ref(cfg, alpha, z):
    # implicit differentiation of P(alpha, z) = u: dz/dalpha = -(dP/dalpha) / (dP/dz), dP/dalpha by a
    # Richardson-extrapolated central difference
    def d(h):
        return (sps.gammainc(alpha + h, z) - sps.gammainc(alpha - h, z)) / (2 * h)

    h = 1e-3 * alpha
    dp_da = (4 * d(h / 2) - d(h)) / 3
    log_pdf = (alpha - 1) * np.log(z) - z - sps.gammaln(alpha)
    return -dp_da / np.exp(log_pdf)


add_row(
    Row(
        "random_gamma_grad",
        lambda cfg, a, z: bind("random_gamma_grad", a, z),
        _cfg(shapes=PAIRS),
        lambda draw, cfg, dtype, smooth: [
            values(draw, dtype, cfg["shapes"][0], Dom(real=((0.8, 3.0),))),
            values(draw, dtype, cfg["shapes"][1], Dom(real=((0.2, 4.0),))),
        ],
        _gamma_grad_ref,
        (D.float32, D.float64),
        tol=100.0,
        nondiff="second derivatives of gamma samples are not implemented (random_gamma_grad has no jvp)",
    )
)


def _truncnorm_sample(draw, cfg, dtype, smooth):
    lo = values(draw, dtype, cfg["shape"], Dom(real=((-2.0, 0.5),)))
    width = values(draw, np.float64, cfg["shape"], Dom(real=((0.3, 2.0),)))
    return [_u32(draw, cfg["lanes"] + (2,)), lo, (lo.astype(np.float64) + width).astype(dtype)]


def _truncnorm_check(cfg, args, outs):
    _, lo, hi = args
    v = np.asarray(outs[0])
    assert np.all((v > lo) & (v < hi)), f"random_truncated_normal: samples {v} outside ({lo}, {hi})"


add_row(
    Row(
        "random_truncated_normal",
        lambda cfg, key, lo, hi: bind("random_truncated_normal", key, lo, hi),
        _param_cfg,
        _truncnorm_sample,
        None,
        (D.float32, D.float64),
        check=_truncnorm_check,
        grad_tol=(1e-4, 1e-5),
    )
)
add_row(
    Row(
        "random_poisson",
        lambda cfg, key, lam: bind("random_poisson", key, lam, dtype=cfg["dtype"]),
        lambda dtype: _param_cfg(dtype, D.float64),
        lambda draw, cfg, dtype, smooth: [
            _u32(draw, cfg["lanes"] + (2,)),
            values(draw, cfg["param_dtype"], cfg["shape"], Dom(real=((0.5, 10.0),))),
        ],
        None,
        (D.int32, D.int64),
        nondiff="integer output",
        check=_positive_check("random_poisson"),
    )
)


# ---------------------------------------------------------------------------------------------------------------
# Collectives: applied inside a vmap named "i" over the leading axis (each lane is one row of x)

COLLECTIVE_LANE = {
    "psum": lambda xi, n: bind("psum", xi, axes=("i",))[0],
    "pmax": lambda xi, n: bind("pmax", xi, axes=("i",))[0],
    "pmin": lambda xi, n: bind("pmin", xi, axes=("i",))[0],
    "all_gather": lambda xi, n: bind("all_gather", xi, axes=("i",), axis_size=n)[0],
    # each lane's operand has one row per lane
    "psum_scatter": lambda xi, n: bind("psum_scatter", xi, axes=("i",), axis_size=n)[0],
    # lane j + 1 gets lane j's value; lane 0 gets zeros
    "ppermute": lambda xi, n: bind("ppermute", xi, axes=("i",), perm=tuple((j, j + 1) for j in range(n - 1)))[0],
}


def _shifted(x):
    out = np.zeros_like(x)
    out[1:] = x[:-1]
    return out


def collective_row(name, ref, dtypes, shape=SHAPES_1, **kw):
    def apply(cfg, x):
        return fl.vmap(lambda xi: COLLECTIVE_LANE[name](xi, x.shape[0]), axis_name="i")(x)

    def sample(draw, cfg, dtype, smooth):
        if smooth and name in ("pmax", "pmin"):
            return [distinct(draw, dtype, cfg["shape"])]
        return [values(draw, dtype, cfg["shape"], Dom(discrete=name in ("pmax", "pmin")))]

    # the named vmap inside apply turns the collective into a reduction before any outer trace sees it
    return add_row(
        Row(name, apply, _cfg(shape=shape), sample, lambda cfg, x: ref(x), tuple(dtypes), staged=False, **kw)
    )


collective_row(
    "psum",
    lambda x: np.broadcast_to(np.sum(x, 0, dtype=x.dtype if x.dtype in I else None), x.shape),
    NUM,
    linear="all",
    tol=10.0,
)
collective_row("pmax", lambda x: np.broadcast_to(np.max(x, 0), x.shape), REAL + B)
collective_row("pmin", lambda x: np.broadcast_to(np.min(x, 0), x.shape), REAL + B)
collective_row("all_gather", lambda x: np.broadcast_to(x[None], (x.shape[0],) + x.shape), ALL, linear="all")
collective_row(
    "psum_scatter",
    lambda x: np.sum(x, 0, dtype=x.dtype if x.dtype in I else None),
    NUM,
    # (lanes, lanes, ...): lane i's operand has one row per lane
    shape=st.tuples(st.integers(1, 3), st.lists(st.integers(1, 3), max_size=1)).map(lambda t: (t[0], t[0], *t[1])),
    linear="all",
    tol=10.0,
)
collective_row("ppermute", _shifted, ALL, linear="all")
add_row(
    Row(
        "axis_index",
        lambda cfg: fl.vmap(lambda: bind("axis_index", axes=("i",))[0], axis_name="i", axis_size=cfg["n"])(),
        _cfg(n=st.integers(1, 4)),
        lambda draw, cfg, dtype, smooth: [],
        lambda cfg: np.arange(cfg["n"]),
        (D.int64,),
        nondiff="it has no inputs",
        staged=False,
    )
)


# ---------------------------------------------------------------------------------------------------------------
# Custom derivative rules (transforms/custom.py): a function with a correct rule, so every check must pass


@fl.custom_jvp
def _sin_times(x, y):
    return fl.sin(x) * y


@_sin_times.defjvp
def _sin_times_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _sin_times(x, y), fl.cos(x) * y * tx + fl.sin(x) * ty


@fl.custom_vjp
def _sin_times_v(x, y):
    return fl.sin(x) * y


def _sin_times_fwd(x, y):
    return _sin_times_v(x, y), (x, y)


def _sin_times_bwd(res, g):
    x, y = res
    gx, gy = fl.cos(x) * y * g, fl.sin(x) * g
    return _unbroadcast(gx, x), _unbroadcast(gy, y)


def _unbroadcast(g, x):
    from funclib.primitives.shape import unbroadcast

    return unbroadcast(g, x.aval)


_sin_times_v.defvjp(_sin_times_fwd, _sin_times_bwd)


@fl.custom_vjp
def _sin_v(x):
    return fl.sin(x)


_sin_v.defvjp(lambda x: (fl.sin(x), (x,)), lambda res, g: (fl.cos(res[0]) * g,))

_CUSTOM_SAMPLE = lambda draw, cfg, dtype, smooth: [values(draw, dtype, s) for s in cfg["shapes"]]  # noqa: E731
add_row(
    Row(
        "custom_jvp_call",
        lambda cfg, x, y: _sin_times(x, y),
        _cfg(shapes=PAIRS),
        _CUSTOM_SAMPLE,
        lambda cfg, x, y: np.sin(x) * y,
        F + C,
    )
)
add_row(
    Row(
        "custom_vjp_call",
        lambda cfg, x, y: _sin_times_v(x, y),
        _cfg(shapes=PAIRS),
        _CUSTOM_SAMPLE,
        lambda cfg, x, y: np.sin(x) * y,
        F + C,
    )
)
# custom_lin is the linear map a custom_vjp function contributes to linearize
add_row(
    Row(
        "custom_lin",
        lambda cfg, x, t: fl.linearize(_sin_v, x)[1](t),
        lambda dtype: SHAPES.map(lambda s: {"shapes": (s, s)}),
        _CUSTOM_SAMPLE,
        lambda cfg, x, t: np.cos(x) * t,
        F + C,
        linear=((1,),),
    )
)


# ---------------------------------------------------------------------------------------------------------------
# Convolution patches (im2col) and their adjoint


@st.composite
def _conv_cfg(draw):
    nd = draw(st.integers(1, 2))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    strides = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    dil = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    pad = tuple((draw(st.integers(0, 1)), draw(st.integers(0, 1))) for _ in range(nd))
    spatial = tuple(max(draw(st.integers(2, 4)), dil[i] * (k[i] - 1) + 1 - sum(pad[i])) for i in range(nd))
    osz = tuple((spatial[i] + sum(pad[i]) - dil[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(nd))
    cl = draw(st.booleans())
    return {
        "x": (n, c) + spatial,
        "cols": (n,) + osz + k + (c,) if cl else (n, c) + k + osz,
        "cl": cl,
        "k": k,
        "strides": strides,
        "pad": pad,
        "dil": dil,
        "osz": osz,
    }


def _window(cfg, o, kk):
    """Padded-input coordinates read by window position ``o`` and kernel offset ``kk``."""
    return tuple(o[i] * cfg["strides"][i] + kk[i] * cfg["dil"][i] for i in range(len(o)))


def _cf_perm(nd):
    """Channels-last patches (N, *out, *k, C) -> channels-first (N, C, *k, *out)."""
    return (0, 2 * nd + 1, *range(nd + 1, 2 * nd + 1), *range(1, nd + 1))


def _patches_ref(cfg, x):
    pad = [(0, 0), (0, 0)] + [tuple(p) for p in cfg["pad"]]
    xp = np.pad(x, pad)
    nd = len(cfg["k"])
    out = np.zeros((x.shape[0],) + cfg["osz"] + cfg["k"] + (x.shape[1],), x.dtype)
    for o in np.ndindex(*cfg["osz"]):
        for kk in np.ndindex(*cfg["k"]):
            out[(slice(None),) + o + kk] = xp[(slice(None), slice(None)) + _window(cfg, o, kk)]
    return out if cfg["cl"] else np.transpose(out, _cf_perm(nd))


def _col2im_ref(cfg, cols):
    if not cfg["cl"]:
        cols = np.transpose(cols, np.argsort(_cf_perm(len(cfg["k"]))))
    n, c = cfg["x"][:2]
    padded = tuple(s + sum(p) for s, p in zip(cfg["x"][2:], cfg["pad"]))
    buf = np.zeros((n, c) + padded, cols.dtype)
    for o in np.ndindex(*cfg["osz"]):
        for kk in np.ndindex(*cfg["k"]):
            buf[(slice(None), slice(None)) + _window(cfg, o, kk)] += cols[(slice(None),) + o + kk]
    crop = tuple(slice(p[0], p[0] + s) for s, p in zip(cfg["x"][2:], cfg["pad"]))
    return buf[(slice(None), slice(None)) + crop]


_CONV_PARAMS = lambda cfg: {  # noqa: E731
    "strides": cfg["strides"],
    "padding": cfg["pad"],
    "dilation": cfg["dil"],
    "channels_last": cfg["cl"],
}
add_row(
    Row(
        "conv_patches",
        lambda cfg, x: bind("conv_patches", x, kernel_shape=cfg["k"], **_CONV_PARAMS(cfg)),
        lambda dtype: _conv_cfg(),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["x"])],
        _patches_ref,
        NUM,
        linear="all",
    )
)
add_row(
    Row(
        "conv_patches_transpose",
        lambda cfg, c: bind("conv_patches_transpose", c, input_shape=cfg["x"][2:], **_CONV_PARAMS(cfg)),
        lambda dtype: _conv_cfg(),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["cols"])],
        _col2im_ref,
        NUM,
        linear="all",
        tol=10.0,
    )
)


# ---------------------------------------------------------------------------------------------------------------
# Control flow and jit (transforms/): each body is nonlinear in one argument and linear in another


def _cond_apply(cfg, p, x, y):
    return fl.cond(p, lambda a, b: fl.sin(a) * b, lambda a, b: fl.cos(a) * b, x, y)


add_row(
    Row(
        "cond",
        _cond_apply,
        _cfg(shapes=PAIRS),
        lambda draw, cfg, dtype, smooth: (
            [draw(hnp.arrays(np.bool_, ()))] + [values(draw, dtype, s) for s in cfg["shapes"]]
        ),
        lambda cfg, p, x, y: np.where(p, np.sin(x) * y, np.cos(x) * y),
        F + C,
        linear=((2,),),
    )
)


def _scan_apply(cfg, c, xs):
    return fl.scan(lambda c, x: (c * fl.cos(x), c * x), c, xs, reverse=cfg["reverse"])


def _scan_ref(cfg, c, xs):
    ys = [None] * xs.shape[0]
    order = range(xs.shape[0] - 1, -1, -1) if cfg["reverse"] else range(xs.shape[0])
    for i in order:
        c, ys[i] = c * np.cos(xs[i]), c * xs[i]
    return [c, np.stack(ys)]


@st.composite
def _scan_cfg(draw):
    s = draw(st.lists(st.integers(1, 3), max_size=2).map(tuple))
    return {"shapes": (s, (draw(st.integers(1, 3)),) + s), "reverse": draw(st.booleans())}


add_row(
    Row(
        "scan",
        _scan_apply,
        lambda dtype: _scan_cfg(),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, s) for s in cfg["shapes"]],
        _scan_ref,
        F + C,
        linear=((0,),),
        tol=4.0,
    )
)


def _while_apply(cfg, v, w):
    n = cfg["n"]
    return fl.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * fl.cos(c[2]), c[2]), (0, v, w), max_steps=3)[1]


add_row(
    Row(
        "while",
        _while_apply,
        lambda dtype: st.fixed_dictionaries({"shape": SHAPES, "n": st.integers(0, 3)}),
        lambda draw, cfg, dtype, smooth: [values(draw, dtype, cfg["shape"]) for _ in range(2)],
        lambda cfg, v, w: v * np.cos(w) ** cfg["n"],
        F + C,
        linear=((0,),),
        tol=4.0,
    )
)

_JITTED = fl.jit(lambda x, y: fl.sin(x) * y)
# the row checks jit's rules as a call primitive, so two dtypes and one broadcasting shape pair keep the compiled
# kernels few (each new rank or broadcast pattern compiles new ones); kernel coverage belongs to the jit tests
add_row(
    Row(
        "jit",
        lambda cfg, x, y: _JITTED(x, y),
        _cfg(shapes=st.just(((2, 3), (3,)))),
        _CUSTOM_SAMPLE,
        lambda cfg, x, y: np.sin(x) * y,
        (D.float32, D.float64),
        linear=((1,),),
    )
)


# ---------------------------------------------------------------------------------------------------------------
# Rows kept beside this file: tests/op_table_<family>.py modules define their own ROWS (they may import from here)


def _load_extensions() -> None:
    for path in sorted(pathlib.Path(__file__).parent.glob("op_table_*.py")):
        ROWS.extend(importlib.import_module(path.stem).ROWS)


# ---------------------------------------------------------------------------------------------------------------
# Registry helpers


def rows_by_name() -> dict[str, Row]:
    return {r.name: r for r in ROWS}


def main_dtype(row: Row) -> np.dtype:
    """The dtype used by the single-dtype checks (vmap, jaxpr): float64 when supported."""
    for d in (D.float64, D.complex128, D.int64, D.int32, D.uint32, D.bool_):
        if d in row.dtypes:
            return d
    return row.dtypes[0]


def grad_dtypes(row: Row) -> tuple:
    """The dtypes of the derivative checks: float64 and complex128 where supported."""
    return tuple(d for d in (D.float64, D.complex128) if d in row.dtypes)


def draw_case(draw, row: Row, dtype, smooth: bool = False):
    """A drawn configuration and its inputs (NumPy arrays) for ``row`` at ``dtype``."""
    cfg = draw(row.config(np.dtype(dtype)))
    return cfg, row.sample(draw, cfg, np.dtype(dtype), smooth)


def reference(row: Row, cfg, args: list):
    ins = [_up(a) if row.upcast else a for a in args]
    return row.ref(cfg, *ins)


def as_tensors(args) -> list:
    return [fl.asarray(a) for a in args]


def tolerance(dtype, scale: float = 1.0) -> tuple[float, float]:
    """(rtol, atol) of eager results of ``dtype`` against a float64 reference."""
    base = {
        D.float16: 3e-3,
        D.bfloat16: 2e-2,
        D.float32: 2e-6,
        D.complex64: 2e-6,
        D.float64: 1e-12,
        D.complex128: 1e-12,
    }.get(np.dtype(dtype))
    if base is None:
        return 0.0, 0.0
    return base * scale, base * scale


_load_extensions()  # last: the extensions import the helpers above
