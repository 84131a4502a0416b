"""Products and contractions with NumPy's meanings: dot, vdot, inner, outer, tensordot, einsum (both the
subscript and the interleaved operand/sublist forms), matmul, matvec, vecmat, vecdot, kron, trace,
diagonal and cross. All lower onto ``dot_general`` and elementwise operations."""

from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes, ops
from ..core import Tensor
from ..errors import ShapeError
from ..ops import linalg_basic as L
from ..ops import reductions as R
from ..ops.manipulation import broadcast_arrays, moveaxis, stack
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ._ufunc import prepare
from ._util import NoValue, asarray, axis_int, no_out

__all__ = [
    "dot",
    "vdot",
    "inner",
    "outer",
    "tensordot",
    "einsum",
    "einsum_path",
    "matmul",
    "matvec",
    "vecmat",
    "vecdot",
    "kron",
    "trace",
    "diagonal",
    "cross",
]


def _pair(a, b, op):
    x, y = asarray(a, op), asarray(b, op)
    if x.dtype == dtypes.bool_ and y.dtype == dtypes.bool_:
        x, y = convert(x, dtypes.int64), convert(y, dtypes.int64)
    return x, y


def dot(a, b, out=None) -> Tensor:
    """NumPy's ``dot``: the product of scalars, the inner product of vectors, the matrix product of
    matrices, and in general the sum over the last axis of ``a`` and the second-to-last of ``b``.

    >>> fnp.dot([[1, 2], [3, 4]], [1, 1])
    Tensor([3, 7], dtype=int64)
    """
    no_out(out, "dot")
    x, y = _pair(a, b, "dot")
    if x.ndim == 0 or y.ndim == 0:
        return ops.multiply(x, y)
    return L.tensordot(x, y, axes=((x.ndim - 1,), (builtins.max(y.ndim - 2, 0),)))


def vdot(a, b, /) -> Tensor:
    """``sum(conj(a) * b)`` over the flattened arrays.

    >>> fnp.vdot([1j, 2], [1j, 3])
    Tensor(7.+0.j, dtype=complex64)
    """
    x, y = _pair(a, b, "vdot")
    x, y = S.reshape(x, (-1,)), S.reshape(y, (-1,))
    if x.shape != y.shape:
        raise ShapeError(f"numpy.vdot: the arrays have {x.shape[0]} and {y.shape[0]} elements")
    return L.tensordot(ops.conj(x), y, axes=1)


def inner(a, b, /) -> Tensor:
    """The sum product over the last axes (no conjugation); a scalar multiplies.

    >>> fnp.inner([1, 2], [3, 4])
    Tensor(11, dtype=int64)
    """
    x, y = _pair(a, b, "inner")
    if x.ndim == 0 or y.ndim == 0:
        return ops.multiply(x, y)
    return L.tensordot(x, y, axes=((x.ndim - 1,), (y.ndim - 1,)))


def outer(a, b, out=None) -> Tensor:
    """The outer product of the flattened arrays.

    >>> fnp.outer([1, 2], [1, 10])
    Tensor([[ 1, 10],
           [ 2, 20]], dtype=int64)
    """
    no_out(out, "outer")
    x, y = _pair(a, b, "outer")
    return L.outer(S.reshape(x, (-1,)), S.reshape(y, (-1,)))


def tensordot(a, b, axes=2) -> Tensor:
    """The sum product over ``axes``: an int (the last ``axes`` of ``a`` with the first of ``b``) or a pair
    of axis sequences.

    >>> fnp.tensordot(fnp.ones((2, 3, 4)), fnp.ones((3, 4, 5)), 2).shape
    (2, 5)
    """
    x, y = _pair(a, b, "tensordot")
    if not isinstance(axes, (builtins.int, np.integer)):
        axes = tuple(axes)
        if len(axes) != 2:
            raise ValueError("numpy.tensordot: axes must be an int or a pair of axis sequences")
        ax_a, ax_b = ((v,) if isinstance(v, (builtins.int, np.integer)) else tuple(v) for v in axes)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"numpy.tensordot: {len(ax_a)} axes of a against {len(ax_b)} of b")
        axes = (ax_a, ax_b)
    else:
        axes = int(axes)
    return L.tensordot(x, y, axes=axes)


def _letters(sub, op):
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
            continue
        i = int(s)
        if not 0 <= i < 52:
            raise ValueError(f"numpy.{op}: subscript integers must lie in [0, 52), got {i}")
        out.append(chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26))
    return "".join(out)


def _einsum_args(operands, op):
    """Subscripts and operands from either call form (``'ij,jk', a, b`` or ``a, [0, 1], b, [1, 2]``)."""
    if not operands:
        raise ValueError(f"numpy.{op}: no operands given")
    if isinstance(operands[0], str):
        return operands[0], list(operands[1:])
    ops = list(operands[0::2])
    subs = list(operands[1::2])
    out_sub = None
    if len(operands) % 2 == 1:
        out_sub = ops.pop()
    terms = ",".join(_letters(s, op) for s in subs)
    if len(subs) != len(ops):
        raise ValueError(f"numpy.{op}: the interleaved form needs one sublist per operand")
    if out_sub is not None:
        terms += "->" + _letters(out_sub, op)
    return terms, ops


def einsum(*operands, out=None, optimize=False, **kwargs) -> Tensor:
    """Einstein summation: ``einsum('ij,jk->ik', a, b)`` or the interleaved form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``; ``...`` broadcasts. ``dtype`` casts the operands; ``optimize``
    is accepted (contractions run pairwise, left to right, each on BLAS).

    >>> fnp.einsum(fnp.ones((2, 3)), [0, 1], fnp.ones(3), [1], [0])
    Tensor([3., 3.], dtype=float32)
    """
    no_out(out, "einsum")
    extra = set(kwargs) - {"dtype", "order", "casting"}
    if extra:
        raise TypeError(f"numpy.einsum: unexpected keyword arguments {sorted(extra)}")
    subscripts, ops = _einsum_args(operands, "einsum")
    xs = [asarray(o, "einsum") for o in ops]
    if kwargs.get("dtype") is not None:
        xs = prepare("einsum", xs, None, True, kwargs.get("casting", "safe"), kwargs.get("order", "K"),
                     kwargs["dtype"], None)
    xs = [convert(x, dtypes.int64) if x.dtype == dtypes.bool_ else x for x in xs]
    return L.einsum(subscripts, *xs)


def einsum_path(*operands, optimize="greedy", einsum_call=False):
    """NumPy's contraction order and its cost report for these operands (only their shapes are used).

    >>> fnp.einsum_path("ij,jk->ik", fnp.ones((2, 3)), fnp.ones((3, 4)))[0]
    ['einsum_path', (0, 1)]
    """
    subscripts, ops = _einsum_args(operands, "einsum_path")
    stand_ins = [np.broadcast_to(np.zeros((), np.float64), tuple(asarray(o, "einsum_path").shape)) for o in ops]
    return np.einsum_path(subscripts, *stand_ins, optimize=optimize, einsum_call=einsum_call)


def _gufunc_prep(op, x1, x2, out, axes, axis, keepdims, casting, order, dtype, signature):
    no_out(out, op)
    if axes is not NoValue or axis is not NoValue or keepdims:
        raise ValueError(f"numpy.{op}: axes=, axis= and keepdims= are not supported; move the axes with "
                         "fnp.moveaxis first")
    x1, x2 = prepare(op, (x1, x2), None, True, casting, order, dtype, signature)
    return _pair(x1, x2, op)


def matmul(x1, x2, /, out=None, *, axes=NoValue, axis=NoValue, keepdims=False, casting="same_kind", order="K",
           dtype=None, subok=True, signature=None) -> Tensor:
    """The matrix product (1-D operands are promoted and the added axis removed; leading axes broadcast).

    >>> fnp.matmul(fnp.ones((5, 2, 3)), fnp.ones((3, 4))).shape
    (5, 2, 4)
    """
    a, b = _gufunc_prep("matmul", x1, x2, out, axes, axis, keepdims, casting, order, dtype, signature)
    return L.matmul(a, b)


def matvec(x1, x2, /, out=None, *, axes=NoValue, axis=NoValue, keepdims=False, casting="same_kind", order="K",
           dtype=None, subok=True, signature=None) -> Tensor:
    """Matrix-vector products ``x1 @ x2`` of a stack of matrices (..., m, n) and vectors (..., n).

    >>> fnp.matvec(fnp.eye(2), fnp.array([1.0, 2.0]))
    Tensor([1., 2.], dtype=float32)
    """
    a, b = _gufunc_prep("matvec", x1, x2, out, axes, axis, keepdims, casting, order, dtype, signature)
    if a.ndim < 2 or b.ndim < 1:
        raise ShapeError(f"numpy.matvec: needs (..., m, n) and (..., n), got {tuple(a.shape)} and {tuple(b.shape)}")
    y = L.matmul(a, S.reshape(b, tuple(b.shape) + (1,)))
    return S.reshape(y, tuple(y.shape[:-1]))


def vecmat(x1, x2, /, out=None, *, axes=NoValue, axis=NoValue, keepdims=False, casting="same_kind", order="K",
           dtype=None, subok=True, signature=None) -> Tensor:
    """Vector-matrix products ``conj(x1) @ x2`` of vectors (..., n) and matrices (..., n, m).

    >>> fnp.vecmat(fnp.array([1.0, 2.0]), fnp.eye(2))
    Tensor([1., 2.], dtype=float32)
    """
    a, b = _gufunc_prep("vecmat", x1, x2, out, axes, axis, keepdims, casting, order, dtype, signature)
    if a.ndim < 1 or b.ndim < 2:
        raise ShapeError(f"numpy.vecmat: needs (..., n) and (..., n, m), got {tuple(a.shape)} and {tuple(b.shape)}")
    y = L.matmul(S.reshape(ops.conj(a), tuple(a.shape[:-1]) + (1, a.shape[-1])), b)
    return S.reshape(y, tuple(y.shape[:-2]) + (y.shape[-1],))


def vecdot(x1, x2, /, out=None, *, axes=NoValue, axis=NoValue, keepdims=False, casting="same_kind", order="K",
           dtype=None, subok=True, signature=None) -> Tensor:
    """``sum(conj(x1) * x2)`` over the last axis (or ``axis``), broadcasting the others.

    >>> fnp.vecdot(fnp.array([[1.0, 2.0]]), fnp.array([3.0, 4.0]))
    Tensor([11.], dtype=float32)
    """
    ax = -1 if axis is NoValue else axis
    a, b = _gufunc_prep("vecdot", x1, x2, out, axes, NoValue, keepdims, casting, order, dtype, signature)
    return L.vecdot(a, b, axis=ax)


def kron(a, b) -> Tensor:
    """The Kronecker product: blocks ``a[i, j] * b``, for arrays of any rank.

    >>> fnp.kron(fnp.eye(2, dtype=int), fnp.array([[1, 2]]))
    Tensor([[1, 2, 0, 0],
           [0, 0, 1, 2]], dtype=int64)
    """
    x, y = _pair(a, b, "kron")
    nd = builtins.max(x.ndim, y.ndim)
    x = S.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape))
    y = S.reshape(y, (1,) * (nd - y.ndim) + tuple(y.shape))
    xs = S.reshape(x, tuple(v for n in x.shape for v in (n, 1)))
    ys = S.reshape(y, tuple(v for n in y.shape for v in (1, n)))
    return S.reshape(ops.multiply(xs, ys), tuple(m * n for m, n in zip(x.shape, y.shape)))


def diagonal(a, offset=0, axis1=0, axis2=1) -> Tensor:
    """The diagonal ``offset`` of the (``axis1``, ``axis2``) planes, as a new last axis (NumPy's default axes
    are the first two).

    >>> fnp.diagonal(fnp.arange(9).reshape(3, 3), 1)
    Tensor([1, 5], dtype=int64)
    """
    return L.diagonal(asarray(a, "diagonal"), offset=int(offset), axis1=axis1, axis2=axis2)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None) -> Tensor:
    """The sum of the diagonal ``offset`` of the (``axis1``, ``axis2``) planes.

    >>> fnp.trace(fnp.eye(3))
    Tensor(3., dtype=float32)
    """
    no_out(out, "trace")
    d = diagonal(a, offset, axis1, axis2)
    return R.sum(d, axis=-1, dtype=dtype)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None) -> Tensor:
    """The cross product of 3-vectors (or the z component for two 2-vectors; a 2-vector with a 3-vector has
    z = 0) along ``axisa``/``axisb``, written along ``axisc`` (``axis`` sets all three).

    >>> fnp.cross([1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    Tensor([0., 0., 1.], dtype=float32)
    """
    x, y = _pair(a, b, "cross")
    if axis is not None:
        axisa = axisb = axisc = axis
    x = moveaxis(x, axis_int(axisa, x.ndim, "cross"), -1)
    y = moveaxis(y, axis_int(axisb, y.ndim, "cross"), -1)
    na, nb = x.shape[-1], y.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"numpy.cross: vectors must have 2 or 3 components, got {na} and {nb}")

    def comp(v, i):
        return v[..., i] if i < v.shape[-1] else None

    x0, x1, x2 = (comp(x, i) for i in range(3))
    y0, y1, y2 = (comp(y, i) for i in range(3))
    z = ops.subtract(ops.multiply(x0, y1), ops.multiply(x1, y0))
    if na == 2 and nb == 2:
        return z

    def mul(u, v):
        return None if u is None or v is None else ops.multiply(u, v)

    def sub(u, v):
        if v is None:
            return u
        return ops.negative(v) if u is None else ops.subtract(u, v)

    cx = sub(mul(x1, y2), mul(x2, y1))
    cy = sub(mul(x2, y0), mul(x0, y2))

    c = stack(broadcast_arrays(cx, cy, z), axis=-1)
    return moveaxis(c, -1, axis_int(axisc, c.ndim, "cross"))

