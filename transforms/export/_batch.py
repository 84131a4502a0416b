"""One symbolic batch dimension: the function traced at several batch sizes, the encodings merged.

Every integer that differs between the traces (a dimension, a ``reshape`` size, the count a mean divides by) must
be ``a * batch + c`` and is saved as ``{"b": [a, c]}``; constants must be equal or fills of one value. Anything
else depends on the batch size in a way a saved program cannot express, and is an error at export.

>>> merge([{"shape": [8, 3]}, {"shape": [9, 3]}, {"shape": [11, 3]}], [8, 9, 11], [])
{'shape': [{'b': [1, 0]}, 3]}
"""

from __future__ import annotations

import numpy as np

from funclib import tree as tree_util
from funclib.core import ShapedArray, aval_of

from .._api_util import broadcast_prefix
from ._codec import Encoder, ExportError


def merge(vals: list, sizes: list[int], where: list):
    a = vals[0]
    if all(v == a and type(v) is type(a) for v in vals[1:]):
        return a
    if all(type(v) is int for v in vals):
        return _fit(vals, sizes, where)
    if all(type(v) is dict for v in vals) and all(v.keys() == a.keys() for v in vals):
        if a.keys() == {"f"}:
            nums = [float.fromhex(v["f"]) for v in vals]
            if not all(x == int(x) for x in nums):
                raise ExportError(
                    f"fl.export: the value {nums[0]!r} (at {_where(where)}, batch size {sizes[0]}; {nums[1]!r} at "
                    f"batch size {sizes[1]}) depends on the batch size but is not an integer linear in it (e.g. "
                    "the unbiased variance factor n/(n-1) of a BatchNorm in training mode); export with a fixed "
                    "batch size (no batch_axes)"
                )
            return {**_fit([int(x) for x in nums], sizes, where), "float": True}
        return {k: merge([v[k] for v in vals], sizes, where + [k]) for k in a}
    if all(type(v) is list for v in vals) and all(len(v) == len(a) for v in vals):
        if where[-2:-1] == ["eqns"] and a and type(a[0]) is str:
            where = where + [f"({a[0]})"]
        return [merge([v[i] for v in vals], sizes, where + [i]) for i in range(len(a))]
    raise ExportError(
        f"fl.export: the program's structure depends on the batch size (at {_where(where)}: {vals[0]!r:.60} at "
        f"batch {sizes[0]}, {vals[1]!r:.60} at batch {sizes[1]}); export without batch_axes (a fixed shape)"
    )


def _fit(vals: list[int], sizes: list[int], where: list) -> dict:
    a = (vals[1] - vals[0]) // (sizes[1] - sizes[0])
    c = vals[0] - a * sizes[0]
    if any(a * s + c != v for v, s in zip(vals, sizes)):
        raise ExportError(
            f"fl.export: a value of the program changes with the batch size but not linearly (at {_where(where)}: "
            f"{vals} at batch sizes {sizes}); export without batch_axes (a fixed shape)"
        )
    return {"b": [a, c]}


def _where(path: list) -> str:
    out = []
    it = iter(path)
    for p in it:
        if p == "eqns":
            i = next(it, None)
            out.append(f"equation {i}")
        elif p == "vars":
            out.append(f"variable {next(it, '?')}")
        elif isinstance(p, str) and p.startswith("("):
            out[-1] += f" {p}"
        elif isinstance(p, str) and (p in ("lit", "aval", "consts", "in", "out", "jaxpr", "closed") or
                                     p.startswith("constant")):
            out.append(p)
        elif isinstance(p, str) and p not in ("t", "d", "f", "s", "c", "b", "dtype", "array", "pool"):
            out.append(f"parameter {p!r}")
    return " / ".join(out) or "the program"


def merge_pools(pools: list[list[np.ndarray]], sizes: list[int], where: str) -> tuple[dict, dict]:
    """Constants must be the same at every batch size, or be filled with one value (zeros of a batch shape).
    Returns ``(arrays, fills)`` by pool index."""
    if len({len(p) for p in pools}) != 1:
        raise ExportError(f"fl.export: {where} captures a different number of constants at different batch sizes")
    arrays, fills = {}, {}
    for k, arrs in enumerate(zip(*pools)):
        a0 = arrs[0]
        if all(a is a0 or (a.shape == a0.shape and a.dtype == a0.dtype and np.array_equal(a, a0)) for a in arrs):
            arrays[k] = a0
            continue
        first = [a.reshape(-1)[0] for a in arrs if a.size]
        uniform = (
            len(first) == len(arrs)
            and all(a.dtype == a0.dtype and a.ndim == a0.ndim and np.all(a == f) for a, f in zip(arrs, first))
            and all(f == first[0] for f in first)
        )
        if not uniform:
            raise ExportError(
                f"fl.export: {where} captures a constant whose value depends on the batch size (constant {k}: "
                f"{aval_of(arrs[0]).str_short()} at batch {sizes[0]}, {aval_of(arrs[1]).str_short()} at batch "
                f"{sizes[1]}); compute it inside the function from its arguments, or export without batch_axes"
            )
        shape = merge([list(a.shape) for a in arrs], sizes, [f"constant {k}"])
        fills[str(k)] = {"fill": Encoder(where).scalar(first[0].item()), "shape": shape, "dtype": a0.dtype.name}
    return arrays, fills


def with_batch(a: ShapedArray, axis: int | None, size: int) -> ShapedArray:
    if axis is None:
        return a
    shape = list(a.shape)
    shape[axis] = size
    return ShapedArray(tuple(shape), a.dtype)


def batch_leaves(batch_axes, args, dyn_args, kwargs, jitted, leaves) -> dict[int, int]:
    if isinstance(batch_axes, list):
        batch_axes = tuple(batch_axes)
    if isinstance(batch_axes, tuple):
        if len(batch_axes) != len(args):
            raise ValueError(
                f"fl.export: batch_axes has {len(batch_axes)} entries but the function got {len(args)} positional "
                "arguments"
            )
        if any(batch_axes[i] is not None for i in jitted.static_argnums):
            raise ValueError("fl.export: static arguments cannot have a batch axis (give them None)")
        pos = tuple(a for i, a in enumerate(batch_axes) if i not in jitted.static_argnums)
    else:
        pos = batch_axes
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in jitted.static_argnames}
    try:
        per_leaf = broadcast_prefix((pos, tree_util.map(lambda _: None, dyn_kwargs)), (dyn_args, dyn_kwargs))
    except ValueError as e:
        raise ValueError(f"fl.export: batch_axes {batch_axes!r} is not a pytree prefix of the arguments: {e}") from None
    out = {}
    for i, (x, ax) in enumerate(zip(leaves, per_leaf)):
        if ax is None:
            continue
        if type(ax) is not int:
            raise TypeError(f"fl.export: batch_axes entries must be int or None, got {ax!r}")
        nd = len(x.shape)
        if not -nd <= ax < nd:
            raise ValueError(f"fl.export: batch axis {ax} is out of range for argument leaf {i} of shape {x.shape}")
        out[i] = ax % nd
    sizes = {x.shape[ax] for i, ax in out.items() for x in [leaves[i]]}
    if len(sizes) > 1:
        raise ValueError(f"fl.export: the batch axes have different sizes {sorted(sizes)}; they must share one")
    return out
