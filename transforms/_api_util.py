"""Argument handling shared by the transforms: leaf conversion and input checks with clear errors."""

from __future__ import annotations

import inspect

import optree

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_int
from funclib.core import Tensor, strengthen
from funclib.errors import DTypeError
from funclib.ops.creation import asarray


def as_tensor_leaf(x, op: str):
    """A pytree leaf as a Tensor (Python scalars and NumPy arrays are converted); anything else is an error."""
    if isinstance(x, Tensor):
        return strengthen(x)
    try:
        return asarray(x)
    except (TypeError, ValueError):
        raise TypeError(
            f"{op}: expected tensors (or Python scalars / NumPy arrays) as pytree leaves, got {type(x).__name__}: "
            f"{x!r:.80}. Mark non-array arguments static, or close over them."
        ) from None


def check_argnames(fun, names, op: str, what: str = "static_argnames") -> None:
    """A ValueError when ``names`` are not parameters of ``fun`` (when its signature says so)."""
    try:
        params = inspect.signature(fun).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = [n for n in names if n not in params]
    if unknown:
        name = getattr(fun, "__name__", type(fun).__name__)
        raise ValueError(
            f"{op}: {what} {unknown} are not parameters of {name}{inspect.signature(fun)}"
        )


def check_argnums(argnums, nargs: int, op: str, what: str = "argnums") -> tuple[int, ...]:
    """``argnums`` (an int or a sequence of ints) as non-negative indices into ``nargs`` positional arguments."""
    nums = (argnums,) if not isinstance(argnums, (tuple, list)) else tuple(argnums)
    out = []
    for n in nums:
        n = check_int(n, op, what)
        if not -nargs <= n < nargs:
            raise ValueError(
                f"{op}: {what}={argnums} but the function was called with {nargs} positional argument"
                f"{'' if nargs == 1 else 's'}"
            )
        out.append(n % nargs)
    return tuple(out)


def check_float_input(x, op: str, where: str, allow_complex: bool = True):
    if x.dtype in dtypes.INEXACT:
        return
    raise DTypeError(
        f"{op}: {where} has dtype {x.dtype.name}; only floating-point (or complex) inputs can be differentiated. "
        f"Cast it with .astype(fl.float32), or leave it out of argnums."
    )


def flatten_args(args):
    leaves, treedef = tree_util.flatten(args)
    return leaves, treedef


def broadcast_prefix(prefix, full):
    """One entry of ``prefix`` per leaf of ``full``, where ``prefix`` is a pytree prefix (None counts as a leaf)."""
    try:
        return optree.broadcast_prefix(prefix, full, none_is_leaf=True, namespace="funclib")
    except (ValueError, TypeError) as e:
        raise ValueError(str(e)) from None
