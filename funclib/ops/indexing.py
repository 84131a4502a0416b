"""NumPy-style indexing (``x[idx]``) and functional updates (``x.at[idx].set(v)``), take, take_along_axis.

Basic indices (ints, slices, ``...``, ``None``) lower to static ``slice``/``rev``/``reshape``. Anything
with integer arrays, traced integers or boolean masks lowers to one ``gather`` over index tuples built
here; ``.at`` lowers to one ``scatter``, ``scatter_add``, ``scatter_mul``, ``scatter_max`` or ``scatter_min``
(``.divide``/``.power``: ``x / scatter_mul(ones, ...)`` and ``x ** scatter_mul(ones, ...)``, as JAX). Boolean
masks need a concrete mask (eager, or a mask that is not traced, e.g. under ``grad``): their output shape depends
on the data.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes
from ..core import Tensor, Tracer, _wrap, concrete_or_none
from ..errors import DataDependentShapeError, ImmutableError, ShapeError
from ..namespace import public, tensor_method
from ..primitives import shape as S
from ..primitives._util import broadcast_shapes, normalize_axis
from ..primitives.elementwise import _to_tensor, convert
from ..primitives.indexing import gather, scatter, scatter_add
from ..primitives.scatter_combine import scatter_max, scatter_min, scatter_mul
from ..primitives.shape import select
from . import elementwise as E


def _is_int_scalar(k):
    return isinstance(k, (builtins.int, np.integer)) and not isinstance(k, (builtins.bool, np.bool_))


def _expand_key(x, key):
    """Normalize to a tuple without Ellipsis, masks turned into integer arrays, and None kept."""
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, (list, np.ndarray)) and not isinstance(k, Tensor):
            k = np.asarray(k)
            if k.dtype == object or k.dtype.kind not in "biu":
                raise IndexError(f"index arrays must be integer or boolean, got dtype {k.dtype}")
        if isinstance(k, (builtins.bool, np.bool_)) or (_is_bool_index(k) and _ndim(k) == 0):
            # a 0-d mask adds an axis of length 1 (True) or 0 (False), as in NumPy
            k = _NewAxis(bool(_concrete_mask(k)))
        out.append(k)
    n_ell = builtins.sum(1 for k in out if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = 0
    for k in out:
        if k is None or k is Ellipsis or type(k) is _NewAxis:
            continue
        if _is_bool_index(k):
            consumed += _ndim(k)
        else:
            consumed += 1
    if consumed > x.ndim:
        raise IndexError(f"too many indices: tensor of shape {tuple(x.shape)} is {x.ndim}-dimensional, "
                         f"but {consumed} were indexed")
    if n_ell:
        i = next(i for i, k in enumerate(out) if k is Ellipsis)
        out[i : i + 1] = [slice(None)] * (x.ndim - consumed)
    else:
        out += [slice(None)] * (x.ndim - consumed)
    res = []
    pos = 0  # the tensor axis the next key addresses
    for k in out:
        if _is_bool_index(k):
            nd = _ndim(k)
            want = tuple(x.shape[pos : pos + nd])
            if tuple(np.shape(k)) != want:
                raise IndexError(
                    f"boolean index (mask) of shape {tuple(np.shape(k))} does not match the shape {want} of the "
                    f"axes it indexes (axes {pos}..{pos + nd - 1} of a tensor of shape {tuple(x.shape)})"
                )
            res.extend(_mask_to_indices(k))
            pos += nd
        else:
            res.append(k)
            if k is not None and type(k) is not _NewAxis:
                pos += 1
    return res


class _NewAxis:
    """A 0-d boolean index: a new axis that keeps (True) or drops (False) everything."""

    __slots__ = ("keep",)

    def __init__(self, keep: bool):
        self.keep = keep


def _concrete_mask(mask):
    c = concrete_or_none(mask) if isinstance(mask, Tensor) else mask
    if c is None:
        raise DataDependentShapeError(
            f"boolean mask indexing: the output shape depends on the values of the traced "
            f"{mask.aval.str_short()} mask, which are unknown inside the transform. Use fl.where(mask, x, 0) "
            "(same shape), or compute the mask outside the transform."
        )
    return c.numpy() if isinstance(c, Tensor) else np.asarray(c)


def _ndim(k):
    return k.ndim if hasattr(k, "ndim") else np.ndim(k)


def _is_bool_index(k):
    d = getattr(k, "dtype", None)
    return d is not None and np.dtype(d) == np.bool_


def _mask_to_indices(mask):
    return [np.asarray(i) for i in np.nonzero(_concrete_mask(mask))]


def _is_array_index(k):
    return isinstance(k, (Tensor, np.ndarray))


@tensor_method("__getitem__")
def getitem(x, key, /):
    """``x[key]`` with NumPy semantics (out-of-bounds integer indices raise IndexError)."""
    x = _to_tensor(x, "indexing")
    if isinstance(key, Tensor) and key.dtype not in dtypes.INTEGER and key.dtype != dtypes.bool_:
        raise IndexError(f"tensors used as indices must be integer or boolean, got {key.dtype.name}")
    keys = _expand_key(x, key)
    # insert new axes (None, 0-d masks) first so every remaining key addresses one axis
    if any(k is None or type(k) is _NewAxis for k in keys):
        shape = []
        it = iter(x.shape)
        new_keys = []
        for k in keys:
            if k is None or type(k) is _NewAxis:
                shape.append(1)
                new_keys.append(slice(0, 0) if type(k) is _NewAxis and not k.keep else slice(None))
            else:
                shape.append(next(it))
                new_keys.append(k)
        x = S.reshape(x, tuple(shape))
        keys = new_keys
    if builtins.any(_is_array_index(k) or isinstance(k, Tracer) for k in keys):
        return _advanced_get(x, keys)
    return _basic_get(x, keys)


def _basic_get(x, keys):
    start, limit, stride, rev_axes, squeeze_axes = [], [], [], [], []
    for ax, (k, n) in enumerate(zip(keys, x.shape)):
        if _is_int_scalar(k):
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {ax} with size {n}")
            i %= n
            start.append(i)
            limit.append(i + 1)
            stride.append(1)
            squeeze_axes.append(ax)
        elif isinstance(k, slice):
            s, e, st = k.indices(n)
            if st > 0:
                start.append(s)
                limit.append(max(e, s))
                stride.append(st)
            else:
                # x[s:e:-k] == rev(x)[n-1-s : n-1-e : k]
                rev_axes.append(ax)
                s2, e2 = n - 1 - s, n - 1 - e
                start.append(s2)
                limit.append(max(e2, s2))
                stride.append(-st)
        else:
            raise IndexError(f"unsupported index {k!r} of type {type(k).__name__}")
    if rev_axes:
        x = S.rev(x, tuple(rev_axes))
    x = S.slice_(x, start, limit, stride)
    if squeeze_axes:
        x = S.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in squeeze_axes))
    return x


def _index_plan(x, keys):
    """Build full index tuples for ``x[keys]``: returns (idx (result_shape + (ndim,)) int64, result_shape)."""
    # ints count as 0-d index arrays: with no arrays around they broadcast to (), which only drops the axis
    adv_pos = [
        i for i, k in enumerate(keys) if _is_array_index(k) or isinstance(k, Tracer) or _is_int_scalar(k)
    ]
    adv = []
    for i in adv_pos:
        k = keys[i]
        n = x.shape[i]
        if _is_int_scalar(k) or isinstance(k, np.ndarray):
            arr = np.asarray(k)
            if arr.dtype.kind not in "iu":
                raise IndexError(f"index arrays must be integers, got {arr.dtype}")
            if arr.size and (arr.min() < -n or arr.max() >= n):
                bad = arr[(arr < -n) | (arr >= n)].flat[0]
                raise IndexError(f"index {bad} is out of bounds for axis {i} with size {n}")
            adv.append(_wrap(np.where(arr < 0, arr + n, arr).astype(np.int64)))
        else:
            if k.dtype not in dtypes.INTEGER:
                raise IndexError(f"index tensors must be integers, got {k.dtype.name}")
            conc = concrete_or_none(k)
            if conc is not None and not isinstance(k, Tracer):
                arr = np.asarray(conc.numpy())
                if arr.size and (arr.min() < -n or arr.max() >= n):
                    bad = arr[(arr < -n) | (arr >= n)].flat[0]
                    raise IndexError(f"index {bad} is out of bounds for axis {i} with size {n}")
            k64 = convert(k, np.int64) if k.dtype != np.int64 else k
            adv.append(select(k64 < 0, k64 + n, k64))
    bshape = broadcast_shapes(*[tuple(a.shape) for a in adv], op="indexing") if adv else ()
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)) if adv_pos else True
    basic_axes = [i for i in range(len(keys)) if i not in adv_pos]
    basic_ranges = {}
    for i in basic_axes:
        k = keys[i]
        n = x.shape[i]
        if not isinstance(k, slice):
            raise IndexError(
                f"unsupported index {k!r} of type {type(k).__name__}; use ints, slices, ..., None, or integer or "
                "boolean arrays"
            )
        basic_ranges[i] = np.arange(*k.indices(n), dtype=np.int64)
    # result layout
    if adv_pos and contiguous:
        first = adv_pos[0]
        before = [i for i in basic_axes if i < first]
        after = [i for i in basic_axes if i > first]
        layout = [("b", i) for i in before] + [("a", None)] + [("b", i) for i in after]
    else:
        layout = ([("a", None)] if adv_pos else []) + [("b", i) for i in basic_axes]
    result_shape = []
    for kind, i in layout:
        result_shape.extend(bshape if kind == "a" else [len(basic_ranges[i])])
    result_shape = tuple(result_shape)
    cols = []
    nr = len(result_shape)
    # position of each layout entry in the result
    pos = {}
    p = 0
    for kind, i in layout:
        if kind == "a":
            pos["a"] = p
            p += len(bshape)
        else:
            pos[i] = p
            p += 1
    for ax in range(len(keys)):
        if ax in adv_pos:
            a = adv[adv_pos.index(ax)]
            start = pos["a"] + len(bshape) - a.ndim
            dims = tuple(range(start, start + a.ndim))
            col = S.broadcast_in_dim(a, result_shape, dims)
        else:
            r = _wrap(basic_ranges[ax])
            col = S.broadcast_in_dim(r, result_shape, (pos[ax],))
        cols.append(S.reshape(col, result_shape + (1,)))
    idx = S.concatenate(cols, nr) if len(cols) > 1 else cols[0]
    return idx, result_shape


def _advanced_get(x, keys):
    idx, _ = _index_plan(x, keys)
    return gather(x, idx, tuple(range(x.ndim)))


class _IndexUpdateRef:
    __slots__ = ("x", "key")

    def __init__(self, x, key):
        self.x = x
        self.key = key

    def _plan(self):
        x = self.x
        keys = _expand_key(x, self.key)
        if any(type(k) is _NewAxis for k in keys):
            raise IndexError(
                "at[...]: 0-d boolean indices are not supported in updates; use fl.where(cond, new, x)"
            )
        none_pos = [i for i, k in enumerate(keys) if k is None]
        keys_wo = [k for k in keys if k is not None]
        idx, rshape = _index_plan(x, keys_wo)
        return idx, rshape, none_pos

    def _updates(self, v, rshape, none_pos):
        x = self.x
        v = _to_tensor(v, "at[...]") if not isinstance(v, Tensor) else v
        if v.dtype != x.dtype:
            v = convert(v, x.dtype)
        full = list(rshape)
        for p in none_pos:
            full.insert(min(p, len(full)), 1)
        try:
            v = S.broadcast_to(v, tuple(full)) if tuple(v.shape) != tuple(full) else v
        except ShapeError:
            raise ShapeError(
                f"at[...]: update of shape {tuple(v.shape)} does not broadcast to the indexed shape "
                f"{tuple(full)}"
            ) from None
        return S.reshape(v, rshape) if tuple(full) != rshape else v

    def get(self):
        """``x[idx]``."""
        return getitem(self.x, self.key)

    def set(self, values):
        """A new tensor equal to ``x`` with ``x[idx] = values`` (the last write wins for repeated indices)."""
        idx, rshape, none_pos = self._plan()
        return scatter(self.x, idx, self._updates(values, rshape, none_pos), tuple(range(self.x.ndim)))

    def add(self, values):
        """A new tensor with ``values`` added at ``idx`` (repeated indices accumulate)."""
        idx, rshape, none_pos = self._plan()
        return scatter_add(self.x, idx, self._updates(values, rshape, none_pos), tuple(range(self.x.ndim)))

    def _scatter(self, prim, values):
        idx, rshape, none_pos = self._plan()
        return prim(self.x, idx, self._updates(values, rshape, none_pos), tuple(range(self.x.ndim)))

    def multiply(self, values):
        """A new tensor with ``x[idx]`` multiplied by ``values`` (repeated indices multiply in turn)."""
        return self._scatter(scatter_mul, values)

    def divide(self, values):
        """A new tensor with ``x[idx]`` divided by ``values`` (repeated indices divide in turn).

        As in JAX, ``x / (1 with values multiplied in at idx)``: an integer tensor gives a floating-point result.
        """
        return E.divide(self.x, _IndexUpdateRef(_ones_like(self.x), self.key).multiply(values))

    def power(self, values):
        """A new tensor with ``x[idx] ** values`` (repeated indices raise in turn: ``(x ** a) ** b``)."""
        return E.pow(self.x, _IndexUpdateRef(_ones_like(self.x), self.key).multiply(values))

    def min(self, values):
        """A new tensor with ``x[idx] = minimum(x[idx], values)`` (every repeated index takes part)."""
        return self._scatter(scatter_min, values)

    def max(self, values):
        """A new tensor with ``x[idx] = maximum(x[idx], values)`` (every repeated index takes part)."""
        return self._scatter(scatter_max, values)


def _ones_like(x):
    return S.full(tuple(x.shape), 1, x.dtype)


class _AtHelper:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, key):
        return _IndexUpdateRef(self.x, key)

    def __setitem__(self, key, value):
        raise ImmutableError(
            f"x.at[{key!r}] = {value!r:.40} is not supported: tensors are immutable. Use "
            f"x = x.at[{key!r}].set({value!r:.40}), which returns a new tensor (also .add, .multiply, .min, .max)."
        )


@public
def take(x, indices, /, *, axis: int | None = None) -> Tensor:
    """Elements of ``x`` at integer ``indices`` along ``axis`` (flattened when None)."""
    x = _to_tensor(x, "take")
    if axis is None:
        x = S.reshape(x, (-1,))
        axis = 0
    ax = normalize_axis(axis, x.ndim, "take")
    key = [slice(None)] * x.ndim
    key[ax] = indices if isinstance(indices, (Tensor, np.ndarray)) else np.asarray(indices)
    try:
        return getitem(x, tuple(key))
    except IndexError as e:
        raise IndexError(f"take: {e}") from None


@public
def take_along_axis(x, indices, /, *, axis: int = -1) -> Tensor:
    """Pick values along ``axis`` with an index tensor of the same rank (as ``np.take_along_axis``)."""
    x = _to_tensor(x, "take_along_axis")
    indices = _to_tensor(indices, "take_along_axis")
    ax = normalize_axis(axis, x.ndim, "take_along_axis")
    if indices.ndim != x.ndim:
        raise ShapeError(
            f"take_along_axis: indices rank {indices.ndim} must equal the tensor's rank {x.ndim}"
        )
    oshape = list(broadcast_shapes(
        tuple(d for i, d in enumerate(x.shape) if i != ax),
        tuple(d for i, d in enumerate(indices.shape) if i != ax),
    ))
    oshape.insert(ax, indices.shape[ax])
    oshape = tuple(oshape)
    ishape = tuple(indices.shape[ax] if i == ax else oshape[i] for i in range(x.ndim))
    ind = S.broadcast_to(indices, ishape) if tuple(indices.shape) != ishape else indices
    ind = convert(ind, np.int64) if ind.dtype != np.int64 else ind
    n = x.shape[ax]
    ind = select(ind < 0, ind + n, ind)
    cols = []
    for d in range(x.ndim):
        if d == ax:
            c = ind
        elif x.shape[d] == 1:
            c = S.full(oshape, 0, np.int64)
        else:
            c = S.iota(np.int64, oshape, d)
        cols.append(S.reshape(c, oshape + (1,)))
    idx = S.concatenate(cols, len(oshape))
    return gather(x, idx, tuple(range(x.ndim)))


@tensor_method("at", prop=True)
def _at(self):
    return _AtHelper(self)
