"""Collectives over named vmap axes: psum, pmax, pmin, all_gather, axis_index (pmean is psum / psum(1)).

Each primitive takes a flat list of operands and ``axes``, the tuple of axis names it acts over (all_gather and
axis_index: one name; their wrappers compose several); the public wrappers take pytrees and a name or a tuple of
names. ``BatchTrace`` (transforms/batching.py) handles them. The trace whose name is in ``axes`` calls
``prim.vmap(args, dims, lanes=, offset=, size=, **params)``, which reduces over its own lanes, then binds the
primitive with the remaining names at its parent; a trace of another name applies the primitive lane by lane
(``prim.lane_dims`` gives where its batch axis ends up). A vmap run in chunks combines the chunks' partial results
with ``prim.combine`` before the program goes on. Bound with no vmap of a name active, they raise
``UnboundAxisError``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

from .. import tree as tree_util
from ..core import Primitive, ShapedArray, Zero, _wrap, aval_of, current_trace, is_undefined
from ..errors import DTypeError, FunclibError
from ..namespace import public
from .elementwise import _to_tensor, add, bitwise_and, bitwise_or, convert, equal, maximum, minimum, safe_div
from .indexing import gather
from .reduce import reduce_max, reduce_min
from .shape import bdim_to_front, broadcast_in_dim, concatenate, iota, reduce_sum, reshape


class UnboundAxisError(FunclibError, NameError):
    """A collective named an axis that no enclosing vmap defines."""


def _unbound(name):
    def impl(*args, axes, **params):
        which = axes[0] if len(axes) == 1 else axes
        raise UnboundAxisError(
            f"{name}: no enclosing vmap has axis_name={which!r}; wrap the call in fl.vmap(..., axis_name={which!r})"
        )

    return impl


def _collective(name, *, linear=False, lane_dims=None, combine=None):
    p = Primitive(name, multiple_results=True, linear=linear)
    p.family = "collective"
    p.collective = True
    p.def_impl(_unbound(name))
    # applied lane by lane for another axis, each output keeps its operand's batch axis (unless shifted)
    p.lane_dims = lane_dims or (lambda dims: list(dims))
    p.combine = combine  # the chunks' partial results (a list of output lists) -> the outputs
    return p


def _same_avals(*avals, axes):
    return [ShapedArray(a.shape, a.dtype) for a in avals]


def _fold(fn):
    def combine(partials):
        outs = list(partials[0])
        for part in partials[1:]:
            outs = [fn(a, b) for a, b in zip(outs, part)]
        return outs

    return combine


def _add(a, b):
    return add(a, b)


def _max(a, b):
    return bitwise_or(a, b) if a.dtype == np.bool_ else maximum(a, b)


def _min(a, b):
    return bitwise_and(a, b) if a.dtype == np.bool_ else minimum(a, b)


# --- psum ---------------------------------------------------------------------------------------------------------

psum_p = _collective("psum", linear=True, combine=_fold(_add))


@psum_p.def_abstract_eval
def _psum_abstract(*avals, axes):
    for a in avals:
        if a.dtype == np.bool_:
            raise DTypeError("psum: boolean operands have no sum; fl.psum counts them as int64 (or use pmax: any)")
    return _same_avals(*avals, axes=axes)



@psum_p.def_jvp
def _psum_jvp(primals, tangents, *, axes):
    outs = psum_p.bind(*primals, axes=axes)
    nonzero = [t for t in tangents if type(t) is not Zero]
    summed = iter(psum_p.bind(*nonzero, axes=axes) if nonzero else [])
    return outs, [Zero(aval_of(o)) if type(t) is Zero else next(summed) for o, t in zip(outs, tangents)]


@psum_p.def_transpose
def _psum_transpose(cts, *xs, axes):
    # every lane's output is the sum over lanes, so each input lane's cotangent is the sum of all lanes' cotangents
    linear = [i for i, x in enumerate(xs) if is_undefined(x)]
    summed = iter(psum_p.bind(*[cts[i] for i in linear], axes=axes) if linear else [])
    return [next(summed) if is_undefined(x) else None for x in xs]


@psum_p.def_vmap
def _psum_vmap(args, dims, *, axes, lanes, offset, size):
    return [x * lanes if d is None else reduce_sum(x, (d,)) for x, d in zip(args, dims)], [None] * len(args)


# --- pmax / pmin --------------------------------------------------------------------------------------------------


def _extremum(name, red, pick):
    p = _collective(name, combine=_fold(pick))
    p.no_rule["transpose"] = "not linear"
    p.def_abstract_eval(_same_avals)

    @p.def_jvp
    def _jvp(primals, tangents, *, axes):
        outs = p.bind(*primals, axes=axes)
        moving = [i for i, t in enumerate(tangents) if type(t) is not Zero]
        if not moving:
            return outs, [Zero(aval_of(o)) for o in outs]
        # ties share the derivative equally, as for reduce_max
        masks = [convert(equal(primals[i], outs[i]), outs[i].dtype) for i in moving]
        # two binds: the counts depend on the primals only, so under linearize they are computed, not staged
        counts = psum_p.bind(*masks, axes=axes)
        nums = psum_p.bind(*[tangents[i] * m for i, m in zip(moving, masks)], axes=axes)
        touts = dict(zip(moving, [safe_div(n, c) for n, c in zip(nums, counts)]))
        return outs, [touts[i] if i in touts else Zero(aval_of(o)) for i, o in enumerate(outs)]

    @p.def_vmap
    def _vmap(args, dims, *, axes, lanes, offset, size):
        return [x if d is None else red(x, (d,)) for x, d in zip(args, dims)], [None] * len(args)

    return p


def _rmax(x, axes):
    return reduce_max(x, axes)


def _rmin(x, axes):
    return reduce_min(x, axes)


pmax_p = _extremum("pmax", _rmax, _max)
pmin_p = _extremum("pmin", _rmin, _min)


# --- all_gather ---------------------------------------------------------------------------------------------------


def _concat_chunks(partials):
    return [concatenate(list(parts), 0) for parts in zip(*partials)]


all_gather_p = _collective(
    "all_gather", linear=True, lane_dims=lambda dims: [None if d is None else d + 1 for d in dims],
    combine=_concat_chunks,
)


@all_gather_p.def_abstract_eval
def _ag_abstract(*avals, axes, axis_size):
    return [ShapedArray((axis_size,) + a.shape, a.dtype) for a in avals]


@all_gather_p.def_jvp
def _ag_jvp(primals, tangents, *, axes, axis_size):
    outs = all_gather_p.bind(*primals, axes=axes, axis_size=axis_size)
    nonzero = [t for t in tangents if type(t) is not Zero]
    gathered = iter(all_gather_p.bind(*nonzero, axes=axes, axis_size=axis_size) if nonzero else [])
    return outs, [Zero(aval_of(o)) if type(t) is Zero else next(gathered) for o, t in zip(outs, tangents)]


@all_gather_p.def_transpose
def _ag_transpose(cts, *xs, axes, axis_size):
    # lane i's input appears as row i of every lane's output: its cotangent is row i of the summed cotangents

    linear = [i for i, x in enumerate(xs) if is_undefined(x)]
    if not linear:
        return [None] * len(xs)
    totals = iter(psum_p.bind(*[cts[i] for i in linear], axes=axes))
    (i,) = axis_index_p.bind(axes=axes)
    row = reshape(i, (1,))
    return [gather(next(totals), row, (0,)) if is_undefined(x) else None for x in xs]


@all_gather_p.def_vmap
def _ag_vmap(args, dims, *, axes, axis_size, lanes, offset, size):
    if axis_size != size:
        raise ValueError(
            f"all_gather over {axes[0]!r} was traced for an axis of size {axis_size}, but that vmap axis has size "
            f"{size} (a jitted function traced under one vmap and called under another); call fl.all_gather "
            "inside the vmap, or jit the vmapped function instead"
        )
    outs = [
        bdim_to_front(x, d) if d is not None else broadcast_in_dim(x, (lanes,) + x.shape, tuple(range(1, x.ndim + 1)))
        for x, d in zip(args, dims)
    ]
    return outs, [None] * len(args)


# --- axis_index ---------------------------------------------------------------------------------------------------

axis_index_p = _collective("axis_index", lane_dims=lambda dims: [None])  # one output, the same for every lane
axis_index_p.no_rule["transpose"] = "has no inputs"
axis_index_p.no_rule["jvp"] = "has no inputs (and an integer output)"
axis_index_p.def_abstract_eval(lambda *, axes: [ShapedArray((), np.dtype(np.int64))])


@axis_index_p.def_jvp
def _ai_jvp(primals, tangents, *, axes):
    outs = axis_index_p.bind(axes=axes)
    return outs, [Zero(aval_of(o)) for o in outs]


@axis_index_p.def_vmap
def _ai_vmap(args, dims, *, axes, lanes, offset, size):
    i = iota(np.int64, (lanes,), 0)
    return [i + _wrap(np.asarray(offset, np.int64)) if offset else i], [0]


# --- the public functions -----------------------------------------------------------------------------------------


def _names(axis_name, op: str) -> tuple:
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if not names:
        raise ValueError(f"{op}: axis_name is empty; give the name of an enclosing vmap axis (or a tuple of names)")
    for n in names:
        if n is None or not isinstance(n, Hashable):
            raise TypeError(f"{op}: axis names must be hashable and not None (e.g. strings), got {n!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{op}: axis_name {names!r} names an axis twice")
    return names


def _flat(x, op: str):
    leaves, tree = tree_util.flatten(x)
    return [_to_tensor(v, op) for v in leaves], tree


@public
def psum(x, axis_name):
    """Sum ``x`` over the lanes of the named vmap axes: every lane gets the total.

    Args:
      x: a tensor or a pytree of tensors (Python scalars too: ``psum(1, "i")`` is the axis size).
      axis_name: the ``axis_name`` of an enclosing ``fl.vmap``, or a tuple of names to sum over several
        (nested vmaps).

    >>> fl.vmap(lambda v: fl.psum(v, "i"), axis_name="i")(fl.arange(3.0))
    Tensor([3., 3., 3.], dtype=float32)
    """
    names = _names(axis_name, "psum")
    leaves, tree = _flat(x, "psum")
    return tree_util.unflatten(tree, psum_p.bind(*_counts(leaves), axes=names)) if leaves else x


def _counts(leaves):
    # booleans are summed as counts, as fl.sum does
    return [convert(v, np.int64) if v.dtype == np.bool_ else v for v in leaves]


@public
def pmean(x, axis_name):
    """Mean of ``x`` (a tensor or pytree) over the lanes of the named vmap axes (a name or a tuple of names).

    >>> fl.vmap(lambda v: fl.pmean(v, "i"), axis_name="i")(fl.arange(3.0))
    Tensor([1., 1., 1.], dtype=float32)
    """
    names = _names(axis_name, "pmean")
    leaves, tree = _flat(x, "pmean")
    if not leaves:
        return x
    leaves = _counts(leaves)
    # the lane count as psum(1) rather than a size read at trace time, so a traced pmean suits any batch size
    ones = [_wrap(np.ones((), v.dtype)) for v in leaves]
    sums = psum_p.bind(*leaves, *ones, axes=names)
    k = len(leaves)
    return tree_util.unflatten(tree, [s / n for s, n in zip(sums[:k], sums[k:])])


@public
def pmax(x, axis_name):
    """Maximum of ``x`` (a tensor or pytree) over the lanes of the named vmap axes (a name or a tuple of names).

    >>> fl.vmap(lambda v: fl.pmax(v, "i"), axis_name="i")(fl.arange(3.0))
    Tensor([2., 2., 2.], dtype=float32)
    """
    names = _names(axis_name, "pmax")
    leaves, tree = _flat(x, "pmax")
    return tree_util.unflatten(tree, pmax_p.bind(*leaves, axes=names)) if leaves else x


@public
def pmin(x, axis_name):
    """Minimum of ``x`` (a tensor or pytree) over the lanes of the named vmap axes (a name or a tuple of names).

    >>> fl.vmap(lambda v: fl.pmin(v, "i"), axis_name="i")(fl.arange(3.0))
    Tensor([0., 0., 0.], dtype=float32)
    """
    names = _names(axis_name, "pmin")
    leaves, tree = _flat(x, "pmin")
    return tree_util.unflatten(tree, pmin_p.bind(*leaves, axes=names)) if leaves else x


@public
def all_gather(x, axis_name, *, axis_size: int | None = None):
    """Every lane's ``x`` (a tensor or pytree) stacked along a new leading axis, in lane order.

    Args:
      x: a tensor or a pytree of tensors.
      axis_name: the name of an enclosing vmap axis, or a tuple of names: the lanes of all of them stacked along
        one axis, the first name slowest (the order of ``axis_index`` of the same tuple).
      axis_size: optional check of the stacked axis' length.

    >>> fl.vmap(lambda v: fl.all_gather(v, "i"), axis_name="i")(fl.arange(2.0))
    Tensor([[0., 1.],
            [0., 1.]], dtype=float32)
    """
    names = _names(axis_name, "all_gather")
    leaves, tree = _flat(x, "all_gather")
    sizes = [axis_size_of(n) for n in names]
    total = math.prod(sizes)
    if axis_size is not None and int(axis_size) != total:
        raise ValueError(f"all_gather: axis_size={axis_size}, but the axes {names!r} have {total} lanes in all")
    if not leaves:
        return x
    outs = leaves
    for name, n in reversed(list(zip(names, sizes))):
        outs = all_gather_p.bind(*outs, axes=(name,), axis_size=n)
    if len(names) > 1:
        outs = [reshape(o, (total,) + tuple(o.shape[len(names) :])) for o in outs]
    return tree_util.unflatten(tree, outs)


def axis_size_of(axis_name) -> int:
    """The size of the enclosing vmap axis called ``axis_name`` (its full size, also when vmap runs in chunks)."""
    t = current_trace()
    while t is not None:
        axis = getattr(t, "axis", None)
        if axis is not None and axis.name == axis_name:
            return axis.size
        t = t.parent
    raise UnboundAxisError(f"no enclosing vmap has axis_name={axis_name!r}")


@public
def axis_index(axis_name):
    """This lane's index along the named vmap axis; for a tuple of names, the row-major index over all of them.

    >>> fl.vmap(lambda: fl.axis_index("i"), axis_name="i", axis_size=3)()
    Tensor([0, 1, 2], dtype=int64)
    """
    names = _names(axis_name, "axis_index")
    index, inner = None, None
    for k, name in enumerate(reversed(names)):
        (i,) = axis_index_p.bind(axes=(name,))
        term = i if inner is None else i * inner
        index = term if index is None else index + term
        if k + 1 < len(names):  # the lane count of this axis, as psum(1): a traced index suits any batch size
            (n,) = psum_p.bind(_wrap(np.ones((), np.int64)), axes=(name,))
            inner = n if inner is None else inner * n
    return index
