"""Array creation with NumPy's signatures: array, zeros, full, arange, linspace, logspace, geomspace, eye, tri,
diag, vander, meshgrid, indices, fromfunction, frombuffer, the triangle and diagonal index helpers."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, Tracer, _wrap
from ..errors import ShapeError
from ..ops import creation as C
from ..ops.linalg_basic import diagonal
from ..ops.manipulation import moveaxis
from ..ops.reductions import cumprod
from ..ops.searching import where
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ._util import asarray as _as
from ._util import check_device, check_like, check_order, concrete, dtype_arg, static_int

__all__ = [
    "array",
    "asarray",
    "copy",
    "zeros",
    "ones",
    "empty",
    "full",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "arange",
    "linspace",
    "logspace",
    "geomspace",
    "eye",
    "identity",
    "tri",
    "tril",
    "triu",
    "diag",
    "diagflat",
    "vander",
    "meshgrid",
    "indices",
    "fromfunction",
    "frombuffer",
    "fromiter",
    "fromstring",
    "tril_indices",
    "triu_indices",
    "tril_indices_from",
    "triu_indices_from",
    "diag_indices",
    "diag_indices_from",
    "mask_indices",
]


def array(object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, ndmax=0, like=None) -> Tensor:
    """A Tensor from ``object`` (a Tensor, NumPy array, nested sequence or scalar), cast to ``dtype``, with at
    least ``ndmin`` dimensions. Python floats become the default float dtype (float32 unless changed).

    >>> fnp.array([[1, 2], [3, 4]], ndmin=3).shape
    (1, 2, 2)
    """
    check_like(like, "array")
    check_order(order, "array")
    if ndmax:
        raise ValueError("numpy.array: ndmax= (object arrays of nested sequences) is not supported; pass ndmax=0")
    x = C.asarray(object, dtype=dtype_arg(dtype), copy=None if copy else False)
    if x.ndim < ndmin:
        x = S.reshape(x, (1,) * (ndmin - x.ndim) + tuple(x.shape))
    return x


def asarray(a, dtype=None, order=None, *, device=None, copy=None, like=None) -> Tensor:
    """``a`` as a Tensor of ``dtype``; Tensors (and traced values) pass through unchanged.

    >>> fnp.asarray([1, 2]).dtype
    dtype('int64')
    """
    check_like(like, "asarray")
    check_order(order, "asarray")
    return C.asarray(a, dtype=dtype_arg(dtype), device=device, copy=copy)


def copy(a, order="K", subok=False) -> Tensor:
    """``a`` as a Tensor. Tensors are immutable, so a copy and the original are indistinguishable and a Tensor
    is returned as is (a writable NumPy input is copied).

    >>> fnp.copy([1.0, 2.0]).shape
    (2,)
    """
    check_order(order, "copy")
    return _as(a, "copy")


def _shape(shape, op):
    return C._shape_arg(shape, f"numpy.{op}")


def zeros(shape, dtype=None, order="C", *, device=None, like=None) -> Tensor:
    """A tensor of zeros; ``dtype`` defaults to the default float dtype.

    >>> fnp.zeros((2, 3)).shape
    (2, 3)
    """
    check_like(like, "zeros")
    check_order(order, "zeros")
    return C.zeros(_shape(shape, "zeros"), dtype=dtype_arg(dtype), device=device)


def ones(shape, dtype=None, order="C", *, device=None, like=None) -> Tensor:
    """A tensor of ones; ``dtype`` defaults to the default float dtype.

    >>> fnp.ones(3, fnp.int32)
    Tensor([1, 1, 1], dtype=int32)
    """
    check_like(like, "ones")
    check_order(order, "ones")
    return C.ones(_shape(shape, "ones"), dtype=dtype_arg(dtype), device=device)


def empty(shape, dtype=None, order="C", *, device=None, like=None) -> Tensor:
    """A tensor of ``shape``: zeros, since an immutable tensor is never observed uninitialized.

    >>> fnp.empty(2)
    Tensor([0., 0.], dtype=float32)
    """
    check_like(like, "empty")
    check_order(order, "empty")
    return C.zeros(_shape(shape, "empty"), dtype=dtype_arg(dtype), device=device)


def full(shape, fill_value, dtype=None, order="C", *, device=None, like=None) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (a scalar, or an array broadcast to ``shape``).

    >>> fnp.full((2, 2), [1, 2])
    Tensor([[1, 2],
           [1, 2]], dtype=int64)
    """
    check_like(like, "full")
    check_order(order, "full")
    check_device(device, "full")
    shape = _shape(shape, "full")
    d = dtype_arg(dtype)
    if type(fill_value) in (builtins.bool, builtins.int, builtins.float, builtins.complex):
        return C.full(shape, fill_value, dtype=d)
    v = C.asarray(fill_value, dtype=d)
    return S.broadcast_to(v, shape)


def _like(a, dtype, shape, op):
    a = _as(a, op)
    return (a.dtype if dtype is None else dtypes.canonicalize(dtype)), (
        tuple(a.shape) if shape is None else _shape(shape, op)
    )


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> Tensor:
    """Zeros with the dtype and shape of ``a`` (or the given ones).

    >>> fnp.zeros_like(fnp.ones((2, 1)), shape=3)
    Tensor([0., 0., 0.], dtype=float32)
    """
    check_order(order, "zeros_like")
    check_device(device, "zeros_like")
    d, s = _like(a, dtype, shape, "zeros_like")
    return S.full(s, 0, d)


def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> Tensor:
    """Ones with the dtype and shape of ``a`` (or the given ones)."""
    check_order(order, "ones_like")
    check_device(device, "ones_like")
    d, s = _like(a, dtype, shape, "ones_like")
    return S.full(s, 1, d)


def empty_like(prototype, /, dtype=None, order="K", subok=True, shape=None, *, device=None) -> Tensor:
    """Zeros with the dtype and shape of ``prototype`` (see ``empty``)."""
    check_order(order, "empty_like")
    check_device(device, "empty_like")
    d, s = _like(prototype, dtype, shape, "empty_like")
    return S.full(s, 0, d)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None) -> Tensor:
    """``fill_value`` broadcast to the shape of ``a``, in ``a``'s dtype (or ``dtype``).

    >>> fnp.full_like(fnp.zeros(2, fnp.int32), 7.9)
    Tensor([7, 7], dtype=int32)
    """
    check_order(order, "full_like")
    check_device(device, "full_like")
    d, s = _like(a, dtype, shape, "full_like")
    if isinstance(fill_value, Tensor):
        return S.broadcast_to(convert(fill_value, d) if fill_value.dtype != d else fill_value, s)
    v = np.asarray(fill_value)
    if d in dtypes.INTEGER and v.dtype.kind == "f":
        v = np.trunc(v)  # NumPy's float-to-int cast truncates
    return S.broadcast_to(_wrap(v.astype(d)), s)


def _number(v, op, name):
    if isinstance(v, Tracer):
        raise TypeError(f"numpy.{op}: {name} must be a concrete number (the output length depends on it)")
    if isinstance(v, (Tensor, np.ndarray, np.generic)):
        v = np.asarray(v)
        if v.ndim:
            raise TypeError(f"numpy.{op}: {name} must be a scalar, got shape {v.shape}")
        return v.item()
    return v


def arange(start_or_stop, /, stop=None, step=1, *, dtype=None, device=None, like=None) -> Tensor:
    """Evenly spaced values in ``[start, stop)``: int64 for integer arguments, the default float dtype when
    any argument is a float.

    >>> fnp.arange(1, 7, 2)
    Tensor([1, 3, 5], dtype=int64)
    """
    check_like(like, "arange")
    start = _number(start_or_stop, "arange", "start")
    stop = None if stop is None else _number(stop, "arange", "stop")
    step = _number(step, "arange", "step")
    return C.arange(start, stop, step, dtype=dtype_arg(dtype), device=device)


def _traced(*xs) -> bool:
    return builtins.any(isinstance(x, Tracer) for x in xs)


def _inexact_result(*xs, dtype=None):
    """The dtype of a ``linspace``-like result: ``dtype``, else the promoted inputs made floating."""
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    d = dtypes.result_type(*[x if isinstance(x, Tensor) or type(x) in (int, float, complex, bool)
                             else C.asarray(x) for x in xs])
    if d in dtypes.INEXACT:
        return d
    return dtypes.default_float


def _wide(d):
    return np.complex128 if d in dtypes.COMPLEX else np.float64


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    """``num`` evenly spaced samples from ``start`` to ``stop`` (arrays give one sequence per element, along
    ``axis``). Differentiable in ``start`` and ``stop``; ``retstep=True`` also returns the spacing.

    >>> fnp.linspace(0.0, 1.0, 5)
    Tensor([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    check_device(device, "linspace")
    num = static_int(num, "linspace", "num")
    if num < 0:
        raise ValueError(f"numpy.linspace: num must be non-negative, got {num}")
    d = _inexact_result(start, stop, dtype=dtype)
    div = num - 1 if endpoint else num
    if not _traced(start, stop):
        a, b = np.asarray(concrete(start, "linspace", "")), np.asarray(concrete(stop, "linspace", ""))
        wide = _wide(d) if d in dtypes.INEXACT else np.float64
        y, step = np.linspace(a.astype(wide), b.astype(wide), num, endpoint, retstep=True, axis=axis)
        if d in dtypes.INTEGER:
            y = np.floor(y)
        out = _wrap(y.astype(d))
        return (out, _wrap(np.asarray(step).astype(d if d in dtypes.INEXACT else np.float64))) if retstep else out
    wd = d if d in dtypes.INEXACT else dtypes.default_float
    a, b = C.asarray(start, dtype=wd), C.asarray(stop, dtype=wd)
    a, b = ops.add(a, ops.multiply(b, 0)), ops.add(b, ops.multiply(a, 0))  # broadcast against each other
    delta = ops.subtract(b, a)
    shape = (num,) + tuple(a.shape)
    i = S.broadcast_in_dim(convert(S.iota(dtypes.int64, (num,), 0), wd), shape, (0,))
    if div > 0:
        step = ops.divide(delta, float(div))
        y = ops.add(ops.multiply(i, step), a)
    else:
        step = ops.multiply(delta, math.nan)
        y = ops.add(ops.multiply(i, delta), a)
    if endpoint and num > 1:
        head = S.slice_(y, (0,) * y.ndim, (num - 1,) + tuple(a.shape))
        y = S.concatenate([head, S.reshape(b, (1,) + tuple(b.shape))], 0)
    if y.ndim > 1:
        y = moveaxis(y, 0, axis)
    if d in dtypes.INTEGER:
        y = convert(ops.floor(y), d)
    return (y, step) if retstep else y


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0) -> Tensor:
    """``base ** linspace(start, stop, num)``: samples evenly spaced on a log scale.

    >>> fnp.logspace(0.0, 2.0, 3)
    Tensor([  1.,  10., 100.], dtype=float32)
    """
    d = _inexact_result(start, stop, base, dtype=dtype)
    if not _traced(start, stop, base):
        args = (concrete(v, "logspace", "") for v in (start, stop, base))
        a, b, c = (np.asarray(v).astype(_wide(d) if d in dtypes.INEXACT else np.float64) for v in args)
        y = np.logspace(a, b, num=static_int(num, "logspace", "num"), endpoint=endpoint, base=c, axis=axis)
        return _wrap((np.floor(y) if d in dtypes.INTEGER else y).astype(d))
    wd = d if d in dtypes.INEXACT else dtypes.default_float
    y = linspace(start, stop, num=num, endpoint=endpoint, dtype=wd, axis=axis)
    base = C.asarray(base, dtype=wd)
    if base.ndim:
        base = S.expand_dims(base, [axis % (base.ndim + 1)])
    out = ops.pow(base, y)
    return convert(ops.floor(out), d) if d in dtypes.INTEGER else out


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0) -> Tensor:
    """Samples evenly spaced on a log scale, with the endpoints themselves given (both nonzero; negative
    or complex endpoints follow NumPy).

    >>> fnp.geomspace(1.0, 1000.0, 4)
    Tensor([   1.,   10.,  100., 1000.], dtype=float32)
    """
    num = static_int(num, "geomspace", "num")
    d = _inexact_result(start, stop, dtype=dtype)
    if not _traced(start, stop):
        a, b = (np.asarray(concrete(v, "geomspace", "")) for v in (start, stop))
        wide = _wide(d) if d in dtypes.INEXACT else np.float64
        y = np.geomspace(a.astype(wide), b.astype(wide), num=num, endpoint=endpoint, axis=axis)
        return _wrap((np.floor(y) if d in dtypes.INTEGER else y).astype(d))
    wd = d if d in dtypes.INEXACT else dtypes.default_float
    a, b = C.asarray(start, dtype=wd), C.asarray(stop, dtype=wd)
    sign = ops.sign(a)
    a1, b1 = ops.divide(a, sign), ops.divide(b, sign)
    y = logspace(ops.log10(a1), ops.log10(b1), num=num, endpoint=endpoint, base=10.0, dtype=wd, axis=0)
    rest = tuple(y.shape[1:])
    if num > 0:
        parts = [S.reshape(S.broadcast_to(a1, rest), (1,) + rest)]
        mid_hi = num - 1 if endpoint and num > 1 else num
        if mid_hi > 1:
            parts.append(S.slice_(y, (1,) + (0,) * len(rest), (mid_hi,) + rest))
        if endpoint and num > 1:
            parts.append(S.reshape(S.broadcast_to(b1, rest), (1,) + rest))
        y = S.concatenate(parts, 0)
    y = ops.multiply(y, sign)
    if y.ndim > 1:
        y = moveaxis(y, 0, axis)
    return convert(ops.floor(y), d) if d in dtypes.INTEGER else y


def eye(N, M=None, k=0, dtype=float, order="C", *, device=None, like=None) -> Tensor:
    """An ``N`` x ``M`` matrix with ones on diagonal ``k``.

    >>> fnp.eye(2, 3, 1)
    Tensor([[0., 1., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    check_like(like, "eye")
    check_order(order, "eye")
    return C.eye(static_int(N, "eye", "N"), None if M is None else static_int(M, "eye", "M"),
                 k=static_int(k, "eye", "k"), dtype=dtypes.canonicalize(dtype), device=device)


def identity(n, dtype=None, *, like=None) -> Tensor:
    """The ``n`` x ``n`` identity matrix.

    >>> fnp.identity(2, dtype=int)
    Tensor([[1, 0],
           [0, 1]], dtype=int64)
    """
    check_like(like, "identity")
    return C.eye(static_int(n, "identity", "n"), dtype=dtypes.canonicalize(dtype or float))


def tri(N, M=None, k=0, dtype=float, *, like=None) -> Tensor:
    """Ones at and below diagonal ``k`` of an ``N`` x ``M`` matrix, zeros elsewhere.

    >>> fnp.tri(2, dtype=int)
    Tensor([[1, 0],
           [1, 1]], dtype=int64)
    """
    check_like(like, "tri")
    return _wrap(np.tri(static_int(N, "tri", "N"), None if M is None else static_int(M, "tri", "M"),
                        static_int(k, "tri", "k"), dtype=dtypes.canonicalize(dtype)))


def _tri_part(m, k, lower, op):
    m = _as(m, op)
    if m.ndim == 0:
        raise ShapeError(f"numpy.{op}: input must be at least 1-D, got a 0-d array")
    if m.ndim == 1:
        m = S.broadcast_to(m, (m.shape[0], m.shape[0]))
    k = static_int(k, op, "k")
    return C.tril(m, k=k) if lower else C.triu(m, k=k)


def tril(m, k=0) -> Tensor:
    """The lower triangle of the last two axes: zeros above diagonal ``k`` (a 1-D input is a repeated row).

    >>> fnp.tril([[1, 2], [3, 4]])
    Tensor([[1, 0],
           [3, 4]], dtype=int64)
    """
    return _tri_part(m, k, True, "tril")


def triu(m, k=0) -> Tensor:
    """The upper triangle of the last two axes: zeros below diagonal ``k``.

    >>> fnp.triu([[1, 2], [3, 4]])
    Tensor([[1, 2],
           [0, 4]], dtype=int64)
    """
    return _tri_part(m, k, False, "triu")


def diag(v, k=0) -> Tensor:
    """The ``k``-th diagonal of a matrix, or a square matrix with the 1-D ``v`` on its ``k``-th diagonal.

    >>> fnp.diag([1.0, 2.0])
    Tensor([[1., 0.],
           [0., 2.]], dtype=float32)
    """
    v = _as(v, "diag")
    k = static_int(k, "diag", "k")
    if v.ndim == 2:
        return diagonal(v, offset=k, axis1=0, axis2=1)
    if v.ndim != 1:
        raise ShapeError(f"numpy.diag: input must be 1-D or 2-D, got shape {tuple(v.shape)}")
    n = v.shape[0]
    mask = _wrap(np.eye(n, dtype=bool))
    m = where(mask, S.broadcast_in_dim(v, (n, n), (0,)), _wrap(np.zeros((), v.dtype)))
    if k == 0:
        return m
    a = builtins.abs(k)
    cfg = ((0, a, 0), (a, 0, 0)) if k > 0 else ((a, 0, 0), (0, a, 0))
    return S.pad(m, _wrap(np.zeros((), v.dtype)), cfg)


def diagflat(v, k=0) -> Tensor:
    """A square matrix with the flattened ``v`` on diagonal ``k``.

    >>> fnp.diagflat([[1, 2]]).shape
    (2, 2)
    """
    return diag(S.reshape(_as(v, "diagflat"), (-1,)), k)


def vander(x, N=None, increasing=False) -> Tensor:
    """The Vandermonde matrix of the 1-D ``x``: columns ``x**(N-1), ..., x, 1`` (reversed when
    ``increasing``), built by a cumulative product as NumPy does.

    >>> fnp.vander([2, 3], 3)
    Tensor([[4, 2, 1],
           [9, 3, 1]], dtype=int64)
    """

    x = _as(x, "vander")
    if x.ndim != 1:
        raise ShapeError(f"numpy.vander: x must be 1-D, got shape {tuple(x.shape)}")
    n = x.shape[0]
    N = n if N is None else static_int(N, "vander", "N")
    if N == 0:
        return S.full((n, 0), 0, x.dtype)
    cols = S.concatenate([S.full((n, 1), 1, x.dtype), S.broadcast_in_dim(x, (n, N - 1), (0,))], 1)
    out = cumprod(cols, axis=1)
    return out if increasing else S.rev(out, (1,))


def meshgrid(*xi, copy=True, sparse=False, indexing="xy") -> tuple[Tensor, ...]:
    """Coordinate arrays from coordinate vectors (each input is flattened). ``indexing='xy'`` swaps the first
    two output axes (Cartesian); ``'ij'`` keeps them (matrix). ``sparse`` returns broadcastable arrays.

    >>> [g.shape for g in fnp.meshgrid(fnp.arange(3), fnp.arange(2))]
    [(2, 3), (2, 3)]
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"numpy.meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [S.reshape(_as(x, "meshgrid"), (-1,)) for x in xi]
    nd = len(xs)
    shape = [x.shape[0] for x in xs]
    dims = list(range(nd))
    if indexing == "xy" and nd > 1:
        shape[0], shape[1] = shape[1], shape[0]
        dims[0], dims[1] = 1, 0
    out = []
    for x, dim in zip(xs, dims):
        if sparse:
            out.append(S.reshape(x, tuple(shape[i] if i == dim else 1 for i in range(nd))))
        else:
            out.append(S.broadcast_in_dim(x, tuple(shape), (dim,)))
    return tuple(out)


def indices(dimensions, dtype=int, sparse=False):
    """The index grid of an array of shape ``dimensions``: one array per axis, stacked (or a tuple of
    broadcastable arrays with ``sparse``).

    >>> fnp.indices((2, 2))[1]
    Tensor([[0, 1],
           [0, 1]], dtype=int64)
    """
    shape = _shape(dimensions, "indices")
    d = dtypes.canonicalize(dtype)
    nd = len(shape)
    if sparse:
        return tuple(
            S.reshape(S.iota(d, (n,), 0), tuple(n if i == j else 1 for j in range(nd))) for i, n in enumerate(shape)
        )
    grids = [S.reshape(S.iota(d, shape, i), (1,) + shape) for i in range(nd)]
    return S.concatenate(grids, 0) if grids else S.full((0,), 0, d)


def fromfunction(function, shape, *, dtype=float, like=None, **kwargs):
    """``function(*coordinates, **kwargs)`` called once with the index grid of ``shape`` (as ``dtype``).

    >>> fnp.fromfunction(lambda i, j: i + j, (2, 2), dtype=int)
    Tensor([[0, 1],
           [1, 2]], dtype=int64)
    """
    check_like(like, "fromfunction")
    return function(*_grid_list(shape, dtype), **kwargs)


def _grid_list(shape, dtype):
    shape = _shape(shape, "fromfunction")
    d = dtypes.canonicalize(dtype)
    return [S.iota(d, shape, i) for i in range(len(shape))]


def frombuffer(buffer, dtype=None, count=-1, offset=0, *, like=None) -> Tensor:
    """The bytes of ``buffer`` read as a 1-D array of ``dtype``. ``dtype`` describes the bytes, so it is
    NumPy's: the default and ``float`` mean float64. A read-only buffer (``bytes``) is shared, not copied.

    >>> fnp.frombuffer(b"\\x01\\x02", dtype=fnp.uint8)
    Tensor([1, 2], dtype=uint8)
    """
    check_like(like, "frombuffer")
    arr = np.frombuffer(buffer, dtype=np.float64 if dtype is None else np.dtype(dtype), count=count, offset=offset)
    return C.asarray(arr)


def fromiter(iter, dtype, count=-1, *, like=None) -> Tensor:
    """A 1-D array of ``dtype`` from the values an iterable yields (at most ``count`` of them).

    >>> fnp.fromiter((i * i for i in range(4)), int)
    Tensor([0, 1, 4, 9], dtype=int64)
    """
    check_like(like, "fromiter")
    return C.asarray(np.fromiter(iter, dtype=dtypes.canonicalize(dtype), count=count))


def fromstring(string, dtype=float, count=-1, *, sep, like=None) -> Tensor:
    """A 1-D array of the numbers in ``string``, separated by ``sep`` (text mode only; for bytes use
    ``frombuffer``).

    >>> fnp.fromstring("1 2 3", dtype=int, sep=" ")
    Tensor([1, 2, 3], dtype=int64)
    """
    check_like(like, "fromstring")
    if sep == "":
        raise ValueError("numpy.fromstring: binary mode (sep='') is not supported; use fnp.frombuffer for bytes")
    d = dtypes.canonicalize(dtype)
    return C.asarray(np.fromstring(string, dtype=d, count=count, sep=sep))


def _index_pair(rows, cols):
    return _wrap(np.asarray(rows, np.int64)), _wrap(np.asarray(cols, np.int64))


def tril_indices(n, k=0, m=None) -> tuple[Tensor, Tensor]:
    """Row and column indices of the lower triangle (at and below diagonal ``k``) of an ``n`` x ``m`` matrix.

    >>> fnp.tril_indices(2)
    (Tensor([0, 1, 1], dtype=int64), Tensor([0, 0, 1], dtype=int64))
    """
    return _index_pair(*np.tril_indices(static_int(n, "tril_indices", "n"), k, m))


def triu_indices(n, k=0, m=None) -> tuple[Tensor, Tensor]:
    """Row and column indices of the upper triangle (at and above diagonal ``k``) of an ``n`` x ``m`` matrix.

    >>> fnp.triu_indices(2)
    (Tensor([0, 0, 1], dtype=int64), Tensor([0, 1, 1], dtype=int64))
    """
    return _index_pair(*np.triu_indices(static_int(n, "triu_indices", "n"), k, m))


def _last2(arr, op):
    shape = tuple(_as(arr, op).shape)
    if len(shape) < 2:
        raise ShapeError(f"numpy.{op}: input must be at least 2-D, got shape {shape}")
    return shape[-2:]


def tril_indices_from(arr, k=0) -> tuple[Tensor, Tensor]:
    """``tril_indices`` for the shape of the last two axes of ``arr``."""
    n, m = _last2(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0) -> tuple[Tensor, Tensor]:
    """``triu_indices`` for the shape of the last two axes of ``arr``."""
    n, m = _last2(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def diag_indices(n, ndim=2) -> tuple[Tensor, ...]:
    """Indices of the main diagonal of an ``ndim``-dimensional array with all sides ``n``.

    >>> fnp.diag_indices(2)
    (Tensor([0, 1], dtype=int64), Tensor([0, 1], dtype=int64))
    """
    i = _wrap(np.arange(static_int(n, "diag_indices", "n"), dtype=np.int64))
    return (i,) * static_int(ndim, "diag_indices", "ndim")


def diag_indices_from(arr) -> tuple[Tensor, ...]:
    """``diag_indices`` for ``arr``, whose sides must all be equal."""
    shape = tuple(_as(arr, "diag_indices_from").shape)
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ShapeError(f"numpy.diag_indices_from: needs at least 2 equal sides, got shape {shape}")
    return diag_indices(shape[0], len(shape))


def mask_indices(n, mask_func, k=0) -> tuple[Tensor, Tensor]:
    """Indices where ``mask_func(ones((n, n)), k)`` is nonzero (e.g. ``fnp.triu``).

    >>> fnp.mask_indices(2, fnp.triu)
    (Tensor([0, 0, 1], dtype=int64), Tensor([0, 1, 1], dtype=int64))
    """
    n = static_int(n, "mask_indices", "n")
    m = concrete(_as(mask_func(C.ones((n, n), dtype=dtypes.int64), k), "mask_indices"), "mask_indices",
                 "pass a mask_func that does not depend on traced values")
    return _index_pair(*np.nonzero(m))

