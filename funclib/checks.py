"""Argument checks shared by the public API. Each raises a TypeError or ValueError that names the function, the
argument, what it got and what it expects, at the point where the argument enters funclib."""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Iterable
from typing import Any

from .core import Tensor, Tracer
from .errors import ShapeError

__all__ = [
    "describe",
    "check_callable",
    "check_int",
    "check_number",
    "check_choice",
    "check_probability",
    "check_shape",
]


def describe(v: Any) -> str:
    """``str 'abc'``, ``int 3``, ``Tensor of shape (2, 3)``: what a bad argument was, for messages."""
    if isinstance(v, Tensor):
        return f"a {type(v).__name__} of shape {tuple(v.shape)} and dtype {v.dtype.name}"
    return f"{type(v).__name__} {v!r:.60}"


def check_callable(f: Any, op: str, arg: str = "fun") -> Callable:
    """``f`` if it is callable, else a TypeError naming ``op`` and ``arg``."""
    if not callable(f):
        raise TypeError(f"{op}: {arg} must be callable (a function), got {describe(f)}")
    return f


def check_int(v: Any, op: str, arg: str, *, min: int | None = None, max: int | None = None) -> int:
    """``v`` as a Python int (NumPy integers and 0-d integer tensors included; bools and floats rejected),
    within ``[min, max]``."""
    if isinstance(v, bool):
        raise TypeError(f"{op}: {arg} must be an int, got bool {v!r}")
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError(f"{op}: {arg} must be an int, got {describe(v)}") from None
    if (min is not None and i < min) or (max is not None and i > max):
        raise ValueError(f"{op}: {arg} must be {_range(min, max)}, got {i}")
    return i


def check_number(
    v: Any,
    op: str,
    arg: str,
    *,
    min: float | None = None,
    max: float | None = None,
    min_open: bool = False,
    max_open: bool = False,
) -> float:
    """``v`` as a real Python number within the bounds (open where asked); a 0-d tensor counts as a number."""
    if isinstance(v, Tensor) and v.ndim == 0 and v.dtype.kind in "fiu":
        if isinstance(v, Tracer):
            return v
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {arg} must be a real number, got {describe(v)}")
    bad_lo = min is not None and (v <= min if min_open else v < min)
    bad_hi = max is not None and (v >= max if max_open else v > max)
    if bad_lo or bad_hi:
        raise ValueError(f"{op}: {arg} must be {_range(min, max, min_open, max_open)}, got {v}")
    return v


def check_probability(v: Any, op: str, arg: str = "p") -> float:
    return check_number(v, op, arg, min=0.0, max=1.0)


def check_choice(v: Any, op: str, arg: str, choices: Iterable[Any]) -> Any:
    """``v`` if it is one of ``choices``, else a ValueError listing them."""
    choices = tuple(choices)
    try:
        ok = v in choices
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{op}: {arg} must be one of {', '.join(map(repr, choices))}; got {describe(v)}")
    return v


def check_shape(shape: Any, op: str, arg: str = "shape", *, allow_unknown: bool = False) -> tuple[int, ...]:
    """An int or a sequence of ints as a shape tuple; non-negative, except one ``-1`` when ``allow_unknown``."""
    if type(shape) is tuple:  # the common case, checked without the general machinery
        for d in shape:
            if type(d) is not int or d < 0:
                break
        else:
            return shape
    if isinstance(shape, (int, numbers.Integral)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        if isinstance(shape, (str, bytes)):
            raise TypeError
        out = tuple(operator.index(d) for d in shape)
        if any(isinstance(d, bool) for d in shape):
            raise TypeError
    except TypeError:
        raise TypeError(f"{op}: {arg} must be an int or a tuple of ints, got {describe(shape)}") from None
    bad = [d for d in out if d < 0 and not (allow_unknown and d == -1)]
    if bad or (allow_unknown and out.count(-1) > 1):
        what = "at most one -1 and otherwise non-negative sizes" if allow_unknown else "non-negative sizes"
        raise ShapeError(f"{op}: {arg} must hold {what}, got {out} (negative dimensions are not allowed)")
    return out


def _range(lo, hi, lo_open=False, hi_open=False) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo}"
    return f"{'<' if hi_open else '<='} {hi}"
