"""Gather and scatter over integer index arrays, and slices at traced offsets (dynamic_slice,
dynamic_update_slice, which batch into gathers and scatters).

Canonical form: ``idx`` has shape ``batch + (k,)`` and addresses the operand axes ``axes`` (k of them, sorted).
``gather(x, idx, axes)`` has shape ``batch + (x's other axes, in order)``; ``scatter`` writes ``updates`` of that
shape into ``x`` (with repeated indices, the last write wins), and ``scatter_add``/``scatter_mul``/``scatter_max``/
``scatter_min`` combine every update with ``x`` in turn (``np.add.at`` semantics). NumPy-style indexing in
``funclib.ops.indexing`` lowers onto these.
Indices must be in bounds (negative ones are wrapped by the public indexing code); out-of-bounds indices raise.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..checks import check_shape
from ..core import Primitive, ShapedArray, Tensor, Zero, _wrap, array_from, aval_of, is_undefined
from ..errors import DTypeError, ShapeError
from ..kernels import sparse
from ..namespace import public
from .elementwise import add, convert, maximum, minimum
from .shape import bdim_to_front, broadcast_in_dim, concatenate, instantiate, iota, zeros


def _front(x, axes):
    x = np.asarray(x)
    if axes == tuple(range(len(axes))):
        return x
    return np.moveaxis(x, axes, tuple(range(len(axes))))


def _gather_impl(x, idx, *, axes):
    idx = np.asarray(idx)
    try:
        return _front(x, axes)[tuple(idx[..., i] for i in range(len(axes)))]
    except IndexError as e:
        raise IndexError(
            f"gather: index out of bounds for operand shape {np.shape(x)} along axes {axes}: {e}"
        ) from None


def _gather_shape(x, idx, axes, op):
    if idx.dtype not in dtypes.INTEGER:
        raise ShapeError(f"{op}: indices must be integers, got {idx.dtype.name}")
    if idx.ndim < 1 or idx.shape[-1] != len(axes):
        raise ShapeError(f"{op}: indices of shape {idx.shape} must end in {len(axes)} (one per indexed axis)")
    if list(axes) != sorted(set(axes)) or any(not 0 <= a < x.ndim for a in axes):
        raise ShapeError(f"{op}: axes {axes} must be sorted, unique and within rank {x.ndim}")
    rest = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return idx.shape[:-1] + rest


gather_p = Primitive("gather")
gather_p.family = "indexing"
gather_p.linear = True  # in the operand; the indices are non-linear
gather_p.def_impl(_gather_impl)


@gather_p.def_abstract_eval
def _gather_abstract(x, idx, *, axes):
    return ShapedArray(_gather_shape(x, idx, axes, "gather"), x.dtype)


@gather_p.def_jvp
def _gather_jvp(primals, tangents, *, axes):
    x, idx = primals
    out = gather_p.bind(x, idx, axes=axes)
    if type(tangents[0]) is Zero:
        return out, Zero(aval_of(out))
    return out, gather_p.bind(tangents[0], idx, axes=axes)


@gather_p.def_transpose
def _gather_transpose(ct, x, idx, *, axes):
    return [scatter_add_p.bind(zeros(x.aval), idx, ct, axes=axes), None]


def _iota_index(batch_shape_idx, size):
    """An index column addressing lane b for every index position: shape (size, *batch, 1)."""
    return iota(np.int64, (size,) + tuple(batch_shape_idx) + (1,), 0)


def _with_batch_index(idx, size):
    """Prepend the lane number to every index tuple of a batched index array (batch axis first)."""
    idx = convert(idx, np.int64) if idx.dtype != np.int64 else idx
    return concatenate([_iota_index(idx.shape[1:-1], size), idx], idx.ndim - 1)


def _bcast_front(a, d, size):
    if d is not None:
        return bdim_to_front(a, d)
    return broadcast_in_dim(a, (size,) + a.shape, tuple(range(1, a.ndim + 1)))


@gather_p.def_vmap
def _gather_vmap(args, dims, *, axes):
    (x, idx), (dx, di) = args, dims
    if di is None:
        # only the operand is batched: keep its batch axis as a non-indexed axis
        x = bdim_to_front(x, dx)
        out = gather_p.bind(x, idx, axes=tuple(a + 1 for a in axes))
        return out, idx.ndim - 1
    size = idx.shape[di]
    idx = bdim_to_front(idx, di)
    if dx is None:
        return gather_p.bind(x, idx, axes=axes), 0
    x = bdim_to_front(x, dx)
    return gather_p.bind(x, _with_batch_index(idx, size), axes=(0,) + tuple(a + 1 for a in axes)), 0


def gather(x, idx, axes):
    """``x`` indexed along ``axes`` by the index tuples in the last axis of ``idx``."""
    return gather_p.bind(x, idx, axes=tuple(int(a) for a in axes))


# --- scatter / scatter_add ------------------------------------------------------------------------------------------


_COMBINE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def scatter_impl(mode):
    combine = _COMBINE.get(mode)

    def impl(x, idx, upd, *, axes):
        out = np.array(x, copy=True)
        view = _front(out, axes)
        idx = np.asarray(idx)
        if mode == "add" and len(axes) == 1 and view is out and sparse.add_rows(out, idx, upd):
            return out  # along axis 0 on numba's kernel: np.add.at is several times slower
        key = tuple(idx[..., i] for i in range(len(axes)))
        try:
            if combine is None:
                view[key] = upd
            else:
                # ufunc.at applies every update in turn, so repeated indices combine (np.maximum.at semantics)
                combine.at(view, key, upd)
        except IndexError as e:
            raise IndexError(f"scatter: index out of bounds for operand shape {out.shape}: {e}") from None
        return out

    return impl


def scatter_abstract(name, ok=None):
    def rule(x, idx, upd, *, axes):
        if ok is not None and x.dtype not in ok:
            raise DTypeError(f"{name}: unsupported dtype {x.dtype.name}; expected one of {sorted(d.name for d in ok)}")
        shape = _gather_shape(x, idx, axes, name)
        if upd.shape != shape or upd.dtype != x.dtype:
            raise ShapeError(
                f"{name}: updates must be {ShapedArray(shape, x.dtype).str_short()}, got {upd.str_short()}"
            )
        return ShapedArray(x.shape, x.dtype)

    return rule


scatter_add_p = Primitive("scatter_add", linear=True)
scatter_add_p.family = "indexing"
scatter_add_p.def_impl(scatter_impl("add"))
scatter_add_p.def_abstract_eval(scatter_abstract("scatter_add"))

scatter_p = Primitive("scatter", linear=True)
scatter_p.family = "indexing"
scatter_p.def_impl(scatter_impl("set"))
scatter_p.def_abstract_eval(scatter_abstract("scatter"))


def _scatter_jvp_for(p):
    def rule(primals, tangents, *, axes):
        x, idx, upd = primals
        tx, _, tu = tangents
        out = p.bind(x, idx, upd, axes=axes)
        if type(tx) is Zero and type(tu) is Zero:
            return out, Zero(aval_of(out))
        return out, p.bind(instantiate(tx), idx, instantiate(tu), axes=axes)

    return rule


scatter_add_p.def_jvp(_scatter_jvp_for(scatter_add_p))
scatter_p.def_jvp(_scatter_jvp_for(scatter_p))


@scatter_add_p.def_transpose
def _scatter_add_transpose(ct, x, idx, upd, *, axes):
    return [
        ct if is_undefined(x) else None,
        None,
        gather_p.bind(ct, idx, axes=axes) if is_undefined(upd) else None,
    ]


@scatter_p.def_transpose
def _scatter_transpose(ct, x, idx, upd, *, axes):
    # with repeated indices the last write wins in the primal; the transpose assumes unique indices (as XLA does)
    return [
        scatter_p.bind(ct, idx, zeros(upd.aval if is_undefined(upd) else aval_of(upd)), axes=axes)
        if is_undefined(x)
        else None,
        None,
        gather_p.bind(ct, idx, axes=axes) if is_undefined(upd) else None,
    ]


def scatter_vmap(p):
    def rule(args, dims, *, axes):
        (x, idx, upd), (dx, di, du) = args, dims
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        x = _bcast_front(x, dx, size)
        upd = _bcast_front(upd, du, size)
        idx = _bcast_front(idx, di, size)
        return p.bind(x, _with_batch_index(idx, size), upd, axes=(0,) + tuple(a + 1 for a in axes)), 0

    return rule


scatter_add_p.def_vmap(scatter_vmap(scatter_add_p))
scatter_p.def_vmap(scatter_vmap(scatter_p))


def scatter_add(x, idx, updates, axes):
    """``x`` with ``updates`` added at the index tuples ``idx`` (repeated indices accumulate)."""
    return scatter_add_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


def scatter(x, idx, updates, axes):
    """``x`` with ``updates`` written at the index tuples ``idx`` (with repeats, the last write wins)."""
    return scatter_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


# --- dynamic_slice / dynamic_update_slice ---------------------------------------------------------------------------

dynamic_slice_p = Primitive("dynamic_slice")
dynamic_slice_p.family = "indexing"
dynamic_slice_p.no_rule["transpose"] = "linear only in the operand; its transpose is dynamic_update_slice"


def _clamped_starts(shape, starts, sizes):
    return tuple(int(min(max(int(s), 0), n - z)) for n, s, z in zip(shape, starts, sizes))


def _ds_impl(x, *starts, slice_sizes):
    x = np.asarray(x)
    st = _clamped_starts(x.shape, starts, slice_sizes)
    return x[tuple(slice(s, s + z) for s, z in zip(st, slice_sizes))]


dynamic_slice_p.def_impl(_ds_impl)


@dynamic_slice_p.def_abstract_eval
def _ds_abstract(x, *starts, slice_sizes):
    if len(starts) != x.ndim or len(slice_sizes) != x.ndim:
        raise ShapeError(
            f"dynamic_slice: got {len(starts)} starts and {len(slice_sizes)} slice_sizes for an operand of shape "
            f"{x.shape}; need {x.ndim} of each"
        )
    for s in starts:
        if s.shape != () or s.dtype not in dtypes.INTEGER:
            raise ShapeError("dynamic_slice: starts must be integer scalars")
    if any(not 0 <= z <= n for z, n in zip(slice_sizes, x.shape)):
        raise ShapeError(f"dynamic_slice: slice_sizes {slice_sizes} exceed the operand shape {x.shape}")
    return ShapedArray(tuple(slice_sizes), x.dtype)


@dynamic_slice_p.def_jvp
def _ds_jvp(primals, tangents, *, slice_sizes):
    x, *starts = primals
    out = dynamic_slice_p.bind(x, *starts, slice_sizes=slice_sizes)
    if type(tangents[0]) is Zero:
        return out, Zero(aval_of(out))
    return out, dynamic_slice_p.bind(tangents[0], *starts, slice_sizes=slice_sizes)


dynamic_slice_p.linear = True  # linear in the operand (starts are non-linear index operands)


@dynamic_slice_p.def_transpose
def _ds_transpose(ct, x, *starts, slice_sizes):
    return [dynamic_update_slice(zeros(x.aval), ct, starts)] + [None] * len(starts)


@dynamic_slice_p.def_vmap
def _ds_vmap(args, dims, *, slice_sizes):
    x, *starts = args
    dx, *dstarts = dims
    if all(d is None for d in dstarts):
        x = bdim_to_front(x, dx)
        zero = _wrap(np.zeros((), starts[0].dtype if starts else np.int64))
        return dynamic_slice_p.bind(x, zero, *starts, slice_sizes=(x.shape[0],) + tuple(slice_sizes)), 0
    # batched start indices: a gather of the window for every lane
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    x = bdim_to_front(x, dx) if dx is not None else broadcast_in_dim(x, (size,) + x.shape, tuple(range(1, x.ndim + 1)))
    idx = _window_indices(x.shape[1:], starts, dstarts, slice_sizes, size)
    return gather(x, idx, tuple(range(x.ndim))), 0


def _window_indices(shape, starts, dstarts, sizes, batch):
    """Index tuples (batch, *window, ndim+1) addressing each lane's clamped window; used by batched dynamic ops."""
    nd = len(shape)
    out_shape = (batch,) + tuple(sizes)
    cols = [iota(np.int64, out_shape + (1,), 0)]
    for i, (s, d, n, z) in enumerate(zip(starts, dstarts, shape, sizes)):
        s = convert_int(s)
        s = bdim_to_front(s, d) if d is not None else broadcast_in_dim(s, (batch,), ())
        s = minimum(maximum(s, _wrap(np.zeros((), np.int64))), _wrap(np.asarray(n - z, np.int64)))
        base = broadcast_in_dim(s, out_shape + (1,), (0,))
        cols.append(add(base, iota(np.int64, out_shape + (1,), i + 1)))
    del nd
    return concatenate(cols, len(out_shape))


def convert_int(s):
    return convert(s, np.int64) if s.dtype != np.int64 else s


@public
def dynamic_slice(x, starts, slice_sizes, *, op="dynamic_slice"):
    """``x[s0:s0+z0, ...]`` with traced starts; starts are clamped so the window stays in bounds (as in XLA)."""
    starts = [s if isinstance(s, Tensor) else _wrap(array_from(s, op=op)) for s in starts]
    sizes = check_shape(slice_sizes, "dynamic_slice", "slice_sizes")
    # the eager impl would clamp silently; the abstract rule names what is wrong
    _ds_abstract(aval_of(x), *[aval_of(s) for s in starts], slice_sizes=sizes)
    return dynamic_slice_p.bind(x, *starts, slice_sizes=sizes)


dynamic_update_slice_p = Primitive("dynamic_update_slice", linear=True)
dynamic_update_slice_p.family = "indexing"


def _dus_impl(x, update, *starts):
    out = np.array(x, copy=True)
    st = _clamped_starts(out.shape, starts, update.shape)
    out[tuple(slice(s, s + z) for s, z in zip(st, update.shape))] = update
    return out


dynamic_update_slice_p.def_impl(_dus_impl)


@dynamic_update_slice_p.def_abstract_eval
def _dus_abstract(x, update, *starts):
    if update.dtype != x.dtype or update.ndim != x.ndim or any(u > n for u, n in zip(update.shape, x.shape)):
        raise ShapeError(f"dynamic_update_slice: update {update.str_short()} does not fit into operand {x.str_short()}")
    if len(starts) != x.ndim:
        raise ShapeError(f"dynamic_update_slice: need {x.ndim} start indices")
    return ShapedArray(x.shape, x.dtype)


@dynamic_update_slice_p.def_jvp
def _dus_jvp(primals, tangents):
    x, u, *starts = primals
    tx, tu = tangents[0], tangents[1]
    out = dynamic_update_slice_p.bind(x, u, *starts)
    if type(tx) is Zero and type(tu) is Zero:
        return out, Zero(aval_of(out))
    return out, dynamic_update_slice_p.bind(instantiate(tx), instantiate(tu), *starts)


@dynamic_update_slice_p.def_transpose
def _dus_transpose(ct, x, u, *starts):
    out = [None, None] + [None] * len(starts)
    if is_undefined(x):
        out[0] = dynamic_update_slice_p.bind(ct, zeros(u.aval if is_undefined(u) else aval_of(u)), *starts)
    if is_undefined(u):
        out[1] = dynamic_slice_p.bind(ct, *starts, slice_sizes=u.aval.shape)
    return out


@dynamic_update_slice_p.def_vmap
def _dus_vmap(args, dims):
    x, u, *starts = args
    dx, du, *dstarts = dims
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)

    def front(a, d):
        return (
            bdim_to_front(a, d)
            if d is not None
            else broadcast_in_dim(a, (size,) + a.shape, tuple(range(1, a.ndim + 1)))
        )

    if all(d is None for d in dstarts):
        zero = _wrap(np.zeros((), starts[0].dtype if starts else np.int64))
        return dynamic_update_slice_p.bind(front(x, dx), front(u, du), zero, *starts), 0
    x, u = front(x, dx), front(u, du)
    idx = _window_indices(x.shape[1:], starts, dstarts, u.shape[1:], size)
    return scatter(x, idx, u, tuple(range(x.ndim))), 0


@public
def dynamic_update_slice(x, update, starts, *, op="dynamic_update_slice"):
    """Write ``update`` into ``x`` at traced ``starts`` (clamped so it fits)."""
    starts = [s if isinstance(s, Tensor) else _wrap(array_from(s, op=op)) for s in starts]
    _dus_abstract(aval_of(x), aval_of(update), *[aval_of(s) for s in starts])
    return dynamic_update_slice_p.bind(x, update, *starts)
