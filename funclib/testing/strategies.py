"""Hypothesis strategies for funclib tensors, shapes, dtypes and pytrees.

>>> from hypothesis import given
>>> from funclib.testing import strategies as fst
>>> @given(fst.tensors(dtype=fl.float64, shape=fst.shapes(max_dims=2)))
... def test_double(x):
...     fl.testing.assert_allclose(x + x, 2 * x)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError as e:
    raise ImportError(
        "funclib.testing.strategies needs Hypothesis, which is not installed: pip install funclib[testing]"
    ) from e

from .. import dtypes as _dt
from ..ops.creation import asarray

__all__ = [
    "broadcastable_shapes",
    "dtypes",
    "elements_for",
    "floats_for",
    "mutually_broadcastable_shapes",
    "pytrees_of",
    "shapes",
    "tensors",
]

_KINDS: dict[str, tuple[np.dtype, ...]] = {
    "bool": _dt.BOOL,
    "signed integer": _dt.SIGNED,
    "unsigned integer": _dt.UNSIGNED,
    "integral": _dt.INTEGER,
    "real floating": _dt.REAL_FLOATING,
    "complex floating": _dt.COMPLEX,
    "numeric": _dt.NUMERIC,
    "all": _dt.ALL,
}

_WIDTH = {_dt.float16: 16, _dt.bfloat16: 32, _dt.float32: 32, _dt.float64: 64}


def dtypes(kinds: str | Sequence[str] = "all") -> st.SearchStrategy[np.dtype]:
    """funclib dtypes of the given Array API kinds.

    Args:
      kinds: one of, or a sequence of, ``"bool"``, ``"signed integer"``, ``"unsigned integer"``,
        ``"integral"``, ``"real floating"``, ``"complex floating"``, ``"numeric"``, ``"all"``. Default ``"all"``.

    >>> fst.dtypes("real floating").example() in (fl.float16, fl.bfloat16, fl.float32, fl.float64)
    True
    """
    names = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    chosen: list[np.dtype] = []
    for k in names:
        if k not in _KINDS:
            raise ValueError(f"dtypes: unknown kind {k!r}; expected one of {sorted(_KINDS)}")
        chosen.extend(d for d in _KINDS[k] if d not in chosen)
    return st.sampled_from(chosen)


def shapes(
    min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4
) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes with ``min_dims..max_dims`` axes of ``min_side..max_side`` elements each.

    >>> s = fst.shapes(min_dims=2, max_dims=2, max_side=3).example()
    >>> len(s) == 2 and all(1 <= d <= 3 for d in s)
    True
    """
    if not 0 <= min_dims <= max_dims or not 0 <= min_side <= max_side:
        raise ValueError(
            f"shapes: need 0 <= min_dims <= max_dims and 0 <= min_side <= max_side, got min_dims={min_dims}, "
            f"max_dims={max_dims}, min_side={min_side}, max_side={max_side}"
        )
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def broadcastable_shapes(
    shape: Sequence[int],
    min_dims: int = 0,
    max_dims: int | None = None,
    min_side: int = 1,
    max_side: int | None = None,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes that broadcast against ``shape`` (NumPy rules): trailing axes equal to ``shape``'s or 1.

    >>> s = fst.broadcastable_shapes((3, 4)).example()  # e.g. (4,), (1, 4) or (2, 3, 1)
    >>> len(np.broadcast_shapes((3, 4), s)) >= 2
    True
    """
    return hnp.broadcastable_shapes(
        tuple(shape), min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    )


def mutually_broadcastable_shapes(
    num_shapes: int, min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4
) -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
    """``num_shapes`` shapes that broadcast together (the result shape is left out).

    >>> a, b = fst.mutually_broadcastable_shapes(2).example()  # e.g. (3, 1) and (4,)
    >>> isinstance(np.broadcast_shapes(a, b), tuple)
    True
    """
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    ).map(lambda r: tuple(r.input_shapes))


def _safe_bound(dtype: np.dtype) -> float:
    # squares and sums of a few such values stay finite
    return math.sqrt(float(_dt.finfo(dtype).max)) / 4


_HOST = {16: np.float16, 32: np.float32, 64: np.float64}


def _inward(v: float, host, up: bool) -> float:
    """``v`` rounded to the nearest ``host`` float on its inner side (Hypothesis needs exact bounds)."""
    r = host(v)
    if up and float(r) < v:
        r = np.nextafter(r, host(np.inf))
    elif not up and float(r) > v:
        r = np.nextafter(r, host(-np.inf))
    return float(r)


def floats_for(
    dtype,
    min_value: float | None = None,
    max_value: float | None = None,
    *,
    allow_subnormal: bool = False,
) -> st.SearchStrategy:
    """Finite values exactly representable in ``dtype`` and safe to compute with: no NaN or infinity, and
    (unless bounds are given) magnitudes up to ``sqrt(finfo(dtype).max) / 4`` so products do not overflow.

    For a complex dtype the values are Python complexes whose parts obey the bounds.

    >>> v = fst.floats_for(fl.float16, -1.0, 1.0).example()
    >>> -1.0 <= v <= 1.0 and float(np.float16(v)) == v
    True
    """
    d = _dt.canonicalize(dtype)
    if d in _dt.COMPLEX:
        part = floats_for(_dt.real_dtype(d), min_value, max_value, allow_subnormal=allow_subnormal)
        return st.builds(complex, part, part)
    if d not in _WIDTH:
        raise ValueError(f"floats_for: {d.name} is not a floating-point dtype; use elements_for for any dtype")
    bound = _safe_bound(d)
    host = _HOST[_WIDTH[d]]
    lo = _inward(-bound if min_value is None else min_value, host, up=True)
    hi = _inward(bound if max_value is None else max_value, host, up=False)
    if lo > hi:
        raise ValueError(f"floats_for: min_value {lo} > max_value {hi}")
    base = st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=_WIDTH[d], allow_subnormal=allow_subnormal)
    if d == _dt.bfloat16:
        # round to bfloat16 and keep only values still inside the bounds
        base = base.map(lambda v: float(np.asarray(v, d).astype(np.float32))).filter(lambda v: lo <= v <= hi)
    return base


def elements_for(dtype, min_value=None, max_value=None) -> st.SearchStrategy:
    """Scalar values for any funclib dtype: booleans, integers in range, or ``floats_for(dtype)``.

    Integers default to ``|v| <= sqrt(max)`` (so products do not wrap); pass bounds for the full range.

    >>> 0 <= fst.elements_for(fl.uint8).example() <= 15
    True
    """
    d = _dt.canonicalize(dtype)
    if d == _dt.bool_:
        return st.booleans()
    if d in _dt.INTEGER:
        info = _dt.iinfo(d)
        safe = math.isqrt(int(info.max))
        lo = max(int(info.min), -safe) if min_value is None else int(min_value)
        hi = safe if max_value is None else int(max_value)
        return st.integers(lo, hi)
    return floats_for(d, min_value, max_value)


def tensors(
    dtype: Any = _dt.float32,
    shape: Any = None,
    elements: st.SearchStrategy | None = None,
) -> st.SearchStrategy:
    """funclib Tensors.

    Args:
      dtype: a dtype or a strategy of dtypes. Default float32.
      shape: a shape, or a strategy of shapes. Default ``shapes()``.
      elements: a strategy of scalar values; default ``elements_for(dtype)``.

    >>> x = fst.tensors(dtype=fl.float64, shape=(2, 3), elements=fst.floats_for(fl.float64, -1, 1)).example()
    >>> x.shape, x.dtype
    ((2, 3), dtype('float64'))
    """

    if not isinstance(dtype, st.SearchStrategy):
        try:
            dtype = _dt.canonicalize(dtype)
        except (TypeError, ValueError) as e:
            raise type(e)(f"tensors: dtype must be a funclib dtype or a strategy of them: {e}") from None
    dtype_st = dtype if isinstance(dtype, st.SearchStrategy) else st.just(dtype)
    shape_st = shapes() if shape is None else shape if isinstance(shape, st.SearchStrategy) else st.just(tuple(shape))

    @st.composite
    def build(draw):
        d = _dt.canonicalize(draw(dtype_st))
        s = draw(shape_st)
        el = elements if elements is not None else elements_for(d)
        # bfloat16 is not a NumPy-native dtype: draw its values (already bfloat16-exact) as float32
        host = np.dtype(np.float32) if d == _dt.bfloat16 else d
        arr = draw(hnp.arrays(host, s, elements=el))
        return asarray(arr.astype(d))

    return build()


def pytrees_of(leaves: st.SearchStrategy, max_leaves: int = 6, *, allow_none: bool = False) -> st.SearchStrategy:
    """Pytrees (nested lists, tuples and string-keyed dicts) whose leaves come from ``leaves``.

    Args:
      leaves: the leaf strategy, e.g. ``tensors()``.
      max_leaves: an upper bound on the number of leaves. Default 6.
      allow_none: also produce ``None`` nodes (pytrees without leaves). Default False.

    >>> tree = fst.pytrees_of(fst.tensors(shape=(2,))).example()  # e.g. {'a': [Tensor(...), Tensor(...)]}
    >>> all(leaf.shape == (2,) for leaf in fl.tree.leaves(tree))
    True
    """
    base = leaves | st.none() if allow_none else leaves
    keys = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
    return st.recursive(
        base,
        lambda children: (
            st.lists(children, max_size=3)
            | st.lists(children, max_size=3).map(tuple)
            | st.dictionaries(keys, children, max_size=3)
        ),
        max_leaves=max_leaves,
    )
