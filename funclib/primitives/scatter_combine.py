"""scatter_mul, scatter_max and scatter_min: ``x`` combined with every update at its index in turn, repeats included
(``np.multiply.at`` semantics), in the canonical form of ``indexing.py``.

Primitives rather than gather-combine-scatter, which keeps only one of several updates to the same element. The
derivative of ``scatter_mul`` with respect to its updates multiplies the other updates to the same element, found
by sorting the updates by target (``sort.py``), so this family sits above ``indexing`` and ``sort``.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Primitive, Zero, _wrap, aval_of, is_undefined
from .elementwise import bitwise_or, convert, not_equal, safe_div, safe_mul
from .indexing import gather_p, scatter_abstract, scatter_add_p, scatter_impl, scatter_vmap
from .shape import broadcast_in_dim, concatenate, instantiate, iota, reshape, rev, select, slice_
from .sort import sort

scatter_mul_p = Primitive("scatter_mul")
scatter_mul_p.family = "indexing"
scatter_mul_p.linear = True  # in the operand; not in the updates
scatter_mul_p.def_impl(scatter_impl("mul"))
scatter_mul_p.def_abstract_eval(scatter_abstract("scatter_mul", frozenset(dtypes.NUMERIC)))
scatter_mul_p.def_vmap(scatter_vmap(scatter_mul_p))


def _ones(aval):
    return _wrap(np.ones(aval.shape, aval.dtype))


def _scalar(v, dtype):
    return _wrap(np.asarray(v, dtype))


@scatter_mul_p.def_jvp
def _scatter_mul_jvp(primals, tangents, *, axes):
    x, idx, u = primals
    tx, _, tu = tangents
    out = scatter_mul_p.bind(x, idx, u, axes=axes)
    if out.dtype not in dtypes.INEXACT or (type(tx) is Zero and type(tu) is Zero):
        return out, Zero(aval_of(out))
    acc = None
    if type(tx) is not Zero:
        acc = safe_mul(tx, scatter_mul_p.bind(_ones(aval_of(x)), idx, u, axes=axes))
    if type(tu) is not Zero:
        # d out[i] / d u_j = x[i] * (the product of the other updates to element i)
        others = _product_of_others(u, idx, axes, aval_of(x).shape)
        t = scatter_add_p.bind(zeros_like_value(x), idx, safe_mul(instantiate(tu), others), axes=axes)
        t = safe_mul(t, x)
        acc = t if acc is None else acc + t
    return out, acc


def _product_of_others(u, idx, axes, x_shape):
    """For each update, the product of the other updates to its element of the operand.

    A polynomial in ``u`` built from products and selections (no division, so zeros among the updates are no
    special case), so its derivatives of every order are exact: the updates are sorted by target, and each one's
    exclusive prefix and suffix products within its target's run are multiplied.
    """
    ia = aval_of(idx)
    batch, k = ia.shape[:-1], ia.shape[-1]
    n = int(np.prod(batch, dtype=np.int64))
    rest = tuple(aval_of(u).shape[len(batch) :])
    if n <= 1:
        return _ones(aval_of(u))
    idx = reshape(convert(idx, np.int64), (n, k))
    target = None
    stride = 1
    for j in range(k - 1, -1, -1):  # each index tuple as one row-major number
        col = reshape(slice_(idx, (0, j), (n, j + 1)), (n,))
        term = col if stride == 1 else col * _scalar(stride, np.int64)
        target = term if target is None else target + term
        stride *= x_shape[axes[j]]
    target, order = sort([target, iota(np.int64, (n,), 0)], 0)
    vals = gather_p.bind(reshape(u, (n,) + rest), reshape(order, (n, 1)), axes=(0,))
    differs = not_equal(slice_(target, (1,), (n,)), slice_(target, (0,), (n - 1,)))
    true1 = _wrap(np.ones((1,), bool))
    starts = concatenate([true1, differs], 0)
    ends = concatenate([differs, true1], 0)

    def wide(flags):
        return broadcast_in_dim(flags, (n,) + rest, (0,))

    def shift(v, fill):  # v moved one place towards the end, ``fill`` in front
        pad = _wrap(np.full((1,) + rest, fill, aval_of(v).dtype))
        return concatenate([pad, slice_(v, (0,) * v.ndim, (n - 1,) + rest)], 0)

    def exclusive_prefix(v, first):
        # a segmented inclusive product scan (Hillis-Steele doubling), then shifted by one within each run
        inc, covered, d = v, first, 1
        while d < n:
            pad = _wrap(np.ones((d,) + rest, aval_of(v).dtype))
            prev = concatenate([pad, slice_(inc, (0,) * inc.ndim, (n - d,) + rest)], 0)
            prev_covered = concatenate([_wrap(np.ones((d,), bool)), slice_(covered, (0,), (n - d,))], 0)
            inc = select(wide(covered), inc, inc * prev)
            covered = bitwise_or(covered, prev_covered)
            d *= 2
        return select(wide(first), _ones(aval_of(v)), shift(inc, 1))

    before = exclusive_prefix(vals, starts)
    after = rev(exclusive_prefix(rev(vals, (0,)), rev(ends, (0,))), (0,))
    sorted_others = before * after
    back = scatter_add_p.bind(zeros_like_value(sorted_others), reshape(order, (n, 1)), sorted_others, axes=(0,))
    return reshape(back, aval_of(u).shape)


@scatter_mul_p.def_transpose
def _scatter_mul_transpose(ct, x, idx, u, *, axes):
    if is_undefined(u):
        raise TypeError("scatter_mul is linear in its operand only, not in its updates")
    return [safe_mul(ct, scatter_mul_p.bind(_ones(x.aval), idx, u, axes=axes)), None, None]


def zeros_like_value(x):
    a = aval_of(x)
    return _wrap(np.zeros(a.shape, a.dtype))


def _scatter_extremum(name, mode):
    p = Primitive(name)
    p.family = "indexing"
    p.def_impl(scatter_impl(mode))
    p.def_abstract_eval(scatter_abstract(name, frozenset(dtypes.INTEGER + dtypes.REAL_FLOATING)))
    p.def_vmap(scatter_vmap(p))
    p.no_rule["transpose"] = "not linear"

    @p.def_jvp
    def _jvp(primals, tangents, *, axes):
        x, idx, u = primals
        tx, _, tu = tangents
        out = p.bind(x, idx, u, axes=axes)
        if out.dtype not in dtypes.INEXACT or (type(tx) is Zero and type(tu) is Zero):
            return out, Zero(aval_of(out))
        # the result's tangent is the mean of the tangents of every value equal to it (x's and the updates'):
        # ties share the derivative equally, as for reduce_max and maximum
        from_x = convert(x == out, out.dtype)
        from_u = convert(u == gather_p.bind(out, idx, axes=axes), out.dtype)
        zero = zeros_like_value(x)
        count = from_x + scatter_add_p.bind(zero, idx, from_u, axes=axes)
        num = scatter_add_p.bind(instantiate(tx) * from_x, idx, instantiate(tu) * from_u, axes=axes)
        return out, safe_div(num, count)  # count is 0 only where out is NaN, and num is then 0

    return p


scatter_max_p = _scatter_extremum("scatter_max", "max")
scatter_min_p = _scatter_extremum("scatter_min", "min")




def scatter_mul(x, idx, updates, axes):
    """``x`` multiplied by ``updates`` at the index tuples ``idx`` (repeated indices multiply in turn)."""
    return scatter_mul_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


def scatter_max(x, idx, updates, axes):
    """``x`` with ``maximum(x, u)`` at the index tuples ``idx`` for every update ``u`` (``np.maximum.at``)."""
    return scatter_max_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))


def scatter_min(x, idx, updates, axes):
    """``x`` with ``minimum(x, u)`` at the index tuples ``idx`` for every update ``u`` (``np.minimum.at``)."""
    return scatter_min_p.bind(x, idx, updates, axes=tuple(int(a) for a in axes))
