"""Gather and scatter over integer index arrays.

Canonical form: ``idx`` has shape ``batch + (k,)`` and addresses the operand axes ``axes`` (k of them, sorted).
``gather(x, idx, axes)`` has shape ``batch + (x's other axes, in order)``; ``scatter``/``scatter_add`` write
``updates`` of that shape into ``x``. NumPy-style indexing in ``funclib.ops.indexing`` lowers onto these.
Indices must be in bounds (negative ones are wrapped by the public indexing code); out-of-bounds indices raise.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Zero, aval_of, is_undefined
from ..errors import ShapeError
from ..kernels import sparse
from ._util import bdim_to_front, instantiate, zeros


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
    from .shape import iota

    return iota(np.int64, (size,) + tuple(batch_shape_idx) + (1,), 0)


def _with_batch_index(idx, size):
    """Prepend the lane number to every index tuple of a batched index array (batch axis first)."""
    from .elementwise import convert
    from .shape import concatenate

    idx = convert(idx, np.int64) if idx.dtype != np.int64 else idx
    return concatenate([_iota_index(idx.shape[1:-1], size), idx], idx.ndim - 1)


def _bcast_front(a, d, size):
    from .shape import broadcast_in_dim

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


def _scatter_impl_for(mode):
    def impl(x, idx, upd, *, axes):
        out = np.array(x, copy=True)
        view = _front(out, axes)
        idx = np.asarray(idx)
        if mode == "add" and len(axes) == 1 and view is out and sparse.add_rows(out, idx, upd):
            return out  # along axis 0 on numba's kernel: np.add.at is several times slower
        key = tuple(idx[..., i] for i in range(len(axes)))
        try:
            if mode == "add":
                np.add.at(view, key, upd)
            else:
                view[key] = upd
        except IndexError as e:
            raise IndexError(f"scatter: index out of bounds for operand shape {out.shape}: {e}") from None
        return out

    return impl


def _scatter_abstract_for(name):
    def rule(x, idx, upd, *, axes):
        shape = _gather_shape(x, idx, axes, name)
        if upd.shape != shape or upd.dtype != x.dtype:
            raise ShapeError(
                f"{name}: updates must be {ShapedArray(shape, x.dtype).str_short()}, got {upd.str_short()}"
            )
        return ShapedArray(x.shape, x.dtype)

    return rule


scatter_add_p = Primitive("scatter_add", linear=True)
scatter_add_p.family = "indexing"
scatter_add_p.def_impl(_scatter_impl_for("add"))
scatter_add_p.def_abstract_eval(_scatter_abstract_for("scatter_add"))

scatter_p = Primitive("scatter", linear=True)
scatter_p.family = "indexing"
scatter_p.def_impl(_scatter_impl_for("set"))
scatter_p.def_abstract_eval(_scatter_abstract_for("scatter"))


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
    from ._util import zeros

    return [
        scatter_p.bind(ct, idx, zeros(upd.aval if is_undefined(upd) else aval_of(upd)), axes=axes)
        if is_undefined(x)
        else None,
        None,
        gather_p.bind(ct, idx, axes=axes) if is_undefined(upd) else None,
    ]


def _scatter_vmap_for(p):
    def rule(args, dims, *, axes):
        (x, idx, upd), (dx, di, du) = args, dims
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        x = _bcast_front(x, dx, size)
        upd = _bcast_front(upd, du, size)
        idx = _bcast_front(idx, di, size)
        return p.bind(x, _with_batch_index(idx, size), upd, axes=(0,) + tuple(a + 1 for a in axes)), 0

    return rule


scatter_add_p.def_vmap(_scatter_vmap_for(scatter_add_p))
scatter_p.def_vmap(_scatter_vmap_for(scatter_p))


def scatter_add(x, idx, updates, axes):
    """``x`` with ``updates`` added at the index tuples ``idx`` (repeated indices accumulate)."""
    return scatter_add_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


def scatter(x, idx, updates, axes):
    """``x`` with ``updates`` written at the index tuples ``idx`` (with repeats, the last write wins)."""
    return scatter_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))
