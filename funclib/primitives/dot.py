"""``dot_general``: batched tensor contraction, the one matrix-multiply primitive. Runs on BLAS via np.matmul, or
a matrix product on ``kernels.gemm.matmul`` (funclib's AVX-512 float32 product where it measured faster).

``preferred_element_type`` (spelled as in ``jax.lax.dot_general``) is the dtype of the result and of the
accumulation: int8 operands with ``int32`` give the exact product (NumPy's ``int8 @ int8`` wraps in int8), float8
or bfloat16 operands with ``float32`` skip the rounding back. Integer products run on the numba kernels of
``kernels.intmm`` (NumPy has no integer BLAS); floats narrower than float32 compute in float32.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import dtypes
from ..core import Primitive, ShapedArray, Tensor, UndefinedPrimal, Zero, _state, _wrap, aval_of
from ..errors import DTypeError, ShapeError
from ..kernels import gemm, intmm, lowp
from .elementwise import convert
from .shape import bdim_to_front, transpose

dot_general_p = Primitive("dot_general", linear=True)  # bilinear: linear in each operand
dot_general_p.family = "dot"
_LOW = frozenset((dtypes.float16, dtypes.bfloat16) + dtypes.FLOAT8)
_INT = frozenset(dtypes.INTEGER + dtypes.INT4)


def _free(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _cached(fn):
    """``functools.lru_cache`` for the shape arithmetic below; unhashable arguments (lists) skip the cache."""
    cached = functools.lru_cache(maxsize=2048)(fn)

    def call(*args):
        try:
            return cached(*args)
        except TypeError:
            return fn(*args)

    return call


@_cached
def _layout(x_shape, y_shape, dimension_numbers):
    """How ``_dot_impl`` runs a contraction of these shapes: operand permutations (None for the identity), the
    kind of product (0 outer, 1 matmul, 2 stacked matmul), the shapes handed to it and the output shape."""
    (lc, rc), (lb, rb) = dimension_numbers
    xf, yf = _free(len(x_shape), lc, lb), _free(len(y_shape), rc, rb)
    bshape = [x_shape[i] for i in lb]
    m = [x_shape[i] for i in xf]
    n = [y_shape[i] for i in yf]
    k = math.prod([x_shape[i] for i in lc])
    B, M, N = math.prod(bshape), math.prod(m), math.prod(n)
    xperm = tuple(lb) + tuple(xf) + tuple(lc)
    yperm = tuple(rb) + tuple(rc) + tuple(yf)
    if k == 1:
        kind, xs, ys = 0, (B, M, 1), (B, 1, N)
    elif B == 1:
        kind, xs, ys = 1, (M, k), (k, N)
    else:
        kind, xs, ys = 2, (B, M, k), (B, k, N)
    return (
        None if xperm == tuple(range(len(x_shape))) else xperm,
        None if yperm == tuple(range(len(y_shape))) else yperm,
        kind,
        xs,
        ys,
        tuple(bshape + m + n),
    )


def _dot_impl(x, y, *, dimension_numbers, preferred_element_type=None):
    x, y = np.asarray(x), np.asarray(y)
    out_dtype = preferred_element_type or x.dtype
    if x.dtype in _INT:
        return _int_dot(x, y, dimension_numbers, out_dtype)
    compute = out_dtype if out_dtype not in _LOW else np.dtype(np.float32)
    if x.dtype != compute:
        x, y = lowp.astype(x, compute), lowp.astype(y, compute)
    xperm, yperm, kind, xs, ys, out_shape = _layout(x.shape, y.shape, dimension_numbers)
    # transposes become strided views; 2-D matmul hands transposed (F-order) operands to BLAS without a copy
    xt = x if xperm is None else x.transpose(xperm)
    yt = y if yperm is None else y.transpose(yperm)
    if kind == 0:
        # an outer product (per-example gradients under vmap): a broadcast multiply streams it, BLAS does not
        out = np.multiply(xt.reshape(xs), yt.reshape(ys))
    elif kind == 1:
        out = gemm.matmul(xt.reshape(xs), yt.reshape(ys))
    else:
        # stacked matmul only reaches BLAS when each matrix is contiguous in one of its axes
        out = np.matmul(_blasable(xt.reshape(xs)), _blasable(yt.reshape(ys)))
    out = out.reshape(out_shape)
    return out if out.dtype == out_dtype else lowp.astype(out, out_dtype)


def _int_dot(x, y, dimension_numbers, out_dtype):
    if x.dtype in lowp.INT4:
        x, y = lowp.astype(x, np.int8), lowp.astype(y, np.int8)
    acc = np.dtype(np.int64) if out_dtype.itemsize > 4 else np.dtype(np.int32)
    xperm, yperm, kind, xs, ys, out_shape = _layout(x.shape, y.shape, dimension_numbers)
    xt = (x if xperm is None else x.transpose(xperm)).reshape(xs)
    yt = (y if yperm is None else y.transpose(yperm)).reshape(ys)
    if kind == 0:
        out = np.multiply(xt, yt, dtype=acc)
    else:
        out = intmm.matmul(xt.reshape((-1,) + xs[-2:]), yt.reshape((-1,) + ys[-2:]), acc)
    out = out.reshape(out_shape)
    return out if out.dtype == out_dtype else lowp.astype(out, out_dtype)


def _blasable(a):
    s = a.strides
    isz = a.itemsize
    if s[-1] == isz or s[-2] == isz:
        return a
    return np.ascontiguousarray(a)


dot_general_p.def_impl(_dot_impl)


@_cached
def _out_shape(x_shape, y_shape, dimension_numbers):
    """The output shape, or None when contracted or batch sizes do not match."""
    (lc, rc), (lb, rb) = dimension_numbers
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"dot_general: unbalanced dimension numbers {dimension_numbers}")
    xn, yn = len(x_shape), len(y_shape)
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        if not (0 <= a < xn and 0 <= b < yn) or x_shape[a] != y_shape[b]:
            return None
    return (
        tuple(x_shape[i] for i in lb)
        + tuple(x_shape[i] for i in _free(xn, lc, lb))
        + tuple(y_shape[i] for i in _free(yn, rc, rb))
    )


@dot_general_p.def_abstract_eval
def _dot_abstract(x, y, *, dimension_numbers, preferred_element_type=None):
    if x.dtype != y.dtype:
        raise DTypeError(f"dot_general: operands must share a dtype, got {x.dtype.name} and {y.dtype.name}")
    if x.dtype == dtypes.bool_:
        raise DTypeError("dot_general: boolean operands are not supported; cast to an integer or float dtype")
    if preferred_element_type is not None:
        _check_preferred(x.dtype, preferred_element_type)
    shape = _out_shape(x.shape, y.shape, dimension_numbers)
    if shape is None:
        raise ShapeError(
            f"dot_general: cannot contract {x.str_short()} with {y.str_short()} along {dimension_numbers} "
            f"(sizes must match)"
        )
    return ShapedArray(shape, preferred_element_type or x.dtype)


def _kind(d):
    return "i" if d in _INT else "c" if d in dtypes.COMPLEX else "f"


def _check_preferred(d, pet):
    if _kind(d) != _kind(pet) or pet == dtypes.bool_ or pet in dtypes.LOW_PRECISION or pet.itemsize < d.itemsize:
        raise DTypeError(
            f"dot_general: preferred_element_type={pet.name} does not fit {d.name} operands; it must be a dtype of "
            f"the same kind at least as wide (e.g. int32 for int8 operands, float32 for float8/bfloat16 ones)"
        )


def _pet(preferred_element_type) -> dict:
    return {} if preferred_element_type is None else {"preferred_element_type": preferred_element_type}


@dot_general_p.def_jvp
def _dot_jvp(primals, tangents, *, dimension_numbers, preferred_element_type=None):
    x, y = primals
    tx, ty = tangents
    params = {"dimension_numbers": dimension_numbers, **_pet(preferred_element_type)}
    out = dot_general_p.bind(x, y, **params)
    if out.dtype not in dtypes.INEXACT:
        return out, Zero(aval_of(out))
    acc = None
    if type(tx) is not Zero:
        acc = dot_general_p.bind(tx, y, **params)
    if type(ty) is not Zero:
        t = dot_general_p.bind(x, ty, **params)
        acc = t if acc is None else acc + t
    return out, Zero(aval_of(out)) if acc is None else acc


@_cached
def _ct_lhs_plan(x_ndim, y_ndim, dimension_numbers):
    """The contraction of the output cotangent with ``y`` and the permutation that restores x's axis order."""
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    xf = _free(x_ndim, lc, lb)
    yf = _free(y_ndim, rc, rb)
    ct_yfree = tuple(range(nb + len(xf), nb + len(xf) + len(yf)))
    src = list(lb) + xf + [lc[list(rc).index(a)] for a in sorted(rc)]
    return ((ct_yfree, tuple(yf)), (tuple(range(nb)), tuple(rb))), tuple(int(i) for i in np.argsort(src))


def _ct_lhs(ct, y, x_ndim, dimension_numbers):
    dn, perm = _ct_lhs_plan(x_ndim, y.aval.ndim if type(y) is UndefinedPrimal else y.ndim, dimension_numbers)
    return transpose(_dot(ct, y, dn, check=False), perm)


@_cached
def _ct_rhs_plan(x_ndim, y_ndim, dimension_numbers):
    """The permutation of the output cotangent and the swapped dimension numbers for the rhs cotangent."""
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    nxf = len(_free(x_ndim, lc, lb))
    nyf = len(_free(y_ndim, rc, rb))
    perm = tuple(range(nb)) + tuple(range(nb + nxf, nb + nxf + nyf)) + tuple(range(nb, nb + nxf))
    return perm, ((rc, lc), (rb, lb))


@dot_general_p.def_transpose
def _dot_transpose(ct, x, y, *, dimension_numbers, preferred_element_type=None):
    x_linear = type(x) is UndefinedPrimal
    if x_linear and type(y) is UndefinedPrimal:
        raise TypeError("dot_general is bilinear: only one operand may be linear when transposing")
    if preferred_element_type is not None and ct.dtype != (x.aval if x_linear else aval_of(x)).dtype:
        # the cotangent is as wide as the output: contract it in its dtype, then round to the operand's
        lin = x if x_linear else y
        cts = _dot_transpose(
            ct,
            x if x_linear else convert(x, ct.dtype),
            convert(y, ct.dtype) if x_linear else y,
            dimension_numbers=dimension_numbers,
        )
        return [None if c is None else convert(c, lin.aval.dtype) for c in cts]
    if x_linear:
        return [_ct_lhs(ct, y, x.aval.ndim, dimension_numbers), None]
    # the rhs cotangent is the lhs cotangent of the swapped product
    y_ndim = y.aval.ndim
    perm, swapped = _ct_rhs_plan(x.ndim, y_ndim, dimension_numbers)
    return [None, _ct_lhs(transpose(ct, perm), x, y_ndim, swapped)]


@dot_general_p.def_vmap
def _dot_vmap(args, dims, *, dimension_numbers, preferred_element_type=None):
    (x, y), (dx, dy) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers
    pet = _pet(preferred_element_type)
    sh = lambda t: tuple(a + 1 for a in t)  # noqa: E731
    if dx is not None and dy is not None:
        x, y = bdim_to_front(x, dx), bdim_to_front(y, dy)
        dn = ((sh(lc), sh(rc)), ((0,) + sh(lb), (0,) + sh(rb)))
        return dot_general_p.bind(x, y, dimension_numbers=dn, **pet), 0
    if dx is not None:
        x = bdim_to_front(x, dx)
        dn = ((sh(lc), rc), (sh(lb), rb))
        return dot_general_p.bind(x, y, dimension_numbers=dn, **pet), len(lb)
    y = bdim_to_front(y, dy)
    dn = ((lc, sh(rc)), (lb, sh(rb)))
    nxf = len(_free(x.ndim, lc, lb))
    return dot_general_p.bind(x, y, dimension_numbers=dn, **pet), len(lb) + nxf


def dot_general(x, y, dimension_numbers, preferred_element_type=None):
    """Contract ``x`` and ``y``: ``dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.

    The output is batch axes, then x's free axes, then y's free axes, of dtype ``preferred_element_type`` (the
    operands' by default; see the module docstring).
    """
    dn = _canonical(dimension_numbers)
    if preferred_element_type is None:
        return _dot(x, y, dn)
    pet = dtypes.canonicalize(preferred_element_type)
    if pet == x.dtype:
        return _dot(x, y, dn)
    _check_preferred(x.dtype, pet)
    if _state.trace is None and type(x) is Tensor and type(y) is Tensor:
        _dot_abstract(aval_of(x), aval_of(y), dimension_numbers=dn, preferred_element_type=pet)
        return _wrap(_dot_impl(x._value, y._value, dimension_numbers=dn, preferred_element_type=pet))
    return dot_general_p.bind(x, y, dimension_numbers=dn, preferred_element_type=pet)


@_cached
def _canonical(dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    return (
        (tuple(int(a) for a in lc), tuple(int(a) for a in rc)),
        (tuple(int(a) for a in lb), tuple(int(a) for a in rb)),
    )


def _dot(x, y, dn, check: bool = True):
    """``dot_general`` with canonical dimension numbers; ``check=False`` for operands known to fit (transposes)."""
    if _state.trace is None and type(x) is Tensor and type(y) is Tensor:
        if check:
            _dot_abstract(aval_of(x), aval_of(y), dimension_numbers=dn)
        return _wrap(_dot_impl(x._value, y._value, dimension_numbers=dn))
    return dot_general_p.bind(x, y, dimension_numbers=dn)
