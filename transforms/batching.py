"""``vmap``: vectorizing map. A ``BatchTrace`` carries each value with its batch axis (or ``None``: not mapped).

Named axes and collectives: a vmap with an ``axis_name`` has a ``NamedAxis``; collectives over it
(funclib/primitives/collectives.py) reduce over its lanes. Higher-order primitives (jit, control flow, custom
rules) get the axis in their batching rules (``prim.batch_named``), so collectives inside their bodies see it too.

Chunks: ``chunk_size``/``max_bytes`` run the batch in chunks, and a collective over a chunked axis needs every
chunk. Each chunk runs the function until the first collective not yet resolved, contributes its partial result
(its own lanes' sum, maximum, rows, ...) and stops; once every chunk has, ``prim.combine`` joins the partials and
the function runs again from the start, each collective already resolved now returning its full result. So a
function with k collectives over the axis runs k + 1 times per chunk (the work before each collective is
recomputed rather than stored: memory stays that of one chunk), and results do not depend on the chunking. A
collective over the chunked axis inside a loop, cond or custom rule's body would need every chunk at every step:
that raises ``ChunkedCollectiveError`` (inside a ``jit`` the body is evaluated inline instead).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import ShapedArray, Trace, Tracer, _state, aval_of, current_trace, set_trace
from funclib.errors import ConcretizationError, FunclibError
from funclib.jaxpr import eval_jaxpr, trace_to_jaxpr
from funclib.primitives.collectives import binds_collective
from funclib.primitives.shape import broadcast_in_dim, concatenate, moveaxis, slice_

from ._api_util import as_tensor_leaf, broadcast_prefix, leaf_labels

not_mapped = None


class ChunkedCollectiveError(FunclibError, ValueError):
    """A collective over a vmap axis run in chunks, where the chunks cannot take turns (see the module doc)."""


class NamedAxis:
    """A named vmap axis: its name, its full size and, when vmap runs it in chunks, their shared ``Chunks``."""

    __slots__ = ("name", "size", "chunks")

    def __init__(self, name, size: int, chunks: Chunks | None = None):
        self.name = name
        self.size = size
        self.chunks = chunks


class _ChunkStop(BaseException):
    # a BaseException, so that a user's ``except Exception`` inside the function cannot swallow it
    def __init__(self, chunks):
        self.chunks = chunks


class Chunks:
    """The collectives over one chunked axis, resolved in program order across the runs of its chunks."""

    def __init__(self, name):
        self.name = name
        self.results: list = []  # the full outputs of the collectives resolved so far
        self.keys: list = []  # what each was (primitive, params, per-lane operand types), to check every run
        self.pending = None  # (key, prim, params) of the collective being resolved in this run
        self.partials: list = []  # its partial outputs, one list per chunk
        self.seen = 0  # collectives over the axis met by the chunk running now

    def meet(self, prim, params, key_avals, local):
        """The full outputs of this collective if resolved, else record the chunk's partial ones and stop it."""
        key = (prim.name, tuple(sorted(params.items())), key_avals)
        k = self.seen
        self.seen += 1
        if k < len(self.results):
            if key != self.keys[k]:
                raise self._differs(k, key, self.keys[k])
            return self.results[k]
        if self.pending is None:
            self.pending = (key, prim, params)
        elif key != self.pending[0]:
            raise self._differs(k, key, self.pending[0])
        self.partials.append(local)
        raise _ChunkStop(self)

    def resolve(self, n_chunks: int):
        key, prim, params = self.pending
        if len(self.partials) != n_chunks:
            raise ChunkedCollectiveError(
                f"vmap over {self.name!r} in chunks: {len(self.partials)} of {n_chunks} chunks reached {prim.name} "
                f"#{len(self.results)} and the others finished without it; the function must bind the same "
                "collectives in the same order for every chunk (no Python side effects that change what runs)"
            )
        outs = prim.combine(self.partials)
        rest = tuple(n for n in params["axes"] if n != self.name)
        if rest:
            outs = prim.bind(*outs, **{**params, "axes": rest})
        self.results.append(list(outs))
        self.keys.append(key)
        self.pending, self.partials = None, []

    def _differs(self, k, got, want):
        return ChunkedCollectiveError(
            f"vmap over {self.name!r} in chunks: collective #{k} over the axis is {got[0]}{list(got[2])} in one run "
            f"and {want[0]}{list(want[2])} in another; the function must bind the same collectives in the same "
            "order every time it runs (it runs once per collective, see fl.vmap's chunk_size)"
        )


class BatchTracer(Tracer):
    __slots__ = ("val", "bdim")

    @property
    def aval(self) -> ShapedArray:
        a = aval_of(self.val)
        return ShapedArray(a.shape[: self.bdim] + a.shape[self.bdim + 1 :], a.dtype)

    @property
    def dtype(self):
        return self.val.dtype

    @property
    def device(self) -> str:
        return self.val.device

    @property
    def shape(self):
        s = self.val.shape
        return s[: self.bdim] + s[self.bdim + 1 :]


class BatchTrace(Trace):
    def __init__(self, parent, axis_size: int, axis: NamedAxis | None = None, *, offset: int = 0, root: bool = False):
        self.parent = parent
        self.axis_size = axis_size  # the lanes this trace carries (a chunk's, when vmap runs in chunks)
        self.axis = axis
        self.axis_name = None if axis is None else axis.name
        self.offset = offset  # the index of this trace's first lane along the named axis
        self.root = root  # the trace a chunked vmap runs its function in (collectives resolve across chunks here)
        self.name = "vmap"

    def new(self, val, bdim) -> BatchTracer:
        t = BatchTracer.__new__(BatchTracer)
        t._trace = self
        t.val = val
        t.bdim = bdim
        return t

    def concretize(self, tracer, what):
        raise ConcretizationError(
            f"Cannot convert a batched value ({tracer.aval.str_short()} per lane, batch axis {tracer.bdim}) to "
            f"{what} inside vmap: each lane may need a different answer. Use fl.where(cond, a, b) or "
            "fl.cond for data-dependent choices. (Python control flow on values that are not batched still works.)"
        )

    def process(self, prim, args, params):
        if getattr(prim, "collective", False):
            return self._collective(prim, args, params)
        vals = []
        dims = []
        batched = False
        for a in args:
            if type(a) is BatchTracer and a._trace is self:
                vals.append(a.val)
                dims.append(a.bdim)
                batched = True
            else:
                vals.append(a)
                dims.append(None)
        named = getattr(prim, "batch_named", False)
        if named and self.axis is not None:
            body_binds = binds_collective(list(params.values()), self.axis_name)
            if body_binds and (not batched or self.axis.chunks is not None) and prim.name == "jit":
                # the body's collectives must reach this trace (to see its lanes, or to be resolved across
                # chunks), so it is evaluated inline instead of batched as a unit
                j = params["jaxpr"]
                return eval_jaxpr(j, j.cache.get("consts", []) if j.constvars else [], *args)
            batched = batched or body_binds
        if not batched:
            return self.bind_parent(prim, vals, params)
        rule = prim.vmap or prim.rule("vmap")
        # written out, not `with set_trace`: once per batched operation (set_trace measured 2-8% slower on an eager
        # vmap(grad))
        prev = _state.trace
        _state.trace = self.parent
        try:
            if named:
                out, out_dim = rule(vals, dims, axis=self.axis, lanes=self.axis_size, **params)
            else:
                out, out_dim = rule(vals, dims, **params)
        finally:
            _state.trace = prev
        if prim.multiple_results:
            return [o if d is None else self.new(o, d) for o, d in zip(out, out_dim)]
        return out if out_dim is None else self.new(out, out_dim)

    def _collective(self, prim, args, params):
        vals = [a.val if type(a) is BatchTracer and a._trace is self else a for a in args]
        dims = [a.bdim if type(a) is BatchTracer and a._trace is self else None for a in args]
        names = params["axes"]
        if self.axis_name is None or self.axis_name not in names:
            # another axis: apply it lane by lane, passing the batched values through to the enclosing traces
            if getattr(prim, "lane_inputs", None) is not None:
                vals, dims = prim.lane_inputs(vals, dims)
            out = self.bind_parent(prim, vals, params)
            return [o if d is None else self.new(o, d) for o, d in zip(out, prim.lane_dims(dims))]
        chunks = self.axis.chunks
        if chunks is not None and not self.root:
            raise ChunkedCollectiveError(
                f"{prim.name} over axis {self.axis_name!r} inside a loop, cond or custom_jvp/custom_vjp body, under "
                f"a vmap that runs that axis in chunks (chunk_size or max_bytes): the body needs every chunk at once. "
                "Remove chunk_size/max_bytes from that vmap, or move the collective out of the loop or rule."
            )
        rest = tuple(n for n in names if n != self.axis_name)
        with set_trace(self.parent):
            out, out_dims = prim.rule("vmap")(
                vals, dims, lanes=self.axis_size, offset=self.offset, size=self.axis.size, **params
            )
            if chunks is not None and all(d is None for d in out_dims):
                key_avals = tuple(a.aval.str_short() if isinstance(a, Tracer) else aval_of(a).str_short() for a in args)
                out = chunks.meet(prim, params, key_avals, out)
            elif rest:
                out = prim.bind(*out, **{**params, "axes": rest})
        return [o if d is None else self.new(o, d) for o, d in zip(out, out_dims)]


def _broadcast_prefix(prefix, tree, what: str):
    """Expand an axes spec that is a pytree prefix of ``tree`` into one entry per leaf of ``tree``."""
    try:
        return broadcast_prefix(prefix, tree)
    except ValueError as e:
        raise ValueError(
            f"vmap: {what} {prefix!r} is not a pytree prefix of the arguments: {e}\n"
            f"  {what}: {tree_util.structure(prefix, is_leaf=lambda x: x is None)}\n"
            f"  arguments: {tree_util.structure(tree)}"
        ) from None


def vmap(
    fun: Callable,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Any = None,
    axis_size: int | None = None,
    chunk_size: int | None = None,
    max_bytes: int | None = None,
) -> Callable:
    """Vectorize ``fun`` over a batch axis of its arguments.

    Args:
      fun: a function of pytrees of tensors.
      in_axes: int, None, or a pytree prefix of the positional arguments giving each leaf's batch axis
        (negative ints count from the end; None: not mapped). Default 0.
      out_axes: the same for the outputs. Default 0.
      axis_name: a name for the batch axis, used by collectives (``fl.psum(x, name)``, ...).
      axis_size: the batch size; required when nothing is mapped.
      chunk_size: run the batch in chunks of at most this many lanes, bounding peak memory.
      max_bytes: pick the chunk size so that the intermediates of one chunk stay under this many bytes
        (per-lane memory is estimated from the jaxpr of one lane). Results do not depend on the chunking:
        collectives over ``axis_name`` combine every chunk's part, at the price of running the function once
        more per such collective (the work before each is recomputed, not stored).

    Keyword arguments are always mapped over axis 0.

    >>> fl.vmap(lambda x: x.sum())(fl.ones((3, 4)))
    Tensor([4., 4., 4.], dtype=float32)
    """
    check_callable(fun, "vmap")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be a positive int, got {chunk_size!r}")
    if axis_name is not None:
        try:
            hash(axis_name)
        except TypeError:
            raise TypeError(f"vmap: axis_name must be hashable (e.g. a string), got {axis_name!r}") from None
        if isinstance(axis_name, tuple):
            raise TypeError(
                f"vmap: axis_name must be one name, got the tuple {axis_name!r}; nest vmaps to name several axes "
                "(collectives take a tuple of names)"
            )

    def batched(*args, **kwargs):
        leaves, in_tree = tree_util.flatten((args, kwargs))
        pos_axes = in_axes
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(
                f"vmap: in_axes has {len(in_axes)} entries but the function got {len(args)} positional arguments"
            )
        spec = (pos_axes, tree_util.map(lambda _: 0, kwargs))
        axes = _broadcast_prefix(spec, (args, kwargs), "in_axes")
        leaves = [as_tensor_leaf(x, "vmap") if ax is not None else x for x, ax in zip(leaves, axes)]
        norm = []
        sizes = {}
        for i, (x, ax) in enumerate(zip(leaves, axes)):
            if ax is None:
                norm.append(None)
                continue
            if not isinstance(ax, int):
                raise TypeError(f"vmap: in_axes entries must be int or None, got {ax!r}")
            nd = len(x.shape)
            if not -nd <= ax < nd:
                label = _labels(fun, args, kwargs)[i]
                raise ValueError(f"vmap: in_axes={ax} is out of range for argument {label} of shape {tuple(x.shape)}")
            ax %= nd
            norm.append(ax)
            sizes.setdefault(x.shape[ax], []).append(i)
        if len(sizes) > 1:
            labels = _labels(fun, args, kwargs)
            detail = ", ".join(f"size {s} for {', '.join(labels[i] for i in ls)}" for s, ls in sizes.items())
            raise ValueError(f"vmap: mapped axes have different sizes: {detail}. Each mapped axis must share one size.")
        if not sizes:
            if axis_size is None:
                raise ValueError("vmap: no argument is mapped (all in_axes are None); pass axis_size=")
            size = axis_size
        else:
            size = next(iter(sizes))
            if axis_size is not None and axis_size != size:
                raise ValueError(f"vmap: axis_size={axis_size} but the mapped axes have size {size}")
        if isinstance(axis_name, NamedAxis):
            # a batching rule vectorizing a body again, inside an existing named axis (chunked or not)
            return _vmap_flat(fun, leaves, norm, in_tree, size, out_axes, axis_name)
        chunk = chunk_size
        if max_bytes is not None:
            per_lane = lane_bytes(fun, leaves, norm, in_tree, None if axis_name is None else NamedAxis(axis_name, size))
            chunk = max(1, int(max_bytes) // max(per_lane, 1))
            if chunk_size is not None:
                chunk = min(chunk, chunk_size)
        if chunk is not None and size > chunk:
            return _chunked(fun, leaves, norm, in_tree, size, chunk, out_axes, axis_name)
        axis = None if axis_name is None else NamedAxis(axis_name, size)
        return _vmap_flat(fun, leaves, norm, in_tree, size, out_axes, axis)

    batched.__name__ = f"vmap({getattr(fun, '__name__', 'fun')})"
    batched.__doc__ = getattr(fun, "__doc__", None)
    batched.__wrapped__ = fun
    return batched


class _AxisFrame(Trace):
    """Makes a named axis visible (``axis_size_of``) while one lane is traced, without batching anything."""

    def __init__(self, parent, axis: NamedAxis):
        self.parent = parent
        self.axis = axis
        self.name = "vmap"

    def process(self, prim, args, params):
        return self.bind_parent(prim, args, params)


def lane_bytes(fun, leaves, axes, in_tree, axis: NamedAxis | None = None) -> int:
    """Bytes of every intermediate of one lane of ``fun`` (an upper bound on its live memory)."""

    mapped = [i for i, ax in enumerate(axes) if ax is not None]
    avals = []
    for i in mapped:
        a, ax = aval_of(leaves[i]), axes[i]
        avals.append(ShapedArray(a.shape[:ax] + a.shape[ax + 1 :], a.dtype))

    def one(*xs):
        full = list(leaves)
        for i, x in zip(mapped, xs):
            full[i] = x
        args, kwargs = tree_util.unflatten(in_tree, full)
        return [as_tensor_leaf(o, "vmap output") for o in tree_util.leaves(fun(*args, **kwargs))]

    # collectives over the named axis are staged, like any primitive
    with set_trace(_state.trace if axis is None else _AxisFrame(_state.trace, axis)):
        jaxpr, _, _ = trace_to_jaxpr(one, avals, name="vmap(max_bytes)")
    total = 0
    for eqn in jaxpr.eqns:
        for v in eqn.outputs:
            total += v.aval.size * v.aval.dtype.itemsize
    return total


def _vmap_flat(fun, leaves, axes, in_tree, size, out_axes, axis, offset=0, root=False):
    trace = BatchTrace(_state.trace, size, axis, offset=offset, root=root)
    ins = [x if ax is None else trace.new(x, ax) for x, ax in zip(leaves, axes)]
    args, kwargs = tree_util.unflatten(in_tree, ins)
    with set_trace(trace):
        out = fun(*args, **kwargs)
    o_leaves, o_tree = tree_util.flatten(out)
    oaxes = _broadcast_out_axes(out_axes, out)
    res = []
    for i, (o, oa) in enumerate(zip(o_leaves, oaxes)):
        if type(o) is BatchTracer and o._trace is trace:
            val, bd = o.val, o.bdim
        else:
            val, bd = as_tensor_leaf(o, "vmap output"), None
        if oa is None:
            if bd is not None:
                raise ValueError(
                    f"vmap: out_axes is None for output leaf {i}, but that output depends on the mapped axis; "
                    "give it an int out_axes"
                )
            res.append(val)
            continue
        nd = val.ndim + (1 if bd is None else 0)
        if not -nd <= oa < nd:
            raise ValueError(f"vmap: out_axes={oa} out of range for output leaf {i} of rank {nd - 1}")
        oa %= nd
        if bd is None:
            shape = tuple(val.shape[:oa]) + (size,) + tuple(val.shape[oa:])
            dims = tuple(d for d in range(nd) if d != oa)
            res.append(broadcast_in_dim(val, shape, dims))
        else:
            res.append(moveaxis(val, bd, oa))
    return tree_util.unflatten(o_tree, res)


def _broadcast_out_axes(out_axes, out):
    if isinstance(out_axes, list):
        out_axes = tuple(out_axes)
    try:
        return broadcast_prefix(out_axes, out)
    except ValueError as e:
        raise ValueError(
            f"vmap: out_axes {out_axes!r} is not a pytree prefix of the outputs: {e}\n"
            f"  outputs: {tree_util.structure(out)}"
        ) from None


def _chunked(fun, leaves, axes, in_tree, size, chunk, out_axes, axis_name):
    chunks = None if axis_name is None else Chunks(axis_name)
    axis = None if axis_name is None else NamedAxis(axis_name, size, chunks)
    starts = range(0, size, chunk)
    while True:  # one run per collective over the axis, plus the last one, which finishes every chunk
        pieces = []
        for start in starts:
            stop = min(start + chunk, size)
            part = []
            for x, ax in zip(leaves, axes):
                if ax is None:
                    part.append(x)
                    continue
                lo = [0] * x.ndim
                hi = list(x.shape)
                lo[ax], hi[ax] = start, stop
                part.append(slice_(x, lo, hi))
            if chunks is not None:
                chunks.seen = 0
            try:
                pieces.append(
                    _vmap_flat(fun, part, axes, in_tree, stop - start, out_axes, axis, offset=start, root=True)
                )
            except _ChunkStop as e:
                if e.chunks is not chunks:
                    raise
        if chunks is None or chunks.pending is None:
            break
        chunks.resolve(len(starts))
    flat = [tree_util.flatten(p) for p in pieces]
    o_tree = flat[0][1]
    oaxes = _broadcast_out_axes(out_axes, pieces[0])
    res = []
    for j, oa in enumerate(oaxes):
        parts = [f[0][j] for f in flat]
        if oa is None:
            res.append(parts[0])
        else:
            nd = parts[0].ndim
            res.append(concatenate(parts, oa % nd))
    return tree_util.unflatten(o_tree, res)


def batch_size_of(trace: BatchTrace) -> int:
    return trace.axis_size


def _labels(fun, args, kwargs) -> list[str]:
    """Labels of the leaves of ``(args, kwargs)`` in flattening order (keywords sorted, as dicts flatten)."""
    return leaf_labels(fun, args, range(len(args)), kwargs, sorted(kwargs))


def named_axes() -> tuple:
    """(name, size) of every named vmap axis the current call is inside, innermost first."""
    out = []
    t = current_trace()
    while t is not None:
        axis = getattr(t, "axis", None)
        if axis is not None and axis.name is not None:
            out.append((axis.name, axis.size))
        t = t.parent
    return tuple(out)
