"""Shape manipulation with NumPy's signatures: reshape (C and Fortran order), the stack and split families,
flips and rotations, insert/delete/append, resize, trim_zeros and the shape queries."""

from __future__ import annotations

import builtins
import operator

import numpy as np

from .. import dtypes
from ..core import Tensor, _wrap
from ..errors import ShapeError
from ..ops import manipulation as M
from ..ops.elementwise import trunc
from ..ops.indexing import take as _take
from ..primitives import shape as S
from ..primitives._util import broadcast_shapes as _bshapes
from ..primitives._util import normalize_axis
from ..primitives.elementwise import convert
from ._util import asarray, axes_tuple, axis_int, check_order, concrete, no_out, static_int

__all__ = [
    "reshape",
    "ravel",
    "transpose",
    "permute_dims",
    "matrix_transpose",
    "swapaxes",
    "moveaxis",
    "rollaxis",
    "expand_dims",
    "squeeze",
    "concatenate",
    "concat",
    "stack",
    "vstack",
    "hstack",
    "dstack",
    "column_stack",
    "block",
    "unstack",
    "split",
    "array_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "tile",
    "repeat",
    "flip",
    "fliplr",
    "flipud",
    "rot90",
    "roll",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "broadcast_to",
    "broadcast_arrays",
    "broadcast_shapes",
    "append",
    "insert",
    "delete",
    "resize",
    "trim_zeros",
    "ndim",
    "shape",
    "size",
]


def _shape_arg(shape, op) -> tuple[int, ...]:
    if isinstance(shape, (builtins.int, np.integer)):
        return (int(shape),)
    return tuple(operator.index(d) for d in shape)


def reshape(a, /, shape, order="C", *, copy=None) -> Tensor:
    """``a`` with a new shape (one entry may be -1), read and written in C (row-major) or ``order='F'``
    (column-major) index order.

    >>> fnp.reshape(fnp.arange(6), (2, 3), order="F")
    Tensor([[0, 2, 4],
           [1, 3, 5]], dtype=int64)
    """
    check_order(order, "reshape", ("C", "F", "A"))
    x = asarray(a, "reshape")
    shape = _shape_arg(shape, "reshape")
    if order == "F":
        rev = tuple(range(x.ndim))[::-1]
        y = S.reshape(S.transpose(x, rev), shape[::-1])
        return S.transpose(y, tuple(range(y.ndim))[::-1])
    return S.reshape(x, shape)


def ravel(a, order="C") -> Tensor:
    """``a`` flattened to 1-D, in C (or ``order='F'``) index order.

    >>> fnp.ravel([[1, 2], [3, 4]], order="F")
    Tensor([1, 3, 2, 4], dtype=int64)
    """
    check_order(order, "ravel")
    x = asarray(a, "ravel")
    if order == "F":
        x = S.transpose(x, tuple(range(x.ndim))[::-1])
    return S.reshape(x, (-1,))


def transpose(a, axes=None) -> Tensor:
    """``a`` with its axes reversed, or permuted by ``axes``.

    >>> fnp.transpose(fnp.ones((2, 3))).shape
    (3, 2)
    """
    return M.transpose(asarray(a, "transpose"), axes)


def permute_dims(a, axes=None) -> Tensor:
    """The Array API name of ``transpose``."""
    return M.transpose(asarray(a, "permute_dims"), axes)


def matrix_transpose(x, /) -> Tensor:
    """Swap the last two axes.

    >>> fnp.matrix_transpose(fnp.ones((4, 2, 3))).shape
    (4, 3, 2)
    """
    return M.matrix_transpose(asarray(x, "matrix_transpose"))


def swapaxes(a, axis1, axis2) -> Tensor:
    """``a`` with two axes interchanged."""
    return M.swapaxes(asarray(a, "swapaxes"), axis1, axis2)


def moveaxis(a, source, destination) -> Tensor:
    """``a`` with axes moved to new positions (the others keep their order).

    >>> fnp.moveaxis(fnp.ones((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    return M.moveaxis(asarray(a, "moveaxis"), source, destination)


def rollaxis(a, axis, start=0) -> Tensor:
    """Move ``axis`` so that it lies before position ``start`` (prefer ``moveaxis``).

    >>> fnp.rollaxis(fnp.ones((2, 3, 4)), 2).shape
    (4, 2, 3)
    """
    x = asarray(a, "rollaxis")
    n = x.ndim
    axis = axis_int(axis, n, "rollaxis")
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start <= n:
        raise ValueError(f"numpy.rollaxis: start={start} must lie in [-{n}, {n}]")
    if axis < start:
        start -= 1
    if axis == start:
        return x
    order = [i for i in range(n) if i != axis]
    order.insert(start, axis)
    return S.transpose(x, tuple(order))


def expand_dims(a, axis) -> Tensor:
    """``a`` with size-1 axes inserted at the positions ``axis`` (an int or tuple) of the result."""
    return M.expand_dims(asarray(a, "expand_dims"), axis=axis)


def squeeze(a, axis=None) -> Tensor:
    """``a`` without its size-1 axes (or only those in ``axis``, which must have size 1)."""
    x = asarray(a, "squeeze")
    if axis is not None:
        for ax in axes_tuple(axis, x.ndim, "squeeze"):
            if x.shape[ax] != 1:
                raise ValueError(f"numpy.squeeze: axis {ax} has size {x.shape[ax]}; only size-1 axes can be removed")
    return M.squeeze(x, axis)


def _join_prep(arrays, dtype, casting, op):
    if isinstance(arrays, Tensor) or (isinstance(arrays, np.ndarray)):
        arrays = list(M.unstack(asarray(arrays, op))) if arrays.ndim else [arrays]
    xs = [asarray(a, op) for a in arrays]
    if not xs:
        raise ValueError(f"numpy.{op}: needs at least one array to join")
    d = dtypes.result_type(*xs) if dtype is None else dtypes.canonicalize(dtype)
    if dtype is not None:
        for x in xs:
            if not np.can_cast(x.dtype, d, casting=casting):
                raise TypeError(
                    f"numpy.{op}: cannot cast {x.dtype.name} to {d.name} with casting={casting!r}; pass "
                    "casting='unsafe' to allow it"
                )
    return [x if x.dtype == d else convert(x, d) for x in xs]


def concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind") -> Tensor:
    """Join arrays along an existing axis (``axis=None`` flattens them first).

    >>> fnp.concatenate(([1, 2], [3]))
    Tensor([1, 2, 3], dtype=int64)
    """
    no_out(out, "concatenate")
    return M.concat(_join_prep(arrays, dtype, casting, "concatenate"), axis=axis)


def concat(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind") -> Tensor:
    """The Array API name of ``concatenate``."""
    no_out(out, "concat")
    return M.concat(_join_prep(arrays, dtype, casting, "concat"), axis=axis)


def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind") -> Tensor:
    """Join arrays of one shape along a new axis.

    >>> fnp.stack([[1, 2], [3, 4]], axis=1)
    Tensor([[1, 3],
           [2, 4]], dtype=int64)
    """
    no_out(out, "stack")
    return M.stack(_join_prep(arrays, dtype, casting, "stack"), axis=axis)


def vstack(tup, *, dtype=None, casting="same_kind") -> Tensor:
    """Stack arrays vertically (along the first axis; 1-D arrays become rows)."""
    return M.concat([M.atleast_2d(x) for x in _join_prep(tup, dtype, casting, "vstack")], axis=0)


def hstack(tup, *, dtype=None, casting="same_kind") -> Tensor:
    """Stack arrays horizontally (along the second axis; 1-D arrays are joined end to end)."""
    xs = [M.atleast_1d(x) for x in _join_prep(tup, dtype, casting, "hstack")]
    return M.concat(xs, axis=0 if xs[0].ndim == 1 else 1)


def dstack(tup) -> Tensor:
    """Stack arrays along the third axis (after making them at least 3-D)."""
    return M.concat([_at3(x) for x in _join_prep(tup, None, "same_kind", "dstack")], axis=2)


def column_stack(tup) -> Tensor:
    """Stack 1-D arrays as columns of a 2-D array (2-D arrays are joined as they are).

    >>> fnp.column_stack(([1, 2], [3, 4]))
    Tensor([[1, 3],
           [2, 4]], dtype=int64)
    """
    xs = _join_prep(tup, None, "same_kind", "column_stack")
    return M.concat([S.reshape(x, (-1, 1)) if x.ndim < 2 else x for x in xs], axis=1)


def _block_depth(arrays, op):
    if isinstance(arrays, tuple):
        raise TypeError(f"numpy.{op}: nested sequences must be lists, not tuples")
    if isinstance(arrays, list):
        if not arrays:
            raise ValueError(f"numpy.{op}: lists cannot be empty")
        depths = {_block_depth(a, op) for a in arrays}
        if len(depths) != 1:
            raise ValueError(f"numpy.{op}: list depths are mismatched")
        return depths.pop() + 1
    return 0


def block(arrays) -> Tensor:
    """Assemble an array from nested lists of blocks: the innermost lists join along the last axis, each
    level out along the axis before.

    >>> fnp.block([[fnp.eye(2), fnp.zeros((2, 1))], [fnp.ones((1, 3))]]).shape
    (3, 3)
    """
    depth = _block_depth(arrays, "block")

    def leaves(a):
        return [x for b in a for x in leaves(b)] if isinstance(a, list) else [asarray(a, "block")]

    nd = builtins.max([depth] + [x.ndim for x in leaves(arrays)])

    def assemble(a, level):
        if not isinstance(a, list):
            x = asarray(a, "block")
            return S.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape)) if x.ndim < nd else x
        parts = _join_prep([assemble(b, level + 1) for b in a], None, "same_kind", "block")
        return M.concat(parts, axis=nd - depth + level) if len(parts) > 1 else parts[0]

    return assemble(arrays, 0)


def unstack(x, /, *, axis=0) -> tuple[Tensor, ...]:
    """Split ``x`` along ``axis`` into a tuple of arrays without that axis."""
    return M.unstack(asarray(x, "unstack"), axis=axis)


def _split_bounds(n, ios, op, equal):
    if isinstance(ios, (builtins.int, np.integer)) or (isinstance(ios, (Tensor, np.ndarray)) and np.ndim(ios) == 0):
        k = static_int(ios, op, "indices_or_sections")
        if k <= 0:
            raise ValueError(f"numpy.{op}: the number of sections must be positive, got {k}")
        if equal and n % k:
            raise ValueError(f"numpy.{op}: an axis of size {n} cannot be split into {k} equal sections; use "
                             "fnp.array_split for unequal ones")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        cuts = np.cumsum([0] + sizes)
        return list(zip(cuts[:-1], cuts[1:]))
    idx = [static_int(i, op, "indices") for i in np.asarray(concrete(ios, op, "pass the indices as a list"))]
    pts = [0] + idx + [n]
    out = []
    for a, b in zip(pts[:-1], pts[1:]):
        lo, hi, _ = slice(a, b).indices(n)
        out.append((lo, builtins.max(lo, hi)))
    return out


def _split(ary, ios, axis, op, equal):
    x = asarray(ary, op)
    ax = axis_int(axis, x.ndim, op)
    out = []
    for lo, hi in _split_bounds(x.shape[ax], ios, op, equal):
        start, limit = [0] * x.ndim, list(x.shape)
        start[ax], limit[ax] = int(lo), int(hi)
        out.append(S.slice_(x, start, limit))
    return out


def split(ary, indices_or_sections, axis=0) -> list[Tensor]:
    """Split into equal sections (an int that must divide the axis) or at the given indices.

    >>> [p.shape for p in fnp.split(fnp.arange(6), [1, 4])]
    [(1,), (3,), (2,)]
    """
    return _split(ary, indices_or_sections, axis, "split", True)


def array_split(ary, indices_or_sections, axis=0) -> list[Tensor]:
    """``split`` that allows unequal sections: the first ``n % k`` sections are one longer.

    >>> [p.shape for p in fnp.array_split(fnp.arange(5), 3)]
    [(2,), (2,), (1,)]
    """
    return _split(ary, indices_or_sections, axis, "array_split", False)


def hsplit(ary, indices_or_sections) -> list[Tensor]:
    """``split`` along the second axis (the first for 1-D arrays)."""
    x = asarray(ary, "hsplit")
    if x.ndim == 0:
        raise ValueError("numpy.hsplit: needs an array of at least 1 dimension")
    return _split(x, indices_or_sections, 1 if x.ndim > 1 else 0, "hsplit", True)


def vsplit(ary, indices_or_sections) -> list[Tensor]:
    """``split`` along the first axis of an array of at least 2 dimensions."""
    x = asarray(ary, "vsplit")
    if x.ndim < 2:
        raise ValueError("numpy.vsplit: needs an array of at least 2 dimensions")
    return _split(x, indices_or_sections, 0, "vsplit", True)


def dsplit(ary, indices_or_sections) -> list[Tensor]:
    """``split`` along the third axis of an array of at least 3 dimensions."""
    x = asarray(ary, "dsplit")
    if x.ndim < 3:
        raise ValueError("numpy.dsplit: needs an array of at least 3 dimensions")
    return _split(x, indices_or_sections, 2, "dsplit", True)


def tile(A, reps) -> Tensor:
    """``A`` repeated ``reps`` times along each axis.

    >>> fnp.tile([1, 2], (2, 2))
    Tensor([[1, 2, 1, 2],
           [1, 2, 1, 2]], dtype=int64)
    """
    reps = tuple(static_int(r, "tile", "reps") for r in np.atleast_1d(np.asarray(reps)))
    return M.tile(asarray(A, "tile"), reps)


def repeat(a, repeats, axis=None) -> Tensor:
    """Each element repeated ``repeats`` times (an int, or one count per element) along ``axis``
    (flattened when None). Counts given as a traced array make the shape data-dependent.

    >>> fnp.repeat([1, 2], [1, 3])
    Tensor([1, 2, 2, 2], dtype=int64)
    """
    if isinstance(repeats, (np.ndarray, list, tuple)):
        repeats = [static_int(r, "repeat", "repeats") for r in np.asarray(repeats).reshape(-1)]
        if len(repeats) == 1:
            repeats = repeats[0]
    elif isinstance(repeats, np.integer):
        repeats = int(repeats)
    return M.repeat(asarray(a, "repeat"), repeats, axis=axis)


def flip(m, axis=None) -> Tensor:
    """``m`` with the order of elements reversed along ``axis`` (all axes by default)."""
    return M.flip(asarray(m, "flip"), axis=axis)


def fliplr(m) -> Tensor:
    """Reverse the second axis (columns)."""
    x = asarray(m, "fliplr")
    if x.ndim < 2:
        raise ValueError("numpy.fliplr: needs an array of at least 2 dimensions")
    return S.rev(x, (1,))


def flipud(m) -> Tensor:
    """Reverse the first axis (rows)."""
    x = asarray(m, "flipud")
    if x.ndim < 1:
        raise ValueError("numpy.flipud: needs an array of at least 1 dimension")
    return S.rev(x, (0,))


def rot90(m, k=1, axes=(0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times, from the first towards the second of ``axes``.

    >>> fnp.rot90([[1, 2], [3, 4]])
    Tensor([[2, 4],
           [1, 3]], dtype=int64)
    """
    x = asarray(m, "rot90")
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("numpy.rot90: axes must hold exactly two axes")
    a0, a1 = (axis_int(a, x.ndim, "rot90") for a in axes)
    if a0 == a1:
        raise ValueError("numpy.rot90: the two axes must differ")
    k = static_int(k, "rot90", "k") % 4
    if k == 0:
        return x
    if k == 2:
        return S.rev(x, tuple(sorted((a0, a1))))
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return S.transpose(S.rev(x, (a1,)), tuple(perm))
    return S.rev(S.transpose(x, tuple(perm)), (a1,))


def roll(a, shift, axis=None) -> Tensor:
    """Elements shifted cyclically by ``shift`` along ``axis`` (of the flattened array when None).

    >>> fnp.roll([1, 2, 3], 1)
    Tensor([3, 1, 2], dtype=int64)
    """
    x = asarray(a, "roll")
    if isinstance(shift, (list, tuple, np.ndarray)):
        shift = tuple(static_int(s, "roll", "shift") for s in shift)
    else:
        shift = static_int(shift, "roll", "shift")
    if axis is not None and not isinstance(axis, (builtins.int, np.integer)):
        axis = tuple(axis)
    if axis is not None and isinstance(shift, tuple) and not isinstance(axis, tuple):
        axis = (axis,) * len(shift)
    if isinstance(axis, tuple) and not isinstance(shift, tuple):
        shift = (shift,) * len(axis)
    if axis is None and isinstance(shift, tuple):
        shift = builtins.sum(shift)
    return M.roll(x, shift, axis=axis)


def _at3(x):
    if x.ndim == 0:
        return S.reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return S.reshape(x, (1, x.shape[0], 1))
    if x.ndim == 2:
        return S.reshape(x, tuple(x.shape) + (1,))
    return x


def _atleast(arys, fn, op):
    out = tuple(fn(asarray(a, op)) for a in arys)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """Each input as an array of at least one dimension (one array, or a tuple for several)."""
    return _atleast(arys, M.atleast_1d, "atleast_1d")


def atleast_2d(*arys):
    """Each input as an array of at least two dimensions (1-D arrays become rows)."""
    return _atleast(arys, M.atleast_2d, "atleast_2d")


def atleast_3d(*arys):
    """Each input as an array of at least three dimensions: (N,) becomes (1, N, 1), (M, N) becomes (M, N, 1).

    >>> fnp.atleast_3d([1, 2]).shape
    (1, 2, 1)
    """
    return _atleast(arys, _at3, "atleast_3d")


def broadcast_to(array, shape, subok=False) -> Tensor:
    """``array`` broadcast to ``shape``."""
    return M.broadcast_to(asarray(array, "broadcast_to"), _shape_arg(shape, "broadcast_to"))


def broadcast_arrays(*args, subok=False) -> tuple[Tensor, ...]:
    """The inputs broadcast against each other."""
    return tuple(M.broadcast_arrays(*[asarray(a, "broadcast_arrays") for a in args]))


def broadcast_shapes(*args) -> tuple[int, ...]:
    """The shape that arrays of the given shapes broadcast to.

    >>> fnp.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    return _bshapes(*[_shape_arg(s, "broadcast_shapes") for s in args], op="numpy.broadcast_shapes")


def append(arr, values, axis=None) -> Tensor:
    """``values`` appended to ``arr`` along ``axis`` (both flattened when None).

    >>> fnp.append([1, 2], [[3], [4]])
    Tensor([1, 2, 3, 4], dtype=int64)
    """
    x, v = asarray(arr, "append"), asarray(values, "append")
    if axis is None:
        x, v = S.reshape(x, (-1,)), S.reshape(v, (-1,))
        axis = 0
    return concatenate((x, v), axis=axis)


def _obj_indices(obj, n, op):
    """Concrete integer positions from an int, slice, sequence or boolean mask, and whether it was a scalar."""
    if isinstance(obj, slice):
        return np.arange(*obj.indices(n), dtype=np.int64), False
    idx = np.asarray(concrete(obj, op, "pass the positions as a Python list (they decide the shape)"))
    if idx.dtype == bool:
        if idx.ndim != 1:
            raise ValueError(f"numpy.{op}: a boolean obj must be 1-D")
        return np.flatnonzero(idx).astype(np.int64), False
    if idx.size == 0:
        idx = idx.astype(np.int64)
    if idx.dtype.kind not in "iu":
        raise IndexError(f"numpy.{op}: obj must hold integers or booleans, got {idx.dtype}")
    if idx.ndim > 1:
        raise ValueError(f"numpy.{op}: obj must be a scalar or 1-D")
    return idx.astype(np.int64), idx.ndim == 0


def insert(arr, obj, values, axis=None) -> Tensor:
    """``values`` inserted before the positions ``obj`` along ``axis`` (flattened when None); ``values`` are
    cast to ``arr``'s dtype.

    >>> fnp.insert([1, 2, 3], 1, [9, 9])
    Tensor([1, 9, 9, 2, 3], dtype=int64)
    """
    x = asarray(arr, "insert")
    if axis is None:
        x = S.reshape(x, (-1,))
        axis = 0
    ax = axis_int(axis, x.ndim, "insert")
    n = x.shape[ax]
    idx, scalar = _obj_indices(obj, n, "insert")
    v = asarray(values, "insert")
    v = _cast_like(v, x.dtype)
    if idx.size == 1:
        i = int(idx.reshape(()))
        if not -n <= i <= n:
            raise IndexError(f"numpy.insert: index {i} is out of bounds for axis {ax} with size {n}")
        if i < 0:
            i += n
        if v.ndim < x.ndim:
            v = S.reshape(v, (1,) * (x.ndim - v.ndim) + tuple(v.shape))
        if scalar:
            v = M.moveaxis(v, 0, ax)
        k = v.shape[ax]
        shape = list(x.shape)
        shape[ax] = k
        v = S.broadcast_to(v, tuple(shape))
        positions = np.full(k, i, np.int64)
    else:
        positions = np.where(idx < 0, idx + n, idx)
        if positions.size and (positions.min() < 0 or positions.max() > n):
            raise IndexError(f"numpy.insert: index out of bounds for axis {ax} with size {n}")
        k = positions.size
        shape = list(x.shape)
        shape[ax] = k
        v = _broadcast_index_values(v, tuple(shape), ax)
    # output slot of each inserted value (stable: equal positions keep their order) and of each old element
    order = np.argsort(positions, kind="stable")
    new_pos = np.empty(k, np.int64)
    new_pos[order] = positions[order] + np.arange(k)
    is_new = np.zeros(n + k, bool)
    is_new[new_pos] = True
    src = np.empty(n + k, np.int64)
    src[~is_new] = np.arange(n)
    src[new_pos] = n + np.arange(k)
    joined = S.concatenate([x, v], ax) if k else x
    return _take(joined, _wrap(src), axis=ax)


def _broadcast_index_values(v, shape, ax):
    """``values`` broadcast as NumPy does for ``new[..., indices, ...] = values``."""
    try:
        return S.broadcast_to(v, shape)
    except (ShapeError, ValueError):
        raise ValueError(f"numpy.insert: values of shape {tuple(v.shape)} do not broadcast to {shape}") from None


def _cast_like(v, d):
    if v.dtype == d:
        return v
    if d in dtypes.INTEGER and v.dtype in dtypes.REAL_FLOATING:
        v = trunc(v)
    return convert(v, d)


def delete(arr, obj, axis=None) -> Tensor:
    """``arr`` without the entries at positions ``obj`` (an int, slice, sequence or boolean mask) along
    ``axis`` (flattened when None).

    >>> fnp.delete([1, 2, 3, 4], [0, 2])
    Tensor([2, 4], dtype=int64)
    """
    x = asarray(arr, "delete")
    if axis is None:
        x = S.reshape(x, (-1,))
        axis = 0
    ax = axis_int(axis, x.ndim, "delete")
    n = x.shape[ax]
    if not isinstance(obj, slice):
        raw = np.asarray(concrete(obj, "delete", "pass the positions as a Python list"))
        if raw.dtype == bool:
            if raw.shape != (n,):
                raise ValueError(f"numpy.delete: a boolean mask must have shape ({n},), got {raw.shape}")
            return _take(x, _wrap(np.flatnonzero(~raw).astype(np.int64)), axis=ax)
    idx, _ = _obj_indices(obj, n, "delete")
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)][0]
        raise IndexError(f"numpy.delete: index {bad} is out of bounds for axis {ax} with size {n}")
    keep = np.ones(n, bool)
    keep[np.where(idx < 0, idx + n, idx)] = False
    return _take(x, _wrap(np.flatnonzero(keep).astype(np.int64)), axis=ax)


def resize(a, new_shape) -> Tensor:
    """An array of ``new_shape`` filled with the flattened ``a`` repeated cyclically (zeros if ``a`` is
    empty).

    >>> fnp.resize([1, 2, 3], (2, 2))
    Tensor([[1, 2],
           [3, 1]], dtype=int64)
    """
    x = S.reshape(asarray(a, "resize"), (-1,))
    shape = _shape_arg(new_shape, "resize")
    if builtins.any(d < 0 for d in shape):
        raise ValueError(f"numpy.resize: all sizes must be non-negative, got {shape}")
    total = int(np.prod(shape, dtype=np.int64))
    if x.shape[0] == 0:
        return S.full(shape, 0, x.dtype)
    flat = _take(x, _wrap(np.arange(total, dtype=np.int64) % x.shape[0]), axis=0)
    return S.reshape(flat, shape)


def trim_zeros(filt, trim="fb", axis=None) -> Tensor:
    """``filt`` cropped to the smallest box (along ``axis``, or all axes) holding its nonzero values, from the
    front ('f'), the back ('b') or both. The extent depends on the values, so they must be concrete.

    >>> fnp.trim_zeros([0, 1, 2, 0])
    Tensor([1, 2], dtype=int64)
    """
    x = asarray(filt, "trim_zeros")
    trim = trim.lower()
    if trim not in ("fb", "bf", "f", "b"):
        raise ValueError(f"numpy.trim_zeros: unexpected character(s) in trim: {trim!r}")
    axes = axes_tuple(axis, x.ndim, "trim_zeros")
    if not axes:
        return x
    v = concrete(x, "trim_zeros", "slice with static bounds instead")
    nz = np.nonzero(v)
    if nz[0].size == 0:
        start = stop = [0] * x.ndim
    else:
        start = [int(c.min()) if "f" in trim else 0 for c in nz]
        stop = [int(c.max()) + 1 if "b" in trim else n for c, n in zip(nz, x.shape)]
    lo = [start[i] if i in axes else 0 for i in range(x.ndim)]
    hi = [stop[i] if i in axes else x.shape[i] for i in range(x.ndim)]
    return S.slice_(x, lo, hi)


def ndim(a) -> int:
    """The number of dimensions of ``a``.

    >>> fnp.ndim([[1, 2]])
    2
    """
    return a.ndim if isinstance(a, Tensor) else np.ndim(a)


def shape(a) -> tuple[int, ...]:
    """The shape of ``a``.

    >>> fnp.shape([[1, 2]])
    (1, 2)
    """
    return tuple(a.shape) if isinstance(a, Tensor) else np.shape(a)


def size(a, axis=None) -> int:
    """The number of elements of ``a`` (along ``axis``, an int or tuple, when given).

    >>> fnp.size(fnp.ones((2, 3)), 1)
    3
    """
    s = shape(a)
    if axis is None:
        return int(np.prod(s, dtype=np.int64))
    axes = (axis,) if isinstance(axis, (builtins.int, np.integer)) else tuple(axis)
    return int(np.prod([s[normalize_axis(ax, len(s), "size")] for ax in axes], dtype=np.int64))
