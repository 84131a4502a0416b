"""NumPy's index helpers: ``r_``, ``c_``, ``mgrid``, ``ogrid``, ``s_``, ``index_exp``, ``ix_``.

``r_`` and ``c_`` concatenate traced tensors as well as concrete ones; the ranges that slices inside them (and
``mgrid``/``ogrid``) denote must be concrete numbers, since they decide shapes.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes
from ..core import Tensor, _wrap
from ..errors import ShapeError
from ..ops import creation as C
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ._util import asarray, concrete

__all__ = ["c_", "index_exp", "ix_", "mgrid", "ogrid", "r_", "s_"]

s_ = np.s_
index_exp = np.index_exp

_SCALARS = (builtins.int, builtins.float, builtins.complex, builtins.bool, np.generic)


def _slice_range(sl: slice, op: str):
    """The values a ``start:stop:step`` slice denotes (a complex step is a number of points, endpoint
    included), as a float64 or int64 NumPy array, and whether it is floating."""
    start = 0 if sl.start is None else sl.start
    stop, step = sl.stop, 1 if sl.step is None else sl.step
    for v in (start, stop, step):
        if isinstance(v, Tensor) or not isinstance(v, _SCALARS):
            raise TypeError(f"numpy.{op}: slice bounds must be concrete numbers, got {v!r}")
    if stop is None:
        raise ValueError(f"numpy.{op}: a slice needs a stop value")
    if isinstance(step, (complex, np.complexfloating)):
        n = int(abs(step))
        return np.linspace(start, stop, n), True
    is_float = builtins.any(isinstance(v, (float, np.floating)) for v in (start, stop, step))
    return np.arange(start, stop, step, dtype=np.float64 if is_float else np.int64), is_float


def _range_dtype(is_float: bool):
    return dtypes.float_default() if is_float else dtypes.default_int


class _Grid:
    """``mgrid[a:b:c, ...]`` (dense) and ``ogrid[...]`` (open: one broadcastable array per axis)."""

    def __init__(self, sparse: bool):
        self.sparse = sparse
        self.name = "ogrid" if sparse else "mgrid"

    def __getitem__(self, key):
        single = isinstance(key, slice)
        keys = (key,) if single else tuple(key)
        ranges = [_slice_range(k, self.name) for k in keys]
        d = _range_dtype(builtins.any(f for _, f in ranges))
        vecs = [_wrap(r.astype(d)) for r, _ in ranges]
        if single:
            return vecs[0]
        shape = tuple(v.shape[0] for v in vecs)
        nd = len(vecs)
        if self.sparse:
            return tuple(S.reshape(v, tuple(n if i == j else 1 for j in range(nd))) for i, (v, n) in
                         enumerate(zip(vecs, shape)))
        return S.concatenate([S.reshape(S.broadcast_in_dim(v, shape, (i,)), (1,) + shape) for i, v in
                              enumerate(vecs)], 0)

    def __repr__(self) -> str:
        return f"funclib.numpy.{self.name}"


mgrid = _Grid(sparse=False)
mgrid.__doc__ = """A dense coordinate grid: ``mgrid[0:2, 0:3]`` has shape (2, 2, 3); a complex step is a number
of points, endpoints included.

>>> fnp.mgrid[0:1:3j]
Tensor([0. , 0.5, 1. ], dtype=float32)
"""
ogrid = _Grid(sparse=True)
ogrid.__doc__ = """An open coordinate grid: one broadcastable array per axis.

>>> [g.shape for g in fnp.ogrid[0:2, 0:3]]
[(2, 1), (1, 3)]
"""


def _at_least(x, ndmin):
    return S.reshape(x, (1,) * (ndmin - x.ndim) + tuple(x.shape)) if x.ndim < ndmin else x


class _Concatenator:
    """``r_`` (``axis=0, ndmin=1, trans1d=-1``) and ``c_`` (``axis=-1, ndmin=2, trans1d=0``) with NumPy's
    string directives ``'axis'``, ``'axis,ndmin'`` and ``'axis,ndmin,trans1d'`` as the first entry."""

    def __init__(self, name, axis, ndmin, trans1d):
        self.name, self.axis, self.ndmin, self.trans1d = name, axis, ndmin, trans1d

    def __getitem__(self, key):
        if isinstance(key, str):
            raise ValueError(f"numpy.{self.name}: matrix directives ('r', 'c') are not supported")
        keys = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        objs, kinds = [], []
        for k, item in enumerate(keys):
            if isinstance(item, str):
                if k != 0:
                    raise ValueError(f"numpy.{self.name}: a string directive must be the first entry")
                axis, ndmin, trans1d = self._directive(item, axis, ndmin, trans1d)
                continue
            if isinstance(item, slice):
                r, is_float = _slice_range(item, self.name)
                obj = _wrap(r.astype(_range_dtype(is_float)))
                item_ndim = 1
                kinds.append(obj.dtype)
            elif isinstance(item, _SCALARS) and not isinstance(item, Tensor):
                obj = item
                item_ndim = 0
                kinds.append(item if type(item) in (int, float, complex, bool) else np.asarray(item).dtype)
            else:
                obj = asarray(item, self.name)
                item_ndim = obj.ndim
                kinds.append(obj.dtype)
            objs.append((obj, item_ndim))
        if not objs:
            raise ValueError(f"numpy.{self.name}: nothing to concatenate")
        d = dtypes.result_type(*kinds)
        out = []
        for obj, item_ndim in objs:
            x = C.asarray(obj, dtype=d) if not isinstance(obj, Tensor) else obj
            x = convert(x, d) if x.dtype != d else x
            x = _at_least(x, ndmin)
            if trans1d != -1 and item_ndim < ndmin:
                k2 = ndmin - item_ndim
                k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
                order = list(range(ndmin))
                x = S.transpose(x, tuple(order[:k1] + order[k2:] + order[k1:k2]))
            out.append(x)
        nd = out[0].ndim
        if not -nd <= axis < nd:
            raise ShapeError(f"numpy.{self.name}: axis {axis} is out of range for {nd}-dimensional pieces")
        return S.concatenate(out, axis % nd) if len(out) > 1 else out[0]

    def _directive(self, item, axis, ndmin, trans1d):
        parts = item.split(",")
        try:
            vals = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"numpy.{self.name}: unknown directive {item!r}") from None
        if len(vals) > 3:
            raise ValueError(f"numpy.{self.name}: a directive has at most three fields, got {item!r}")
        axis = vals[0]
        if len(vals) > 1:
            ndmin = vals[1]
        if len(vals) > 2:
            trans1d = vals[2]
        return axis, ndmin, trans1d

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"funclib.numpy.{self.name}"


r_ = _Concatenator("r_", 0, 1, -1)
r_.__doc__ = """Concatenate along the first axis, with slices as ranges: ``r_[1:3, 5, [7, 8]]``.

>>> fnp.r_[0:3, 7]
Tensor([0, 1, 2, 7], dtype=int64)
"""
c_ = _Concatenator("c_", -1, 2, 0)
c_.__doc__ = """Stack 1-D pieces as columns (concatenate along the last axis, at least 2-D).

>>> fnp.c_[fnp.array([1, 2]), fnp.array([3, 4])]
Tensor([[1, 3],
       [2, 4]], dtype=int64)
"""


def ix_(*args) -> tuple[Tensor, ...]:
    """Open-mesh index arrays from 1-D sequences (booleans become the indices of their True entries), so that
    ``a[ix_(rows, cols)]`` picks the cross product.

    >>> [i.shape for i in fnp.ix_([0, 1], [2, 4, 5])]
    [(2, 1), (1, 3)]
    """
    n = len(args)
    out = []
    for k, a in enumerate(args):
        if not isinstance(a, Tensor) and len(np.asarray(a)) == 0:
            x = _wrap(np.zeros(0, np.int64))
        else:
            x = asarray(a, "ix_")
        if x.dtype == dtypes.bool_:
            x = _wrap(np.nonzero(concrete(x, "ix_", "pass integer indices"))[0].astype(np.int64))
        if x.ndim != 1:
            raise ShapeError(f"numpy.ix_: inputs must be 1-D, got shape {tuple(x.shape)}")
        out.append(S.reshape(x, (1,) * k + (x.shape[0],) + (1,) * (n - k - 1)))
    return tuple(out)
