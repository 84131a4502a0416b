"""``sort``: a stable multi-operand sort along one axis (the first ``num_keys`` operands are the keys).

``argsort`` sorts an iota alongside the keys; the jvp permutes tangents with that permutation.
"""

from __future__ import annotations

import numpy as np

from ..core import Primitive, ShapedArray, Zero, aval_of
from ..errors import DTypeError, ShapeError
from .indexing import gather
from .shape import bdim_to_front, broadcast_in_dim, concatenate, iota

sort_p = Primitive("sort", multiple_results=True)
sort_p.family = "sort"
sort_p.no_rule["transpose"] = "not linear"


_UNSTABLE_OK = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                               np.uint8, np.uint16, np.uint32, np.uint64, np.bool_))


def _sort_impl(*operands, dimension, num_keys):
    ops = [np.asarray(o) for o in operands]
    if len(ops) == 1 and ops[0].dtype in _UNSTABLE_OK:
        x = ops[0]
        # sorting values alone, only equal elements can trade places, and those are identical but for -0 and
        # +0: without a -0 NumPy's default sort (many times faster than the stable one) gives the same result
        if x.dtype.kind != "f" or not (np.signbit(x) & (x == 0)).any():
            return [np.sort(x, axis=dimension)]
    keys = ops[:num_keys]
    if num_keys == 1:
        perm = np.argsort(keys[0], axis=dimension, kind="stable")
    else:
        # np.lexsort takes the primary key last
        perm = np.lexsort(tuple(np.moveaxis(k, dimension, -1) for k in reversed(keys)), axis=-1)
        perm = np.moveaxis(perm, -1, dimension)
    return [np.take_along_axis(o, perm, axis=dimension) for o in ops]


sort_p.def_impl(_sort_impl)


@sort_p.def_abstract_eval
def _sort_abstract(*operands, dimension, num_keys):
    shape = operands[0].shape
    if any(o.shape != shape for o in operands):
        raise ShapeError(f"sort: operands must share a shape, got {[o.shape for o in operands]}")
    if not 0 <= dimension < len(shape):
        raise ShapeError(f"sort: axis {dimension} out of range for shape {shape}")
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"sort: num_keys={num_keys} with {len(operands)} operands")
    for o in operands[:num_keys]:
        if o.dtype.kind == "c":
            raise DTypeError("sort: complex keys have no order; sort by real and imaginary parts explicitly")
    return [ShapedArray(o.shape, o.dtype) for o in operands]


@sort_p.def_jvp
def _sort_jvp(primals, tangents, *, dimension, num_keys):
    shape = primals[0].shape
    perm_in = iota(np.int64, shape, dimension)
    *outs, perm = sort_p.bind(*primals, perm_in, dimension=dimension, num_keys=num_keys)
    # index tuples (i0, .., perm, .., in) for a full gather of each tangent
    cols = [
        perm.reshape(shape + (1,)) if d == dimension else iota(np.int64, shape + (1,), d) for d in range(len(shape))
    ]
    idx = concatenate(cols, len(shape)) if cols else None
    touts = []
    for o, t in zip(outs, tangents):
        if type(t) is Zero or o.dtype.kind not in "fc":
            touts.append(Zero(aval_of(o)))
        else:
            touts.append(gather(t, idx, tuple(range(len(shape)))))
    return outs, touts


@sort_p.def_vmap
def _sort_vmap(args, dims, *, dimension, num_keys):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [
        bdim_to_front(a, d) if d is not None else broadcast_in_dim(a, (size,) + a.shape, tuple(range(1, a.ndim + 1)))
        for a, d in zip(args, dims)
    ]
    return sort_p.bind(*moved, dimension=dimension + 1, num_keys=num_keys), [0] * len(args)


def sort(operands, dimension: int, num_keys: int = 1):
    """Sort ``operands`` (a list) along ``dimension`` by the first ``num_keys`` of them (stable)."""
    return sort_p.bind(*operands, dimension=int(dimension), num_keys=int(num_keys))
