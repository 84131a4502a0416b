"""Collectives over named axes: psum, pmax, pmin, all_gather, psum_scatter, ppermute, axis_index (pmean is
psum / psum(1)).

Each primitive takes a flat list of operands and ``axes``, the tuple of axis names it acts over (all_gather and
axis_index: one name; their wrappers compose several); the public wrappers take pytrees and a name or a tuple of
names. ``BatchTrace`` (transforms/batching.py) handles them. The trace whose name is in ``axes`` calls
``prim.vmap(args, dims, lanes=, offset=, size=, **params)``, which reduces over its own lanes, then binds the
primitive with the remaining names at its parent; a trace of another name applies the primitive lane by lane
(``prim.lane_dims`` gives where its batch axis ends up). A vmap run in chunks combines the chunks' partial results
with ``prim.combine`` before the program goes on.

An axis whose lanes are processes (``funclib.distributed.spmd``) appears in ``axes`` as an ``ExternalAxis``
object instead of a name: traces pass it through like any primitive parameter, so it is staged into jaxprs, and
the impl hands the NumPy operands to the axis (MPI there). Bound with a name that no vmap or spmd defines, a
collective raises ``UnboundAxisError``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

from .. import tree as tree_util
from ..core import Primitive, ShapedArray, Zero, _wrap, aval_of, current_trace, is_undefined
from ..errors import DTypeError, FunclibError
from ..jaxpr import ClosedJaxpr, Jaxpr
from ..namespace import public
from .elementwise import _to_tensor, add, bitwise_and, bitwise_or, convert, equal, maximum, minimum, safe_div
from .indexing import gather
from .reduce import reduce_max, reduce_min
from .shape import bdim_to_front, broadcast_in_dim, concatenate, iota, moveaxis, reduce_sum, reshape, select


class UnboundAxisError(FunclibError, NameError):
    """A collective named an axis that no enclosing vmap (or ``fl.distributed.spmd``) defines."""


class ExternalAxis:
    """An axis whose lanes live outside this process (the ranks of ``funclib.distributed``).

    Collectives bound with one in ``axes`` compute on the NumPy operands with ``collective``; every other rule
    (shapes, JVP, transpose, batching over other axes) is the primitive's own. Instances are compared by identity.
    """

    name: Hashable
    size: int

    def collective(self, op: str, arrays: list, **params) -> list:
        """The outputs of collective ``op`` (a primitive name) over this axis, for this process's ``arrays``."""
        raise NotImplementedError

    def program_step(self, op: str, params: dict):
        """The function a compiled program calls for this collective (``transforms/lowering.py``)."""
        return lambda *arrays: self.collective(op, list(arrays), **params)

    def program_guard(self, jaxpr, name: str):
        """A no-argument function a compiled program calls first (e.g. to check every process runs the same
        program), or None."""
        return None


def _impl(name):
    def impl(*args, axes, **params):
        unbound = [a for a in axes if not isinstance(a, ExternalAxis)]
        if unbound:
            which = unbound[0] if len(unbound) == 1 else tuple(unbound)
            raise UnboundAxisError(
                f"{name}: no enclosing vmap has axis_name={which!r}; wrap the call in fl.vmap(..., "
                f"axis_name={which!r}), or in fl.distributed.spmd(f, axis_name={which!r}) to run it across processes"
            )
        outs = list(args)
        for ax in axes:
            outs = ax.collective(name, outs, **params)
        return outs

    return impl


def _collective(name, *, linear=False, lane_dims=None, combine=None):
    p = Primitive(name, multiple_results=True, linear=linear)
    p.family = "collective"
    p.collective = True
    p.def_impl(_impl(name))
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
    if isinstance(axes[0], ExternalAxis):
        # across processes each rank needs only its own row of the sum: a reduce-scatter moves 1/n of the data
        rows = iter(psum_scatter_p.bind(*[cts[i] for i in linear], axes=axes, axis_size=axis_size))
        return [next(rows) if is_undefined(x) else None for x in xs]
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


# --- psum_scatter -------------------------------------------------------------------------------------------------


def _chunked_lanes(name, axes, lanes, size):
    if lanes != size:
        raise FunclibError(
            f"{name} over vmap axis {axes[0]!r} run in chunks (chunk_size or max_bytes): each lane's result needs "
            f"every chunk's rows at once. Remove chunk_size/max_bytes from that vmap, or use fl.psum and index "
            "the result with fl.axis_index"
        )


# each lane's operand is (n, ...) and lane i gets row i of the sum over lanes; across processes MPI's reduce-scatter
psum_scatter_p = _collective(
    "psum_scatter", linear=True, lane_dims=lambda dims: [None if d is None else d - 1 for d in dims],
    combine=None,
)
# applied lane by lane for another axis, the scattered axis must stay leading: batch axes move behind it
psum_scatter_p.lane_inputs = lambda vals, dims: (
    [moveaxis(v, 0, 1) if d == 0 else v for v, d in zip(vals, dims)],
    [1 if d == 0 else d for d in dims],
)


@psum_scatter_p.def_abstract_eval
def _ps_abstract(*avals, axes, axis_size):
    for a in avals:
        if a.ndim == 0 or a.shape[0] != axis_size:
            raise ValueError(
                f"psum_scatter: each operand's leading axis must have the axis' size {axis_size} (one row per lane), "
                f"got {a.str_short()}"
            )
        if a.dtype == np.bool_:
            raise DTypeError("psum_scatter: boolean operands have no sum; convert them to an integer dtype first")
    return [ShapedArray(a.shape[1:], a.dtype) for a in avals]


@psum_scatter_p.def_jvp
def _ps_jvp(primals, tangents, *, axes, axis_size):
    outs = psum_scatter_p.bind(*primals, axes=axes, axis_size=axis_size)
    nonzero = [t for t in tangents if type(t) is not Zero]
    rows = iter(psum_scatter_p.bind(*nonzero, axes=axes, axis_size=axis_size) if nonzero else [])
    return outs, [Zero(aval_of(o)) if type(t) is Zero else next(rows) for o, t in zip(outs, tangents)]


@psum_scatter_p.def_transpose
def _ps_transpose(cts, *xs, axes, axis_size):
    # row i of every lane's operand lands in lane i's output: the cotangent of each operand is every lane's output
    # cotangent, stacked
    linear = [i for i, x in enumerate(xs) if is_undefined(x)]
    stacked = iter(all_gather_p.bind(*[cts[i] for i in linear], axes=axes, axis_size=axis_size) if linear else [])
    return [next(stacked) if is_undefined(x) else None for x in xs]


@psum_scatter_p.def_vmap
def _ps_vmap(args, dims, *, axes, axis_size, lanes, offset, size):
    _chunked_lanes("psum_scatter", axes, lanes, size)
    return [x * lanes if d is None else reduce_sum(x, (d,)) for x, d in zip(args, dims)], [0] * len(args)


# --- ppermute -----------------------------------------------------------------------------------------------------

# lane dst gets lane src's operand for each (src, dst) pair of ``perm``; lanes that no pair targets get zeros.
# Across processes: MPI Sendrecv between the paired ranks.
ppermute_p = _collective("ppermute", linear=True)
ppermute_p.def_abstract_eval(lambda *avals, axes, perm: [ShapedArray(a.shape, a.dtype) for a in avals])


@ppermute_p.def_jvp
def _pp_jvp(primals, tangents, *, axes, perm):
    outs = ppermute_p.bind(*primals, axes=axes, perm=perm)
    nonzero = [t for t in tangents if type(t) is not Zero]
    moved = iter(ppermute_p.bind(*nonzero, axes=axes, perm=perm) if nonzero else [])
    return outs, [Zero(aval_of(o)) if type(t) is Zero else next(moved) for o, t in zip(outs, tangents)]


@ppermute_p.def_transpose
def _pp_transpose(cts, *xs, axes, perm):
    linear = [i for i, x in enumerate(xs) if is_undefined(x)]
    inverse = tuple((d, s) for s, d in perm)
    back = iter(ppermute_p.bind(*[cts[i] for i in linear], axes=axes, perm=inverse) if linear else [])
    return [next(back) if is_undefined(x) else None for x in xs]


@ppermute_p.def_vmap
def _pp_vmap(args, dims, *, axes, perm, lanes, offset, size):
    _chunked_lanes("ppermute", axes, lanes, size)
    src = np.zeros((lanes, 1), np.int64)
    hit = np.zeros(lanes, np.bool_)
    for s, d in perm:
        src[d, 0], hit[d] = s, True
    outs = []
    for x, d in zip(args, dims):
        if d is None:
            x = broadcast_in_dim(x, (lanes,) + tuple(x.shape), tuple(range(1, x.ndim + 1)))
        else:
            x = bdim_to_front(x, d)
        moved = gather(x, _wrap(src), (0,))
        if not hit.all():
            shape = tuple(moved.shape)
            mask = broadcast_in_dim(_wrap(hit), shape, (0,))
            moved = select(mask, moved, broadcast_in_dim(_wrap(np.zeros((), moved.dtype)), shape, ()))
        outs.append(moved)
    return outs, [0] * len(args)


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


@public
def psum_scatter(x, axis_name):
    """Sum ``x`` over the lanes of a named axis and give lane ``i`` row ``i`` of the sum (a reduce-scatter).

    Args:
      x: a tensor or pytree of tensors whose leading axis has the axis' size (one row per lane).
      axis_name: the name of an enclosing ``fl.vmap`` axis, or of an ``fl.distributed.spmd`` process axis.

    Its transpose is ``all_gather``: a gradient through ``all_gather`` is a ``psum_scatter`` of the cotangents.

    >>> fl.vmap(lambda v: fl.psum_scatter(v, "i"), axis_name="i")(fl.ones((2, 2)))
    Tensor([2., 2.], dtype=float32)
    """
    if isinstance(axis_name, (tuple, list)):
        raise TypeError("psum_scatter: give one axis name, not a tuple (scatter over one axis at a time)")
    (name,) = _names(axis_name, "psum_scatter")
    leaves, tree = _flat(x, "psum_scatter")
    if not leaves:
        return x
    n = axis_size_of(name)
    for v in leaves:
        if v.ndim == 0 or v.shape[0] != n:
            raise ValueError(
                f"psum_scatter: the leading axis of each operand must have axis {name!r}'s size {n} (one row per "
                f"lane), got shape {tuple(v.shape)}; reshape it to ({n}, -1) first"
            )
    return tree_util.unflatten(tree, psum_scatter_p.bind(*leaves, axes=(name,), axis_size=n))


@public
def ppermute(x, axis_name, perm):
    """Send each lane's ``x`` to another lane: for every ``(src, dst)`` pair in ``perm``, lane ``dst`` receives
    lane ``src``'s value; lanes that no pair sends to get zeros.

    Args:
      x: a tensor or pytree of tensors.
      axis_name: the name of an enclosing ``fl.vmap`` axis, or of an ``fl.distributed.spmd`` process axis
        (there, a point-to-point exchange between ranks).
      perm: pairs of lane indices; each source and each destination at most once.

    >>> n = 3
    >>> fl.vmap(lambda v: fl.ppermute(v, "i", [(i, (i + 1) % n) for i in range(n)]), axis_name="i")(fl.arange(3.0))
    Tensor([2., 0., 1.], dtype=float32)
    """
    if isinstance(axis_name, (tuple, list)):
        raise TypeError("ppermute: give one axis name, not a tuple")
    (name,) = _names(axis_name, "ppermute")
    n = axis_size_of(name)
    try:
        pairs = tuple((int(s), int(d)) for s, d in perm)
    except (TypeError, ValueError):
        raise TypeError(
            f"ppermute: perm must be a sequence of (source, destination) pairs of ints, got {perm!r}"
        ) from None
    for s, d in pairs:
        if not (0 <= s < n and 0 <= d < n):
            raise ValueError(f"ppermute: pair {(s, d)} is outside axis {name!r} of size {n} (lanes 0..{n - 1})")
    for k, what in ((0, "source"), (1, "destination")):
        seen = [p[k] for p in pairs]
        if len(set(seen)) != len(seen):
            dup = next(v for v in seen if seen.count(v) > 1)
            raise ValueError(f"ppermute: lane {dup} is the {what} of more than one pair in perm={list(pairs)}")
    leaves, tree = _flat(x, "ppermute")
    return tree_util.unflatten(tree, ppermute_p.bind(*leaves, axes=(name,), perm=pairs)) if leaves else x


def binds_collective(obj, name) -> bool:
    """Whether a jaxpr (or a param holding jaxprs) binds a collective over axis ``name``, at any depth."""
    if isinstance(obj, ClosedJaxpr):
        obj = obj.jaxpr
    if isinstance(obj, Jaxpr):
        key = ("binds_collective", name)
        found = obj.cache.get(key)
        if found is None:
            found = any(
                (getattr(e.prim, "collective", False) and name in e.params["axes"])
                or any(binds_collective(v, name) for v in e.params.values())
                for e in obj.eqns
            )
            obj.cache[key] = found
        return found
    if isinstance(obj, (tuple, list)):
        return any(binds_collective(v, name) for v in obj)
    return False


def axis_size_of(axis_name) -> int:
    """The size of the enclosing vmap axis called ``axis_name`` (its full size, also when vmap runs in chunks)."""
    t = current_trace()
    while t is not None:
        axis = getattr(t, "axis", None)
        if axis is not None and axis.name == axis_name:
            return axis.size
        t = t.parent
    raise UnboundAxisError(
        f"no enclosing vmap has axis_name={axis_name!r} (nor an fl.distributed.spmd over processes); wrap the call "
        f"in fl.vmap(..., axis_name={axis_name!r}) or fl.distributed.spmd(f, axis_name={axis_name!r})"
    )


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
