"""Array API statistical, searching and utility reductions, plus the cumulative family and logsumexp."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..checks import check_number
from ..core import Tensor, _wrap, concrete_or_none
from ..errors import DTypeError, ShapeError
from ..namespace import public, tensor_method
from ..primitives import reduce as R
from ..primitives import shape as S
from ..primitives._util import normalize_axis
from ..primitives.elementwise import _to_tensor, convert, stop_gradient
from ..primitives.shape import _select_impl, select
from . import elementwise as E


def _axes(x, axis, op) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        axes = (axis,)
    out = tuple(sorted(normalize_axis(a, x.ndim, op) for a in axes))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return out


def _keep(y, x, axes, keepdims):
    if not keepdims:
        return y
    return S.reshape(y, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


_TO_INT64 = frozenset(dtypes.SIGNED + dtypes.BOOL + (dtypes.int4,))
_TO_UINT64 = frozenset(dtypes.UNSIGNED + (dtypes.uint4,))


def _sum_dtype(d, dtype):
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    if d in _TO_INT64:
        return dtypes.default_int
    if d in _TO_UINT64:
        return dtypes.uint64
    return d


@public
def sum(x, /, *, axis=None, dtype=None, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` (all axes by default). Integer sums accumulate in int64 (uint64 for unsigned).

    >>> fl.sum(fl.ones((2, 3)), axis=0)
    Tensor([2., 2., 2.], dtype=float32)
    """
    x = _to_tensor(x, "sum")
    axes = _axes(x, axis, "sum")
    d = _sum_dtype(x.dtype, dtype)
    xc = x if x.dtype == d else convert(x, d)
    return _keep(S.reduce_sum(xc, axes), x, axes, keepdims)


@tensor_method("sum")
def _sum_method(self, axis=None, dtype=None, keepdims=False, *, dim=None, keepdim=None):
    """``fl.sum`` with PyTorch's spellings too: ``x.sum(0)``, ``x.sum(dim=0, keepdim=True)``."""
    return sum(self, axis=axis if dim is None else dim, dtype=dtype,
               keepdims=keepdims if keepdim is None else keepdim)


def _reduction_method(fn):
    """Make ``fn`` also the method ``x.<fn>(axis, keepdims)``, with PyTorch's ``dim``/``keepdim`` accepted too."""

    def method(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        return fn(self, axis=axis if dim is None else dim, keepdims=keepdims if keepdim is None else keepdim)

    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    tensor_method(fn.__name__)(method)
    return fn


@_reduction_method
@public
def prod(x, /, *, axis=None, dtype=None, keepdims: bool = False) -> Tensor:
    """Product over ``axis``."""
    x = _to_tensor(x, "prod")
    axes = _axes(x, axis, "prod")
    d = _sum_dtype(x.dtype, dtype)
    xc = x if x.dtype == d else convert(x, d)
    return _keep(R.reduce_prod(xc, axes) if axes else xc, x, axes, keepdims)


def _real_check(x, op):
    if x.dtype in dtypes.COMPLEX or x.dtype == dtypes.bool_:
        raise DTypeError(f"{op}: unsupported dtype {x.dtype.name}; expected a real numeric dtype")


@_reduction_method
@public
def max(x, /, *, axis=None, keepdims: bool = False) -> Tensor:
    """Maximum over ``axis`` (NaN propagates; ties share the gradient equally)."""
    x = _to_tensor(x, "max")
    _real_check(x, "max")
    axes = _axes(x, axis, "max")
    return _keep(R.reduce_max(x, axes) if axes else x, x, axes, keepdims)


@_reduction_method
@public
def min(x, /, *, axis=None, keepdims: bool = False) -> Tensor:
    """Minimum over ``axis`` (NaN propagates; ties share the gradient equally)."""
    x = _to_tensor(x, "min")
    _real_check(x, "min")
    axes = _axes(x, axis, "min")
    return _keep(R.reduce_min(x, axes) if axes else x, x, axes, keepdims)


def _count(x, axes):
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


@_reduction_method
@public
def mean(x, /, *, axis=None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over ``axis``.

    >>> fl.mean(fl.tensor([1.0, 2.0, 3.0]))
    Tensor(2., dtype=float32)
    """
    x = _to_tensor(x, "mean")
    if x.dtype not in dtypes.INEXACT:
        raise DTypeError(
            f"mean: expected a floating-point dtype, got {x.dtype.name}; cast with .astype(fl.float32)"
        )
    if x.dtype in dtypes.FLOAT8:  # a float8 sum saturates (and n may not fit): average in float32
        return convert(mean(convert(x, dtypes.float32), axis=axis, keepdims=keepdims), x.dtype)
    axes = _axes(x, axis, "mean")
    n = _count(x, axes)
    s = S.reduce_sum(x, axes)
    return _keep(E.divide(s, _wrap(np.asarray(n, x.dtype))), x, axes, keepdims)


@public
def var(x, /, *, axis=None, correction=0.0, keepdims: bool = False) -> Tensor:
    """Variance with ``correction`` degrees of freedom removed (0: population, 1: sample)."""
    return _var(x, axis, correction, keepdims, "var")


def _var(x, axis, correction, keepdims, op):
    x = _to_tensor(x, op)
    if x.dtype not in dtypes.INEXACT:
        raise DTypeError(f"{op}: expected a floating-point dtype, got {x.dtype.name}")
    correction = check_number(correction, op, "correction")
    if x.dtype in dtypes.FLOAT8:
        return convert(_var(convert(x, dtypes.float32), axis, correction, keepdims, op), x.dtype)
    axes = _axes(x, axis, op)
    m = mean(x, axis=axes, keepdims=True)
    dev = E.subtract(x, m)
    sq = E.real(E.multiply(dev, E.conj(dev))) if x.dtype in dtypes.COMPLEX else E.multiply(dev, dev)
    n = _count(x, axes) - correction
    s = S.reduce_sum(sq, axes)
    # the standard: no degrees of freedom left (N - correction <= 0) gives NaN
    out = E.divide(s, _wrap(np.asarray(n if n > 0 else np.nan, sq.dtype)))
    return _keep(out, x, axes, keepdims)


@public
def std(x, /, *, axis=None, correction=0.0, keepdims: bool = False) -> Tensor:
    """Standard deviation (see ``var``)."""
    return E.sqrt(_var(x, axis, correction, keepdims, "std"))


@tensor_method("var")
def _var_method(self, axis=None, correction=0.0, keepdims=False):
    return var(self, axis=axis, correction=correction, keepdims=keepdims)


@tensor_method("std")
def _std_method(self, axis=None, correction=0.0, keepdims=False):
    return std(self, axis=axis, correction=correction, keepdims=keepdims)


@_reduction_method
@public
def all(x, /, *, axis=None, keepdims: bool = False) -> Tensor:
    x = _to_tensor(x, "all")
    b = x if x.dtype == dtypes.bool_ else E.not_equal(x, 0)
    axes = _axes(x, axis, "all")
    return _keep(R.reduce_and(b, axes) if axes else b, x, axes, keepdims)


@_reduction_method
@public
def any(x, /, *, axis=None, keepdims: bool = False) -> Tensor:
    x = _to_tensor(x, "any")
    b = x if x.dtype == dtypes.bool_ else E.not_equal(x, 0)
    axes = _axes(x, axis, "any")
    return _keep(R.reduce_or(b, axes) if axes else b, x, axes, keepdims)


def _arg(prim_fn, x, axis, keepdims, op):
    x = _to_tensor(x, op)
    _real_check(x, op)
    if axis is None:
        flat = S.reshape(x, (-1,))
        if flat.shape[0] == 0:
            raise ShapeError(f"{op}: attempt to get {op} of an empty tensor")
        out = prim_fn(flat, 0)
        return S.reshape(out, (1,) * x.ndim) if keepdims else out
    ax = normalize_axis(axis, x.ndim, op)
    out = prim_fn(x, ax)
    return S.expand_dims(out, [ax]) if keepdims else out


@public
def argmax(x, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the maximum (the first one on ties; NaN counts as the maximum)."""
    return _arg(R.argmax, x, axis, keepdims, "argmax")


@public
def argmin(x, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the minimum (the first one on ties; NaN counts as the minimum)."""
    return _arg(R.argmin, x, axis, keepdims, "argmin")


def _arg_method(fn):
    def method(self, axis=None, keepdims=False):
        return fn(self, axis=axis, keepdims=keepdims)

    method.__name__ = method.__qualname__ = fn.__name__
    tensor_method(fn.__name__)(method)


_arg_method(argmax)
_arg_method(argmin)


@public
def cumulative_sum(x, /, *, axis: int | None = None, dtype=None, include_initial: bool = False) -> Tensor:
    """Cumulative sum along ``axis`` (required unless ``x`` is 1-D)."""
    x = _to_tensor(x, "cumulative_sum")
    if axis is None:
        if x.ndim != 1:
            raise ValueError("cumulative_sum: axis is required for tensors with more than one dimension")
        axis = 0
    ax = normalize_axis(axis, x.ndim, "cumulative_sum")
    d = _sum_dtype(x.dtype, dtype)
    xc = x if x.dtype == d else convert(x, d)
    out = R.cumsum(xc, ax)
    if include_initial:
        cfg = [(0, 0, 0)] * x.ndim
        cfg[ax] = (1, 0, 0)
        out = S.pad(out, _wrap(np.zeros((), d)), cfg)
    return out


@tensor_method("cumsum")
def _cumsum_method(self, axis=0):
    return cumulative_sum(self, axis=axis)


@public
def cumsum(x, axis: int = 0, *, reverse: bool = False) -> Tensor:
    x = _to_tensor(x, "cumsum")
    return R.cumsum(x, normalize_axis(axis, x.ndim, "cumsum"), reverse)


@public
def cumprod(x, axis: int = 0) -> Tensor:
    """Cumulative product (exact derivatives, also at zeros)."""
    x = _to_tensor(x, "cumprod")
    return R.cumulative(E.multiply, x, normalize_axis(axis, x.ndim, "cumprod"))


@public
def cummax(x, axis: int = 0) -> Tensor:
    x = _to_tensor(x, "cummax")
    return R.cumulative(E.maximum, x, normalize_axis(axis, x.ndim, "cummax"))


@public
def cummin(x, axis: int = 0) -> Tensor:
    x = _to_tensor(x, "cummin")
    return R.cumulative(E.minimum, x, normalize_axis(axis, x.ndim, "cummin"))


@public
def logcumsumexp(x, axis: int = 0) -> Tensor:
    x = _to_tensor(x, "logcumsumexp")
    return R.cumulative(E.logaddexp, x, normalize_axis(axis, x.ndim, "logcumsumexp"))


@public
def logsumexp(x, /, *, axis=None, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` computed stably (the max is subtracted first; its gradient is softmax).

    >>> fl.logsumexp(fl.tensor([0.0, 0.0]))
    Tensor(0.6931472, dtype=float32)
    """
    x = E._float(x, "logsumexp")
    axes = _axes(x, axis, "logsumexp")
    m, mk = stable_shift(x, axes)
    s = S.reduce_sum(E.exp(E.subtract(x, mk)), axes)
    return _keep(E.add(E.log(s), m), x, axes, keepdims)


def stable_shift(x, axes: tuple[int, ...]):
    """The shift that keeps ``exp`` finite in logsumexp and softmax: the max over ``axes``, non-finite maxima
    replaced by 0; returned reduced and with the axes kept as size 1. It carries no gradient, so when ``x`` has a
    concrete value (eagerly, or the primal under ``grad``) NumPy computes it straight from that."""
    keep = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    c = concrete_or_none(x)
    if c is not None:
        v = c._value
        m = np.asarray(np.maximum.reduce(v, axis=axes) if axes else v)
        m = np.asarray(_select_impl(np.isfinite(m), m, np.zeros((), m.dtype)))
        return _wrap(m), _wrap(m.reshape(keep))
    # stopped before the max, so the max's own derivative is never formed
    xs = stop_gradient(x)
    m = R.reduce_max(xs, axes) if axes else xs
    m = select(E.isfinite(m), m, _wrap(np.zeros((), m.dtype)))
    return m, S.reshape(m, keep)
