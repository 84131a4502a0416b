"""``vmap``: vectorizing map. A ``BatchTrace`` carries each value with its batch axis (or ``None``: not mapped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import ShapedArray, Trace, Tracer, _state, aval_of
from funclib.errors import ConcretizationError
from funclib.primitives._util import moveaxis
from funclib.primitives.shape import broadcast_in_dim, concatenate, slice_

from ._api_util import as_tensor_leaf, broadcast_prefix

not_mapped = None


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
    def shape(self):
        s = self.val.shape
        return s[: self.bdim] + s[self.bdim + 1 :]


class BatchTrace(Trace):
    def __init__(self, parent, axis_size: int, axis_name=None):
        self.parent = parent
        self.axis_size = axis_size
        self.axis_name = axis_name
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
        if not batched:
            return self.bind_parent(prim, vals, params)
        rule = prim.vmap or prim.rule("vmap")
        prev = _state.trace
        _state.trace = self.parent
        try:
            out, out_dim = rule(vals, dims, **params)
        finally:
            _state.trace = prev
        if prim.multiple_results:
            return [o if d is None else self.new(o, d) for o, d in zip(out, out_dim)]
        return out if out_dim is None else self.new(out, out_dim)

    def _collective(self, prim, args, params):
        vals = [a.val if type(a) is BatchTracer and a._trace is self else a for a in args]
        dims = [a.bdim if type(a) is BatchTracer and a._trace is self else None for a in args]
        if params.get("axis_name") != self.axis_name:
            # another axis: apply it lane-wise by passing the batched values through to the enclosing traces
            out = self.bind_parent(prim, vals, params)
            d = next((d for d in dims if d is not None), None)
            if d is None:
                return out
            return self.new(out, d) if not prim.multiple_results else [self.new(o, d) for o in out]
        prev = _state.trace
        _state.trace = self.parent
        try:
            params = {**params, "axis_size": self.axis_size}
            out, out_dim = prim.rule("vmap")(vals, dims, **params)
        finally:
            _state.trace = prev
        return out if out_dim is None else self.new(out, out_dim)


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
        (per-lane memory is estimated from the jaxpr of one lane). Results do not depend on the chunking.

    Keyword arguments are always mapped over axis 0.

    >>> fl.vmap(lambda x: x.sum())(fl.ones((3, 4)))
    Tensor([4., 4., 4.], dtype=float32)
    """
    check_callable(fun, "vmap")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be a positive int, got {chunk_size!r}")

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
                raise ValueError(f"vmap: in_axes={ax} is out of range for argument leaf {i} of shape {tuple(x.shape)}")
            ax %= nd
            norm.append(ax)
            sizes.setdefault(x.shape[ax], []).append(i)
        if len(sizes) > 1:
            detail = ", ".join(f"size {s} for leaves {ls}" for s, ls in sizes.items())
            raise ValueError(f"vmap: mapped axes have different sizes: {detail}. Each mapped axis must share one size.")
        if not sizes:
            if axis_size is None:
                raise ValueError("vmap: no argument is mapped (all in_axes are None); pass axis_size=")
            size = axis_size
        else:
            size = next(iter(sizes))
            if axis_size is not None and axis_size != size:
                raise ValueError(f"vmap: axis_size={axis_size} but the mapped axes have size {size}")
        chunk = chunk_size
        if max_bytes is not None:
            per_lane = lane_bytes(fun, leaves, norm, in_tree)
            chunk = max(1, int(max_bytes) // max(per_lane, 1))
            if chunk_size is not None:
                chunk = min(chunk, chunk_size)
        if chunk is not None and size > chunk:
            return _chunked(fun, leaves, norm, in_tree, size, chunk, out_axes, axis_name)
        return _vmap_flat(fun, leaves, norm, in_tree, size, out_axes, axis_name)

    batched.__name__ = f"vmap({getattr(fun, '__name__', 'fun')})"
    batched.__doc__ = getattr(fun, "__doc__", None)
    batched.__wrapped__ = fun
    return batched


def lane_bytes(fun, leaves, axes, in_tree) -> int:
    """Bytes of every intermediate of one lane of ``fun`` (an upper bound on its live memory)."""
    from funclib.jaxpr import trace_to_jaxpr

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

    jaxpr, _, _ = trace_to_jaxpr(one, avals, name="vmap(max_bytes)")
    total = 0
    for eqn in jaxpr.eqns:
        for v in eqn.outputs:
            total += v.aval.size * v.aval.dtype.itemsize
    return total


def _vmap_flat(fun, leaves, axes, in_tree, size, out_axes, axis_name):
    trace = BatchTrace(_state.trace, size, axis_name)
    ins = [x if ax is None else trace.new(x, ax) for x, ax in zip(leaves, axes)]
    args, kwargs = tree_util.unflatten(in_tree, ins)
    prev = _state.trace
    _state.trace = trace
    try:
        out = fun(*args, **kwargs)
    finally:
        _state.trace = prev
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
    pieces = []
    for start in range(0, size, chunk):
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
        pieces.append(_vmap_flat(fun, part, axes, in_tree, stop - start, out_axes, axis_name))
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
