"""ONNX rules of reductions, dot_general (a convolution's product becomes Conv), shapes, gathers and scatters,
convolution patches and sorting."""

from __future__ import annotations

import itertools
import math

import numpy as np

from funclib import dtypes as D

from .._dims import Dim
from .._errors import ExportError, where
from .._lower import compute_dtype, onnx_rule
from ._common import INT64_MAX, INT64_MIN, _computed, _dt, _is_float, _zero

# ---------------------------------------------------------------------------------------------------------------
# Reductions


def _axes_of(eqn):
    return tuple(int(a) for a in eqn.params["axes"])


def _reduce_rule(op, kind):
    @_computed(kind)
    def rule(ctx, eqn, ins, d):
        axes = _axes_of(eqn)
        if not axes:
            return [ctx.node("Identity", ins)]
        y = ctx.math(op, [ins[0]], d, kind=kind, extra=[ctx.i64(axes)], keepdims=0)
        if op in ("ReduceMax", "ReduceMin") and _is_float(d):
            # NumPy propagates NaN through max/min reductions; ONNX Runtime's ReduceMax may skip it
            isnan = ctx.cast(ctx.node("IsNaN", [ins[0]]), np.int32)
            has_nan = ctx.cast(ctx.node("ReduceMax", [isnan, ctx.i64(axes)], keepdims=0), D.bool_)
            # y - 0.0 keeps a -0.0 maximum, which a Where would turn into +0.0
            y = ctx.node("Sub", [y, ctx.node("Where", [has_nan, ctx.scalar(np.nan, d), _zero(ctx, d)])])
        return [y]

    return rule


onnx_rule("reduce_sum")(_reduce_rule("ReduceSum", "wrap"))
onnx_rule("reduce_prod")(_reduce_rule("ReduceProd", "wrap"))
onnx_rule("reduce_max", "reduce_or")(_reduce_rule("ReduceMax", "order"))
onnx_rule("reduce_min", "reduce_and")(_reduce_rule("ReduceMin", "order"))


@onnx_rule("argmax", "argmin")
@_computed("order")
def _argmax(ctx, eqn, ins, d):
    op = "ArgMax" if eqn.prim.name == "argmax" else "ArgMin"
    axis = int(eqn.params["axis"])
    x = ins[0]
    y = ctx.math(op, [x], d, kind="order", out="keep", axis=axis, keepdims=0)
    if _is_float(d):
        # NumPy returns the first NaN where there is one
        isnan = ctx.cast(ctx.node("IsNaN", [x]), np.int32)
        first_nan = ctx.node("ArgMax", [isnan], axis=axis, keepdims=0)
        any_nan = ctx.cast(ctx.node("ReduceMax", [isnan, ctx.i64([axis])], keepdims=0), D.bool_)
        y = ctx.node("Where", [any_nan, first_nan, y])
    return [ctx.cast(y, eqn.params["index_dtype"])]


@onnx_rule("cumsum")
def _cumsum(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    return [
        ctx.math(
            "CumSum",
            [ins[0]],
            d,
            kind="wrap",
            extra=[ctx.const(np.int64(eqn.params["axis"]))],
            reverse=int(bool(eqn.params["reverse"])),
        )
    ]


# ---------------------------------------------------------------------------------------------------------------
# dot_general: MatMul where the layout allows, else Einsum; a convolution's im2col product becomes Conv


@onnx_rule("dot_general")
def _dot_general(ctx, eqn, ins):
    conv = _match_conv(ctx, eqn, ins)
    if conv is not None:
        return [conv]
    x, y = eqn.inputs
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = map(tuple, (lc, rc, lb, rb))
    nx, ny = x.aval.ndim, y.aval.ndim
    lf = tuple(i for i in range(nx) if i not in lc and i not in lb)
    rf = tuple(i for i in range(ny) if i not in rc and i not in rb)
    d = _dt(x)
    a, b = ins
    # MatMul: contract one axis; at most one free axis on the right; batch axes leading on both sides
    if len(lc) == 1 and len(rf) <= 1 and (not lb or len(lf) == 1):
        perm_l = lb + lf + lc
        perm_r = rb + rc + rf
        if perm_l != tuple(range(nx)):
            a = ctx.node("Transpose", [a], perm=list(perm_l))
        if perm_r != tuple(range(ny)):
            b = ctx.node("Transpose", [b], perm=list(perm_r))
        if lb and not rf:
            # (b.., M, K) @ (b.., K): give the right side a unit column and drop it after
            b = ctx.node("Unsqueeze", [b, ctx.i64([len(rb) + 1])])
            out = ctx.math("MatMul", [a, b], d, kind="wrap")
            return [ctx.node("Squeeze", [out, ctx.i64([len(lb) + 1])])]
        return [ctx.math("MatMul", [a, b], d, kind="wrap")]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls = [""] * nx
    rs = [""] * ny
    for i, j in zip(lb, rb):
        ls[i] = rs[j] = next(letters)
    for i, j in zip(lc, rc):
        ls[i] = rs[j] = next(letters)
    for i in lf:
        ls[i] = next(letters)
    for j in rf:
        rs[j] = next(letters)
    out = "".join(ls[i] for i in lb) + "".join(ls[i] for i in lf) + "".join(rs[j] for j in rf)
    return [ctx.math("Einsum", ins, d, kind="wrap", equation=f"{''.join(ls)},{''.join(rs)}->{out}")]


def _match_conv(ctx, eqn, ins):
    """``dot_general(broadcast(reshape(w)), reshape(conv_patches(x)))``, as ``funclib.nn.functional`` writes a
    convolution, lowered as one Conv (the patches are then dead and removed)."""
    dn = eqn.params["dimension_numbers"]
    if tuple(map(tuple, dn[0])) != ((3,), (2,)) or tuple(map(tuple, dn[1])) != ((0, 1), (0, 1)):
        return None
    wb, cols = eqn.inputs
    d = _dt(wb)
    if not _is_float(d):
        return None
    r = ctx.producer(cols)
    if r is None or r.prim.name != "reshape":
        return None
    p = ctx.producer(r.inputs[0])
    if p is None or p.prim.name != "conv_patches" or p.params.get("channels_last", True):
        return None
    b = ctx.producer(wb)
    if b is None or b.prim.name != "broadcast_in_dim" or tuple(b.params["broadcast_dimensions"]) != (0, 1, 2, 3):
        return None
    w = b.inputs[0]
    if type(w) is not type(cols) or w.aval.shape[0] != 1:
        return None
    x = p.inputs[0]
    k = tuple(p.params["kernel_shape"])
    _, g, og, cgk = w.aval.shape
    c = x.aval.shape[1]
    if c != g * (cgk // math.prod(k)):
        return None
    xs = ctx.env[x]
    ws = ctx.env[w]
    weight = ctx.reshape(ws, (g * og, cgk // math.prod(k)) + k)
    pads = [int(lo) for lo, _ in p.params["padding"]] + [int(hi) for _, hi in p.params["padding"]]
    y = ctx.math(
        "Conv",
        [xs, weight],
        d,
        kernel_shape=list(k),
        strides=list(p.params["strides"]),
        dilations=list(p.params["dilation"]),
        pads=pads,
        group=int(g),
    )
    # Conv gives (N, O, *out); the product's layout is (N, G, O / G, pixels)
    return ctx.reshape(y, ctx.shape(eqn.outputs[0]))


# ---------------------------------------------------------------------------------------------------------------
# Shapes


@onnx_rule("reshape", dynamic=("new_sizes",))
def _reshape(ctx, eqn, ins):
    return [ctx.reshape(ins[0], ctx.params(eqn)["new_sizes"])]


@onnx_rule("broadcast_in_dim", dynamic=("shape",))
def _broadcast_in_dim(ctx, eqn, ins):
    x = eqn.inputs[0]
    params = ctx.params(eqn)
    shape = tuple(params["shape"])
    bdims = tuple(params["broadcast_dimensions"])
    v = ins[0]
    new = [i for i in range(len(shape)) if i not in bdims]
    if new:
        v = ctx.node("Unsqueeze", [v, ctx.i64(new)])
    in_shape = ctx.shape(x)
    # Expand broadcasts like NumPy: a 1 in the target keeps the operand's size, so sizes it already has need no
    # computing
    target = [1] * len(shape)
    for i, s in enumerate(shape):
        if i in bdims and in_shape[bdims.index(i)] == s:
            continue
        target[i] = s
    if all(t == 1 for t in target):
        return [v if new else ctx.node("Identity", [v])]
    return [ctx.node("Expand", [v, ctx.shape_tensor(target)])]


@onnx_rule("transpose")
def _transpose(ctx, eqn, ins):
    return [ctx.node("Transpose", ins, perm=[int(p) for p in eqn.params["permutation"]])]


@onnx_rule("rev")
def _rev(ctx, eqn, ins):
    axes = [int(a) for a in eqn.params["dimensions"]]
    if not axes:
        return [ctx.node("Identity", ins)]
    n = len(axes)
    return [ctx.node("Slice", [ins[0], ctx.i64([-1] * n), ctx.i64([INT64_MIN] * n), ctx.i64(axes), ctx.i64([-1] * n)])]


@onnx_rule("concatenate")
def _concatenate(ctx, eqn, ins):
    return [ctx.node("Concat", ins, axis=int(eqn.params["dimension"]))]


@onnx_rule("slice", dynamic=("start_indices", "limit_indices"))
def _slice(ctx, eqn, ins):
    p = ctx.params(eqn)
    shape = ctx.shape(eqn.inputs[0])
    axes, starts, ends, steps = [], [], [], []
    for ax, (s, l, st, n) in enumerate(zip(p["start_indices"], p["limit_indices"], p["strides"], shape)):
        if s == 0 and l == n and st == 1:
            continue
        axes.append(ax)
        starts.append(s)
        ends.append(INT64_MAX if l == n else l)
        steps.append(int(st))
    if not axes:
        return [ctx.node("Identity", ins)]
    return [
        ctx.node("Slice", [ins[0], ctx.shape_tensor(starts), ctx.shape_tensor(ends), ctx.i64(axes), ctx.i64(steps)])
    ]


@onnx_rule("pad")
def _pad(ctx, eqn, ins):
    x, value = ins
    config = [tuple(int(v) for v in c) for c in eqn.params["padding_config"]]
    shape = list(ctx.shape(eqn.inputs[0]))
    for ax, (_, _, interior) in enumerate(config):
        if interior and (isinstance(shape[ax], Dim) or shape[ax] > 1):
            x = _interior_pad(ctx, x, value, shape, ax, interior, _dt(eqn.inputs[0]))
            shape[ax] = _affine(shape[ax], interior + 1, -interior)
    if all(lo == 0 and hi == 0 for lo, hi, _ in config):
        return [ctx.node("Identity", [x])]
    pads = [lo for lo, _, _ in config] + [hi for _, hi, _ in config]
    return [ctx.pad(x, pads, value, _dt(eqn.inputs[0]))]


def _affine(n, a: int, b: int):
    return n.affine(a, b) if isinstance(n, Dim) else n * a + b


def _interior_pad(ctx, x, value, shape, ax, interior, dtype):
    """Insert ``interior`` copies of ``value`` between the elements along ``ax``: pad a new unit axis after
    ``ax`` to ``interior + 1``, merge the two axes, and drop the trailing fill."""
    rank = len(shape)
    x = ctx.node("Unsqueeze", [x, ctx.i64([ax + 1])])
    pads = [0] * (2 * (rank + 1))
    pads[(rank + 1) + ax + 1] = interior
    x = ctx.pad(x, pads, value, dtype)
    merged = shape[:ax] + [_affine(shape[ax], interior + 1, 0)] + shape[ax + 1 :]
    x = ctx.reshape(x, merged)
    keep = ctx.dim(_affine(shape[ax], interior + 1, -interior))
    return ctx.node("Slice", [x, ctx.i64([0]), keep, ctx.i64([ax])])


def _clamped_start(ctx, start, n, size):
    """The start index clamped into [0, n - size], as int64[1]."""
    s = ctx.cast(ctx.node("Reshape", [start, ctx.i64([1])]), np.int64)
    hi = ctx.node("Sub", [ctx.dim(n), ctx.dim(size)])
    return ctx.node("Min", [ctx.node("Max", [s, ctx.i64([0])]), hi])


@onnx_rule("dynamic_slice", dynamic=("slice_sizes",))
def _dynamic_slice(ctx, eqn, ins):
    x, *starts = ins
    sizes = ctx.params(eqn)["slice_sizes"]
    shape = ctx.shape(eqn.inputs[0])
    if not shape:
        return [ctx.node("Identity", [x])]
    st = [_clamped_start(ctx, s, n, z) for s, n, z in zip(starts, shape, sizes)]
    st = ctx.node("Concat", st, axis=0)
    ends = ctx.node("Add", [st, ctx.shape_tensor(sizes)])
    return [ctx.node("Slice", [x, st, ends, ctx.i64(list(range(len(shape))))])]


def _index_grid(ctx, dims: tuple) -> str:
    """int64 (*dims, len(dims)): every index tuple of a block of shape ``dims``."""
    rank = len(dims)
    cols = []
    for ax, n in enumerate(dims):
        r = ctx.node(
            "Range", [ctx.const(np.int64(0)), ctx.node("Reshape", [ctx.dim(n), ctx.i64([])]), ctx.const(np.int64(1))]
        )
        r = ctx.node("Reshape", [r, ctx.i64([-1 if i == ax else 1 for i in range(rank)] + [1])])
        cols.append(ctx.node("Expand", [r, ctx.shape_tensor(list(dims) + [1])]))
    return ctx.node("Concat", cols, axis=-1)


@onnx_rule("dynamic_update_slice")
def _dynamic_update_slice(ctx, eqn, ins):
    x, upd, *starts = ins
    shape = ctx.shape(eqn.inputs[0])
    ushape = ctx.shape(eqn.inputs[1])
    if not shape:
        return [ctx.node("Identity", [upd])]
    st = ctx.node("Concat", [_clamped_start(ctx, s, n, z) for s, n, z in zip(starts, shape, ushape)], axis=0)
    idx = ctx.node("Add", [_index_grid(ctx, ushape), st])
    return [ctx.node("ScatterND", [x, idx, upd])]


@onnx_rule("iota", dynamic=("shape",))
def _iota(ctx, eqn, ins):
    p = ctx.params(eqn)
    shape, dim, dtype = tuple(p["shape"]), int(p["dimension"]), np.dtype(p["dtype"])
    n = ctx.node("Reshape", [ctx.dim(shape[dim]), ctx.i64([])])
    r = ctx.node("Range", [ctx.const(np.int64(0)), n, ctx.const(np.int64(1))])
    r = ctx.cast(r, dtype) if dtype != D.int64 else r
    r = ctx.node("Reshape", [r, ctx.i64([-1 if i == dim else 1 for i in range(len(shape))])])
    return [ctx.node("Expand", [r, ctx.shape_tensor(shape)])]


# ---------------------------------------------------------------------------------------------------------------
# Gather and scatter: the indexed axes move to the front, where GatherND/ScatterND address them


def _front(ctx, x, axes, rank):
    perm = list(axes) + [i for i in range(rank) if i not in axes]
    if perm == list(range(rank)):
        return x, None
    return ctx.node("Transpose", [x], perm=perm), perm


def _indices(ctx, idx, dtype):
    return ctx.cast(idx, np.int64) if np.dtype(dtype) != D.int64 else idx


@onnx_rule("gather")
def _gather(ctx, eqn, ins):
    x, idx = ins
    axes = tuple(int(a) for a in eqn.params["axes"])
    xt, _ = _front(ctx, x, axes, eqn.inputs[0].aval.ndim)
    return [ctx.node("GatherND", [xt, _indices(ctx, idx, _dt(eqn.inputs[1]))])]


@onnx_rule("scatter", "scatter_add")
def _scatter(ctx, eqn, ins):
    x, idx, upd = ins
    axes = tuple(int(a) for a in eqn.params["axes"])
    rank = eqn.inputs[0].aval.ndim
    xt, perm = _front(ctx, x, axes, rank)
    d = _dt(eqn.inputs[0])
    reduction = "add" if eqn.prim.name == "scatter_add" else None
    # with repeated indices the last update wins in funclib; ONNX leaves the order unspecified, and ONNX Runtime
    # applies updates in order, so they agree there
    idx = _indices(ctx, idx, _dt(eqn.inputs[1]))
    if reduction:
        wide = compute_dtype(d, "wrap")
        if wide != d:
            xt, upd = ctx.cast(xt, wide), ctx.cast(upd, wide)
        y = ctx.node("ScatterND", [xt, idx, upd], reduction=reduction)
        y = ctx.cast(y, d) if wide != d else y
    else:
        y = ctx.node("ScatterND", [xt, idx, upd])
    if perm is not None:
        y = ctx.node("Transpose", [y], perm=[int(i) for i in np.argsort(perm)])
    return [y]


@onnx_rule("scatter_mul", "scatter_max", "scatter_min")
def _scatter_combine(ctx, eqn, ins):
    x, idx, upd = ins
    mode = eqn.prim.name.split("_")[1]
    axes = tuple(int(a) for a in eqn.params["axes"])
    xt, perm = _front(ctx, x, axes, eqn.inputs[0].aval.ndim)
    idx = _indices(ctx, idx, _dt(eqn.inputs[1]))
    d = _dt(eqn.inputs[0])
    if d == D.uint64 and mode != "mul":
        y = ctx.unflip_u64(ctx.node("ScatterND", [ctx.flip_u64(xt), idx, ctx.flip_u64(upd)], reduction=mode))
    else:
        wide = compute_dtype(d, "wrap" if mode == "mul" else "order")
        xw, uw = (ctx.cast(xt, wide), ctx.cast(upd, wide)) if wide != d else (xt, upd)
        y = ctx.node("ScatterND", [xw, idx, uw], reduction=mode)
        if _is_float(wide) and mode != "mul":
            # NumPy's maximum.at propagates NaN, onnxruntime's max/min reductions skip it: mark where one landed
            f4 = np.dtype(np.float32)
            marks = ctx.node(
                "ScatterND",
                [ctx.cast(ctx.node("IsNaN", [xw]), f4), idx, ctx.cast(ctx.node("IsNaN", [uw]), f4)],
                reduction="max",
            )
            hit = ctx.node("Greater", [marks, ctx.scalar(0, f4)])
            y = ctx.node("Sub", [y, ctx.node("Where", [hit, ctx.scalar(np.nan, wide), ctx.scalar(0, wide)])])
        y = ctx.cast(y, d) if wide != d else y
    if perm is not None:
        y = ctx.node("Transpose", [y], perm=[int(i) for i in np.argsort(perm)])
    return [y]


# ---------------------------------------------------------------------------------------------------------------
# Convolution patches (im2col) and their adjoint, as strided slices and pads; a convolution's product is matched
# to Conv in dot_general


def _window_slices(ctx, xp, p, out_sizes):
    """For each kernel offset, the strided slice of the padded input it reads: (N, C, *out) each."""
    k, s, dil = tuple(p["kernel_shape"]), tuple(p["strides"]), tuple(p["dilation"])
    nd = len(k)
    axes = ctx.i64(list(range(2, 2 + nd)))
    steps = ctx.i64(list(s))
    slices = []
    for kk in itertools.product(*[range(n) for n in k]):
        starts = [kk[i] * dil[i] for i in range(nd)]
        ends = [starts[i] + (out_sizes[i] - 1) * s[i] + 1 for i in range(nd)]
        slices.append(ctx.node("Slice", [xp, ctx.i64(starts), ctx.i64(ends), axes, steps]))
    return slices


@onnx_rule("conv_patches")
def _conv_patches(ctx, eqn, ins):
    p = eqn.params
    x = eqn.inputs[0]
    k = tuple(p["kernel_shape"])
    nd = len(k)
    pads = [0, 0] + [int(lo) for lo, _ in p["padding"]] + [0, 0] + [int(hi) for _, hi in p["padding"]]
    xp = ins[0]
    if any(pads):
        xp = ctx.pad(xp, pads, _zero(ctx, _dt(x)), _dt(x))
    in_shape = ctx.shape(x)
    out_shape = ctx.shape(eqn.outputs[0])
    channels_last = p.get("channels_last", True)
    osz = tuple(out_shape[1 : 1 + nd]) if channels_last else tuple(out_shape[2 + nd :])
    if any(isinstance(o, Dim) for o in osz):
        raise ExportError(
            f"fl.onnx.export: conv_patches{where(eqn)} over a spatial axis of dynamic size is not supported; make "
            "only the batch axis dynamic"
        )
    parts = [ctx.node("Unsqueeze", [sl, ctx.i64([2])]) for sl in _window_slices(ctx, xp, p, osz)]
    cols = ctx.node("Concat", parts, axis=2) if len(parts) > 1 else parts[0]  # (N, C, K, *out)
    cols = ctx.reshape(cols, (in_shape[0], in_shape[1]) + k + osz)  # (N, C, *k, *out)
    if channels_last:
        perm = [0, *range(2 + nd, 2 + 2 * nd), *range(2, 2 + nd), 1]
        cols = ctx.node("Transpose", [cols], perm=perm)
    return [cols]


@onnx_rule("conv_patches_transpose")
def _conv_patches_transpose(ctx, eqn, ins):
    p = eqn.params
    c = eqn.inputs[0]
    out_shape = ctx.shape(eqn.outputs[0])  # (N, C, *spatial)
    nd = len(p["strides"])
    cshape = ctx.shape(c)
    channels_last = p.get("channels_last", True)
    v = ins[0]
    if channels_last:  # (N, *out, *k, C) -> (N, C, *k, *out)
        v = ctx.node("Transpose", [v], perm=[0, 2 * nd + 1, *range(nd + 1, 2 * nd + 1), *range(1, nd + 1)])
        k = tuple(cshape[1 + nd : 1 + 2 * nd])
        osz = tuple(cshape[1 : 1 + nd])
    else:
        k = tuple(cshape[2 : 2 + nd])
        osz = tuple(cshape[2 + nd :])
    spatial = tuple(out_shape[2:])
    if any(isinstance(s, Dim) for s in k + osz + spatial):
        raise ExportError(
            f"fl.onnx.export: conv_patches_transpose{where(eqn)} with a dynamic spatial size is not "
            "supported; make only the batch axis dynamic"
        )
    s, dil, padding = tuple(p["strides"]), tuple(p["dilation"]), tuple(tuple(q) for q in p["padding"])
    padded = tuple(spatial[i] + padding[i][0] + padding[i][1] for i in range(nd))
    n, ch = out_shape[0], out_shape[1]
    flat = ctx.reshape(v, (n, ch, math.prod(k)) + osz)
    d = _dt(c)
    zero = _zero(ctx, d)
    total = None
    for j, kk in enumerate(itertools.product(*[range(m) for m in k])):
        piece = ctx.node("Gather", [flat, ctx.const(np.int64(j))], axis=2)  # (N, C, *out)
        shape = [n, ch] + list(osz)
        for i in range(nd):
            if s[i] > 1 and osz[i] > 1:
                piece = _interior_pad(ctx, piece, zero, shape, 2 + i, s[i] - 1, d)
                shape[2 + i] = osz[i] + (osz[i] - 1) * (s[i] - 1)
        lo = [kk[i] * dil[i] for i in range(nd)]
        hi = [padded[i] - lo[i] - shape[2 + i] for i in range(nd)]
        piece = ctx.pad(piece, [0, 0] + lo + [0, 0] + hi, zero, d)
        total = piece if total is None else ctx.math("Add", [total, piece], d, kind="wrap")
    crop_lo = [padding[i][0] for i in range(nd)]
    return [
        ctx.node(
            "Slice",
            [
                total,
                ctx.i64(crop_lo),
                ctx.i64([crop_lo[i] + spatial[i] for i in range(nd)]),
                ctx.i64(list(range(2, 2 + nd))),
            ],
        )
    ]


# ---------------------------------------------------------------------------------------------------------------
# Sorting: TopK is stable (ties keep the lower index first), so a multi-key sort is one stable pass per key, least
# significant first


def _sort_key(ctx, key, d):
    """The keys of one operand, most significant first, in types TopK orders: a float key sorts by (isnan, value
    with NaN as +inf), so NaN comes last as in NumPy; booleans and narrow integers are widened."""
    d = np.dtype(d)
    if _is_float(d):
        wide = np.dtype(np.float32) if d in (D.float16, D.bfloat16) else d
        k = ctx.cast(key, wide) if wide != d else key
        isnan = ctx.node("IsNaN", [k])
        return [ctx.cast(isnan, np.int32), ctx.node("Where", [isnan, ctx.scalar(np.inf, wide), k])]
    if d == D.uint64:  # flipping the top bit maps uint64 onto int64 in order
        return [ctx.flip_u64(key)]
    wide = np.dtype(np.int64) if d.kind in "ib" or d in (D.uint8, D.uint16, D.uint32) else d
    return [ctx.cast(key, wide) if wide != d else key]


@onnx_rule("sort")
def _sort(ctx, eqn, ins):
    axis = int(eqn.params["dimension"])
    nk = int(eqn.params["num_keys"])
    shape = ctx.shape(eqn.inputs[0])
    k = ctx.dim(shape[axis])
    passes = []
    for key, a in zip(ins[:nk], eqn.inputs[:nk]):
        passes.extend(_sort_key(ctx, key, _dt(a)))
    # one stable pass per key, the least significant first
    perm = None
    for key in reversed(passes):
        cur = key if perm is None else ctx.node("GatherElements", [key, perm], axis=axis)
        _, sub = ctx.node("TopK", [cur, k], 2, axis=axis, largest=0, sorted=1)
        perm = sub if perm is None else ctx.node("GatherElements", [perm, sub], axis=axis)
    return [ctx.node("GatherElements", [x, perm], axis=axis) for x in ins]


# ---------------------------------------------------------------------------------------------------------------
