"""The structural primitives every family's rules are written with: broadcast_in_dim, reshape, transpose, rev,
concatenate, pad, slice, iota, select, and reduce_sum (broadcasting's transpose), with the helpers on them
(moving batch axes, zeros, unbroadcasting). All but iota are linear.

This is the lowest family: its rules use only its own primitives, so every other family may use them.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Tensor, Tracer, Zero, _state, _wrap, aval_of, is_undefined
from ..errors import DTypeError, ShapeError
from ..kernels import lowp
from ..kernels.fusion import Lowering
from ._util import broadcast_shapes, check_axes, drop_axes


def _linear_jvp(p):
    """jvp of a primitive linear in all its array inputs: apply it to the tangents."""

    def rule(primals, tangents, **params):
        out = p.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            return out, Zero(aval_of(out))
        return out, p.bind(*[instantiate(t) for t in tangents], **params)

    return rule


def _shape_tuple(shape, op):
    try:
        out = tuple(map(int, shape))
    except TypeError:
        raise ShapeError(f"{op}: shape must be a tuple of ints, got {shape!r}") from None
    if out and min(out) < 0:
        raise ShapeError(f"{op}: negative dimension in shape {out}")
    return out


# --- helpers on the structural primitives -----------------------------------------------------------------------


def moveaxis(x, src: int, dst: int):
    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def bdim_to_front(x, d):
    """Move batch axis ``d`` (or None) to axis 0."""
    return x if d is None or d == 0 else moveaxis(x, d, 0)


def batch_align(x, d, rank):
    """Move the batch axis to 0 and pad the logical rank to ``rank`` so NumPy broadcasting lines up."""
    if d is None:
        return x
    x = moveaxis(x, d, 0)
    pad = rank - (x.ndim - 1)
    if pad > 0:
        x = reshape(x, (x.shape[0],) + (1,) * pad + x.shape[1:])
    return x


def zeros(aval: ShapedArray):
    if not aval.shape:
        # a scalar constant is the same under every transform; larger zeros broadcast one, so that jit does not
        # capture an array of them
        return _wrap(np.zeros((), aval.dtype))
    return broadcast_in_dim(_wrap(np.zeros((), aval.dtype)), aval.shape, ())


def instantiate(t, primal=None):
    """Turn a symbolic ``Zero`` into an array of zeros."""
    if type(t) is Zero:
        return zeros(t.aval)
    return t


def unbroadcast(ct, aval: ShapedArray):
    """Sum ``ct`` down to ``aval.shape`` (the cotangent of an implicit broadcast)."""
    shape = aval.shape
    if ct.shape == shape:
        return ct
    lead = ct.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and ct.shape[lead + i] != 1
    )
    out = reduce_sum(ct, axes) if axes else ct
    return reshape(out, shape) if out.shape != shape else out


# --- broadcast_in_dim ---------------------------------------------------------------------------------------------

broadcast_in_dim_p = Primitive("broadcast_in_dim", linear=True)
broadcast_in_dim_p.family = "shape"


def _bid_impl(x, *, shape, broadcast_dimensions):
    x = np.asarray(x)
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = x.shape[src]
    x = x.reshape(expanded)
    if not x.flags.c_contiguous:
        return np.broadcast_to(x, shape)
    # the same read-only zero-stride view np.broadcast_to makes, without its 7 us of Python-level checks
    strides = tuple(0 if e != n else s for e, n, s in zip(expanded, shape, x.strides))
    out = np.ndarray(shape, x.dtype, x, 0, strides)
    out.flags.writeable = False
    return out


broadcast_in_dim_p.def_impl(_bid_impl)


@broadcast_in_dim_p.def_abstract_eval
def _bid_abstract(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise ShapeError(
            f"broadcast_in_dim: operand of rank {x.ndim} needs {x.ndim} broadcast_dimensions, "
            f"got {broadcast_dimensions}"
        )
    for src, dst in enumerate(broadcast_dimensions):
        if not 0 <= dst < len(shape) or x.shape[src] not in (1, shape[dst]):
            raise ShapeError(f"broadcast_in_dim: cannot broadcast operand shape {x.shape} to {shape}")
    return ShapedArray(shape, x.dtype)


broadcast_in_dim_p.def_jvp(_linear_jvp(broadcast_in_dim_p))


@broadcast_in_dim_p.def_transpose
def _bid_transpose(ct, x, *, shape, broadcast_dimensions):
    xs = x.aval.shape
    new = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    stretched = tuple(dst for src, dst in enumerate(broadcast_dimensions) if xs[src] == 1 and shape[dst] != 1)
    out = reduce_sum(ct, tuple(sorted(new + stretched))) if new or stretched else ct
    return [reshape(out, xs) if out.shape != xs else out]


@broadcast_in_dim_p.def_vmap
def _bid_vmap(args, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = args, dims
    x = bdim_to_front(x, d)
    out = broadcast_in_dim_p.bind(
        x, shape=(x.shape[0],) + tuple(shape), broadcast_dimensions=(0,) + tuple(b + 1 for b in broadcast_dimensions)
    )
    return out, 0


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcast ``x`` to ``shape``; operand axis i maps to output axis ``broadcast_dimensions[i]``."""
    shape = _shape_tuple(shape, "broadcast_in_dim")
    bd = tuple(map(int, broadcast_dimensions))
    if _state.trace is None and type(x) is Tensor:
        _bid_abstract(aval_of(x), shape=shape, broadcast_dimensions=bd)
        return _wrap(_bid_impl(x._value, shape=shape, broadcast_dimensions=bd))
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=bd)


def broadcast_to(x, shape):
    """NumPy-style broadcast of ``x`` to ``shape`` (trailing axes aligned)."""
    shape = _shape_tuple(shape, "broadcast_to")
    xs = x.shape
    if xs == shape:
        return x
    lead = len(shape) - len(xs)
    if lead < 0 or any(a not in (1, b) for a, b in zip(xs, shape[lead:])):
        raise ShapeError(f"broadcast_to: cannot broadcast shape {xs} to {shape}")
    return broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


# --- reshape --------------------------------------------------------------------------------------------------------

reshape_p = Primitive("reshape", linear=True)
reshape_p.family = "shape"
reshape_p.def_impl(lambda x, *, new_sizes: np.reshape(x, new_sizes))


@reshape_p.def_abstract_eval
def _reshape_abstract(x, *, new_sizes):
    if math.prod(new_sizes) != x.size:
        raise ShapeError(f"reshape: cannot reshape {x.shape} ({x.size} elements) into {new_sizes}")
    return ShapedArray(new_sizes, x.dtype)


reshape_p.def_jvp(_linear_jvp(reshape_p))
reshape_p.def_transpose(lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)])


@reshape_p.def_vmap
def _reshape_vmap(args, dims, *, new_sizes):
    x = bdim_to_front(args[0], dims[0])
    return reshape_p.bind(x, new_sizes=(x.shape[0],) + tuple(new_sizes)), 0


def _resolve_shape(shape, size, op="reshape"):
    shape = tuple(map(int, shape))
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = math.prod([d for d in shape if d != -1])
        if known == 0 or size % known:
            raise ShapeError(f"{op}: cannot reshape {size} elements into {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    return _shape_tuple(shape, op)


def reshape(x, new_sizes):
    """Reshape (C order). One entry of ``new_sizes`` may be -1."""
    if _state.trace is None and type(x) is Tensor:
        v = x._value
        ns = _resolve_shape(new_sizes, v.size)
        if v.shape == ns:
            return x
        _reshape_abstract(aval_of(x), new_sizes=ns)
        return _wrap(v.reshape(ns))
    ns = _resolve_shape(new_sizes, math.prod(x.shape))
    if tuple(x.shape) == ns:
        return x
    return reshape_p.bind(x, new_sizes=ns)


# --- transpose ------------------------------------------------------------------------------------------------------

transpose_p = Primitive("transpose", linear=True)
transpose_p.family = "shape"
transpose_p.def_impl(lambda x, *, permutation: np.transpose(x, permutation))


@transpose_p.def_abstract_eval
def _transpose_abstract(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(f"transpose: {permutation} is not a permutation of the {x.ndim} axes of {x.shape}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype)


transpose_p.def_jvp(_linear_jvp(transpose_p))
transpose_p.def_transpose(lambda ct, x, *, permutation: [transpose(ct, tuple(np.argsort(permutation)))])


@transpose_p.def_vmap
def _transpose_vmap(args, dims, *, permutation):
    x = bdim_to_front(args[0], dims[0])
    return transpose_p.bind(x, permutation=(0,) + tuple(p + 1 for p in permutation)), 0


def transpose(x, permutation):
    """Permute axes: output axis i is input axis ``permutation[i]``."""
    perm = tuple(map(int, permutation))
    if perm == tuple(range(len(perm))) and len(perm) == x.ndim:
        return x
    if _state.trace is None and type(x) is Tensor:
        v = x._value
        if sorted(perm) != list(range(v.ndim)):
            _transpose_abstract(aval_of(x), permutation=perm)  # raises, naming the operand
        return _wrap(v.transpose(perm))
    return transpose_p.bind(x, permutation=perm)


# --- reduce_sum: broadcast_in_dim's transpose ---------------------------------------------------------------------

LOWP = frozenset(dtypes.LOW_PRECISION)
NUMERIC = frozenset(dtypes.NUMERIC) | LOWP

reduce_sum_p = Primitive("reduce_sum", linear=True)
reduce_sum_p.family = "reduction"
reduce_sum_p.kernel = "reduce_sum"


@reduce_sum_p.def_impl
def _sum_impl(x, *, axes):
    # the ufunc's reduce method directly: what np.sum calls, without its Python dispatch layer
    x = np.asarray(x)
    if x.dtype in LOWP:  # accumulate in float32 (int8 for int4) and round back
        return np.asarray(lowp.compute(lambda w: np.asarray(np.add.reduce(w, axis=axes, dtype=w.dtype)), x))
    return np.asarray(np.add.reduce(x, axis=axes, dtype=x.dtype))


@reduce_sum_p.def_abstract_eval
def _sum_abstract(x, *, axes):
    if x.dtype not in NUMERIC:
        raise DTypeError(f"reduce_sum: unsupported dtype {x.dtype.name}")
    check_axes("reduce_sum", x, axes)
    return ShapedArray(drop_axes(x.shape, axes), x.dtype)


@reduce_sum_p.def_jvp
def _sum_jvp(primals, tangents, *, axes):
    out = reduce_sum_p.bind(primals[0], axes=axes)
    t = tangents[0]
    if type(t) is Zero:
        return out, Zero(aval_of(out))
    return out, reduce_sum_p.bind(t, axes=axes)


@reduce_sum_p.def_transpose
def _sum_transpose(ct, x, *, axes):
    return [keepdims_broadcast(ct, x.aval.shape, axes)]


def reduce_vmap(p):
    """The vmap rule of a reduction over static ``axes``: move the batch axis to the front, shift the axes."""

    def rule(args, dims, *, axes, **params):
        x = bdim_to_front(args[0], dims[0])
        return p.bind(x, axes=tuple(a + 1 for a in axes), **params), 0

    return rule


reduce_sum_p.def_vmap(reduce_vmap(reduce_sum_p))


def reduce_sum(x, axes):
    """Sum over ``axes`` (a tuple of non-negative ints), keeping the dtype."""
    axes = tuple(sorted(map(int, axes)))
    if not axes:
        return x
    if _state.trace is None and type(x) is Tensor:
        v = x._value
        if v.dtype in NUMERIC and v.dtype not in LOWP:
            return _wrap(np.asarray(np.add.reduce(v, axis=axes, dtype=v.dtype)))
    return reduce_sum_p.bind(x, axes=axes)


def keepdims_broadcast(y, shape, axes):
    """Broadcast the result ``y`` of a reduction over ``axes`` back to the operand's ``shape``."""
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return broadcast_in_dim(y, shape, kept)


# --- rev --------------------------------------------------------------------------------------------------------------

rev_p = Primitive("rev", linear=True)
rev_p.family = "shape"
rev_p.def_impl(lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x)


@rev_p.def_abstract_eval
def _rev_abstract(x, *, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions):
        raise ShapeError(f"rev: axes {dimensions} out of range for rank {x.ndim}")
    return ShapedArray(x.shape, x.dtype)


rev_p.def_jvp(_linear_jvp(rev_p))
rev_p.def_transpose(lambda ct, x, *, dimensions: [rev_p.bind(ct, dimensions=dimensions)])


@rev_p.def_vmap
def _rev_vmap(args, dims, *, dimensions):
    x = bdim_to_front(args[0], dims[0])
    return rev_p.bind(x, dimensions=tuple(d + 1 for d in dimensions)), 0


def rev(x, dimensions):
    return rev_p.bind(x, dimensions=tuple(int(d) for d in dimensions))


# --- concatenate --------------------------------------------------------------------------------------------------

concatenate_p = Primitive("concatenate", linear=True)
concatenate_p.family = "shape"
concatenate_p.def_impl(lambda *xs, dimension: np.concatenate(xs, axis=dimension))


@concatenate_p.def_abstract_eval
def _concat_abstract(*xs, dimension):
    if not xs:
        raise ValueError("concatenate: needs at least one array")
    first = xs[0]
    for x in xs:
        if x.dtype != first.dtype:
            raise ShapeError(f"concatenate: dtypes differ ({first.dtype.name} vs {x.dtype.name}); promote first")
        if x.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != dimension):
            raise ShapeError(f"concatenate: shapes {[s.shape for s in xs]} differ outside axis {dimension}")
    if not 0 <= dimension < first.ndim:
        raise ShapeError(f"concatenate: axis {dimension} out of range for rank {first.ndim}")
    shape = list(first.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(tuple(shape), first.dtype)


concatenate_p.def_jvp(_linear_jvp(concatenate_p))


@concatenate_p.def_transpose
def _concat_transpose(ct, *xs, dimension):
    outs, start = [], 0
    for x in xs:
        size = x.aval.shape[dimension]
        if is_undefined(x):
            lo = [0] * ct.ndim
            hi = list(ct.shape)
            lo[dimension], hi[dimension] = start, start + size
            outs.append(slice_(ct, tuple(lo), tuple(hi)))
        else:
            outs.append(None)
        start += size
    return outs


@concatenate_p.def_vmap
def _concat_vmap(args, dims, *, dimension):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [
        bdim_to_front(a, d) if d is not None else broadcast_in_dim(a, (size,) + a.shape, tuple(range(1, a.ndim + 1)))
        for a, d in zip(args, dims)
    ]
    return concatenate_p.bind(*moved, dimension=dimension + 1), 0


def concatenate(xs, dimension: int):
    xs = list(xs)
    if len(xs) == 1:
        return xs[0]
    return concatenate_p.bind(*xs, dimension=int(dimension))


# --- pad ------------------------------------------------------------------------------------------------------------

pad_p = Primitive("pad", linear=True)
pad_p.family = "shape"


def _pad_impl(x, padding_value, *, padding_config):
    x = np.asarray(x)
    # interior padding first, then edge padding (negative edges crop)
    inner = tuple(d + max(d - 1, 0) * interior for d, (_, _, interior) in zip(x.shape, padding_config))
    full_shape = tuple(lo + n + hi for n, (lo, hi, _) in zip(inner, padding_config))
    tmp_shape = tuple(max(lo, 0) + n + max(hi, 0) for n, (lo, hi, _) in zip(inner, padding_config))
    out = np.full(tmp_shape, padding_value, dtype=x.dtype)
    idx = tuple(slice(max(lo, 0), max(lo, 0) + n, interior + 1) for n, (lo, hi, interior) in zip(inner, padding_config))
    out[idx] = x
    crop = tuple(slice(-min(lo, 0), -min(lo, 0) + s) for s, (lo, _, _) in zip(full_shape, padding_config))
    return out[crop]


pad_p.def_impl(_pad_impl)


@pad_p.def_abstract_eval
def _pad_abstract(x, padding_value, *, padding_config):
    if len(padding_config) != x.ndim:
        raise ShapeError(f"pad: padding_config has {len(padding_config)} entries for rank {x.ndim}")
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        raise ShapeError("pad: padding_value must be a scalar of the operand's dtype")
    shape = []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise ShapeError("pad: interior padding must be non-negative")
        s = lo + hi + n + max(n - 1, 0) * interior
        if s < 0:
            raise ShapeError(f"pad: negative padding crops more than the axis has ({padding_config})")
        shape.append(s)
    return ShapedArray(tuple(shape), x.dtype)


pad_p.def_jvp(_linear_jvp(pad_p))


@pad_p.def_transpose
def _pad_transpose(ct, x, padding_value, *, padding_config):
    out = [None, None]
    if is_undefined(x):
        unpad = pad_p.bind(
            ct,
            _wrap(np.zeros((), ct.dtype)),
            padding_config=tuple((-lo, -hi, 0) for lo, hi, _ in padding_config),
        )
        out[0] = slice_(unpad, (0,) * ct.ndim, unpad.shape, tuple(i + 1 for _, _, i in padding_config))
    if is_undefined(padding_value):
        # the padding value's cotangent: the sum of ct over the cells it fills (a mask of x's cells, not a
        # difference of sums, so no cancellation and an exact zero where ct is zero)
        x_shape = x.aval.shape if is_undefined(x) else aval_of(x).shape
        from_x = pad_p.bind(
            broadcast_in_dim(_wrap(np.ones((), np.bool_)), x_shape, ()),
            _wrap(np.zeros((), np.bool_)),
            padding_config=padding_config,
        )
        out[1] = reduce_sum(select(from_x, _wrap(np.zeros((), ct.dtype)), ct), tuple(range(ct.ndim)))
    return out


@pad_p.def_vmap
def _pad_vmap(args, dims, *, padding_config):
    (x, v), (dx, dv) = args, dims
    if dv is None:
        x = bdim_to_front(x, dx)
        return pad_p.bind(x, v, padding_config=((0, 0, 0),) + tuple(padding_config)), 0
    # batched padding value: pad with zeros, then fill the padded cells from a mask
    size = v.shape[dv]
    x = bdim_to_front(x, dx) if dx is not None else broadcast_in_dim(x, (size,) + x.shape, tuple(range(1, x.ndim + 1)))
    v = bdim_to_front(v, dv)
    cfg = ((0, 0, 0),) + tuple(padding_config)
    zero = _wrap(np.zeros((), x.dtype))
    padded = pad_p.bind(x, zero, padding_config=cfg)
    mask = pad_p.bind(
        broadcast_in_dim(_wrap(np.ones((), np.bool_)), x.shape, ()),
        _wrap(np.zeros((), np.bool_)),
        padding_config=cfg,
    )
    vb = broadcast_in_dim(v, padded.shape, (0,))
    return select(mask, padded, vb), 0


def pad(x, padding_value, padding_config):
    """Pad with ``padding_config`` = ((lo, hi, interior), ...) per axis; negative lo/hi crop."""
    cfg = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    return pad_p.bind(x, padding_value, padding_config=cfg)


# --- slice ----------------------------------------------------------------------------------------------------------

slice_p = Primitive("slice", linear=True)
slice_p.family = "shape"


def _slice_impl(x, *, start_indices, limit_indices, strides):
    return np.asarray(x)[tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]


slice_p.def_impl(_slice_impl)


@slice_p.def_abstract_eval
def _slice_abstract(x, *, start_indices, limit_indices, strides):
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise ShapeError(f"slice: need {x.ndim} start/limit/stride entries")
    shape = []
    for n, s, l, st in zip(x.shape, start_indices, limit_indices, strides):
        if not 0 <= s <= l <= n or st < 1:
            raise ShapeError(f"slice: bounds {start_indices}:{limit_indices}:{strides} invalid for shape {x.shape}")
        shape.append((l - s + st - 1) // st)
    return ShapedArray(tuple(shape), x.dtype)


slice_p.def_jvp(_linear_jvp(slice_p))


@slice_p.def_transpose
def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    shape = x.aval.shape
    cfg = []
    for n, s, st, c in zip(shape, start_indices, strides, ct.shape):
        used = s + (c - 1) * st + 1 if c else s
        cfg.append((s, n - used, st - 1) if c else (0, n, 0))
    if any(c == 0 for c in ct.shape):
        return [zeros(x.aval)]
    return [pad(ct, _wrap(np.zeros((), ct.dtype)), cfg)]


@slice_p.def_vmap
def _slice_vmap(args, dims, *, start_indices, limit_indices, strides):
    x = bdim_to_front(args[0], dims[0])
    return (
        slice_p.bind(
            x,
            start_indices=(0,) + tuple(start_indices),
            limit_indices=(x.shape[0],) + tuple(limit_indices),
            strides=(1,) + tuple(strides),
        ),
        0,
    )


def slice_(x, start_indices, limit_indices, strides=None):
    """Static slice ``x[start:limit:stride]`` along every axis."""
    start = tuple(int(s) for s in start_indices)
    limit = tuple(int(s) for s in limit_indices)
    strides = tuple(int(s) for s in strides) if strides is not None else (1,) * len(start)
    if start == (0,) * x.ndim and limit == tuple(x.shape) and strides == (1,) * x.ndim:
        return x
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides)


# --- select ----------------------------------------------------------------------------------------------------
# where(pred, x, y) on operands of one dtype; in a fused kernel, a conditional expression

select_p = Primitive("select", linear=True)
select_p.family = "select"
select_p.def_lowering(Lowering("({1} if {0} else {2})", exact=True))


_BLEND_MIN_SIZE = 512
_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


@select_p.def_impl
def _select_impl(pred, x, y):
    pred, x, y = np.asarray(pred), np.asarray(x), np.asarray(y)
    d = x.dtype
    u = _UINT.get(d.itemsize)
    if (
        u is None
        or d != y.dtype
        or d.hasobject
        or pred.dtype != np.bool_
        or max(pred.size, x.size, y.size) < _BLEND_MIN_SIZE
    ):
        return np.where(pred, x, y)
    # np.where branches per element (5x slower on an unpredictable mask, e.g. relu's); blending the bits as
    # unsigned integers does not: y ^ ((x ^ y) * pred), which is x's bits where pred holds and y's elsewhere
    xb, yb = x.view(u), y.view(u)
    if y.ndim == 0 and not yb:
        return np.multiply(xb, pred, dtype=u).view(d)
    out = np.bitwise_xor(xb, yb)
    shape = np.broadcast_shapes(pred.shape, out.shape)
    out = np.multiply(out, pred, dtype=u, out=out if out.shape == shape else None)
    out ^= yb
    return out.view(d)


@select_p.def_abstract_eval
def _select_abstract(pred, x, y):
    if pred.dtype != dtypes.bool_:
        raise DTypeError(f"select: the condition must be boolean, got {pred.dtype.name}; compare it first (x > 0)")
    if x.dtype != y.dtype:
        raise DTypeError(f"select: branches must have one dtype, got {x.dtype.name} and {y.dtype.name}")
    ps, xs, ys = pred.shape, x.shape, y.shape
    if (ps == xs or not ps) and (ys == xs or not ys):
        return ShapedArray(xs, x.dtype)
    return ShapedArray(broadcast_shapes(ps, xs, ys, op="where"), x.dtype)


@select_p.def_jvp
def _select_jvp(primals, tangents):
    pred, x, y = primals
    _, tx, ty = tangents
    out = select_p.bind(pred, x, y)
    if (type(tx) is Zero and type(ty) is Zero) or out.dtype not in dtypes.FLOATING:
        return out, Zero(aval_of(out))
    tx = instantiate(tx) if type(tx) is Zero else tx
    ty = instantiate(ty) if type(ty) is Zero else ty
    return out, broadcast_to(select_p.bind(pred, tx, ty), out.shape)


@select_p.def_transpose
def _select_transpose(ct, pred, x, y):
    if is_undefined(pred):
        raise TypeError("select: the condition is not differentiable")
    z = _wrap(np.zeros((), ct.dtype))
    cx = unbroadcast(select_p.bind(pred, ct, z), x.aval) if is_undefined(x) else None
    cy = unbroadcast(select_p.bind(pred, z, ct), y.aval) if is_undefined(y) else None
    return [None, cx, cy]


@select_p.def_vmap
def _select_vmap(args, dims):
    shapes = [a.shape if d is None else a.shape[:d] + a.shape[d + 1 :] for a, d in zip(args, dims)]
    rank = max(len(s) for s in shapes)
    return select_p.bind(*[batch_align(a, d, rank) for a, d in zip(args, dims)]), 0


def select(pred, x, y):
    """``where(pred, x, y)`` on operands of one dtype (no promotion)."""
    return select_p.bind(pred, x, y)


# --- iota -----------------------------------------------------------------------------------------------------------

iota_p = Primitive("iota")
iota_p.family = "creation"
iota_p.no_rule["transpose"] = "has no inputs"
iota_p.no_rule["jvp"] = "has no inputs"


def _iota_impl(*, dtype, shape, dimension):
    r = np.arange(shape[dimension], dtype=dtype)
    return np.broadcast_to(r.reshape([-1 if i == dimension else 1 for i in range(len(shape))]), shape)


iota_p.def_impl(_iota_impl)
iota_p.def_abstract_eval(lambda *, dtype, shape, dimension: ShapedArray(shape, dtype))


@iota_p.def_jvp
def _iota_jvp(primals, tangents, **params):
    out = iota_p.bind(**params)
    return out, Zero(aval_of(out))


iota_p.def_vmap(lambda args, dims, **params: (iota_p.bind(**params), None))


def iota(dtype, shape, dimension: int = 0):
    """Integers 0..n-1 along ``dimension``, broadcast to ``shape``."""
    shape = _shape_tuple(shape if isinstance(shape, (tuple, list)) else (shape,), "iota")
    return iota_p.bind(dtype=dtypes.canonicalize(dtype), shape=shape, dimension=int(dimension))


def full(shape, fill_value, dtype):
    """A tensor of ``shape`` filled with the scalar ``fill_value`` (a number, or a 0-d tensor; a traced one must
    have ``dtype`` already)."""
    shape = _shape_tuple(shape, "full")
    dtype = dtypes.canonicalize(dtype)
    if dtype in dtypes.LOW_PRECISION and not isinstance(fill_value, Tensor):
        fill_value = lowp.astype(np.asarray(fill_value), dtype)  # saturating (float8) or wrapping (int4)
    if _state.trace is None and not isinstance(fill_value, Tensor):
        return _wrap(np.full(shape, fill_value, dtype=dtype))
    if not isinstance(fill_value, Tensor):
        fill_value = _wrap(np.asarray(fill_value, dtype=dtype))
    elif fill_value.dtype != dtype:
        if isinstance(fill_value, Tracer):
            raise DTypeError(
                f"full: the traced fill value is {fill_value.dtype.name}, not {dtype.name}; convert it first "
                "(fl.astype)"
            )
        fill_value = _wrap(fill_value._value.astype(dtype))
    return broadcast_in_dim(fill_value, shape, ())


def squeeze(x, dimensions):
    dims = tuple(d % x.ndim for d in dimensions) if x.ndim else ()
    for d in dims:
        if x.shape[d] != 1:
            raise ShapeError(f"squeeze: axis {d} of shape {x.shape} has size {x.shape[d]}, not 1")
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in dims))


def expand_dims(x, dimensions):
    shape = list(x.shape)
    nd = x.ndim + len(dimensions)
    for d in sorted(d % nd for d in dimensions):
        shape.insert(d, 1)
    return reshape(x, tuple(shape))

