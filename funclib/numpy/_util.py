"""Argument handling shared by ``funclib.numpy``: NumPy's parameters that have no meaning for immutable tensors
are accepted at their defaults and refused otherwise, each with a message naming the function and the fix."""

from __future__ import annotations

import builtins
import operator

import numpy as np

from .. import dtypes
from ..core import Tensor, Tracer, concrete_or_none
from ..errors import DataDependentShapeError
from ..ops.creation import asarray as _fl_asarray
from ..primitives._util import normalize_axis
from ..primitives.elementwise import convert

NoValue = np._NoValue  # NumPy's "argument not given" marker, so signatures read as NumPy's do

_PY_SCALARS = (builtins.bool, builtins.int, builtins.float, builtins.complex)


def no_out(out, op: str) -> None:
    """Accept ``out=None`` (or NumPy's ``(None, None)`` for two outputs); refuse anything else."""
    if out is None or (isinstance(out, tuple) and builtins.all(o is None for o in out)):
        return
    raise TypeError(
        f"numpy.{op}: out= is not supported: funclib tensors are immutable, so nothing can be written into "
        f"an existing array; use the returned value (y = fnp.{op}(...)) or x.at[idx].set(...)"
    )


def check_like(like, op: str) -> None:
    if like is not None:
        raise TypeError(f"numpy.{op}: like= (array-function dispatch) is not supported; pass like=None")


def check_device(device, op: str) -> None:
    if device not in (None, "cpu"):
        raise ValueError(f"numpy.{op}: unknown device {device!r}; funclib tensors live on 'cpu'")


def check_order(order, op: str, allowed=("C", "F", "A", "K", None)) -> None:
    """Memory layout only: every order gives the same immutable values, so each valid one is accepted."""
    if order not in allowed:
        raise ValueError(f"numpy.{op}: order must be one of {[a for a in allowed if a]}, got {order!r}")


def check_ufunc_kw(op: str, where, casting, order, signature) -> None:
    if where is not True:
        raise ValueError(
            f"numpy.{op}: where= is not supported for elementwise functions: without out= the unselected "
            f"elements would be undefined; use fnp.where(mask, fnp.{op}(...), other)"
        )
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"numpy.{op}: casting must be 'no', 'equiv', 'safe', 'same_kind' or 'unsafe', got {casting!r}")
    check_order(order, op)
    if signature is not None:
        raise ValueError(f"numpy.{op}: signature= (loop selection) is not supported; pass dtype= instead")


def asarray(a, op: str = "array") -> Tensor:
    """``a`` as a Tensor (Tensors and tracers pass through)."""
    if isinstance(a, Tensor):
        return a
    try:
        return _fl_asarray(a)
    except (TypeError, ValueError) as e:
        raise TypeError(f"numpy.{op}: cannot convert {type(a).__name__} to an array: {e}") from None


def dtype_arg(dtype):
    return None if dtype is None else dtypes.canonicalize(dtype)


def inexact(x: Tensor) -> Tensor:
    """``x`` as floating point: integers and booleans become the default float dtype."""
    return x if x.dtype in dtypes.INEXACT else convert(x, dtypes.float_default())


def axes_tuple(axis, ndim: int, op: str, *, allow_none: bool = True) -> tuple[int, ...]:
    """``axis`` (None, an int or a sequence) as sorted, unique, non-negative axes."""
    if axis is None:
        if not allow_none:
            raise TypeError(f"numpy.{op}: axis must be an int, got None")
        return tuple(range(ndim))
    if isinstance(axis, (builtins.int, np.integer)):
        axis = (int(axis),)
    axes = tuple(normalize_axis(operator.index(a), ndim, op) for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError(f"numpy.{op}: repeated axis in {axis}")
    return tuple(sorted(axes))


def axis_int(axis, ndim: int, op: str) -> int:
    return normalize_axis(operator.index(axis), ndim, op)


def concrete(x, op: str, fix: str):
    """The NumPy value of ``x`` when it has one (eagerly, or the primal under ``grad``), else a
    ``DataDependentShapeError`` naming ``op`` and the fix."""
    if not isinstance(x, Tensor):
        return np.asarray(x)
    c = concrete_or_none(x)
    if c is None:
        raise DataDependentShapeError(
            f"numpy.{op}: the output shape depends on the values of the traced {x.aval.str_short()} argument, "
            f"which are unknown inside jit, vmap or make_jaxpr. Call it outside the transform, or {fix}"
        )
    return c.numpy()


def static_int(v, op: str, name: str) -> int:
    """A Python int from ``v``; a traced value cannot give one (it would fix a shape)."""
    if isinstance(v, Tracer):
        c = concrete_or_none(v)
        if c is None:
            raise DataDependentShapeError(
                f"numpy.{op}: {name} must be a concrete integer (it decides a shape), got a traced value"
            )
        v = c
    try:
        return operator.index(v.item() if isinstance(v, (Tensor, np.ndarray)) else v)
    except TypeError:
        raise TypeError(f"numpy.{op}: {name} must be an integer, got {v!r}") from None


def is_python_scalar(x) -> bool:
    return type(x) in _PY_SCALARS


def keepdims_arg(keepdims) -> bool:
    return False if keepdims is NoValue else builtins.bool(keepdims)
