"""Array API manipulation functions and the research staples built from shape primitives."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import dtypes
from ..checks import check_choice, check_int, check_shape, describe
from ..core import Tensor, _wrap
from ..errors import ShapeError
from ..namespace import public, tensor_method
from ..primitives import shape as S
from ..primitives._util import broadcast_shapes, normalize_axis
from ..primitives.elementwise import _to_tensor, convert
from .indexing import take
from .searching import require_concrete


def _t(x, op):
    return _to_tensor(x, op)


@public
def reshape(x, /, shape: Sequence[int], *, copy: bool | None = None) -> Tensor:
    """Reshape (C order); one entry may be -1.

    >>> fl.reshape(fl.arange(6), (2, 3)).shape
    (2, 3)
    """
    if copy is False:
        pass  # tensors are immutable, so a view and a copy are indistinguishable
    return S.reshape(_t(x, "reshape"), check_shape(shape, "reshape", allow_unknown=True))


@public
def broadcast_to(x, /, shape: Sequence[int]) -> Tensor:
    """Broadcast ``x`` to ``shape`` (NumPy rules)."""
    return S.broadcast_to(_t(x, "broadcast_to"), tuple(shape))


@public
def broadcast_arrays(*arrays) -> list[Tensor]:
    """Broadcast tensors against each other."""
    arrays = [_t(a, "broadcast_arrays") for a in arrays]
    shape = broadcast_shapes(*[tuple(a.shape) for a in arrays], op="broadcast_arrays")
    return [S.broadcast_to(a, shape) for a in arrays]


@public(method=True)
def permute_dims(x, /, axes: Sequence[int]) -> Tensor:
    """Permute the axes of ``x``."""
    x = _t(x, "permute_dims")
    axes = tuple(normalize_axis(a, x.ndim, "permute_dims") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ShapeError(f"permute_dims: {axes} is not a permutation of range({x.ndim})")
    return S.transpose(x, axes)


@public
def transpose(x, /, axes: Sequence[int] | None = None) -> Tensor:
    """Reverse (or permute) the axes."""
    x = _t(x, "transpose")
    return permute_dims(x, tuple(range(x.ndim))[::-1] if axes is None else axes)


@public(prop="mT")
def matrix_transpose(x, /) -> Tensor:
    """Swap the last two axes."""
    x = _t(x, "matrix_transpose")
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose: needs at least 2 dimensions, got shape {tuple(x.shape)}")
    perm = list(range(x.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return S.transpose(x, tuple(perm))


@public(method=True)
def moveaxis(x, source, destination, /) -> Tensor:
    """Move axes to new positions (others keep their order)."""
    x = _t(x, "moveaxis")
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of axes")
    src = [normalize_axis(a, x.ndim, "moveaxis") for a in src]
    dst = [normalize_axis(a, x.ndim, "moveaxis") for a in dst]
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return S.transpose(x, tuple(order))


@public(method=True)
def swapaxes(x, axis1: int, axis2: int, /) -> Tensor:
    x = _t(x, "swapaxes")
    perm = list(range(x.ndim))
    a, b = normalize_axis(axis1, x.ndim, "swapaxes"), normalize_axis(axis2, x.ndim, "swapaxes")
    perm[a], perm[b] = perm[b], perm[a]
    return S.transpose(x, tuple(perm))


@public(method=True)
def expand_dims(x, /, *, axis=0) -> Tensor:
    """Insert size-1 axes at ``axis`` (an int or tuple)."""
    x = _t(x, "expand_dims")
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = x.ndim + len(axes)
    norm = sorted(normalize_axis(a, nd, "expand_dims") for a in axes)
    if len(set(norm)) != len(norm):
        raise ValueError(f"expand_dims: repeated axis in {axis}")
    return S.expand_dims(x, norm)


@public
def squeeze(x, /, axis=None) -> Tensor:
    """Remove size-1 axes (all of them, or those in ``axis``)."""
    x = _t(x, "squeeze")
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = tuple(
            normalize_axis(a, x.ndim, "squeeze") for a in ((axis,) if isinstance(axis, int) else axis)
        )
    return S.squeeze(x, axes)


def _common(arrays, op):
    if isinstance(arrays, Tensor) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{op}: arrays must be a list or tuple of tensors, got {describe(arrays)}")
    arrays = [_t(a, op) for a in arrays]
    if not arrays:
        raise ValueError(f"{op}: needs at least one array")
    d = dtypes.result_type(*arrays)
    return [a if a.dtype == d else convert(a, d) for a in arrays]


@public
def concat(arrays, /, *, axis: int | None = 0) -> Tensor:
    """Join tensors along an existing axis (``axis=None`` flattens first).

    >>> fl.concat([fl.ones(2), fl.zeros(1)]).shape
    (3,)
    """
    arrays = _common(arrays, "concat")
    if axis is None:
        arrays = [S.reshape(a, (-1,)) for a in arrays]
        axis = 0
    nd = arrays[0].ndim
    if nd == 0:
        raise ShapeError("concat: zero-dimensional tensors cannot be concatenated; use stack")
    ax = normalize_axis(axis, nd, "concat")
    return S.concatenate(arrays, ax)


concatenate = public(concat, name="concatenate")


@public
def stack(arrays, /, *, axis: int = 0) -> Tensor:
    """Join tensors along a new axis."""
    arrays = _common(arrays, "stack")
    shape = tuple(arrays[0].shape)
    for a in arrays:
        if tuple(a.shape) != shape:
            raise ShapeError(
                f"stack: all tensors must have one shape, got {[tuple(b.shape) for b in arrays]}"
            )
    ax = normalize_axis(axis, len(shape) + 1, "stack")
    return S.concatenate([S.expand_dims(a, [ax]) for a in arrays], ax)


@public
def unstack(x, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    """Split along ``axis`` into a tuple of tensors without that axis."""
    x = _t(x, "unstack")
    ax = normalize_axis(axis, x.ndim, "unstack")
    out = []
    for i in range(x.shape[ax]):
        lo = [0] * x.ndim
        hi = list(x.shape)
        lo[ax], hi[ax] = i, i + 1
        out.append(S.squeeze(S.slice_(x, lo, hi), (ax,)))
    return tuple(out)


@public(method=True)
def flip(x, /, *, axis=None) -> Tensor:
    """Reverse the order of elements along ``axis`` (all axes by default)."""
    x = _t(x, "flip")
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = tuple(normalize_axis(a, x.ndim, "flip") for a in ((axis,) if isinstance(axis, int) else axis))
    return S.rev(x, axes) if axes else x


@public
def roll(x, /, shift, *, axis=None) -> Tensor:
    """Roll elements along ``axis`` (flattened when None)."""
    x = _t(x, "roll")
    if axis is None:
        return S.reshape(roll(S.reshape(x, (-1,)), shift, axis=0), tuple(x.shape))
    shifts = (shift,) if isinstance(shift, int) else tuple(shift)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if len(shifts) != len(axes):
        if len(shifts) == 1:
            shifts = shifts * len(axes)
        else:
            raise ValueError("roll: shift and axis must have the same length")
    for s, a in zip(shifts, axes):
        a = normalize_axis(a, x.ndim, "roll")
        n = x.shape[a]
        if n == 0:
            continue
        s %= n
        if s == 0:
            continue
        lo1, hi1 = [0] * x.ndim, list(x.shape)
        lo2, hi2 = [0] * x.ndim, list(x.shape)
        lo1[a], hi1[a] = n - s, n
        lo2[a], hi2[a] = 0, n - s
        x = S.concatenate([S.slice_(x, lo1, hi1), S.slice_(x, lo2, hi2)], a)
    return x


@public
def tile(x, repetitions, /) -> Tensor:
    """Repeat the whole tensor along each axis."""
    x = _t(x, "tile")
    reps = check_shape(repetitions, "tile", "repetitions")
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    x = S.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape))
    # broadcast to (r0, d0, r1, d1, ...) then merge pairs
    inter = []
    dims = []
    for i, (r, d) in enumerate(zip(reps, x.shape)):
        inter += [r, d]
        dims.append(2 * i + 1)
    y = S.broadcast_in_dim(x, tuple(inter), tuple(dims))
    return S.reshape(y, tuple(r * d for r, d in zip(reps, x.shape)))


@public(method=True)
def repeat(x, repeats, /, *, axis: int | None = None) -> Tensor:
    """Repeat each element ``repeats`` times along ``axis`` (flattened when None)."""
    x = _t(x, "repeat")
    if axis is None:
        x = S.reshape(x, (-1,))
        axis = 0
    ax = normalize_axis(axis, x.ndim, "repeat")
    if isinstance(repeats, Tensor):
        fix = "pass repeats as a Python int or list, which fixes the output shape."
        repeats = require_concrete(repeats, "repeat", fix)
        if repeats.ndim == 0:
            repeats = int(repeats)
        else:
            reps = np.asarray(repeats.numpy())
            if reps.ndim != 1 or len(reps) not in (1, x.shape[ax]) or (reps < 0).any():
                raise ValueError(
                    f"repeat: repeats must be non-negative counts, one or one per element of axis {ax} "
                    f"({x.shape[ax]}), got {reps.tolist()}"
                )
            idx = np.repeat(np.arange(x.shape[ax]), reps)
            return take(x, Tensor(idx), axis=ax)
    if isinstance(repeats, (list, tuple)):
        reps = check_shape(repeats, "repeat", "repeats")
        if len(reps) not in (1, x.shape[ax]):
            raise ValueError(
                f"repeat: repeats has {len(reps)} entries, but axis {ax} has {x.shape[ax]} elements (give one "
                "count, or one per element)"
            )
        idx = np.repeat(np.arange(x.shape[ax]), reps)
        return take(x, Tensor(idx), axis=ax)
    repeats = check_int(repeats, "repeat", "repeats", min=0)
    n = x.shape[ax]
    shape = list(x.shape)
    new = shape[: ax + 1] + [repeats] + shape[ax + 1 :]
    y = S.broadcast_in_dim(x, tuple(new), tuple(i if i <= ax else i + 1 for i in range(x.ndim)))
    shape[ax] = n * repeats
    return S.reshape(y, tuple(shape))


@public
def split(x, indices_or_sections, /, axis: int = 0) -> list[Tensor]:
    """Split into equal sections (an int) or at the given indices."""
    x = _t(x, "split")
    ax = normalize_axis(axis, x.ndim, "split")
    n = x.shape[ax]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0 or n % k:
            raise ValueError(f"split: axis of size {n} cannot be split into {k} equal sections")
        cuts = [i * (n // k) for i in range(1, k)]
    else:
        cuts = list(indices_or_sections)
    bounds = [0] + [min(max(c, 0), n) for c in cuts] + [n]
    out = []
    for lo_, hi_ in zip(bounds[:-1], bounds[1:]):
        lo, hi = [0] * x.ndim, list(x.shape)
        lo[ax], hi[ax] = lo_, max(hi_, lo_)
        out.append(S.slice_(x, lo, hi))
    return out


@public(method=True)
def ravel(x, /) -> Tensor:
    return S.reshape(_t(x, "ravel"), (-1,))


@public
def flatten(x, /, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge axes ``start_dim..end_dim`` (PyTorch's flatten)."""
    x = _t(x, "flatten")
    if x.ndim == 0:
        return S.reshape(x, (1,))
    a, b = normalize_axis(start_dim, x.ndim, "flatten"), normalize_axis(end_dim, x.ndim, "flatten")
    if a > b:
        raise ValueError(
            f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for a tensor of rank {x.ndim}"
        )
    shape = tuple(x.shape)
    return S.reshape(x, shape[:a] + (-1,) + shape[b + 1 :])


@public
def atleast_1d(x):
    x = _t(x, "atleast_1d")
    return S.reshape(x, (1,)) if x.ndim == 0 else x


@public
def atleast_2d(x):
    x = atleast_1d(x)
    return S.reshape(x, (1,) + tuple(x.shape)) if x.ndim == 1 else x


_NUMPY_PAD_MODES = ("edge", "linear_ramp", "maximum", "mean", "median", "minimum", "reflect", "symmetric", "wrap")


@public
def pad(x, pad_width, mode: str = "constant", constant_values=0) -> Tensor:
    """NumPy-style ``pad`` (constant mode): ``pad_width`` is an int, a pair, or a pair per axis."""
    x = _t(x, "pad")
    if mode in _NUMPY_PAD_MODES:
        raise NotImplementedError(f"pad: mode {mode!r} is not implemented yet; only 'constant' is")
    check_choice(mode, "pad", "mode", ("constant",))
    try:
        pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    except (ValueError, TypeError):
        raise ValueError(
            f"pad: pad_width must be an int, a (before, after) pair or one pair per axis ({x.ndim} axes), got "
            f"{pad_width!r:.80}"
        ) from None
    if (pw < 0).any():
        raise ValueError(f"pad: pad_width must be non-negative, got {pad_width!r:.80}")
    if isinstance(constant_values, Tensor):
        v = constant_values
    else:
        v = _wrap(np.asarray(constant_values, x.dtype))
    if v.dtype != x.dtype:
        v = convert(v, x.dtype)
    return S.pad(x, v, tuple((int(lo), int(hi), 0) for lo, hi in pw))


# Tensor methods with PyTorch's calling conventions


def _shape_args(shape):
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape


@tensor_method("reshape", "view")
def _reshape_method(self, *shape):
    """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
    return reshape(self, _shape_args(shape))


@tensor_method("transpose")
def _transpose_method(self, *axes):
    return transpose(self, _shape_args(axes) or None)


@tensor_method("permute")
def _permute_method(self, *dims):
    return permute_dims(self, _shape_args(dims))


@tensor_method("squeeze")
def _squeeze_method(self, axis=None):
    return squeeze(self, axis)


@tensor_method("unsqueeze")
def _unsqueeze_method(self, dim):
    return expand_dims(self, axis=dim)


@tensor_method("flatten")
def _flatten_method(self, start_dim=0, end_dim=-1):
    return flatten(self, start_dim, end_dim)


@tensor_method("size_of")
def _size_method(self, dim=None):
    return self.shape if dim is None else self.shape[dim]


@tensor_method("T", prop=True)
def _T(self):
    if self.ndim != 2:
        raise ValueError(f"Tensor.T needs a 2-D tensor, got shape {tuple(self.shape)}; use .mT or permute_dims")
    return permute_dims(self, (1, 0))
