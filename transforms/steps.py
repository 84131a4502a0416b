"""Executable steps of a compiled program: each is a function of arrays returning arrays (a list for multi-output
steps), built from a planned step (``transforms/plan.py``) and an emitter (``kernels/backend.py``).

- ``FusedStep`` runs a ``FusedRegion``: per input layout it collapses the loop axes, fetches the emitter's kernel
  for that layout and remembers how to view each input; a call allocates the outputs and calls the kernel.
- ``StagedStep`` runs a ``StagedRegion`` through one kernel over (rows, cols).
- ``ScanLoop``, ``WhileLoop`` and ``Switch`` run ``scan``, ``while`` and ``cond`` around their bodies' compiled
  programs (one executor pass per iteration); ``native_loops.NativeLoop`` runs a whole loop as one kernel.
- ``LOWERED`` holds the operations only lowered programs have (``plan.fuse_dot_col2im``).
"""

from __future__ import annotations

import math

import numpy as np
from funclib.kernels import fusion
from funclib.kernels.backend import Emitter

from funclib.primitives.conv import _col2im_impl
from funclib.primitives.dot import _dot_impl

from .plan import FusedRegion, StagedRegion


class FusedStep:
    """Runs one fused region: prepares inputs (zero-stride axes become size 1), picks the kernel for the
    broadcast pattern, allocates outputs and calls it."""

    def __init__(self, region: FusedRegion, emitter: Emitter, recycle: bool = False):
        self.region = region
        self.emitter = emitter
        self.shape = region.shape
        self.rank = len(region.shape)
        self.red = region.reduction
        self.plans: dict = {}
        self.kernels: dict = {}  # (spec, innermost size) -> kernel, shared by the layouts that collapse alike
        self._anchor, self._empty, self._empty_near = emitter.anchor, emitter.empty, emitter.empty_near
        self._scratch, self._asarray = emitter.scratch, emitter.asarray
        self.recyclers = _recyclers(emitter, [(region.shape, d) for d in region.out_dtypes], recycle)
        # the kernel as planned from the static shapes (what .lower() shows before any call)
        shapes = [(1,) * (self.rank - len(sh)) + sh for sh in region.in_shapes]
        cshape, cins, csplit = region.collapse(shapes)
        self.source = self._kernel(region.kernel_spec(cshape, cins, csplit), cshape[-1]).source

    def _kernel(self, spec, cols: int):
        k = self.kernels.get((spec, cols))
        if k is None:
            k = self.kernels[spec, cols] = self.emitter.fused_kernel(spec, cols)
        return k

    def _plan(self, arrays):
        """How to call the kernel for these input layouts: per input, the reshapes and slice that give its collapsed
        view; the kernel; the collapsed shape and the reduction buffer's shape."""
        region, emitter = self.region, self.emitter
        r = self.rank
        views = []
        shapes = []
        steps = []
        for a, sh in zip(arrays, region.in_shapes):
            nd = len(sh)
            pad = None
            if nd < r:
                pad = (1,) * (r - nd) + a.shape
                a = a.reshape(pad)
            sl = None
            if 0 in a.strides:
                # a broadcast view: read it as size 1 on its zero-stride axes (no copy)
                sl = tuple(slice(0, 1) if (s == 0 and n > 1) else slice(None) for s, n in zip(a.strides, a.shape))
                a = a[sl]
            views.append(a)
            shapes.append(a.shape)
            steps.append((pad, sl))
        cshape, cins, csplit = region.collapse(shapes)
        kernel = self._kernel(region.kernel_spec(cshape, cins, csplit), cshape[-1])
        carrier = emitter.carrier
        ins = tuple((pad, sl, tuple(c), carrier.get(a.dtype)) for (pad, sl), c, a in zip(steps, cins, views))
        red_shape = None
        if self.red is not None:
            red_shape = (cshape[csplit:] if self.red.leading else cshape[:csplit]) or (1,)
        n = math.prod(self.shape)
        outs = tuple(
            (d, carrier.get(d), emitter.placed(n * d.itemsize), rec)
            for d, rec in zip(region.out_dtypes, self.recyclers)
        )
        return kernel.load(), ins, tuple(cshape), np.asarray(cshape, dtype=np.int64), outs, red_shape, kernel.scratch

    def __call__(self, *arrays):
        try:
            sig = tuple([(a.shape, a.strides, a.dtype) for a in arrays])
        except AttributeError:  # a Python scalar from a NumPy fallback step
            arrays = [self._asarray(a) for a in arrays]
            sig = tuple([(a.shape, a.strides, a.dtype) for a in arrays])
        p = self.plans.get(sig)
        if p is None:
            p = self.plans[sig] = self._plan(arrays)
        k, in_plan, cshape, dims, out_plan, red_shape, bufs = p
        args = []
        for a, (pad, sl, c, half) in zip(arrays, in_plan):
            if pad is not None:
                a = a.reshape(pad)
            if sl is not None:
                a = a[sl]
            if a.shape != c:
                a = a.reshape(c)
            args.append(a if half is None else a.view(half))
        shape = self.shape
        ref = self._anchor(arrays)
        empty = self._empty
        outs = []
        for d, half, big, rec in out_plan:
            if rec is not None:
                o = rec.take(ref)
            else:
                o = self._empty_near(shape, d, ref, 1) if big and ref is not None else empty(shape, d)
            outs.append(o)
            if shape != cshape:
                o = o.reshape(cshape)
            args.append(o if half is None else o.view(half))
        for b, d in enumerate(bufs):
            args.append(self._scratch(cshape[-1], d, ref, b))
        if red_shape is None:
            k(*args, dims)
            return outs
        dtype, out_shape = self.red.dtype, self.red.shape
        half = dtype in fusion.HALF
        red = empty(red_shape, np.float32 if half else dtype)
        k(*args, red, dims)
        red = red.astype(dtype) if half else red
        outs.append(red.reshape(out_shape))
        return outs


def _recyclers(emitter: Emitter, outputs, recycle: bool) -> list:
    """Per output ``(shape, dtype)``: the emitter's reusable buffers for it (``NumbaCPU.recycler``) when ``recycle``
    (the step's outputs are all results of the program), or None."""
    make = getattr(emitter, "recycler", None) if recycle else None
    return [None if make is None else make(tuple(shape), np.dtype(d)) for shape, d in outputs]


class StagedStep:
    """Runs one staged region: a (rows, cols) kernel whose passes over each row compute elementwise values,
    trailing reductions of them, per-row ops on the results and the elementwise ops that consume those."""

    def __init__(self, region: StagedRegion, emitter: Emitter, recycle: bool = False):
        carrier = emitter.carrier
        self.shape = region.shape
        self.dims = np.asarray([region.rows, region.cols], dtype=np.int64)
        self.cols = region.cols
        self.in_prep = [(i, shape, carrier.get(d)) for i, shape, d in region.inputs]
        recyclers = _recyclers(emitter, [(shape, d) for shape, d, _ in region.outputs], recycle)
        self.out_plan = [
            (shape, d, ks, carrier.get(d), emitter.placed(math.prod(shape) * d.itemsize), rec)
            for (shape, d, ks), rec in zip(region.outputs, recyclers)
        ]
        self.out_views = region.out_views
        compiled = emitter.staged_kernel(region.spec, region.cols)
        self.source = compiled.source
        self.buf_dtypes = compiled.scratch
        self._compiled = compiled
        self._anchor, self._empty, self._empty_near = emitter.anchor, emitter.empty, emitter.empty_near
        self._scratch, self._asarray = emitter.scratch, emitter.asarray
        self._kernel = None

    def __call__(self, *arrays):
        k = self._kernel
        if k is None:
            k = self._kernel = self._compiled.load()
        args = []
        for i, cshape, half in self.in_prep:
            a = arrays[i]
            if type(a) is not np.ndarray:
                a = self._asarray(a)
            if a.shape != cshape:
                a = a.reshape(cshape)
            args.append(a if half is None else a.view(half))
        ref = self._anchor(arrays)
        empty = self._empty
        outs = []
        for shape, d, ks, half, big, rec in self.out_plan:
            if rec is not None:
                o = rec.take(ref)
            else:
                o = self._empty_near(shape, d, ref, 1) if big and ref is not None else empty(shape, d)
            outs.append(o)
            if o.shape != ks:
                o = o.reshape(ks)
            args.append(o if half is None else o.view(half))
        for b, d in enumerate(self.buf_dtypes):
            args.append(self._scratch(self.cols, d, ref, b))
        k(*args, self.dims)
        if self.out_views is None:
            return outs
        return [outs[i] if shape is None else outs[i].reshape(shape) for i, shape in self.out_views]


class ScanLoop:
    """``scan`` around its body's program: one executor pass per iteration."""

    def __init__(self, body, params: dict, emitter: Emitter):
        self.body = body
        self.empty, self.asarray = emitter.empty, emitter.asarray
        self.nc, self.ncar = params["num_consts"], params["num_carry"]
        self.length, self.reverse = params["length"], params["reverse"]
        self.y_avals = params["jaxpr"].out_avals[self.ncar :]

    def __call__(self, *args):
        nc, ncar, length, run, asarray = self.nc, self.ncar, self.length, self.body.run, self.asarray
        consts = list(args[:nc])
        carry = list(args[nc : nc + ncar])
        xs = [asarray(x) for x in args[nc + ncar :]]
        ys = [self.empty((length,) + a.shape, a.dtype) for a in self.y_avals]
        for i in range(length - 1, -1, -1) if self.reverse else range(length):
            out = run(consts + carry + [x[i] for x in xs])
            carry = out[:ncar]
            for buf, y in zip(ys, out[ncar:]):
                buf[i] = y
        return [asarray(c) for c in carry] + ys


class WhileLoop:
    """``while`` around its condition's and body's programs, at most ``max_steps`` iterations when given."""

    def __init__(self, cond, body, params: dict, emitter: Emitter):
        self.cond, self.body, self.asarray = cond, body, emitter.asarray
        self.cn, self.bn, self.max_steps = params["cond_nconsts"], params["body_nconsts"], params["max_steps"]

    def __call__(self, *args):
        cn, bn, max_steps = self.cn, self.bn, self.max_steps
        cond, body = self.cond.run, self.body.run
        cc = list(args[:cn])
        bc = list(args[cn : cn + bn])
        carry = list(args[cn + bn :])
        k = 0
        while max_steps is None or k < max_steps:
            if not cond(cc + carry)[0]:
                break
            carry = body(bc + carry)
            k += 1
        return [self.asarray(c) for c in carry]


class Switch:
    """``cond``: the branch program the (clamped) index selects."""

    def __init__(self, branches: list, emitter: Emitter):
        self.branches, self.asarray = branches, emitter.asarray

    def __call__(self, index, *ops):
        i = min(max(int(index), 0), len(self.branches) - 1)
        return [self.asarray(o) for o in self.branches[i].run(list(ops))]


def dot_col2im(x, y, *, dimension_numbers, cols_shape, col2im_params):
    """Per example: its batched matmul, then col2im of the result, while that result is still in cache."""
    n = x.shape[0]
    out = None
    for i in range(n):
        d = _dot_impl(x[i : i + 1], y[i : i + 1], dimension_numbers=dimension_numbers)
        r = _col2im_impl(d.reshape((1,) + tuple(cols_shape[1:])), **col2im_params)
        if out is None:
            out = np.empty((n,) + r.shape[1:], r.dtype)
        out[i] = r[0]
    return out


# the impls of the operations only lowered programs hold (``plan.LoweredOp``)
LOWERED = {"dot_col2im": dot_col2im}
