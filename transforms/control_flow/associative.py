"""``associative_scan``: an inclusive prefix scan of an associative function in ``O(log n)`` vectorized steps.

Built from strided slices, concatenation and calls of ``fn`` on whole arrays (odd/even reduction, then the
even prefixes from the odd ones), so every transform applies with no rules of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import aval_of
from funclib.errors import ShapeError
from funclib.primitives._util import normalize_axis
from funclib.primitives.shape import concatenate, moveaxis, reshape, rev, slice_

from ._common import CarryTypeError, as_leaves, carry_mismatch


def _take(x, start: int, stop: int, step: int = 1):
    lo = [start] + [0] * (x.ndim - 1)
    hi = [stop] + list(x.shape[1:])
    return slice_(x, lo, hi, [step] + [1] * (x.ndim - 1))


def _interleave(even, odd):
    """``[e0, o0, e1, o1, ...]`` along axis 0, where ``len(even)`` is ``len(odd)`` or one more."""
    ne, no = even.shape[0], odd.shape[0]
    if ne == no + 1:
        odd = concatenate([odd, _take(even, ne - 1, ne)], 0)
    pair = concatenate(
        [reshape(even, (ne, 1) + tuple(even.shape[1:])), reshape(odd, (ne, 1) + tuple(odd.shape[1:]))], 1
    )
    out = reshape(pair, (2 * ne,) + tuple(even.shape[1:]))
    return out if ne == no else _take(out, 0, ne + no)


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive scan with an associative ``fn``: ``out[i] = elems[0] . elems[1] . ... . elems[i]``.

    Args:
      fn: an associative function of two pytrees shaped like ``elems`` (with any leading length along
        ``axis``), applied elementwise along that axis, e.g. ``fl.add`` or a composition of affine maps.
      elems: a pytree of tensors sharing the size of ``axis``.
      reverse: scan from the end, as ``jax.lax.associative_scan`` does: the same as flipping ``elems`` along
        ``axis``, scanning and flipping the result, so ``out[i] = elems[n-1] . elems[n-2] . ... . elems[i]``
        (``fn`` still receives the earlier result as its first argument).
      axis: the axis to scan along.

    Returns:
      A pytree like ``elems``.

    >>> fl.associative_scan(fl.add, fl.arange(1.0, 5.0))
    Tensor([ 1.,  3.,  6., 10.], dtype=float32)
    """
    check_callable(fn, "associative_scan", "fn")
    leaves, tree, _ = as_leaves(elems, "associative_scan (elems)")
    if not leaves:
        return elems
    ax = [normalize_axis(axis, x.ndim, "associative_scan") for x in leaves]
    sizes = {int(x.shape[a]) for x, a in zip(leaves, ax)}
    if len(sizes) != 1:
        raise ShapeError(
            f"associative_scan: the leaves have different sizes along axis {axis}: "
            f"{[tuple(x.shape) for x in leaves]}"
        )
    xs = [moveaxis(x, a, 0) for x, a in zip(leaves, ax)]
    if reverse:
        xs = [rev(x, (0,)) for x in xs]

    def combine(a, b):
        out = fn(tree_util.unflatten(tree, a), tree_util.unflatten(tree, b))
        o, t, _ = as_leaves(out, "associative_scan (fn output)")
        if t != tree or [tuple(x.shape) for x in o] != [tuple(x.shape) for x in a]:
            raise CarryTypeError(
                carry_mismatch(
                    "associative_scan",
                    "fn's output and its inputs (one slice)",
                    tree,
                    [aval_of(x) for x in a],
                    t,
                    [aval_of(x) for x in o],
                    fix="Fix: fn must return the structure of elems, elementwise along the scanned axis.",
                )
            )
        return o

    def scan(xs):
        n = xs[0].shape[0]
        if n < 2:
            return xs
        reduced = combine([_take(x, 0, n - 1, 2) for x in xs], [_take(x, 1, n, 2) for x in xs])
        odd = scan(reduced)
        if n % 2 == 0:
            rest = combine([_take(x, 0, x.shape[0] - 1) for x in odd], [_take(x, 2, n, 2) for x in xs])
        else:
            rest = combine(odd, [_take(x, 2, n, 2) for x in xs])
        even = [concatenate([_take(x, 0, 1), r], 0) for x, r in zip(xs, rest)]
        return [_interleave(e, o) for e, o in zip(even, odd)]

    out = scan(xs)
    if reverse:
        out = [rev(x, (0,)) for x in out]
    return tree_util.unflatten(tree, [moveaxis(x, 0, a) for x, a in zip(out, ax)])


__all__ = ["associative_scan"]
