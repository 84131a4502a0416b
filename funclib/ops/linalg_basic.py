"""matmul, tensordot, vecdot, outer, einsum: contractions lowered onto ``dot_general``."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import Tensor, _wrap
from ..errors import DTypeError, ShapeError
from ..namespace import public, tensor_method
from ..primitives import shape as S
from ..primitives._util import broadcast_shapes, normalize_axis
from ..primitives.dot import dot_general
from ..primitives.elementwise import _to_tensor, convert
from ..primitives.indexing import gather
from . import elementwise as E
from . import reductions as R


def _promote(a, b, op):
    a, b = _to_tensor(a, op), _to_tensor(b, op)
    if a.dtype == dtypes.bool_ or b.dtype == dtypes.bool_:
        raise DTypeError(f"{op}: boolean operands are not supported; cast to a numeric dtype")
    d = dtypes.result_type(a, b)
    return (a if a.dtype == d else convert(a, d)), (b if b.dtype == d else convert(b, d))


@public(method=True, rdunder="__rmatmul__")
def matmul(x1, x2, /, *, preferred_element_type=None):
    """Matrix product with NumPy semantics (1-D operands are promoted; leading axes broadcast).

    ``preferred_element_type`` is the result dtype, accumulated in exactly (as in ``jax.lax.dot_general``):
    ``int32`` for int8 operands gives the exact product, ``float32`` keeps float8/bfloat16 products unrounded.

    >>> (fl.ones((2, 3)) @ fl.ones((3, 4))).shape
    (2, 4)
    >>> a = fl.full((2, 300), 127, dtype=fl.int8)
    >>> fl.matmul(a, a.T, preferred_element_type=fl.int32)[0, 0]
    Tensor(4838700, dtype=int32)
    """
    a, b = _promote(x1, x2, "matmul")
    pet = preferred_element_type
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul: operands must be at least 1-D; use * for scalars")
    a1, b1 = a.ndim == 1, b.ndim == 1
    if a1:
        a = S.reshape(a, (1,) + tuple(a.shape))
    if b1:
        b = S.reshape(b, tuple(b.shape) + (1,))
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul: shapes {tuple(x1.shape)} and {tuple(x2.shape)} are not aligned: "
            f"{a.shape[-1]} (last axis of the first) != {b.shape[-2]} (second-to-last of the second)"
        )
    if a.ndim == 2 and b.ndim == 2:
        out = dot_general(a, b, (((1,), (0,)), ((), ())), pet)
    else:
        batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), op="matmul")
        nb = len(batch)
        if b.ndim == 2:
            # fold the batch of a into its rows: one large GEMM instead of a batched one
            out = dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())), pet)
            out = S.broadcast_to(out, batch + tuple(out.shape[-2:])) if tuple(out.shape[:-2]) != batch else out
        else:
            a = S.broadcast_to(a, batch + tuple(a.shape[-2:]))
            b = S.broadcast_to(b, batch + tuple(b.shape[-2:]))
            bd = tuple(range(nb))
            out = dot_general(a, b, (((nb + 1,), (nb,)), (bd, bd)), pet)
    if a1:
        out = S.squeeze(out, (out.ndim - 2,))
    if b1:
        out = S.squeeze(out, (out.ndim - 1,))
    return out


_PLAIN = frozenset({Tensor, int, float, bool, complex})


@tensor_method("__matmul__")
def _matmul_operator(self, other, /):
    """``x @ y``; a ``funclib.sparse`` right operand computes the product itself (its ``__rmatmul__``)."""
    if type(other) not in _PLAIN and getattr(type(other), "_fl_sparse", False):
        return NotImplemented
    return matmul(self, other)


@public
def tensordot(x1, x2, /, *, axes=2, preferred_element_type=None):
    """Contract ``axes`` (an int: the last/first n axes; or a pair of axis sequences). ``preferred_element_type``:
    the result and accumulation dtype, as in ``matmul``.

    >>> fl.tensordot(fl.ones((2, 3)), fl.ones((3,)), axes=1)
    Tensor([3., 3.], dtype=float32)
    """
    a, b = _promote(x1, x2, "tensordot")
    if isinstance(axes, int):
        if axes < 0 or axes > min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={axes} out of range for ranks {a.ndim} and {b.ndim}")
        ca = tuple(range(a.ndim - axes, a.ndim))
        cb = tuple(range(axes))
    else:
        ca, cb = axes
        ca = tuple(normalize_axis(i, a.ndim, "tensordot") for i in ((ca,) if isinstance(ca, int) else ca))
        cb = tuple(normalize_axis(i, b.ndim, "tensordot") for i in ((cb,) if isinstance(cb, int) else cb))
    return _contract(a, b, ca, cb, "tensordot", preferred_element_type)


def _contract(a, b, ca, cb, op, preferred_element_type=None):
    sa, sb = tuple(a.shape[i] for i in ca), tuple(b.shape[i] for i in cb)
    if sa != sb:
        raise ShapeError(
            f"{op}: the contracted axes have sizes {sa} (axes {ca} of shape {tuple(a.shape)}) and {sb} (axes {cb} "
            f"of shape {tuple(b.shape)}); they must match"
        )
    return dot_general(a, b, ((ca, cb), ((), ())), preferred_element_type)


@public
def vecdot(x1, x2, /, *, axis: int = -1):
    """``sum(conj(x1) * x2, axis)`` with broadcasting."""
    a, b = _promote(x1, x2, "vecdot")
    shape = broadcast_shapes(tuple(a.shape), tuple(b.shape), op="vecdot")
    a, b = S.broadcast_to(a, shape), S.broadcast_to(b, shape)
    ax = normalize_axis(axis, len(shape), "vecdot")
    if a.shape[ax] != b.shape[ax]:
        raise ShapeError("vecdot: contracted axes differ in size")
    if a.dtype in dtypes.COMPLEX:
        a = E.conj(a)
    return R.sum(E.multiply(a, b), axis=ax, dtype=a.dtype)  # keep the promoted dtype (no int widening)


@public
def outer(x1, x2, /):
    a, b = _promote(x1, x2, "outer")
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError("outer: operands must be 1-D")
    return dot_general(S.reshape(a, (-1, 1)), S.reshape(b, (1, -1)), (((1,), (0,)), ((), ())))


@public
def inner(x1, x2, /):
    """Contract the last axes of ``x1`` and ``x2``."""
    a, b = _promote(x1, x2, "inner")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"inner: operands must be at least 1-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return _contract(a, b, (a.ndim - 1,), (b.ndim - 1,), "inner")


@public
def einsum(subscripts: str, *operands, preferred_element_type=None):
    """Einstein summation over explicit subscripts (``'ij,jk->ik'``); ``...`` broadcasts leading axes.
    ``preferred_element_type``: the result and accumulation dtype, as in ``matmul``.

    >>> fl.einsum("ij,j->i", fl.ones((2, 3)), fl.ones(3))
    Tensor([3., 3.], dtype=float32)
    """
    ops = [_to_tensor(o, "einsum") for o in operands]
    d = dtypes.result_type(*ops)
    ops = [o if o.dtype == d else convert(o, d) for o in ops]
    pet = None if preferred_element_type is None else dtypes.canonicalize(preferred_element_type)
    if pet is not None and len(ops) == 1:
        ops = [convert(ops[0], pet)]  # nothing to contract: widen, then sum in the wide dtype
    sub = subscripts.replace(" ", "")
    if "->" in sub:
        lhs, out = sub.split("->")
    else:
        lhs, out = sub, None
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise ValueError(f"einsum: {len(terms)} subscripts for {len(ops)} operands")
    # expand '...' into fresh upper-case letters
    ell_rank = 0
    for t, o in zip(terms, ops):
        if "..." in t:
            ell_rank = max(ell_rank, o.ndim - (len(t) - 3))
    ell = "".join(chr(ord("A") + i) for i in range(ell_rank))
    new_terms = []
    for t, o in zip(terms, ops):
        if "..." in t:
            k = o.ndim - (len(t) - 3)
            t = t.replace("...", ell[ell_rank - k :])
        if len(t) != o.ndim:
            raise ShapeError(f"einsum: subscript {t!r} has {len(t)} letters for an operand of rank {o.ndim}")
        new_terms.append(t)
    if out is None:
        counts = {}
        for t in new_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    # diagonals (repeated letters within one term) and letters summed in a single operand
    sizes = {}
    for t, o in zip(new_terms, ops):
        for c, n in zip(t, o.shape):
            if c in sizes and sizes[c] != n and 1 not in (sizes[c], n):
                raise ShapeError(f"einsum: letter {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes.get(c, 1), n)
    cur, cur_t = None, None
    for k, (t, o) in enumerate(zip(new_terms, ops)):
        o, t = _einsum_diagonals(o, t)
        if cur is None:
            cur, cur_t = o, t
            continue
        if o.dtype != cur.dtype:  # after a contraction into preferred_element_type: widening is exact
            o = convert(o, cur.dtype)
        cur, cur_t = _einsum_pair(cur, cur_t, o, t, out + "".join(new_terms[k + 1 :]), pet if k == 1 else None)
    # sum letters not in the output, then permute
    drop = [i for i, c in enumerate(cur_t) if c not in out]
    if drop:
        cur = R.sum(cur, axis=tuple(drop), dtype=pet)
        cur_t = "".join(c for c in cur_t if c in out)
    missing = [c for c in out if c not in cur_t]
    if missing:
        raise ValueError(f"einsum: output letters {missing} do not appear in the inputs")
    return S.transpose(cur, tuple(cur_t.index(c) for c in out)) if cur_t != out else cur


def _einsum_diagonals(o, t):
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        i = t.index(c)
        j = t.index(c, i + 1)
        o = diagonal(o, offset=0, axis1=i, axis2=j)
        t = t[:i] + t[i + 1 : j] + t[j + 1 :] + c
    return o, t


def _einsum_pair(a, ta, b, tb, keep_letters, pet=None):
    # a shared letter is contracted now unless the output or a later operand still needs it
    shared = [c for c in ta if c in tb]
    keep = set(keep_letters)
    batch = [c for c in shared if c in keep]
    contract = [c for c in shared if c not in keep]
    # broadcast size-1 axes of shared letters
    for c in shared:
        na, nb = a.shape[ta.index(c)], b.shape[tb.index(c)]
        if na != nb:
            if na == 1:
                shape = list(a.shape)
                shape[ta.index(c)] = nb
                a = S.broadcast_to(a, tuple(shape))
            else:
                shape = list(b.shape)
                shape[tb.index(c)] = na
                b = S.broadcast_to(b, tuple(shape))
    dn = (
        (tuple(ta.index(c) for c in contract), tuple(tb.index(c) for c in contract)),
        (tuple(ta.index(c) for c in batch), tuple(tb.index(c) for c in batch)),
    )
    res = dot_general(a, b, dn, pet)
    ta_free = [c for c in ta if c not in shared]
    tb_free = [c for c in tb if c not in shared]
    return res, "".join(batch + ta_free + tb_free)


@public
def diagonal(x, /, *, offset: int = 0, axis1: int = -2, axis2: int = -1):
    """The diagonal of the (axis1, axis2) planes, as a new last axis."""
    x = _to_tensor(x, "diagonal")
    a1, a2 = normalize_axis(axis1, x.ndim, "diagonal"), normalize_axis(axis2, x.ndim, "diagonal")
    if a1 == a2:
        raise ValueError("diagonal: axis1 and axis2 must differ")
    n1, n2 = x.shape[a1], x.shape[a2]
    start1, start2 = (0, offset) if offset >= 0 else (-offset, 0)
    k = max(0, min(n1 - start1, n2 - start2))
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    xt = S.transpose(x, (a1, a2) + tuple(rest))
    idx = _wrap(np.stack([np.arange(start1, start1 + k), np.arange(start2, start2 + k)], -1).astype(np.int64))
    g = gather(xt, idx, (0, 1))  # (k, *rest)
    return S.transpose(g, tuple(range(1, g.ndim)) + (0,))


tensor_method("dot")(matmul)
