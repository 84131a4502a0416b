"""Whole loops as one numba function: a ``scan``'s or ``while`` loop's body inlined into a generated ``for`` loop
(a while loop's predicate ahead of its body, then ``break`` when it is false).

A ``LoopSpec`` describes the body with no reference to tracing: numbered values (dtype and static shape; the
first ones are the loop-invariant constants, the carry and the per-iteration slices of the scanned inputs) and
steps over them (fused elementwise regions with an optional reduction, ``dot_general``, transposes, reshapes,
broadcasts, slices, reversals, concatenation, padding, dynamic slices and updates, ``cond`` as ``Switch`` and
loops nested as ``Loop``). ``build(spec)`` generates one module whose ``kernel`` runs the whole loop:

- every scratch buffer is allocated by the caller and passed in (``np.empty`` inside numba costs compile time
  and, for large buffers, run time); nothing is allocated inside the loop;
- every value is a C-ordered array read through an affine index map: transposes, broadcasts, slices and
  reversals only rewrite the map, reshapes of C-ordered values are numba views, and anything else is copied;
- elementwise regions become loop nests built from ``fusion``'s scalar expressions (float32 transcendentals
  from ``vmath``); a region ending in a sum reduction becomes a helper function compiled with
  ``fastmath={'reassoc', 'contract'}``, exactly as the stand-alone fused kernels are, shared by identical ones;
- ``dot_general`` calls ``gemm`` (BLAS, through numba's own BLAS entry, or funclib's AVX-512 float32 product: see
  ``gemm.choose``) on 2-D C- or F-ordered views;
  transposed operands pass as ``.T`` views, other layouts are copied first; batch dimensions are loops;
- copies of loop-invariant values (constants) are made once, before the loop;
- stacked outputs are written in place at row ``i`` (``length - 1 - i`` when reversed); a new carry is
  computed straight into its buffer when nothing reads the old one afterwards, and copied in at the end of the
  iteration otherwise (through a staging buffer where it is a view of an old carry, e.g. a swap).

Sizes never appear in the source: they are read from an ``int64`` table passed at run time, so the kernel
(keyed by a content hash and kept in the private kernel cache, see ``diskcache``) serves every trip
count and every batch size with the same structure. ``Unsupported`` is raised for what it cannot generate;
callers then run the loop some other way.

Example:
    >>> import numpy as np
    >>> from funclib.kernels import loopgen
    >>> from funclib.kernels.fusion import OpSpec
    >>> # carry h (f32[3]), scanned x (f32[3]); body: h = h * 0.5 + x, ys = h
    >>> ops = (OpSpec("mul", (("in", 0), ("const", "0.5", "float32")), "float32"),
    ...        OpSpec("add", (("op", 0), ("in", 1)), "float32"))
    >>> step = loopgen.Elementwise(inputs=(0, 1), ops=ops, outputs=((1, 2),), shape=(3,))
    >>> v = loopgen.Value("float32", (3,))
    >>> spec = loopgen.LoopSpec(values=(v, v, v), n_consts=0, n_carry=1, n_xs=1, steps=(step,),
    ...                         carry_out=(2,), ys=(2,), reverse=False)
    >>> k = loopgen.build(spec)
    >>> carry, ys = k(4, [], [np.zeros(3, np.float32)], [np.ones((4, 3), np.float32)])
    >>> carry[0]
    array([1.875, 1.875, 1.875], dtype=float32)
"""

from __future__ import annotations

import importlib.util
import math
import re
import threading

import numpy as np

from . import diskcache, fusion, gemm
from .backend import Unsupported
from .loopspec import (
    Branch,  # noqa: F401  (the spec types are loopgen's interface: loopgen.Branch, loopgen.Reduction)
    Broadcast,
    Concat,
    Dot,
    DynamicSlice,
    DynamicUpdateSlice,
    Elementwise,
    Gather,
    Loop,
    LoopSpec,
    Pad,
    Reduction,  # noqa: F401
    Reshape,
    Rev,
    ScatterAdd,
    Slice,
    Switch,
    Transpose,
    Value,
)

# the generator method of each step kind; those taking the value count ``n`` apart
_WITH_N = {Elementwise: "elementwise", Switch: "switch", Loop: "loop"}
_PLAIN = {
    Dot: "dot", Transpose: "transpose", Reshape: "reshape", Broadcast: "broadcast", Slice: "slice_", Rev: "rev",
    Concat: "concat", DynamicSlice: "dynamic_slice", Pad: "pad", DynamicUpdateSlice: "dynamic_update_slice",
    Gather: "gather", ScatterAdd: "scatter_add",
}

_DIM = re.compile(r"\bd\[(\d+)\]")  # a size read from the kernel's size table

GENERATOR_VERSION = "6"

_DOT_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
VALUE_DTYPES = frozenset(d for d in fusion.FUSIBLE_DTYPES if d not in fusion.CARRIER)


_VIEWS = (Transpose, Reshape, Slice, Rev, Broadcast)


def _io(st) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if type(st) is Elementwise:
        outs = tuple(v for _, v in st.outputs) + ((st.reduction.out,) if st.reduction is not None else ())
        return tuple(st.inputs), outs
    if type(st) is Dot:
        return (st.lhs, st.rhs), (st.out,)
    if type(st) is Concat:
        return st.srcs, (st.out,)
    if type(st) is DynamicSlice:
        return (st.src, *st.starts), (st.out,)
    if type(st) is Pad:
        return (st.src, st.value), (st.out,)
    if type(st) is DynamicUpdateSlice:
        return (st.src, st.update, *st.starts), (st.out,)
    if type(st) is Gather:
        return (st.src, st.idx), (st.out,)
    if type(st) is ScatterAdd:
        return (st.src, st.idx, st.upd), (st.out,)
    if type(st) is Switch:
        return (st.index, *st.operands, *_branch_reads(st)), st.outs
    if type(st) is Loop:
        return (*st.consts, *st.init, *st.xs), st.outs
    return (st.src,), (st.out,)


def _branch_reads(st: Switch) -> tuple[int, ...]:
    # values a branch reads that it does not compute (constants and literals of the enclosing loop)
    made: set = set()
    reads: list = []
    for br in st.branches:
        for sub in br.steps:
            ins, outs = _io(sub)
            reads += [v for v in ins if v not in made]
            made.update(outs)
        reads += [v for v in br.results if v not in made]
    return tuple(dict.fromkeys(reads))


def _inplace(spec: LoopSpec) -> dict[int, int]:
    """Values computed straight into their carry's buffer: those produced after the last read of the old carry.

    An elementwise region may also read the old carry itself, at the very index it writes. Stacked outputs are
    copied right after their value exists, so only old-carry reads by steps, or by final copies into other
    carries (a swap), keep a new carry out of its buffer.
    """
    nc, nk = spec.n_consts, spec.n_carry
    n_in = nc + nk + spec.n_xs
    root = {v: v for v in range(n_in)}
    pos = {v: -1 for v in range(n_in)}
    last: dict[int, int] = {}

    def read(p: int, r: int) -> None:
        last[r] = max(last.get(r, p), p)

    for s, st in enumerate(spec.steps):
        ins, outs = _io(st)
        for v in ins:
            read(s, root[v])
        for v in outs:
            root[v] = root[ins[0]] if type(st) in _VIEWS else v
            pos[v] = s
    for v in spec.ys:
        read(pos[v], root[v])
    carry_ids = range(nc, nc + nk)
    for k, v in enumerate(spec.carry_out):
        if v != nc + k and root[v] in carry_ids:
            read(len(spec.steps), root[v])
    chosen: dict[int, int] = {}
    for s, st in enumerate(spec.steps):
        if type(st) in _VIEWS:
            continue
        ins, outs = _io(st)
        for v in outs:
            if type(st) is Elementwise and st.reduction is not None:
                continue
            ks = [k for k, c in enumerate(spec.carry_out) if c == v and k not in chosen.values()]
            if not ks:
                continue
            k = ks[0]
            cid = nc + k
            lr = last.get(cid, -2)
            if lr > s:
                continue
            if lr == s:
                if type(st) is not Elementwise:
                    continue
                shape = tuple(spec.values[cid].shape)
                if any(root[u] == cid and (u != cid or shape != tuple(st.shape)) for u in ins):
                    continue
            chosen[v] = k
    return chosen


def _dead_after(spec: LoopSpec) -> dict[int, list[int]]:
    """The values whose buffers the next steps may reuse, by the step after which nothing reads them (through a
    view either): computed by a step, and not a stacked output, a new carry or the predicate, which are read at
    the end of the iteration. A long straight-line program (a whole jitted program) then needs a few buffers
    per shape instead of one per value: fewer arguments to pass at each call, and to compile."""
    root: dict[int, int] = {}
    last: dict[int, int] = {}
    made: list[int] = []
    for s, st in enumerate(spec.steps):
        ins, outs = _io(st)
        for v in ins:
            r = root.get(v, v)
            last[r] = s
        for v in outs:
            if type(st) in _VIEWS:
                root[v] = root.get(ins[0], ins[0])
            else:
                root[v] = v
                made.append(v)
    pinned = {root.get(v, v) for v in (*spec.ys, *spec.carry_out)}
    if spec.cond is not None:
        pinned.add(root.get(spec.cond, spec.cond))
    dead: dict[int, list[int]] = {}
    for v in made:
        if v not in pinned and v in last:
            dead.setdefault(last[v], []).append(v)
    return dead


def _ishape(shape: tuple[int, ...]) -> tuple[int, ...]:
    # rank-0 values live in 1-element arrays: numba indexes those like any other
    return tuple(shape) if shape else (1,)


def _tuple(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _affine(off: str, mult: int, j: str) -> str:
    if mult == 0:
        return off
    term = j if mult == 1 else (f"-{j}" if mult == -1 else f"{mult} * {j}")
    if off == "0":
        return term
    return f"{off} - {j}" if mult == -1 else f"{off} + {term}"


class _Gen:
    """Every value is a C-ordered numba array (``base``) read through an affine index map (``terms``).

    ``terms`` has one ``(value_axis or None, multiplier, offset)`` per axis of the base: transposes, slices and
    reversals only rewrite the map. Strided numba views ('A' layout) would do the same, but a 3-D loop over one
    takes LLVM over ten seconds to compile, and a C array read at permuted or affine indices does not.
    """

    def __init__(self, spec: LoopSpec, pfx: str = "", consts: dict | None = None):
        self.spec = spec
        self.pfx = pfx  # names of the helper functions of a loop nested in another
        self.n_steps = len(spec.steps)  # numbers the steps inside branches after the top-level ones
        self.sizes: list[int] = []
        self.pre: list[str] = []  # before the loop
        self.body: list[str] = []  # inside the loop
        self.helpers: list[str] = []
        self.writable_views: set[str] = set()  # bases that are rows of stacked outputs
        self.sum_helpers: dict = {}  # (body, argument types) of a sum region -> its helper function
        self.consts: dict = {} if consts is None else consts
        self.base: dict[int, str] = {}
        self.base_shape: dict[str, tuple[int, ...]] = {}  # of each base array
        self.terms: dict[int, tuple] = {}
        self.root: dict[int, int] = {}
        self.invariant: set[int] = set(range(spec.n_consts))
        self.temps: list[tuple[tuple[int, ...], str]] = []  # (shape, dtype) of each scratch buffer
        self.direct_ys: dict[int, int] = {}  # value id -> ys index it is computed into
        self.inplace: dict[int, int] = {}  # value id -> carry index it is computed into
        self.free: dict[tuple, list[str]] = {}  # (shape, dtype) -> buffers of values nothing reads any more
        self.owned: dict[int, tuple[tuple, str]] = {}  # value id -> (shape, dtype) and buffer of a reusable value

    # -- helpers ------------------------------------------------------------------------------------------------
    def dim(self, n: int) -> str:
        self.sizes.append(int(n))
        return f"d[{len(self.sizes) - 1}]"

    def shape_expr(self, shape) -> str:
        return _tuple([self.dim(n) for n in shape])

    def prod(self, sizes) -> str:
        return " * ".join(self.dim(n) for n in sizes) if len(sizes) else "1"

    def val(self, vid: int) -> Value:
        return self.spec.values[vid]

    def ish(self, vid: int) -> tuple[int, ...]:
        return _ishape(self.val(vid).shape)

    def np_dtype(self, vid: int) -> str:
        return np.dtype(self.val(vid).dtype).name

    def tmp(self, shape, dtype: str) -> str:
        # allocated by the caller and passed in: np.empty inside the kernel costs about 0.1 s of compile time each
        self.temps.append((_ishape(tuple(shape)), dtype))
        return f"b{len(self.temps) - 1}"

    def identity(self, vid: int) -> tuple:
        r = len(self.val(vid).shape)
        return tuple((a, 1, "0") for a in range(r)) if r else ((None, 0, "0"),)

    def is_c(self, vid: int) -> bool:
        # the map alone does not tell: a slice from 0 with unit strides keeps it while shrinking the shape
        return self.terms[vid] == self.identity(vid) and self.base_shape[self.base[vid]] == self.ish(vid)

    def bind(self, vid: int, base: str, root: int, terms=None) -> None:
        if terms is None:
            self.base_shape[base] = self.ish(vid)
        self.base[vid] = base
        self.terms[vid] = self.identity(vid) if terms is None else terms
        self.root[vid] = root

    def at(self, vid: int, idx: list[str]) -> str:
        """The element of ``vid`` at value indices ``idx`` (one per axis of the value)."""
        parts = [off if a is None else _affine(off, m, idx[a]) for a, m, off in self.terms[vid]]
        return f"{self.base[vid]}[{', '.join(parts)}]"

    def emit(self, deps, lines: list[str]) -> bool:
        """Loop-invariant work (it reads constants only) goes before the loop."""
        if all(v in self.invariant for v in deps):
            self.pre += lines
            return True
        self.body += lines
        return False

    def alloc(self, vid: int) -> str:
        """Give a step's output its own C-ordered buffer (or its carry's buffer, or its row of a stacked output)."""
        if vid in self.inplace:
            base = f"h{self.inplace[vid]}"
        elif vid in self.direct_ys:
            base = f"v{vid}"
            self.writable_views.add(base)
            self.body.append(f"v{vid} = y{self.direct_ys[vid]}[i]")
        else:
            key = (self.ish(vid), self.np_dtype(vid))
            spare = self.free.get(key)
            base = spare.pop() if spare else self.tmp(self.val(vid).shape, self.np_dtype(vid))
            self.owned[vid] = (key, base)
        self.bind(vid, base, vid)
        return base

    def loops(self, shape, ind: str, prefix: str = "j") -> tuple[list[str], str]:
        lines = []
        for k, n in enumerate(shape):
            lines.append(f"{ind}for {prefix}{k} in range({self.dim(n)}):")
            ind += "    "
        return lines, ind

    def copy(self, dst: str, vid: int, perm=None) -> list[str]:
        """Loops writing ``vid`` into the C array ``dst``; with ``perm``, ``dst`` axis ``k`` is axis ``perm[k]``."""
        shape = self.val(vid).shape
        perm = tuple(range(len(shape))) if perm is None else tuple(perm)
        out_shape = _ishape(tuple(shape[p] for p in perm))
        lines, inner = self.loops(out_shape, "")
        where = {p: k for k, p in enumerate(perm)}
        src = self.at(vid, [f"j{where[a]}" for a in range(len(shape))])
        lines.append(f"{inner}{dst}[{', '.join(f'j{k}' for k in range(len(out_shape)))}] = {src}")
        return lines

    def materialize(self, vid: int, perm: tuple[int, ...]) -> str:
        """A C-ordered copy of ``vid`` with its axes permuted by ``perm`` (made once if ``vid`` is invariant)."""
        shape = self.val(vid).shape
        buf = self.tmp(tuple(shape[p] for p in perm), self.np_dtype(vid))
        self.emit([vid], self.copy(buf, vid, perm))
        return buf

    # -- steps --------------------------------------------------------------------------------------------------
    def elementwise(self, st: Elementwise, n: int) -> None:
        red = st.reduction
        outs = [v for _, v in st.outputs] + ([red.out] if red is not None else [])
        for v in outs:
            self.alloc(v)
        if red is None or red.kind != "sum":
            self.body += self.region(st, {}, f"s{n}_", "")
            return
        # its own function, so that only the reduction may reassociate (as the stand-alone kernels do); it reads
        # its sizes as arguments, so that identical reductions (a gradient's, often) share one function
        names: dict = {}
        for v in list(st.inputs) + outs:
            names.setdefault(self.base[v], f"a{len(names)}")
        start = len(self.sizes)
        lines = self.region(st, names, "s_", "    ")
        dims = len(self.sizes) - start
        outside = False  # a view's map may read sizes of its own

        def size(m: re.Match) -> str:
            nonlocal outside
            k = int(m.group(1))
            if start <= k < start + dims:
                return f"n{k - start}"
            outside = True
            return m.group(0)

        text = "\n".join(_DIM.sub(size, ln) for ln in lines)
        params = [f"n{k}" for k in range(dims)] + list(names.values())
        call = [f"d[{start + k}]" for k in range(dims)] + list(names)
        if outside:
            params, call = ["d", *params], ["d", *call]
        key = (text, tuple((self.dtype_of(b, st, outs), self.access(b)) for b in names))
        name = self.sum_helpers.get(key)
        if name is None:
            name = self.sum_helpers[key] = f"{self.pfx}r{len(self.sum_helpers)}"
            self.helpers.append(
                # called from the loop only: no wrapper for calls from Python to compile
                "@numba.njit(error_model='numpy', nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, "
                "fastmath={'reassoc', 'contract'})\n"
                f"def {name}({', '.join(params)}):\n{text}\n"
            )
        self.body.append(f"{name}({', '.join(call)})")

    def dtype_of(self, base: str, st: Elementwise, outs: list[int]) -> str:
        return next(self.np_dtype(v) for v in list(st.inputs) + outs if self.base[v] == base)

    def access(self, base: str) -> str:
        """How a base array is typed at every call of a helper: writable (carries, temporaries, stacked outputs),
        read-only (the top-level kernel's constants and scanned inputs), or, in a nested loop's function, as its
        caller passed it (then only that base has its type)."""
        if base[0] in "hby" or base in self.writable_views:
            return "w"
        return "r" if not self.pfx else base

    def region(self, st: Elementwise, names: dict, pfx: str, ind: str) -> list[str]:
        """The loop nest of a fused region; ``names`` renames bases (a helper function's parameters)."""

        def ren(code: str) -> str:
            b, _, rest = code.partition("[")
            return f"{names.get(b, b)}[{rest}" if rest else names.get(b, b)

        shape = _ishape(st.shape)
        r = len(shape)
        red = st.reduction
        loads = []
        for k, v in enumerate(st.inputs):
            vs = self.val(v).shape
            pad = r - len(vs)
            idx = ["0" if (vs[a] == 1 and shape[pad + a] != 1) else f"j{pad + a}" for a in range(len(vs))]
            loads.append(f"{pfx}x{k} = {ren(self.at(v, idx))}")
        ops = []
        for j, op in enumerate(st.ops):
            ae = fusion.operand_names(op, f"{pfx}x", f"{pfx}t", self.consts)
            ops.append(f"{pfx}t{j} = {fusion._expr(op, ae, [])}")
        full = ", ".join(f"j{k}" for k in range(r))
        stores = [f"{ren(self.base[v])}[{full}] = {pfx}t{j}" for j, v in st.outputs]
        inner = loads + ops + stores
        if red is None:
            lines, deep = self.loops(shape, ind)
            return lines + [deep + s for s in inner]
        axes = tuple(red.axes) if st.shape else (0,)
        kept = [k for k in range(r) if k not in axes]
        kidx = ", ".join(f"j{k}" for k in kept) or "0"
        dt = fusion._compute(np.dtype(self.val(red.out).dtype))
        t = f"{pfx}t{red.op}"
        out = ren(self.base[red.out])
        m = len(axes)
        lines = []
        if axes == tuple(range(r - m, r)):
            cur = ind
            for k in kept:
                lines.append(f"{cur}for j{k} in range({self.dim(shape[k])}):")
                cur += "    "
            acc = f"{pfx}acc"
            lines.append(f"{cur}{acc} = {fusion._init(red.kind, dt)}")
            outer = cur
            for k in axes:
                lines.append(f"{cur}for j{k} in range({self.dim(shape[k])}):")
                cur += "    "
            lines += [cur + s for s in inner]
            lines.append(f"{cur}{acc} = {fusion._combine(red.kind, acc, t, dt)}")
            lines.append(f"{outer}{out}[{kidx}] = {acc}")
            return lines
        cur = ind
        for k in kept:
            lines.append(f"{cur}for j{k} in range({self.dim(shape[k])}):")
            cur += "    "
        lines.append(f"{cur}{out}[{kidx}] = {fusion._init(red.kind, dt)}")
        body, cur = self.loops(shape, ind)
        lines += body + [cur + s for s in inner]
        lines.append(f"{cur}{out}[{kidx}] = {fusion._combine(red.kind, f'{out}[{kidx}]', t, dt)}")
        return lines

    def matrix(self, vid: int, rows, cols) -> str:
        """``vid`` as a 2-D C- or F-ordered matrix with axes ``rows`` x ``cols`` (a copy where needed)."""
        shape = self.val(vid).shape
        r = len(shape)
        order = tuple(rows) + tuple(cols)
        base = self.base[vid]
        if self.is_c(vid):
            if r == 2 and len(rows) == 1:
                return base if rows[0] == 0 else f"{base}.T"
            if order == tuple(range(r)):
                return f"{base}.reshape(({self.prod([shape[a] for a in rows])}, {self.prod([shape[a] for a in cols])}))"
            if tuple(cols) + tuple(rows) == tuple(range(r)):
                k, m = self.prod([shape[a] for a in cols]), self.prod([shape[a] for a in rows])
                return f"{base}.reshape(({k}, {m})).T"
        elif r == 2 and self.terms[vid] == ((1, 1, "0"), (0, 1, "0")) and len(rows) == 1:
            return f"{base}.T" if rows[0] == 0 else base
        buf = self.materialize(vid, order)
        if r == 2 and len(rows) == 1:
            return buf
        m, k = self.prod([shape[a] for a in rows]), self.prod([shape[a] for a in cols])
        return f"{buf}.reshape(({m}, {k}))"

    def dot(self, st: Dot) -> None:
        for v in (st.lhs, st.rhs):
            if np.dtype(self.val(v).dtype) not in _DOT_DTYPES:
                raise Unsupported(f"dot_general on {self.val(v).dtype}")
        if importlib.util.find_spec("scipy") is None:
            raise Unsupported("numba's np.dot needs scipy's BLAS")
        (lc, rc), (lb, rb) = st.contract, st.batch
        ls, rs = self.val(st.lhs).shape, self.val(st.rhs).shape
        lf = [a for a in range(len(ls)) if a not in lc and a not in lb]
        rf = [a for a in range(len(rs)) if a not in rc and a not in rb]
        nb = len(lb)
        if nb == 0:
            a = self.matrix(st.lhs, lf, lc)
            b = self.matrix(st.rhs, rc, rf)
            out = self.alloc(st.out)
            if not (len(lf) == 1 and len(rf) == 1):
                out = f"{out}.reshape(({self.prod([ls[x] for x in lf])}, {self.prod([rs[x] for x in rf])}))"
            self.body.append(f"{self.gemm_for(st, ls, rs, lf, rf, lc)}({a}, {b}, {out})")
            return
        # batch axes first, then one matmul per batch index
        lperm, rperm = tuple(lb) + tuple(lf) + tuple(lc), tuple(rb) + tuple(rc) + tuple(rf)
        lcode = self.base[st.lhs]
        if not (self.is_c(st.lhs) and lperm == tuple(range(len(ls)))):
            lcode = self.materialize(st.lhs, lperm)
        rcode = self.base[st.rhs]
        if not (self.is_c(st.rhs) and rperm == tuple(range(len(rs)))):
            rcode = self.materialize(st.rhs, rperm)
        out = self.alloc(st.out)
        lines, ind = self.loops([ls[x] for x in lb], "", "q")
        bidx = ", ".join(f"q{k}" for k in range(nb))

        def mat(code: str, rows: list[int], cols: list[int]) -> str:
            # a reshape is costly to compile: index the batch away and reshape only if the rest is not 2-D
            if len(rows) == 1 and len(cols) == 1:
                return f"{code}[{bidx}]"
            return f"{code}[{bidx}].reshape(({self.prod(rows)}, {self.prod(cols)}))"

        lf_n, lc_n, rf_n = [ls[x] for x in lf], [ls[x] for x in lc], [rs[x] for x in rf]
        a, b, o = mat(lcode, lf_n, lc_n), mat(rcode, lc_n, rf_n), mat(out, lf_n, rf_n)
        lines.append(f"{ind}{self.gemm_for(st, ls, rs, lf, rf, lc)}({a}, {b}, {o})")
        self.body += lines

    def gemm_for(self, st: Dot, ls, rs, lf, rf, lc) -> str:
        m, n, k = (math.prod(s[x] for x in ax) for s, ax in ((ls, lf), (rs, rf), (ls, lc)))
        return gemm.choose(self.val(st.lhs).dtype, m, n, k)

    def view(self, st, terms) -> None:
        self.bind(st.out, self.base[st.src], self.root[st.src], terms)
        if st.src in self.invariant:
            self.invariant.add(st.out)

    def transpose(self, st: Transpose) -> None:
        inv = {p: k for k, p in enumerate(st.perm)}
        self.view(st, tuple((None if a is None else inv[a], m, off) for a, m, off in self.terms[st.src]))

    def slice_(self, st: Slice) -> None:
        terms = []
        for a, m, off in self.terms[st.src]:
            if a is None:
                terms.append((a, m, off))
            else:
                shift = m * st.start[a]
                terms.append((a, m * st.strides[a], _affine(off, 1, str(shift)) if shift else off))
        self.view(st, tuple(terms))

    def rev(self, st: Rev) -> None:
        ss = self.val(st.src).shape
        terms = []
        for a, m, off in self.terms[st.src]:
            if a is None or a not in st.dims:
                terms.append((a, m, off))
            else:  # j -> (n - 1) - j
                last = f"({self.dim(ss[a])} - 1)"
                terms.append((a, -m, _affine(off, m, last)))
        self.view(st, tuple(terms))

    def reshape(self, st: Reshape) -> None:
        src = st.src
        base = self.base[src]
        if not self.is_c(src):
            base = self.materialize(src, tuple(range(len(self.val(src).shape))))
        if self.ish(src) == self.ish(st.out):
            self.bind(st.out, base, self.root[src])
        else:
            self.bind(st.out, f"v{st.out}", self.root[src])
            self.emit([src], [f"v{st.out} = {base}.reshape({self.shape_expr(self.ish(st.out))})"])
        if src in self.invariant:
            self.invariant.add(st.out)

    def broadcast(self, st: Broadcast) -> None:
        ss, os_ = self.val(st.src).shape, self.val(st.out).shape
        terms = []
        for a, m, off in self.terms[st.src]:
            if a is None or (ss[a] == 1 and os_[st.dims[a]] != 1):
                terms.append((None, 0, off))  # a broadcast axis reads index 0
            else:
                terms.append((st.dims[a], m, off))
        self.view(st, tuple(terms))

    def concat(self, st: Concat) -> None:
        out = self.alloc(st.out)
        shape = self.val(st.out).shape
        lines: list[str] = []
        off = 0
        for src in st.srcs:
            sshape = self.val(src).shape
            loops, inner = self.loops(sshape, "")
            idx = [f"j{k}" for k in range(len(sshape))]
            dst = list(idx)
            if off:
                dst[st.axis] = f"j{st.axis} + {self.dim(off)}"
            lines += loops + [f"{inner}{out}[{', '.join(dst)}] = {self.at(src, idx)}"]
            off += sshape[st.axis]
        assert off == shape[st.axis]
        self.body += lines

    def ys_copies(self, defined, copied: set) -> None:
        """Copy stacked outputs into their row as soon as their value exists (before any carry is overwritten)."""
        defined = set(defined)
        for k, v in enumerate(self.spec.ys):
            if v in defined and k not in copied and self.direct_ys.get(v) != k:
                copied.add(k)
                self.body.append(f"w{k} = y{k}[i]")
                self.body += self.copy(f"w{k}", v)

    def stop(self) -> None:
        """A while loop's exit: the predicate is computed (inside the loop, or once before it if invariant)."""
        if np.dtype(self.val(self.spec.cond).dtype) != np.dtype(np.bool_):
            raise Unsupported("a while predicate that is not boolean")
        self.body.append(f"if not {self.at(self.spec.cond, ['0'] * len(self.val(self.spec.cond).shape))}:")
        self.body.append("    break")

    def dynamic_slice(self, st: DynamicSlice) -> None:
        src, out = st.src, self.alloc(st.out)
        ss, os_ = self.val(src).shape, self.val(st.out).shape
        n = self.n_steps
        self.n_steps += 1
        lines = []
        for a, sv in enumerate(st.starts):
            # clamped like lax.dynamic_slice: the slice always lies inside the operand
            lim = f"{self.dim(ss[a] - os_[a])}"
            lines.append(f"q{n}_{a} = min(max(np.int64({self.at(sv, ['0'] * len(self.val(sv).shape))}), 0), {lim})")
        loops, inner = self.loops(_ishape(os_), "")
        idx = [f"j{a} + q{n}_{a}" for a in range(len(os_))]
        full = ", ".join(f"j{k}" for k in range(len(_ishape(os_))))
        lines += loops + [f"{inner}{out}[{full}] = {self.at(src, idx)}"]
        self.body += lines

    def dynamic_update_slice(self, st: DynamicUpdateSlice) -> None:
        src, upd = st.src, st.update
        ss, us = self.val(src).shape, self.val(upd).shape
        n = self.n_steps
        self.n_steps += 1
        starts = []
        for a, sv in enumerate(st.starts):
            lim = f"{self.dim(ss[a] - us[a])}"
            starts.append(f"q{n}_{a} = min(max(np.int64({self.at(sv, ['0'] * len(self.val(sv).shape))}), 0), {lim})")
        out = self.alloc(st.out)
        lines = starts + self.copy(out, src)
        loops, inner = self.loops(_ishape(us), "")
        dst = ", ".join(f"j{a} + q{n}_{a}" for a in range(len(us))) or "0"
        lines += loops + [f"{inner}{out}[{dst}] = {self.at(upd, [f'j{a}' for a in range(len(us))])}"]
        self.body += lines

    def _indexed(self, st, n: int, what: str) -> tuple[list[str], str, list[str], list[str]]:
        """The loops of a gather or scatter: over the index tuples (``j``), each read into ``gx{n}_t``, wrapped
        and checked as NumPy does, then over the axes not indexed (``gr``). Also the index into the operand and
        into the gathered value (or the updates) at the innermost point."""
        xs, ish = self.val(st.src).shape, self.val(st.idx).shape
        nb = len(ish) - 1
        rest = [a for a in range(len(xs)) if a not in st.axes]
        lines, ind = self.loops(ish[:-1], "")
        for t, a in enumerate(st.axes):
            g, size = f"gx{n}_{t}", self.dim(xs[a])
            lines += [
                f"{ind}{g} = np.int64({self.at(st.idx, [f'j{b}' for b in range(nb)] + [str(t)])})",
                f"{ind}if {g} < 0:",
                f"{ind}    {g} += {size}",
                f"{ind}if {g} < 0 or {g} >= {size}:",
                f"{ind}    raise IndexError('{what}: index out of bounds')",
            ]
        more, ind = self.loops([xs[a] for a in rest], ind, "gr")
        at_src = [f"gx{n}_{st.axes.index(a)}" if a in st.axes else f"gr{rest.index(a)}" for a in range(len(xs))]
        at_out = [f"j{b}" for b in range(nb)] + [f"gr{k}" for k in range(len(rest))]
        return lines + more, ind, at_src, at_out

    def gather(self, st: Gather) -> None:
        n = self.n_steps
        self.n_steps += 1
        out = self.alloc(st.out)
        lines, ind, at_src, at_out = self._indexed(st, n, "gather")
        self.body += lines + [f"{ind}{out}[{', '.join(at_out) or '0'}] = {self.at(st.src, at_src)}"]

    def scatter_add(self, st: ScatterAdd) -> None:
        n = self.n_steps
        self.n_steps += 1
        out = self.alloc(st.out)
        lines, ind, at_src, at_upd = self._indexed(st, n, "scatter_add")
        self.body += self.copy(out, st.src) + lines + [f"{ind}{out}[{', '.join(at_src)}] += {self.at(st.upd, at_upd)}"]

    def pad(self, st: Pad) -> None:
        out = self.alloc(st.out)
        os_, ss = self.val(st.out).shape, self.val(st.src).shape
        loops, inner = self.loops(_ishape(os_), "")
        full = ", ".join(f"j{k}" for k in range(len(_ishape(os_))))
        lines = loops + [f"{inner}{out}[{full}] = {self.at(st.value, ['0'] * len(self.val(st.value).shape))}"]
        loops, inner = self.loops(_ishape(ss), "")
        dst = []
        for a, (lo, _, interior) in enumerate(st.config):
            j = f"j{a}" if interior == 0 else f"{self.dim(interior + 1)} * j{a}"
            dst.append(f"{j} + {self.dim(lo)}" if lo else j)
        src = self.at(st.src, [f"j{a}" for a in range(len(ss))])
        lines += loops + [f"{inner}{out}[{', '.join(dst) or '0'}] = {src}"]
        self.body += lines

    def switch(self, st: Switch, n: int) -> None:
        if np.dtype(self.val(st.index).dtype).kind not in "iu":
            raise Unsupported("a cond index that is not an integer")
        for v in st.outs:
            self.alloc(v)
        idx = self.at(st.index, ["0"] * len(self.val(st.index).shape))
        last = len(st.branches) - 1
        self.body.append(f"w{self.pfx}{n} = min(max(np.int64({idx}), 0), {last})")
        for b, br in enumerate(st.branches):
            outer, self.body = self.body, []
            for sub in br.steps:
                k = self.n_steps
                self.n_steps += 1
                self.step(sub, k)
            for v, r in zip(st.outs, br.results):
                self.body += self.copy(self.base[v], r)
            inner, self.body = self.body, outer
            head = "if" if b == 0 else "elif"
            self.body.append(f"{head} w{self.pfx}{n} == {b}:" if b < last else ("else:" if b else "if True:"))
            self.body += ["    " + ln for ln in inner] or ["    pass"]

    def c_array(self, vid: int) -> str:
        """``vid`` as a C-ordered array of its own shape (a copy if it is read through a non-identity map)."""
        if self.is_c(vid):
            return self.base[vid]
        return self.materialize(vid, tuple(range(len(self.val(vid).shape))))

    def loop(self, st: Loop, n: int) -> None:
        sp = st.spec
        sub = _Gen(sp, f"{self.pfx}l{n}_", self.consts)
        fn = sub.function(f"{self.pfx}l{n}_kernel")
        self.helpers += sub.helpers + [fn]
        args = [self.c_array(v) for v in st.consts]
        nk = sp.n_carry
        for v, init in zip(st.outs[:nk], st.init):
            base = self.alloc(v)
            self.body += self.copy(base, init)
            args.append(base)
        length = self.dim(st.length)
        for v, inner in zip(st.xs, range(sp.n_consts + nk, sp.n_consts + nk + sp.n_xs)):
            a = self.c_array(v)
            if not sp.values[inner].shape:  # a rank-0 slice lives in a 1-element array
                a = f"{a}.reshape(({length}, 1))"
            args.append(a)
        for v, y in zip(st.outs[nk:], sp.ys):
            a = self.alloc(v)
            if not sp.values[y].shape:
                a = f"{a}.reshape(({length}, 1))"
            args.append(a)
        args += [self.tmp(shape, dtype) for shape, dtype in sub.temps]
        off = len(self.sizes)
        self.sizes += sub.sizes
        self.body.append(f"{self.pfx}l{n}_kernel({length}, d[{off}:{len(self.sizes)}], {', '.join(args)})")

    def step(self, st, n: int) -> None:
        kind = type(st)
        if kind in _WITH_N:
            getattr(self, _WITH_N[kind])(st, n)
        elif kind in _PLAIN:
            getattr(self, _PLAIN[kind])(st)
        else:
            raise Unsupported(f"step {kind.__name__}")

    # -- the whole function -------------------------------------------------------------------------------------
    def function(self, name: str) -> str:
        """The numba function running the whole loop (its helpers and constants collected on ``self``)."""
        sp = self.spec
        for v in sp.values:
            if np.dtype(v.dtype) not in VALUE_DTYPES:
                raise Unsupported(f"values of dtype {v.dtype}")
            if any(n == 0 for n in v.shape):
                raise Unsupported("zero-size values")
        nc, nk, nx = sp.n_consts, sp.n_carry, sp.n_xs
        args = [f"k{j}" for j in range(nc)] + [f"h{j}" for j in range(nk)]
        args += [f"x{j}" for j in range(nx)] + [f"y{j}" for j in range(len(sp.ys))]
        for j in range(nc):
            self.bind(j, f"k{j}", j)
        for j in range(nk):
            self.bind(nc + j, f"h{j}", nc + j)
        for j in range(nx):
            v = nc + nk + j
            self.bind(v, f"v{v}", v)
            self.body.append(f"v{v} = x{j}[i]")
        n_in = nc + nk + nx
        self.inplace = _inplace(sp)
        allocated = {v for st in sp.steps if type(st) not in _VIEWS for v in _io(st)[1]}
        for k, v in enumerate(sp.ys):
            if v in allocated and v not in self.direct_ys and v not in self.inplace:
                self.direct_ys[v] = k
        copied: set = set()
        self.ys_copies(range(n_in), copied)
        dead = _dead_after(sp)
        for n, st in enumerate(sp.steps):
            if sp.cond is not None and n == sp.n_cond_steps:
                self.stop()
            self.step(st, n)
            self.ys_copies(_io(st)[1], copied)
            for v in dead.get(n, ()):
                if v in self.owned:
                    key, base = self.owned.pop(v)
                    self.free.setdefault(key, []).append(base)
        if sp.cond is not None and len(sp.steps) == sp.n_cond_steps:
            self.stop()
        # the new carry may read an old one (a swap, or a view of one): stage those before overwriting any
        carry_ids = set(range(nc, nc + nk))
        final = []
        for k, v in enumerate(sp.carry_out):
            if v == nc + k or self.inplace.get(v) == k:
                continue
            if self.root[v] in carry_ids:
                stage = self.tmp(self.val(v).shape, self.np_dtype(v))
                self.body += self.copy(stage, v)
                self.bind(v, stage, v)
            final += self.copy(f"h{k}", v)
        self.body += final
        lines = ["@numba.njit(error_model='numpy', nogil=True, no_cfunc_wrapper=True)"]
        args += [f"b{j}" for j in range(len(self.temps))]
        lines.append(f"def {name}(n, d, {', '.join(args)}):")
        lines += ["    " + s for s in self.pre]
        lines.append("    for it in range(n):")
        lines.append("        i = n - 1 - it" if sp.reverse else "        i = it")
        lines += ["        " + s for s in self.body]
        return "\n".join(lines) + "\n"

    def generate(self) -> str:
        fn = self.function("kernel")
        lines = [
            f"# funclib loop kernel (generator {GENERATOR_VERSION})",
            *fusion.KERNEL_IMPORTS,
            "from funclib.kernels.gemm import gemm, gemm_avx512",
            "",
        ]
        for dn in ("float32", "float64"):
            lines.append(f"_ZERO_{dn} = np.{dn}(0)")
        for (value, dt), name in self.consts.items():
            lines.append(f"{name} = np.{dt}({value})")
        lines += ["", ""]
        for h in self.helpers:
            lines += [h, ""]
        return "\n".join(lines) + "\n" + fn


class LoopKernel:
    """A generated whole-loop kernel: ``k(length, consts, init_carry, xs) -> (final_carry, ys)``."""

    def __init__(self, spec: LoopSpec):
        gen = _Gen(spec)
        self.source: str = gen.generate()
        self.spec = spec
        self._dims = np.asarray(gen.sizes, dtype=np.int64)
        self._temps = gen.temps
        self._want = [(np.dtype(v.dtype), _ishape(v.shape)) for v in spec.values]  # per value: how it is passed
        self._fn = None
        # scratch buffers kept between calls: a small program's kernel allocating a hundred of them per call spent
        # as long on np.empty as on its work. A call that finds them taken (another thread) allocates its own.
        self._scratch: list[np.ndarray] | None = None
        self._scratch_lock = threading.Lock()

    def _dispatcher(self):
        if self._fn is None:
            self._fn = diskcache.load_kernel(self.source)
        return self._fn

    def on_disk(self) -> bool:
        """Whether this kernel's machine code is in the kernel cache (a call loads it instead of compiling)."""
        return diskcache.compiled_on_disk(self.source)

    def prepare(self, consts: list, start: int = 0) -> list[np.ndarray]:
        """Constants ``start``, ``start + 1``, ... as the kernel takes them: read-only (so that every call has the
        same numba signature), C-ordered, rank-0 values as 1-element arrays. A caller with constants that never
        change prepares them once and passes ``ready``."""
        want = self._want
        out = []
        for j, c in enumerate(consts, start):
            dt, sh = want[j]
            if not (type(c) is np.ndarray and c.dtype == dt and c.shape == sh):
                c = np.ascontiguousarray(c, dtype=dt).reshape(sh)
            f = c.flags
            if f.writeable or not f.c_contiguous:
                c = _readonly(np.ascontiguousarray(c))
            out.append(c)
        return out

    def __call__(self, length: int, consts, carry, xs, ready: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Run the loop ``length`` times; the first ``ready`` of ``consts`` are already ``prepare``d."""
        sp = self.spec
        vals = sp.values
        nc, nk = sp.n_consts, sp.n_carry
        cargs = consts[:ready] + self.prepare(consts[ready:], ready) if ready else self.prepare(consts)
        hargs = [
            np.array(c, dtype=vals[nc + j].dtype, order="C", copy=True).reshape(_ishape(vals[nc + j].shape))
            for j, c in enumerate(carry)
        ]
        xargs = []
        for j, x in enumerate(xs):
            v = vals[nc + nk + j]
            xargs.append(_readonly(np.ascontiguousarray(x, dtype=v.dtype).reshape((length,) + _ishape(v.shape))))
        yargs = [np.empty((length,) + _ishape(vals[v].shape), vals[v].dtype) for v in sp.ys]
        fn = self._dispatcher()
        lock = self._scratch_lock
        if lock.acquire(blocking=False):
            try:
                temps = self._scratch
                if temps is None:
                    temps = self._scratch = [np.empty(shape, dtype) for shape, dtype in self._temps]
                fn(length, self._dims, *cargs, *hargs, *xargs, *yargs, *temps)
            finally:
                lock.release()
        else:
            fn(length, self._dims, *cargs, *hargs, *xargs, *yargs, *[np.empty(sh, dt) for sh, dt in self._temps])
        out_carry = [h.reshape(vals[nc + j].shape) for j, h in enumerate(hargs)]
        out_ys = [y.reshape((length,) + vals[v].shape) for y, v in zip(yargs, sp.ys)]
        return out_carry, out_ys


def _readonly(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def build(spec: LoopSpec) -> LoopKernel:
    """Generate the loop kernel for ``spec`` (compiled, or loaded from the disk cache, at its first call)."""
    return LoopKernel(spec)
