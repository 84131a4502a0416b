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


def parameter_names(fun) -> list[str]:
    """The names of ``fun``'s positional parameters, or ``[]`` when it has no signature."""
    try:
        params = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [q.name for q in params if q.kind in kinds]


def leaf_labels(fun, args, nums, kwargs=None, names=()) -> list[str]:
    """A label per leaf of ``args[i] for i in nums`` then of ``kwargs[k] for k in names``, in flattening order: the
    parameter's name and the leaf's key path, ``params['w']`` or ``model.layers[0].weight`` (``args[2]`` when the
    function has no signature), as errors and retrace explanations print them."""
    params = parameter_names(fun)
    out = []
    for base, value in [(params[i] if i < len(params) else f"args[{i}]", args[i]) for i in nums] + [
        (k, kwargs[k]) for k in names
    ]:
        out.extend(base + tree_util.keystr(path) for path, _ in tree_util.flatten_with_path(value)[0])
    return out


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


def static_both_ways(sig, argnums, argnames) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """A parameter that can be passed either way is static however it is passed: its name joins static_argnames
    when its position is in static_argnums, and the reverse."""
    nums, names = list(argnums), list(argnames)
    if sig is not None:
        for i, p in enumerate(sig.parameters.values()):
            if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
                continue
            if p.name in names and i not in nums:
                nums.append(i)
            elif i in nums and p.name not in names:
                names.append(p.name)
    return tuple(nums), tuple(names)


def tensor_tree_signature(args, axes) -> tuple:
    """``(key, arrays)`` for ``jit``'s fast path when ``args`` is a pytree of CPU tensors: the key holds the tree's
    structure, each leaf's shape, dtype and weak type, and the named ``axes`` around the call; the arrays are the
    leaves' values in flattening order. ``(None, None)`` for any other arguments (or an unhashable structure)."""
    leaves, tree = tree_util.flatten(args)
    try:
        key = (tree, tuple([(x._value.shape, x._value.dtype, x.weak_type) for x in leaves if type(x) is Tensor]), axes)
        hash(key)
    except TypeError:
        return None, None
    return (key, [x._value for x in leaves]) if len(key[1]) == len(leaves) else (None, None)
