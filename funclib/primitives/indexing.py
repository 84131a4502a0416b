"""Gather and scatter over integer index arrays.

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
from ..core import Primitive, ShapedArray, Zero, _wrap, aval_of, is_undefined
from ..errors import DTypeError, ShapeError
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


_COMBINE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_impl_for(mode):
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


def _scatter_abstract_for(name, ok=None):
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


# --- scatter_mul / scatter_max / scatter_min: x combined with every update at its index, repeats included -----------
# Primitives rather than gather-combine-scatter, which keeps only one of several updates to the same element.

scatter_mul_p = Primitive("scatter_mul")
scatter_mul_p.family = "indexing"
scatter_mul_p.linear = True  # in the operand; not in the updates
scatter_mul_p.def_impl(_scatter_impl_for("mul"))
scatter_mul_p.def_abstract_eval(_scatter_abstract_for("scatter_mul", frozenset(dtypes.NUMERIC)))
scatter_mul_p.def_vmap(_scatter_vmap_for(scatter_mul_p))


def _ones(aval):
    return _wrap(np.ones(aval.shape, aval.dtype))


def _scalar(v, dtype):
    return _wrap(np.asarray(v, dtype))


@scatter_mul_p.def_jvp
def _scatter_mul_jvp(primals, tangents, *, axes):
    from .elementwise import safe_mul

    x, idx, u = primals
    tx, _, tu = tangents
    out = scatter_mul_p.bind(x, idx, u, axes=axes)
    if out.dtype not in dtypes.INEXACT or (type(tx) is Zero and type(tu) is Zero):
        return out, Zero(aval_of(out))
    acc = None
    if type(tx) is not Zero:
        acc = safe_mul(tx, scatter_mul_p.bind(_ones(aval_of(x)), idx, u, axes=axes))
    if type(tu) is not Zero:
        # d out[i] / d u_j = x[i] * (the product of the other updates to element i)
        others = _product_of_others(u, idx, axes, aval_of(x).shape)
        t = scatter_add_p.bind(zeros_like_value(x), idx, safe_mul(instantiate(tu), others), axes=axes)
        t = safe_mul(t, x)
        acc = t if acc is None else acc + t
    return out, acc


def _product_of_others(u, idx, axes, x_shape):
    """For each update, the product of the other updates to its element of the operand.

    A polynomial in ``u`` built from products and selections (no division, so zeros among the updates are no
    special case), so its derivatives of every order are exact: the updates are sorted by target, and each one's
    exclusive prefix and suffix products within its target's run are multiplied.
    """
    from .elementwise import bitwise_or, convert, not_equal, select
    from .shape import broadcast_in_dim, concatenate, iota, reshape, rev, slice_
    from .sort import sort

    ia = aval_of(idx)
    batch, k = ia.shape[:-1], ia.shape[-1]
    n = int(np.prod(batch, dtype=np.int64))
    rest = tuple(aval_of(u).shape[len(batch) :])
    if n <= 1:
        return _ones(aval_of(u))
    idx = reshape(convert(idx, np.int64), (n, k))
    target = None
    stride = 1
    for j in range(k - 1, -1, -1):  # each index tuple as one row-major number
        col = reshape(slice_(idx, (0, j), (n, j + 1)), (n,))
        term = col if stride == 1 else col * _scalar(stride, np.int64)
        target = term if target is None else target + term
        stride *= x_shape[axes[j]]
    target, order = sort([target, iota(np.int64, (n,), 0)], 0)
    vals = gather_p.bind(reshape(u, (n,) + rest), reshape(order, (n, 1)), axes=(0,))
    differs = not_equal(slice_(target, (1,), (n,)), slice_(target, (0,), (n - 1,)))
    true1 = _wrap(np.ones((1,), bool))
    starts = concatenate([true1, differs], 0)
    ends = concatenate([differs, true1], 0)

    def wide(flags):
        return broadcast_in_dim(flags, (n,) + rest, (0,))

    def shift(v, fill):  # v moved one place towards the end, ``fill`` in front
        pad = _wrap(np.full((1,) + rest, fill, aval_of(v).dtype))
        return concatenate([pad, slice_(v, (0,) * v.ndim, (n - 1,) + rest)], 0)

    def exclusive_prefix(v, first):
        # a segmented inclusive product scan (Hillis-Steele doubling), then shifted by one within each run
        inc, covered, d = v, first, 1
        while d < n:
            pad = _wrap(np.ones((d,) + rest, aval_of(v).dtype))
            prev = concatenate([pad, slice_(inc, (0,) * inc.ndim, (n - d,) + rest)], 0)
            prev_covered = concatenate([_wrap(np.ones((d,), bool)), slice_(covered, (0,), (n - d,))], 0)
            inc = select(wide(covered), inc, inc * prev)
            covered = bitwise_or(covered, prev_covered)
            d *= 2
        return select(wide(first), _ones(aval_of(v)), shift(inc, 1))

    before = exclusive_prefix(vals, starts)
    after = rev(exclusive_prefix(rev(vals, (0,)), rev(ends, (0,))), (0,))
    sorted_others = before * after
    back = scatter_add_p.bind(zeros_like_value(sorted_others), reshape(order, (n, 1)), sorted_others, axes=(0,))
    return reshape(back, aval_of(u).shape)


@scatter_mul_p.def_transpose
def _scatter_mul_transpose(ct, x, idx, u, *, axes):
    from .elementwise import safe_mul

    if is_undefined(u):
        raise TypeError("scatter_mul is linear in its operand only, not in its updates")
    return [safe_mul(ct, scatter_mul_p.bind(_ones(x.aval), idx, u, axes=axes)), None, None]


def zeros_like_value(x):
    a = aval_of(x)
    return _wrap(np.zeros(a.shape, a.dtype))


def _scatter_extremum(name, mode):
    p = Primitive(name)
    p.family = "indexing"
    p.def_impl(_scatter_impl_for(mode))
    p.def_abstract_eval(_scatter_abstract_for(name, frozenset(dtypes.INTEGER + dtypes.REAL_FLOATING)))
    p.def_vmap(_scatter_vmap_for(p))
    p.no_rule["transpose"] = "not linear"

    @p.def_jvp
    def _jvp(primals, tangents, *, axes):
        from .elementwise import convert, safe_div

        x, idx, u = primals
        tx, _, tu = tangents
        out = p.bind(x, idx, u, axes=axes)
        if out.dtype not in dtypes.INEXACT or (type(tx) is Zero and type(tu) is Zero):
            return out, Zero(aval_of(out))
        # the result's tangent is the mean of the tangents of every value equal to it (x's and the updates'):
        # ties share the derivative equally, as for reduce_max and maximum
        from_x = convert(x == out, out.dtype)
        from_u = convert(u == gather_p.bind(out, idx, axes=axes), out.dtype)
        zero = zeros_like_value(x)
        count = from_x + scatter_add_p.bind(zero, idx, from_u, axes=axes)
        num = scatter_add_p.bind(instantiate(tx) * from_x, idx, instantiate(tu) * from_u, axes=axes)
        return out, safe_div(num, count)  # count is 0 only where out is NaN, and num is then 0

    return p


scatter_max_p = _scatter_extremum("scatter_max", "max")
scatter_min_p = _scatter_extremum("scatter_min", "min")


def scatter_add(x, idx, updates, axes):
    """``x`` with ``updates`` added at the index tuples ``idx`` (repeated indices accumulate)."""
    return scatter_add_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


def scatter(x, idx, updates, axes):
    """``x`` with ``updates`` written at the index tuples ``idx`` (with repeats, the last write wins)."""
    return scatter_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


def scatter_mul(x, idx, updates, axes):
    """``x`` multiplied by ``updates`` at the index tuples ``idx`` (repeated indices multiply in turn)."""
    return scatter_mul_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


def scatter_max(x, idx, updates, axes):
    """``x`` with ``maximum(x, u)`` at the index tuples ``idx`` for every update ``u`` (``np.maximum.at``)."""
    return scatter_max_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


def scatter_min(x, idx, updates, axes):
    """``x`` with ``minimum(x, u)`` at the index tuples ``idx`` for every update ``u`` (``np.minimum.at``)."""
    return scatter_min_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))
