"""Indexing functions: take, take_along_axis, choose, compress, extract, select, piecewise, nonzero and
friends (with JAX's ``size=``/``fill_value=`` for static shapes), the multi-index conversions, bit packing,
and the in-place functions of NumPy (``put``, ``put_along_axis``, ``place``, ``fill_diagonal``) in their
functional form: they return the updated array and need ``inplace=False``.
"""

from __future__ import annotations

import builtins
import operator

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, _wrap
from ..ops import reductions as R
from ..ops.indexing import take as _take
from ..ops.indexing import take_along_axis as _take_along_axis
from ..ops.manipulation import broadcast_arrays, stack
from ..ops.searching import nonzero as _nonzero
from ..ops.searching import where as _where
from ..ops.sorting import argsort
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ._util import asarray, axis_int, concrete, no_out, static_int

__all__ = [
    "take",
    "take_along_axis",
    "put",
    "put_along_axis",
    "place",
    "fill_diagonal",
    "choose",
    "compress",
    "extract",
    "select",
    "piecewise",
    "nonzero",
    "flatnonzero",
    "argwhere",
    "where",
    "ravel_multi_index",
    "unravel_index",
    "packbits",
    "unpackbits",
]

_MODES = ("raise", "wrap", "clip")


def _c(v, d):
    return _wrap(np.asarray(v, dtype=d))


def _int_index(i, op):
    i = i if isinstance(i, Tensor) else _wrap(np.asarray(i))
    if i.dtype not in dtypes.INTEGER:
        raise IndexError(f"numpy.{op}: indices must be integers, got {i.dtype.name}")
    return convert(i, dtypes.int64) if i.dtype != dtypes.int64 else i


def _apply_mode(i, n, mode, op):
    if mode not in _MODES:
        raise ValueError(f"numpy.{op}: mode must be one of {_MODES}, got {mode!r}")
    if mode == "wrap":
        return ops.remainder(i, n) if n else i
    if mode == "clip":
        return ops.clip(i, 0, builtins.max(n - 1, 0))
    return i


def take(a, indices, axis=None, out=None, mode="raise") -> Tensor:
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened array when None). ``mode`` handles
    out-of-range indices: 'raise' (an IndexError, at run time under ``jit``), 'wrap' or 'clip'.

    >>> fnp.take(fnp.array([4, 5, 6]), [0, 2, -1])
    Tensor([4, 6, 6], dtype=int64)
    """
    no_out(out, "take")
    x = asarray(a, "take")
    if axis is None:
        x, axis = S.reshape(x, (-1,)), 0
    ax = axis_int(axis, x.ndim, "take")
    mode = "raise" if mode is None else mode
    i = _int_index(indices, "take")
    if mode != "raise":
        i = _apply_mode(i, x.shape[ax], mode, "take")
    return _take(x, i, axis=ax)


def take_along_axis(arr, indices, axis=-1) -> Tensor:
    """Values of ``arr`` at ``indices`` (of the same rank) along ``axis`` (of the flattened array when None),
    e.g. with the result of ``argsort``.

    >>> fnp.take_along_axis(fnp.array([[3, 1, 2]]), fnp.array([[1, 2, 0]]), 1)
    Tensor([[1, 2, 3]], dtype=int64)
    """
    x = asarray(arr, "take_along_axis")
    i = _int_index(indices, "take_along_axis")
    if axis is None:
        x, axis = S.reshape(x, (-1,)), 0
    return _take_along_axis(x, i, axis=axis)


def _no_inplace(op, inplace):
    if inplace:
        raise ValueError(
            f"numpy.{op}: NumPy writes into its argument, which immutable tensors do not allow; pass "
            f"inplace=False and use the returned array (a = fnp.{op}(a, ..., inplace=False))"
        )


def put(a, ind, v, mode="raise", *, inplace=True) -> Tensor:
    """``a`` with the flat positions ``ind`` set to ``v`` (repeated cyclically if shorter). NumPy changes
    ``a`` in place; here the result is returned, so pass ``inplace=False``.

    >>> fnp.put(fnp.zeros(4), [0, 2], [1.0, 2.0], inplace=False)
    Tensor([1., 0., 2., 0.], dtype=float32)
    """
    _no_inplace("put", inplace)
    x = asarray(a, "put")
    flat = S.reshape(x, (-1,))
    i = S.reshape(_int_index(ind, "put"), (-1,))
    i = _apply_mode(i, flat.shape[0], mode, "put")
    vals = S.reshape(asarray(v, "put"), (-1,))
    if vals.shape[0] == 0:
        return x
    k = i.shape[0]
    if vals.shape[0] != k:
        vals = _take(vals, _wrap(np.arange(k, dtype=np.int64) % vals.shape[0]), axis=0)
    return S.reshape(flat.at[i].set(vals), tuple(x.shape))


def _along_key(x, i, ax):
    key = []
    for d in range(x.ndim):
        if d == ax:
            key.append(i)
        else:
            shape = [1] * x.ndim
            shape[d] = x.shape[d]
            key.append(_wrap(np.arange(x.shape[d], dtype=np.int64).reshape(shape)))
    return tuple(key)


def put_along_axis(arr, indices, values, axis, *, inplace=True) -> Tensor:
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (the inverse of ``take_along_axis``).
    Pass ``inplace=False``: the result is returned.

    >>> fnp.put_along_axis(fnp.zeros((1, 3)), fnp.array([[2]]), 5.0, 1, inplace=False)
    Tensor([[0., 0., 5.]], dtype=float32)
    """
    _no_inplace("put_along_axis", inplace)
    x = asarray(arr, "put_along_axis")
    i = _int_index(indices, "put_along_axis")
    if axis is None:
        x0, x = x, S.reshape(x, (-1,))
        out = x.at[_along_key(x, S.reshape(i, (-1,)), 0)].set(values)
        return S.reshape(out, tuple(x0.shape))
    ax = axis_int(axis, x.ndim, "put_along_axis")
    if i.ndim != x.ndim:
        raise ValueError(f"numpy.put_along_axis: indices must have the rank of arr ({x.ndim}), got {i.ndim}")
    return x.at[_along_key(x, i, ax)].set(values)


def place(arr, mask, vals, *, inplace=True) -> Tensor:
    """``arr`` with the positions where ``mask`` is true filled by ``vals`` in order (repeated cyclically).
    Pass ``inplace=False``: the result is returned.

    >>> fnp.place(fnp.arange(5), fnp.arange(5) > 2, [9, 8], inplace=False)
    Tensor([0, 1, 2, 9, 8], dtype=int64)
    """
    _no_inplace("place", inplace)
    x = asarray(arr, "place")
    m = S.broadcast_to(asarray(mask, "place"), tuple(x.shape))
    m = m if m.dtype == dtypes.bool_ else ops.not_equal(m, 0)
    v = S.reshape(asarray(vals, "place"), (-1,))
    if v.shape[0] == 0:
        if type(m) is Tensor and bool(np.any(m.numpy())):
            raise ValueError("numpy.place: cannot insert from an empty array")
        return x
    rank = ops.subtract(R.cumsum(S.reshape(convert(m, dtypes.int64), (-1,)), 0), 1)
    picked = _take(v, ops.remainder(ops.maximum(rank, 0), v.shape[0]), axis=0)
    picked = convert(picked, x.dtype) if picked.dtype != x.dtype else picked
    return _where(m, S.reshape(picked, tuple(x.shape)), x)


def fill_diagonal(a, val, wrap=False, *, inplace=True) -> Tensor:
    """``a`` with its main diagonal (all indices equal) set to ``val`` (repeated cyclically); ``wrap``
    continues the diagonal of a tall matrix below its first square block. Pass ``inplace=False``.

    >>> fnp.fill_diagonal(fnp.zeros((2, 2)), 3.0, inplace=False)
    Tensor([[3., 0.],
           [0., 3.]], dtype=float32)
    """
    _no_inplace("fill_diagonal", inplace)
    x = asarray(a, "fill_diagonal")
    if x.ndim < 2:
        raise ValueError("numpy.fill_diagonal: array must be at least 2-d")
    end = x.size
    if x.ndim == 2:
        step = x.shape[1] + 1
        if not wrap:
            end = builtins.min(end, x.shape[1] * x.shape[1])
    else:
        if len(set(x.shape)) != 1:
            raise ValueError("numpy.fill_diagonal: all dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(x.shape[:-1]).sum())
    pos = np.arange(0, end, step, dtype=np.int64)
    return S.reshape(put(x, _wrap(pos), val, inplace=False), tuple(x.shape))


def choose(a, choices, out=None, mode="raise") -> Tensor:
    """``choices[a[i]][i]`` for every position (all arrays broadcast together).

    >>> fnp.choose(fnp.array([0, 1, 0]), [fnp.array([1, 2, 3]), fnp.array([10, 20, 30])])
    Tensor([ 1, 20,  3], dtype=int64)
    """
    no_out(out, "choose")
    idx = _int_index(asarray(a, "choose"), "choose")
    cs = choices if not isinstance(choices, Tensor) else list(choices)
    cs = [asarray(c, "choose") for c in cs]
    n = len(cs)
    if mode == "raise":
        if type(idx) is Tensor:
            v = idx.numpy()
            if v.size and (v.min() < 0 or v.max() >= n):
                raise ValueError(f"numpy.choose: invalid entry in choice array (must lie in [0, {n}))")
        else:
            idx = _where(ops.less(idx, 0), _c(n, dtypes.int64), idx)  # out of range: IndexError at run time
    else:
        idx = _apply_mode(idx, n, mode, "choose")
    parts = broadcast_arrays(idx, *cs)
    st = stack(parts[1:], axis=0)
    return S.squeeze(_take_along_axis(st, S.expand_dims(parts[0], [0]), axis=0), (0,))


def compress(condition, a, axis=None, out=None) -> Tensor:
    """The slices of ``a`` along ``axis`` (of the flattened array when None) where the 1-D ``condition``
    is true. The condition decides the shape, so it must be concrete.

    >>> fnp.compress([True, False, True], fnp.array([1, 2, 3]))
    Tensor([1, 3], dtype=int64)
    """
    no_out(out, "compress")
    x = asarray(a, "compress")
    if axis is None:
        x, axis = S.reshape(x, (-1,)), 0
    ax = axis_int(axis, x.ndim, "compress")
    c = np.asarray(concrete(asarray(condition, "compress"), "compress", "use fnp.where to keep the shape"))
    if c.ndim != 1:
        raise ValueError("numpy.compress: condition must be 1-D")
    idx = np.flatnonzero(c)
    if idx.size and idx[-1] >= x.shape[ax]:
        raise IndexError(f"numpy.compress: condition selects index {idx[-1]} of an axis of size {x.shape[ax]}")
    return _take(x, _wrap(idx.astype(np.int64)), axis=ax)


def extract(condition, arr) -> Tensor:
    """The elements of ``arr`` where ``condition`` is true (both flattened; the condition must be concrete)."""
    c = S.reshape(asarray(condition, "extract"), (-1,))
    c = c if c.dtype == dtypes.bool_ else ops.not_equal(c, 0)
    return compress(c, S.reshape(asarray(arr, "extract"), (-1,)))


def select(condlist, choicelist, default=0) -> Tensor:
    """For each position, the value from the first choice whose condition is true, else ``default``.

    >>> x = fnp.arange(5)
    >>> fnp.select([x < 2, x > 3], [x, x * 10], default=-1)
    Tensor([ 0,  1, -1, -1, 40], dtype=int64)
    """
    if len(condlist) != len(choicelist):
        raise ValueError("numpy.select: condlist and choicelist must have the same length")
    if not condlist:
        raise ValueError("numpy.select: select with an empty condition list is not possible")
    conds = [asarray(c, "select") for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != dtypes.bool_:
            raise TypeError(f"numpy.select: invalid entry {i} in condlist: should be boolean ndarray")
    choices = [c if type(c) in (builtins.int, builtins.float, builtins.complex) else asarray(c, "select")
               for c in choicelist]
    d = dtypes.result_type(*choices, default)
    out = asarray(default, "select") if not isinstance(default, Tensor) else default
    out = convert(out, d) if out.dtype != d else out
    for c, v in zip(reversed(conds), reversed(choices)):
        vt = asarray(v, "select") if not isinstance(v, Tensor) else v
        out = _where(c, convert(vt, d) if vt.dtype != d else vt, out)
    return out


def piecewise(x, condlist, funclist, *args, **kw) -> Tensor:
    """``funclist[i](x)`` where ``condlist[i]`` holds (later conditions win), with one extra function (or
    value) for where none holds. Unlike NumPy, each function sees the whole ``x`` (so shapes are static and
    it traces); the results are selected, so functions must be elementwise.

    >>> fnp.piecewise(fnp.array([-1.0, 2.0]), [fnp.array([True, False])], [lambda v: -v, lambda v: v * 10])
    Tensor([ 1., 20.], dtype=float32)
    """
    xt = asarray(x, "piecewise")
    n2 = len(funclist)
    if isinstance(condlist, (builtins.bool, np.bool_)) or (
        isinstance(condlist, (Tensor, np.ndarray)) and np.ndim(condlist) == xt.ndim
    ) or (isinstance(condlist, list) and condlist and not isinstance(condlist[0], (list, np.ndarray, Tensor))
          and xt.ndim != 0):
        condlist = [condlist]
    conds = [S.broadcast_to(asarray(c, "piecewise"), tuple(xt.shape)) for c in condlist]
    conds = [c if c.dtype == dtypes.bool_ else ops.not_equal(c, 0) for c in conds]
    if len(conds) == n2 - 1:
        anyc = conds[0]
        for c in conds[1:]:
            anyc = ops.logical_or(anyc, c)
        conds.append(ops.logical_not(anyc))
    elif len(conds) != n2:
        raise ValueError(f"numpy.piecewise: with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected")
    y = S.full(tuple(xt.shape), 0, xt.dtype)
    for c, f in zip(conds, funclist):
        v = f(xt, *args, **kw) if callable(f) else f
        vt = asarray(v, "piecewise") if not isinstance(v, Tensor) else v
        vt = S.broadcast_to(convert(vt, xt.dtype) if vt.dtype != xt.dtype else vt, tuple(xt.shape))
        y = _where(c, vt, y)
    return y


def _static_nonzero(x, size, fill_value):
    """The first ``size`` nonzero positions in C order, padded with ``fill_value``: a static shape."""
    flat = S.reshape(ops.not_equal(x, 0) if x.dtype != dtypes.bool_ else x, (-1,))
    n = flat.shape[0]

    order = argsort(convert(ops.logical_not(flat), dtypes.int8), axis=0)
    first = order[:size] if size <= n else S.concatenate([order, S.full((size - n,), 0, dtypes.int64)], 0)
    count = R.sum(flat)
    keep = ops.less(_wrap(np.arange(size, dtype=np.int64)), count)
    fills = (fill_value,) * x.ndim if not isinstance(fill_value, (tuple, list)) else tuple(fill_value)
    if len(fills) != x.ndim:
        raise ValueError(f"numpy.nonzero: fill_value needs {x.ndim} entries, got {len(fills)}")
    out = []
    for d, f in enumerate(fills):
        stride = int(np.prod(x.shape[d + 1:], dtype=np.int64))
        coord = ops.remainder(ops.floor_divide(first, stride), x.shape[d]) if x.shape[d] else first
        out.append(_where(keep, coord, _c(0 if f is None else f, dtypes.int64)))
    return tuple(out)


def nonzero(a, *, size=None, fill_value=None) -> tuple[Tensor, ...]:
    """The indices of the nonzero elements, one int64 array per axis. Their number depends on the values
    (concrete values needed) unless ``size`` fixes it: then the first ``size`` are returned, padded with
    ``fill_value`` (default 0), which works under ``jit`` and ``vmap``.

    >>> fnp.nonzero(fnp.array([[1, 0], [0, 2]]))
    (Tensor([0, 1], dtype=int64), Tensor([0, 1], dtype=int64))
    """
    x = asarray(a, "nonzero")
    if x.ndim == 0:
        raise ValueError("numpy.nonzero: calling nonzero on 0d arrays is not allowed; use fnp.atleast_1d first")
    if size is not None:
        return _static_nonzero(x, static_int(size, "nonzero", "size"), fill_value)
    return _nonzero(x)


def flatnonzero(a, *, size=None, fill_value=None) -> Tensor:
    """The indices of the nonzero elements of the flattened array (see ``nonzero`` for ``size``)."""
    return nonzero(S.reshape(asarray(a, "flatnonzero"), (-1,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None) -> Tensor:
    """The indices of the nonzero elements as an (N, ndim) array (see ``nonzero`` for ``size``).

    >>> fnp.argwhere(fnp.array([[1, 0], [0, 2]]))
    Tensor([[0, 0],
           [1, 1]], dtype=int64)
    """
    x = asarray(a, "argwhere")
    if x.ndim == 0:
        return argwhere(S.reshape(x, (1,)), size=size, fill_value=fill_value)[:, :0]
    idx = nonzero(x, size=size, fill_value=fill_value)
    return stack(idx, axis=-1)


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """Elements of ``x`` where ``condition`` is true (nonzero), else of ``y``; with only ``condition``,
    ``nonzero(condition)``.

    >>> fnp.where(fnp.array([True, False]), 1.0, -1.0)
    Tensor([ 1., -1.], dtype=float32)
    """
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("numpy.where: either both or neither of x and y should be given")
    c = asarray(condition, "where")
    c = c if c.dtype == dtypes.bool_ else ops.not_equal(c, 0)
    return _where(c, x, y)


def _modes(mode, n):
    modes = (mode,) * n if isinstance(mode, str) else tuple(mode)
    if len(modes) != n:
        raise ValueError(f"numpy.ravel_multi_index: {len(modes)} modes for {n} dimensions")
    return modes


def ravel_multi_index(multi_index, dims, mode="raise", order="C") -> Tensor:
    """Flat indices from a tuple of index arrays into an array of shape ``dims`` (C or Fortran order).

    >>> fnp.ravel_multi_index((fnp.array([1, 2]), fnp.array([0, 3])), (3, 4))
    Tensor([ 4, 11], dtype=int64)
    """
    dims = tuple(operator.index(d) for d in dims)
    idx = [_int_index(asarray(i, "ravel_multi_index"), "ravel_multi_index") for i in multi_index]
    if len(idx) != len(dims):
        raise ValueError(f"numpy.ravel_multi_index: {len(idx)} index arrays for {len(dims)} dimensions")
    strides = np.ones(len(dims), np.int64)
    order_dims = range(len(dims) - 2, -1, -1) if order == "C" else range(1, len(dims))
    if order not in ("C", "F"):
        raise ValueError(f"numpy.ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    for k in order_dims:
        strides[k] = strides[k + 1] * dims[k + 1] if order == "C" else strides[k - 1] * dims[k - 1]
    total = None
    for i, n, m, s in zip(idx, dims, _modes(mode, len(dims)), strides):
        if m == "raise":
            if type(i) is Tensor:
                v = i.numpy()
                if v.size and (v.min() < 0 or v.max() >= n):
                    raise ValueError("numpy.ravel_multi_index: invalid entry in coordinates array")
        else:
            i = _apply_mode(i, n, m, "ravel_multi_index")
        term = ops.multiply(i, int(s))
        total = term if total is None else ops.add(total, term)
    return total


def unravel_index(indices, shape, order="C") -> tuple[Tensor, ...]:
    """Index arrays, one per dimension, of the flat ``indices`` into an array of ``shape``.

    >>> fnp.unravel_index(fnp.array([4, 11]), (3, 4))
    (Tensor([1, 2], dtype=int64), Tensor([0, 3], dtype=int64))
    """
    dims = (operator.index(shape),) if isinstance(shape, (builtins.int, np.integer)) else tuple(
        operator.index(d) for d in shape)
    i = _int_index(asarray(indices, "unravel_index"), "unravel_index")
    size = int(np.prod(dims, dtype=np.int64))
    if type(i) is Tensor:
        v = i.numpy()
        if v.size and (v.min() < 0 or v.max() >= size):
            bad = v[(v < 0) | (v >= size)].flat[0]
            raise ValueError(f"numpy.unravel_index: index {bad} is out of bounds for array with size {size}")
    if order not in ("C", "F"):
        raise ValueError(f"numpy.unravel_index: order must be 'C' or 'F', got {order!r}")
    seq = list(range(len(dims)))[::-1] if order == "C" else list(range(len(dims)))
    out = [None] * len(dims)
    rest = i
    for k in seq:
        n = dims[k]
        out[k] = ops.remainder(rest, n) if n else rest
        rest = ops.floor_divide(rest, n) if n else rest
    return tuple(out)


def _bit_weights(bitorder, op):
    if bitorder not in ("big", "little"):
        raise ValueError(f"numpy.{op}: bitorder must be 'big' or 'little', got {bitorder!r}")
    w = 1 << np.arange(8, dtype=np.int64)
    return w[::-1].copy() if bitorder == "big" else w


def packbits(a, /, axis=None, bitorder="big") -> Tensor:
    """Pack the truth values of ``a`` into the bits of uint8 along ``axis`` (flattened when None),
    padding the end with zeros.

    >>> fnp.packbits(fnp.array([1, 0, 1]))
    Tensor([160], dtype=uint8)
    """
    x = asarray(a, "packbits")
    if x.dtype not in dtypes.INTEGER and x.dtype != dtypes.bool_:
        raise TypeError(f"numpy.packbits: expected an integer or boolean array, got {x.dtype.name}")
    if axis is None:
        x, axis = S.reshape(x, (-1,)), 0
    ax = axis_int(axis, x.ndim, "packbits")
    bits = convert(ops.not_equal(x, 0), dtypes.int64)
    n = bits.shape[ax]
    pad = (-n) % 8
    if pad:
        cfg = [(0, 0, 0)] * bits.ndim
        cfg[ax] = (0, pad, 0)
        bits = S.pad(bits, _c(0, dtypes.int64), cfg)
    shape = list(bits.shape)
    shape[ax: ax + 1] = [shape[ax] // 8, 8]
    w = _wrap(_bit_weights(bitorder, "packbits").reshape([8 if i == ax + 1 else 1 for i in range(len(shape))]))
    return convert(R.sum(ops.multiply(S.reshape(bits, tuple(shape)), w), axis=ax + 1), dtypes.uint8)


def unpackbits(a, /, axis=None, count=None, bitorder="big") -> Tensor:
    """The bits of the uint8 array ``a`` as 0/1 uint8 values along ``axis`` (flattened when None); ``count``
    keeps that many (negative: drops that many from the end; beyond the length: pads with zeros).

    >>> fnp.unpackbits(fnp.array([160], dtype=fnp.uint8), count=3)
    Tensor([1, 0, 1], dtype=uint8)
    """
    x = asarray(a, "unpackbits")
    if x.dtype != dtypes.uint8:
        raise TypeError(f"numpy.unpackbits: expected a uint8 array, got {x.dtype.name}")
    if axis is None:
        x, axis = S.reshape(x, (-1,)), 0
    ax = axis_int(axis, x.ndim, "unpackbits")
    w = _bit_weights(bitorder, "unpackbits")
    shifts = _wrap(np.log2(w).astype(np.uint8))
    xe = S.expand_dims(x, [ax + 1])
    sh = S.reshape(shifts, tuple(8 if i == ax + 1 else 1 for i in range(xe.ndim)))
    bits = ops.bitwise_and(ops.bitwise_right_shift(xe, sh), _c(1, dtypes.uint8))
    shape = list(x.shape)
    shape[ax] *= 8
    bits = S.reshape(bits, tuple(shape))
    if count is None:
        return bits
    count = static_int(count, "unpackbits", "count")
    n = shape[ax]
    keep = count if count >= 0 else builtins.max(n + count, 0)
    if keep <= n:
        lo, hi = [0] * bits.ndim, list(bits.shape)
        hi[ax] = keep
        return S.slice_(bits, lo, hi)
    cfg = [(0, 0, 0)] * bits.ndim
    cfg[ax] = (0, keep - n, 0)
    return S.pad(bits, _c(0, dtypes.uint8), cfg)

