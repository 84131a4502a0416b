"""Random-number primitives: the Threefry-2x32 block function and fused samplers driven by a key.

Keyed primitives take a uint32 key of shape ``(..., 2)``: the leading axes are independent lanes, each
producing the numbers it would produce alone. That makes every vmap rule "move the key's batch axis to the
front", and a lane's numbers never depend on the batch size. Samplers are primitives (not compositions of
``threefry2x32``) for their kernels: one fused pass from key to floats, with no uint32 temporaries.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Zero, aval_of
from ..errors import DTypeError, ShapeError
from ..kernels import threefry as _tf
from ._util import broadcast_shapes
from .elementwise import binary_vmap as _binary_vmap
from .elementwise import convert, safe_mul
from .shape import batch_align as _batch_align
from .shape import bdim_to_front, broadcast_to
from .transcendental import exp

_U32 = dtypes.uint32

# ----------------------------------------------------------------------------------------------------
# threefry2x32: the raw block function, elementwise with broadcasting

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)
threefry2x32_p.family = "random"
threefry2x32_p.no_rule["transpose"] = "not linear"
threefry2x32_p.no_rule["jvp"] = "integer outputs"


@threefry2x32_p.def_impl
def _threefry_impl(k0, k1, x0, x1):
    args = [np.asarray(a, _U32) for a in (k0, k1, x0, x1)]
    shape = np.broadcast_shapes(*(a.shape for a in args))
    flat = [np.array(np.broadcast_to(a, shape)).reshape(-1) for a in args]
    out0 = np.empty(flat[0].size, _U32)
    out1 = np.empty(flat[0].size, _U32)
    _tf.threefry2x32(*flat, out0, out1)
    return [out0.reshape(shape), out1.reshape(shape)]


@threefry2x32_p.def_abstract_eval
def _threefry_abstract(k0, k1, x0, x1):
    for name, a in zip(("k0", "k1", "x0", "x1"), (k0, k1, x0, x1)):
        if a.dtype != _U32:
            raise DTypeError(
                f"threefry2x32: {name} must be uint32, got {a.dtype.name}; cast with .astype(fl.uint32)"
            )
    shape = broadcast_shapes(k0.shape, k1.shape, x0.shape, x1.shape, op="threefry2x32")
    return [ShapedArray(shape, _U32), ShapedArray(shape, _U32)]


@threefry2x32_p.def_jvp
def _threefry_jvp(primals, tangents):
    outs = threefry2x32_p.bind(*primals)
    return outs, [Zero(aval_of(o)) for o in outs]


@threefry2x32_p.def_vmap
def _threefry_vmap(args, dims):
    shapes = [a.shape if d is None else a.shape[:d] + a.shape[d + 1 :] for a, d in zip(args, dims)]
    rank = max(len(s) for s in shapes)
    outs = threefry2x32_p.bind(*[_batch_align(a, d, rank) for a, d in zip(args, dims)])
    return outs, [0, 0]


# ----------------------------------------------------------------------------------------------------
# Samplers from a key alone: random_bits, random_uniform, random_normal


def _check_key(name, key):
    if key.dtype != _U32 or not key.shape or key.shape[-1] != 2:
        raise DTypeError(
            f"{name}: a key must be a uint32 tensor of shape (2,) (or (..., 2) for independent lanes), got "
            f"{key.str_short()}; make one with fl.random.key(seed)"
        )


def _lanes(key):
    if type(key) is np.ndarray and key.dtype == _U32 and key.flags.c_contiguous and key.flags.writeable:
        return key.reshape(-1, 2)
    # a fresh writeable copy: numba compiles read-only arrays as a separate type
    return np.array(key, dtype=_U32, order="C").reshape(-1, 2)


def _run(kernel, key, shape, dtype):
    keys = _lanes(key)
    out = np.empty((keys.shape[0], math.prod(shape)), dtype)
    if out.size:
        kernel(keys, out)
    return out.reshape(key.shape[:-1] + tuple(shape))


def _keyed(name, kernels, doc):
    """A primitive ``(key; shape, dtype, **flags) -> dtype[key.shape[:-1] + shape]``.

    ``kernels`` maps ``dtype`` (or ``(dtype, *flag values)`` when the primitive has flags) to its kernel.
    """
    p = Primitive(name)
    p.family = "random"
    p.no_rule["transpose"] = "not linear"
    p.no_rule["jvp"] = "its only input is the key, an integer tensor"
    p.doc = doc

    def pick(dtype, flags):
        return kernels.get((dtype, *flags.values()) if flags else dtype)

    @p.def_impl
    def _impl(key, *, shape, dtype, **flags):
        return _run(pick(dtype, flags), key, shape, dtype)

    @p.def_abstract_eval
    def _abstract(key, *, shape, dtype, **flags):
        _check_key(name, key)
        if pick(dtype, flags) is None:
            ok = sorted({(k[0] if isinstance(k, tuple) else k).name for k in kernels})
            raise DTypeError(f"{name}: dtype must be one of {', '.join(ok)}, got {dtype}")
        return ShapedArray(key.shape[:-1] + tuple(shape), dtype)

    @p.def_jvp
    def _jvp(primals, tangents, **params):
        out = p.bind(*primals, **params)
        return out, Zero(aval_of(out))

    @p.def_vmap
    def _vmap(args, dims, **params):
        return p.bind(bdim_to_front(args[0], dims[0]), **params), 0

    return p


random_bits_p = _keyed(
    "random_bits",
    {dtypes.uint32: _tf.bits32, dtypes.uint64: _tf.bits64},
    "Raw uint32 or uint64 words; element i of a lane depends only on the key and i.",
)
random_uniform_p = _keyed(
    "random_uniform",
    {
        (dtypes.float32, False): _tf.uniform32,
        (dtypes.float64, False): _tf.uniform64,
        (dtypes.float32, True): _tf.uniform32_open,
        (dtypes.float64, True): _tf.uniform64_open,
    },
    "Uniform floats in [0, 1) on the grid of 2**-24 (float32) or 2**-53 (float64); in (0, 1) with open=True.",
)
random_normal_p = _keyed(
    "random_normal",
    {dtypes.float32: _tf.normal32, dtypes.float64: _tf.normal64},
    "Standard normal floats (Box-Muller over the key's stream).",
)


# a primitive (rather than log/log1p of a uniform) so eager and jit share one kernel and agree bit for bit
random_standard_p = _keyed(
    "random_standard",
    {
        (d, name): kernels[i]
        for name, kernels in _tf.STANDARD.items()
        for i, d in enumerate((dtypes.float32, dtypes.float64))
    },
    "Standard exponential, Gumbel, Laplace or logistic floats (dist=...), by inversion of open uniforms.",
)


# ----------------------------------------------------------------------------------------------------
# Samplers with parameters per element: random_gamma (shape alpha), random_truncated_normal (bounds),
# random_poisson (rate). Inputs: key (*lanes, 2) and parameters (*lanes, *sample_shape), already broadcast by
# the caller.


def _check_param(name, key, x, ok):
    _check_key(name, key)
    lanes = key.shape[:-1]
    if x.shape[: len(lanes)] != lanes:
        raise ShapeError(
            f"{name}: the parameter's leading axes {x.shape[: len(lanes)]} must equal the key's lane axes "
            f"{lanes}"
        )
    if x.dtype not in ok:
        raise DTypeError(f"{name}: the parameter must be float32 or float64, got {x.dtype.name}")


def _param_vmap(p):
    """Key and parameters all get the batch axis in front; an unbatched one is broadcast (shared by lanes)."""

    def rule(args, dims, **params):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        moved = [
            bdim_to_front(a, d) if d is not None else broadcast_to(a, (size,) + tuple(a.shape))
            for a, d in zip(args, dims)
        ]
        return p.bind(*moved, **params), 0

    return rule


def _run_param(kernel, key, x, dtype):
    keys = _lanes(key)
    lanes = keys.shape[0]
    x = np.array(x, order="C", copy=not (x.flags.c_contiguous and x.flags.writeable))
    x = x.reshape(lanes, x.size // lanes if lanes else 0)
    if x.shape[1] >= 2**32:
        raise ValueError("random samplers with per-element parameters support at most 2**32 elements per key")
    out = np.empty(x.shape, dtype)
    if out.size:
        kernel(keys, x, out)
    return out


_FLOATS = frozenset((dtypes.float32, dtypes.float64))

random_gamma_p = Primitive("random_gamma")
random_gamma_p.family = "random"
random_gamma_p.no_rule["transpose"] = "not linear"


@random_gamma_p.def_impl
def _gamma_impl(key, alpha):
    alpha = np.asarray(alpha)
    out = _run_param(_tf.gamma, key, alpha, alpha.dtype)
    # a sample below the smallest normal number rounds to it, so log(sample) and sample ratios stay finite
    np.maximum(out, np.finfo(alpha.dtype).tiny, out=out)
    return out.reshape(alpha.shape)


@random_gamma_p.def_abstract_eval
def _gamma_abstract(key, alpha):
    _check_param("random_gamma", key, alpha, _FLOATS)
    return ShapedArray(alpha.shape, alpha.dtype)


@random_gamma_p.def_jvp
def _gamma_jvp(primals, tangents):
    key, alpha = primals
    z = random_gamma_p.bind(key, alpha)
    t = tangents[1]
    if type(t) is Zero:
        return z, Zero(aval_of(z))

    return z, safe_mul(t, random_gamma_grad_p.bind(alpha, z))


random_gamma_p.def_vmap(_param_vmap(random_gamma_p))

# d sample / d alpha of a Gamma(alpha, 1) sample, by implicit differentiation of its CDF
random_gamma_grad_p = Primitive("random_gamma_grad")
random_gamma_grad_p.family = "random"
random_gamma_grad_p.no_rule["transpose"] = "not linear"
random_gamma_grad_p.no_rule["jvp"] = (
    "second derivatives of gamma samples with respect to alpha are not implemented (they need d2P/dalpha2 of "
    "the incomplete gamma function)"
)


@random_gamma_grad_p.def_impl
def _gamma_grad_impl(alpha, z):
    shape = np.broadcast_shapes(np.shape(alpha), np.shape(z))
    a, x = (np.array(np.broadcast_to(v, shape), np.float64).reshape(-1) for v in (alpha, z))
    out = np.empty(a.size, np.float64)
    if out.size:
        _tf.gamma_grad(a, x, out)
    return out.reshape(shape).astype(np.result_type(alpha, z), copy=False)


@random_gamma_grad_p.def_abstract_eval
def _gamma_grad_abstract(alpha, z):
    if alpha.dtype != z.dtype or alpha.dtype not in _FLOATS:
        raise DTypeError(
            "random_gamma_grad: alpha and the sample must share a float32/float64 dtype, got "
            f"{alpha.dtype.name} and {z.dtype.name}"
        )
    return ShapedArray(broadcast_shapes(alpha.shape, z.shape, op="random_gamma_grad"), alpha.dtype)


random_gamma_grad_p.def_vmap(_binary_vmap(random_gamma_grad_p))


# a primitive for its float64 inverse CDF, accurate deep in either tail (erf/erfinv of float32 bounds is not)
random_truncated_normal_p = Primitive("random_truncated_normal")
random_truncated_normal_p.family = "random"
random_truncated_normal_p.no_rule["transpose"] = "not linear"


@random_truncated_normal_p.def_impl
def _truncnorm_impl(key, lower, upper):
    lower, upper = np.asarray(lower), np.asarray(upper)
    keys = _lanes(key)
    lanes = keys.shape[0]
    n = lower.size // lanes if lanes else 0
    lo, hi = (np.array(v, np.float64).reshape(lanes, n) for v in (lower, upper))
    out = np.empty((lanes, n), np.float64)
    if out.size:
        _tf.truncated_normal(keys, lo, hi, out)
    out = out.reshape(lower.shape).astype(lower.dtype)
    # rounding to the output dtype must not land on a bound
    inside_lo = np.nextafter(lower, np.asarray(np.inf, lower.dtype))
    inside_hi = np.nextafter(upper, np.asarray(-np.inf, lower.dtype))
    return np.minimum(np.maximum(out, inside_lo), inside_hi)


@random_truncated_normal_p.def_abstract_eval
def _truncnorm_abstract(key, lower, upper):
    _check_param("random_truncated_normal", key, lower, _FLOATS)
    if upper.shape != lower.shape or upper.dtype != lower.dtype:
        raise ShapeError(
            f"random_truncated_normal: bounds must share shape and dtype, got {lower.str_short()} and "
            f"{upper.str_short()}"
        )
    return ShapedArray(lower.shape, lower.dtype)


@random_truncated_normal_p.def_jvp
def _truncnorm_jvp(primals, tangents):
    # x = F^-1(F(a) + u (F(b) - F(a))) with u the element's uniform, so dx/da = (1 - u) pdf(a) / pdf(x) and
    # dx/db = u pdf(b) / pdf(x); the pdf ratios are exp((x^2 - a^2) / 2), finite in the tails

    key, lo, hi = primals
    _, t_lo, t_hi = tangents
    x = random_truncated_normal_p.bind(key, lo, hi)
    if type(t_lo) is Zero and type(t_hi) is Zero:
        return x, Zero(aval_of(x))
    shape = tuple(lo.shape[key.ndim - 1 :])
    u = convert(random_uniform_p.bind(key, shape=shape, dtype=dtypes.float64, open=True), x.dtype)
    xx = x * x
    out = None
    if type(t_lo) is not Zero:
        out = t_lo * ((1.0 - u) * exp((xx - lo * lo) * 0.5))
    if type(t_hi) is not Zero:
        d = t_hi * (u * exp((xx - hi * hi) * 0.5))
        out = d if out is None else out + d
    return x, out


random_truncated_normal_p.def_vmap(_param_vmap(random_truncated_normal_p))


random_poisson_p = Primitive("random_poisson")
random_poisson_p.family = "random"
random_poisson_p.no_rule["transpose"] = "not linear"
random_poisson_p.no_rule["jvp"] = "integer output"


@random_poisson_p.def_impl
def _poisson_impl(key, lam, *, dtype):
    lam = np.asarray(lam)
    out = _run_param(_tf.poisson, key, lam, np.int64)
    return out.reshape(lam.shape).astype(dtype, copy=False)


@random_poisson_p.def_abstract_eval
def _poisson_abstract(key, lam, *, dtype):
    _check_param("random_poisson", key, lam, _FLOATS)
    if dtype not in dtypes.INTEGER:
        raise DTypeError(f"random_poisson: dtype must be an integer dtype, got {dtype}")
    return ShapedArray(lam.shape, dtype)


@random_poisson_p.def_jvp
def _poisson_jvp(primals, tangents, *, dtype):
    out = random_poisson_p.bind(*primals, dtype=dtype)
    return out, Zero(aval_of(out))


random_poisson_p.def_vmap(_param_vmap(random_poisson_p))
