"""``dot_general``: batched tensor contraction, the one matrix-multiply primitive. Runs on BLAS via np.matmul."""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Tensor, Zero, _state, _wrap, aval_of, is_undefined
from ..errors import DTypeError, ShapeError
from ._util import bdim_to_front

dot_general_p = Primitive("dot_general", linear=True)  # bilinear: linear in each operand
dot_general_p.family = "dot"
_LOW = (dtypes.float16, dtypes.bfloat16)


def _free(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _dot_impl(x, y, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    x, y = np.asarray(x), np.asarray(y)
    out_dtype = x.dtype
    if out_dtype in _LOW:
        x, y = x.astype(np.float32), y.astype(np.float32)
    xf, yf = _free(x.ndim, lc, lb), _free(y.ndim, rc, rb)
    bshape = [x.shape[i] for i in lb]
    m = [x.shape[i] for i in xf]
    n = [y.shape[i] for i in yf]
    k = int(np.prod([x.shape[i] for i in lc], dtype=np.int64))
    B, M, N = int(np.prod(bshape, dtype=np.int64)), int(np.prod(m, dtype=np.int64)), int(np.prod(n, dtype=np.int64))
    # transposes become strided views; 2-D matmul hands transposed (F-order) operands to BLAS without a copy
    xt = np.transpose(x, list(lb) + xf + list(lc))
    yt = np.transpose(y, list(rb) + list(rc) + yf)
    if k == 1:
        # an outer product (per-example gradients under vmap): a broadcast multiply streams it, BLAS does not
        out = np.multiply(xt.reshape(B, M, 1), yt.reshape(B, 1, N))
    elif B == 1:
        out = np.matmul(xt.reshape(M, k), yt.reshape(k, N))
    else:
        # stacked matmul only reaches BLAS when each matrix is contiguous in one of its axes
        out = np.matmul(_blasable(xt.reshape(B, M, k)), _blasable(yt.reshape(B, k, N)))
    return out.reshape(bshape + m + n).astype(out_dtype, copy=False)


def dot_runner(x_shape, y_shape, dtype, dimension_numbers):
    """``_dot_impl`` specialized to static shapes: the permutations and reshapes are worked out once, so a jitted
    program's call is the matmul and two views. Falls back to the general impl for other shapes."""
    (lc, rc), (lb, rb) = dimension_numbers
    x_shape, y_shape = tuple(x_shape), tuple(y_shape)
    if dtype in _LOW:
        return functools.partial(_dot_impl, dimension_numbers=dimension_numbers)
    xf, yf = _free(len(x_shape), lc, lb), _free(len(y_shape), rc, rb)
    xperm = list(lb) + xf + list(lc)
    yperm = list(rb) + list(rc) + yf
    bshape = [x_shape[i] for i in lb]
    out_shape = tuple(bshape + [x_shape[i] for i in xf] + [y_shape[i] for i in yf])
    k = math.prod(x_shape[i] for i in lc)
    B = math.prod(bshape)
    M = math.prod(x_shape[i] for i in xf)
    N = math.prod(y_shape[i] for i in yf)
    if k == 1 or B != 1:
        return functools.partial(_dot_impl, dimension_numbers=dimension_numbers)
    xid = xperm == list(range(len(x_shape)))
    yid = yperm == list(range(len(y_shape)))
    xs, ys = (M, k), (k, N)

    def run(x, y):
        if x.shape != x_shape or y.shape != y_shape:
            return _dot_impl(x, y, dimension_numbers=dimension_numbers)
        xt = x if xid else x.transpose(xperm)
        yt = y if yid else y.transpose(yperm)
        return np.matmul(xt.reshape(xs), yt.reshape(ys)).reshape(out_shape)

    return run


def _blasable(a):
    s = a.strides
    isz = a.itemsize
    if s[-1] == isz or s[-2] == isz:
        return a
    return np.ascontiguousarray(a)


dot_general_p.def_impl(_dot_impl)


@dot_general_p.def_abstract_eval
def _dot_abstract(x, y, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if x.dtype != y.dtype:
        raise DTypeError(f"dot_general: operands must share a dtype, got {x.dtype.name} and {y.dtype.name}")
    if x.dtype == dtypes.bool_:
        raise DTypeError("dot_general: boolean operands are not supported; cast to an integer or float dtype")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"dot_general: unbalanced dimension numbers {dimension_numbers}")
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        if not (0 <= a < x.ndim and 0 <= b < y.ndim) or x.shape[a] != y.shape[b]:
            raise ShapeError(
                f"dot_general: cannot contract {x.str_short()} with {y.str_short()} along {dimension_numbers} "
                f"(sizes must match)"
            )
    shape = (
        tuple(x.shape[i] for i in lb)
        + tuple(x.shape[i] for i in _free(x.ndim, lc, lb))
        + tuple(y.shape[i] for i in _free(y.ndim, rc, rb))
    )
    return ShapedArray(shape, x.dtype)


@dot_general_p.def_jvp
def _dot_jvp(primals, tangents, *, dimension_numbers):
    x, y = primals
    tx, ty = tangents
    out = dot_general_p.bind(x, y, dimension_numbers=dimension_numbers)
    acc = None
    if type(tx) is not Zero:
        acc = dot_general_p.bind(tx, y, dimension_numbers=dimension_numbers)
    if type(ty) is not Zero:
        t = dot_general_p.bind(x, ty, dimension_numbers=dimension_numbers)
        acc = t if acc is None else acc + t
    return out, Zero(aval_of(out)) if acc is None else acc


def _ct_lhs(ct, y, x_ndim, dimension_numbers):
    from .shape import transpose

    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    xf = _free(x_ndim, lc, lb)
    yf = _free(y.ndim if not is_undefined(y) else y.aval.ndim, rc, rb)
    ct_yfree = tuple(range(nb + len(xf), nb + len(xf) + len(yf)))
    r = dot_general(ct, y, ((ct_yfree, tuple(yf)), (tuple(range(nb)), tuple(rb))))
    src = list(lb) + xf + [lc[list(rc).index(a)] for a in sorted(rc)]
    return transpose(r, tuple(np.argsort(src)))


@dot_general_p.def_transpose
def _dot_transpose(ct, x, y, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if is_undefined(x) and is_undefined(y):
        raise TypeError("dot_general is bilinear: only one operand may be linear when transposing")
    if is_undefined(x):
        return [_ct_lhs(ct, y, x.aval.ndim, dimension_numbers), None]
    # the rhs cotangent is the lhs cotangent of the swapped product
    from .shape import transpose

    nb = len(lb)
    xf = _free(x.ndim, lc, lb)
    yf = _free(y.aval.ndim, rc, rb)
    perm = tuple(range(nb)) + tuple(range(nb + len(xf), nb + len(xf) + len(yf))) + tuple(range(nb, nb + len(xf)))
    swapped = ((rc, lc), (rb, lb))
    return [None, _ct_lhs(transpose(ct, perm), x, y.aval.ndim, swapped)]


@dot_general_p.def_vmap
def _dot_vmap(args, dims, *, dimension_numbers):
    (x, y), (dx, dy) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers
    sh = lambda t: tuple(a + 1 for a in t)  # noqa: E731
    if dx is not None and dy is not None:
        x, y = bdim_to_front(x, dx), bdim_to_front(y, dy)
        dn = ((sh(lc), sh(rc)), ((0,) + sh(lb), (0,) + sh(rb)))
        return dot_general_p.bind(x, y, dimension_numbers=dn), 0
    if dx is not None:
        x = bdim_to_front(x, dx)
        dn = ((sh(lc), rc), (sh(lb), rb))
        return dot_general_p.bind(x, y, dimension_numbers=dn), len(lb)
    y = bdim_to_front(y, dy)
    dn = ((lc, sh(rc)), (lb, sh(rb)))
    nxf = len(_free(x.ndim, lc, lb))
    return dot_general_p.bind(x, y, dimension_numbers=dn), len(lb) + nxf


def dot_general(x, y, dimension_numbers):
    """Contract ``x`` and ``y``: ``dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.

    The output is batch axes, then x's free axes, then y's free axes.
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = (
        (tuple(int(a) for a in lc), tuple(int(a) for a in rc)),
        (tuple(int(a) for a in lb), tuple(int(a) for a in rb)),
    )
    if _state.trace is None and type(x) is Tensor and type(y) is Tensor:
        _dot_abstract(aval_of(x), aval_of(y), dimension_numbers=dn)
        return _wrap(_dot_impl(x._value, y._value, dimension_numbers=dn))
    return dot_general_p.bind(x, y, dimension_numbers=dn)
