"""The description of a generated loop (``LoopSpec`` and its steps): pure data, what ``loopgen`` turns into code.

Value ids number the constants, the carry, the per-iteration slices and then every step's outputs, in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import fusion


@dataclass(frozen=True)
class Value:
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Reduction:
    kind: str  # "sum" | "max" | "min"
    op: int  # index of the reduced op
    axes: tuple[int, ...]  # axes of the region's shape, sorted
    out: int  # value id


@dataclass(frozen=True)
class Elementwise:
    """A fused region: scalar ops (``fusion.OpSpec``, ``("in", k)`` meaning ``inputs[k]``) over ``shape``."""

    inputs: tuple[int, ...]
    ops: tuple[fusion.OpSpec, ...]
    outputs: tuple[tuple[int, int], ...]  # (op index, value id) stored at the full shape
    shape: tuple[int, ...]
    reduction: Reduction | None = None


@dataclass(frozen=True)
class Dot:
    lhs: int
    rhs: int
    out: int
    contract: tuple[tuple[int, ...], tuple[int, ...]]
    batch: tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Transpose:
    src: int
    out: int
    perm: tuple[int, ...]


@dataclass(frozen=True)
class Reshape:
    src: int
    out: int


@dataclass(frozen=True)
class Broadcast:
    src: int
    out: int
    dims: tuple[int, ...]  # broadcast_in_dim's broadcast_dimensions


@dataclass(frozen=True)
class Slice:
    src: int
    out: int
    start: tuple[int, ...]
    limit: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Rev:
    src: int
    out: int
    dims: tuple[int, ...]


@dataclass(frozen=True)
class Concat:
    srcs: tuple[int, ...]
    out: int
    axis: int


@dataclass(frozen=True)
class DynamicSlice:
    """``dynamic_slice``: ``out = src[start[0] : start[0] + out.shape[0], ...]``, starts clamped into range."""

    src: int
    starts: tuple[int, ...]  # value ids of the 0-d integer starts
    out: int


@dataclass(frozen=True)
class DynamicUpdateSlice:
    """``dynamic_update_slice``: a copy of ``src`` with ``update`` written at the (clamped) starts."""

    src: int
    update: int
    starts: tuple[int, ...]
    out: int


@dataclass(frozen=True)
class Pad:
    """``pad`` with non-negative edge padding: ``out`` filled with ``value``, ``src`` written every
    ``interior + 1`` elements from ``lo`` on each axis."""

    src: int
    value: int
    out: int
    config: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class Gather:
    """``gather``: ``out[b..., r...]`` is ``src`` at the index tuple ``idx[b..., :]`` on ``axes`` and at ``r`` on
    the other axes; a negative index counts from the end and one out of range raises, as NumPy's indexing does."""

    src: int
    idx: int
    out: int
    axes: tuple[int, ...]


@dataclass(frozen=True)
class ScatterAdd:
    """``scatter_add``: a copy of ``src`` with ``upd[b..., r...]`` added where ``Gather`` would read it, in index
    order (repeated indices add up, as ``np.add.at``)."""

    src: int
    idx: int
    upd: int
    out: int
    axes: tuple[int, ...]


@dataclass(frozen=True)
class Branch:
    steps: tuple
    results: tuple[int, ...]  # value id of each branch output


@dataclass(frozen=True)
class Switch:
    """``cond``: the steps of the branch the (clamped) ``index`` selects, its results copied into ``outs``. The
    branches' values are numbered with the enclosing loop's; a branch reads its operands as those values."""

    index: int
    operands: tuple[int, ...]
    branches: tuple[Branch, ...]
    outs: tuple[int, ...]


@dataclass(frozen=True)
class Loop:
    """A loop inside a loop body: ``spec`` numbered on its own, its constants, initial carry and scanned inputs
    being values of the enclosing body; ``outs`` the final carry, then the stacked outputs. ``length`` is the trip
    count (a while loop's limit)."""

    spec: LoopSpec
    consts: tuple[int, ...]
    init: tuple[int, ...]
    xs: tuple[int, ...]
    outs: tuple[int, ...]
    length: int


@dataclass(frozen=True)
class LoopSpec:
    """Values ``0 .. n_consts+n_carry+n_xs-1`` are the constants, the carry and the per-iteration slices.

    A ``while`` loop has no scanned inputs or stacked outputs and a predicate: its first ``n_cond_steps`` steps
    compute the boolean value ``cond`` from the carry, and the loop stops (before the remaining steps run) when it
    is false, or after ``length`` iterations.
    """

    values: tuple[Value, ...]
    n_consts: int
    n_carry: int
    n_xs: int
    steps: tuple
    carry_out: tuple[int, ...]  # value id of each new carry
    ys: tuple[int, ...]  # value id of each per-iteration output
    reverse: bool
    cond: int | None = None
    n_cond_steps: int = 0
