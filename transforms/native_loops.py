"""Loops whose whole body lowers to generated code run as one loop kernel (``funclib.kernels.loopgen``).

``native_scan(eqn, fallback, emitter)`` and ``native_while(eqn, fallback, emitter)`` describe the loop as a
``loopgen.LoopSpec`` and ask the emitter for its loop kernel. The description is built from pieces any loop can
use: ``plan_body`` plans a body's equations (the fusion plan's elementwise regions with their reductions) and
finds the literals that become loop-invariant inputs, ``BodyValues`` numbers the values, and ``describe_steps``
turns the planned equations into loop steps (fused regions, stand-alone reductions, ``dot_general``,
``transpose``, ``reshape``, ``broadcast_in_dim``, ``slice``, ``rev``, ``concatenate``). A ``while`` loop's
predicate is computed by steps of its own, ahead of the body's, and ``max_steps`` is the kernel's run-time trip
limit. A body with anything else (another loop, a ``cond``, a gather, a sort, float16 values, ...) gives ``None``
and the caller keeps its executor loop. If the generated kernel fails to compile, the step logs it and runs
``fallback`` from then on, so results never depend on which path ran.

``whole_program`` makes a small jitted program one generated function (``WholeProgram``); a longer one of small
values starts as its steps and switches once hot (``TieredProgram``, compiled in a background thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np
from funclib.kernels import compile_pool, fusion, loopgen
from funclib.kernels.backend import Emitter, Unsupported

from funclib import config
from funclib.jaxpr import Literal, Var

from .fusion_plan import REDUCTIONS, Group, kernel_name, plan_groups
from .plan import fused_region

log = logging.getLogger("funclib.jit")

# any/all of booleans are their max/min (a batched while loop's predicate is the any of its lanes')
_BOOL_REDUCTIONS = {"reduce_or": "max", "reduce_and": "min"}

# the trip limit of a while loop without max_steps
_UNBOUNDED = np.iinfo(np.int64).max


class NativeLoop:
    """The executor step for a ``scan`` or ``while``: runs the generated loop kernel; ``fallback`` if it cannot be
    compiled.

    ``consts`` says where each of the kernel's constants comes from: an operand of the equation (its index) or a
    value baked in (a body's closed-over array, an array literal).
    """

    def __init__(self, kind: str, kernel: Callable, consts: list, params: dict, fallback: Callable):
        self.kind = kind
        self.kernel = kernel
        self.source = kernel.source
        self.consts = consts
        self.fallback = fallback
        self.failed = False
        self.ran = False
        if kind == "scan":
            self.n_ops = params["num_consts"]
            self.n_carry = params["num_carry"]
            self.length = params["length"]
        else:
            self.n_ops = params["cond_nconsts"] + params["body_nconsts"]
            self.n_carry = None
            m = params["max_steps"]
            self.length = _UNBOUNDED if m is None else int(m)

    def __call__(self, *args):
        if not self.failed:
            try:
                out = self.run(args)
                self.ran = True
                return out
            except IndexError:
                # a gather's index out of range (checked as NumPy does): the executor raises NumPy's message
                return self.fallback(*args)
            except Exception as e:
                if self.ran:
                    raise
                # a body the generator describes but numba cannot compile: a generator limitation, not a user error
                log.warning(
                    "%s: the generated loop kernel failed (%s: %s); running the executor loop",
                    self.kind,
                    type(e).__name__,
                    e,
                )
                self.failed = True
        return self.fallback(*args)

    def run(self, args) -> list:
        consts = [args[c] if type(c) is int else c for c in self.consts]
        n = self.n_ops
        if self.n_carry is None:
            return self.kernel(self.length, consts, args[n:], [])[0]
        k = n + self.n_carry
        carry, ys = self.kernel(self.length, consts, args[n:k], args[k:])
        return carry + ys


# the executor steps of scan and while are one class; the names say which loops a program holds
NativeScan = NativeWhile = NativeLoop


def native_scan(eqn, fallback: Callable, emitter: Emitter) -> NativeLoop | None:
    """A ``NativeLoop`` for this scan equation, or ``None`` if its body holds an unsupported step."""
    return _native(eqn, fallback, emitter)


def native_while(eqn, fallback: Callable, emitter: Emitter) -> NativeLoop | None:
    """A ``NativeLoop`` for this while equation, or ``None`` if its predicate or body holds an unsupported step."""
    return _native(eqn, fallback, emitter)


def _native(eqn, fallback, emitter):
    name = eqn.prim.name
    try:
        spec, atoms = loop_spec(eqn, emitter)
        kernel = emitter.loop_kernel(spec)
    except Unsupported as e:
        log.debug("%s: executor loop (%s)", name, e)
        return None
    consts = []
    for kind, a in atoms:
        if kind == "operand":
            consts.append(a)
        elif kind == "closed":
            consts.append(np.asarray(getattr(a[1], "_value", a[1])))
        else:
            consts.append(np.asarray(a.val, dtype=a.aval.dtype))
    return NativeLoop(name, kernel, consts, eqn.params, fallback)


def _bodies(eqn) -> list:
    """The closed jaxprs an equation runs (as the loop generator sees them: loops and branches only)."""
    p = eqn.params
    name = eqn.prim.name
    if name == "scan":
        return [p["jaxpr"]]
    if name == "while":
        return [p["cond_jaxpr"], p["body_jaxpr"]]
    if name == "cond":
        return list(p["branches"])
    return []


def _nested(cjs, emitter, closed: dict, lits: dict) -> None:
    """Collect the closed-over values and the literals of every body nested in ``cjs`` (and their own literals):
    a generated loop takes them all as constants."""
    for cj in cjs:
        _, own = plan_body(cj.jaxpr, emitter)
        for a in own:
            lits.setdefault(id(a), a)
        for e in cj.jaxpr.eqns:
            subs = _bodies(e)
            for sub in subs:
                for v, c in zip(sub.jaxpr.constvars, sub.consts):
                    closed.setdefault(v, (v, c))
            _nested(subs, emitter, closed, lits)


def loop_spec(eqn, emitter: Emitter) -> tuple[loopgen.LoopSpec, list]:
    """The ``LoopSpec`` of a ``scan`` or ``while`` equation and where each of its constants comes from:
    ``("operand", index)``, ``("closed", (var, value))`` or ``("literal", literal)``.

    Values are numbered: each body's closed-over values and constant operands, then those of the bodies nested
    in them, then literals, then the carry (read by a while loop's predicate and body alike) and the scanned
    slices; steps are the predicate's (a while loop), then the body's."""
    p = eqn.params
    bodies = _bodies(eqn)
    if eqn.prim.name == "scan":
        n_ops = [p["num_consts"]]
    else:
        n_ops = [p["cond_nconsts"], p["body_nconsts"]]
    vals = BodyValues()
    atoms: list = []
    start = 0
    for cj, n in zip(bodies, n_ops):
        for v, c in zip(cj.jaxpr.constvars, cj.consts):
            vals.bind(v)
            atoms.append(("closed", (v, c)))
        for k, v in enumerate(cj.jaxpr.invars[:n]):
            vals.bind(v)
            atoms.append(("operand", start + k))
        start += n
    closed: dict = {}
    lits: dict = {}
    _nested(bodies, emitter, closed, lits)
    for v, c in closed.values():
        vals.bind(v)
        atoms.append(("closed", (v, c)))
    for a in lits.values():
        vals.bind(a)
        atoms.append(("literal", a))
    n_consts = len(vals.values)
    first = bodies[0].jaxpr.invars[n_ops[0] :]
    for k, v in enumerate(first):
        w = vals.bind(v)
        for cj, n in zip(bodies[1:], n_ops[1:]):
            vals.ids[cj.jaxpr.invars[n + k]] = w
    if eqn.prim.name == "scan":
        nk = p["num_carry"]
        steps = describe_steps(plan_body(bodies[0].jaxpr, emitter)[0], vals, emitter)
        outs = [vals.ref(a) for a in bodies[0].jaxpr.outvars]
        spec = loopgen.LoopSpec(
            values=tuple(vals.values),
            n_consts=n_consts,
            n_carry=nk,
            n_xs=len(first) - nk,
            steps=tuple(steps),
            carry_out=tuple(outs[:nk]),
            ys=tuple(outs[nk:]),
            reverse=bool(p["reverse"]),
        )
        return spec, atoms
    cj, bj = bodies
    c_steps = describe_steps(plan_body(cj.jaxpr, emitter)[0], vals, emitter)
    pred = vals.ref(cj.jaxpr.outvars[0])
    b_steps = describe_steps(plan_body(bj.jaxpr, emitter)[0], vals, emitter)
    spec = loopgen.LoopSpec(
        values=tuple(vals.values),
        n_consts=n_consts,
        n_carry=len(first),
        n_xs=0,
        steps=tuple(c_steps) + tuple(b_steps),
        carry_out=tuple(vals.ref(a) for a in bj.jaxpr.outvars),
        ys=(),
        reverse=False,
        cond=pred,
        n_cond_steps=len(c_steps),
    )
    return spec, atoms


# A program runs as one generated function when it has at most WHOLE_PROGRAM_MAX_STEPS steps and no value over
# WHOLE_PROGRAM_MAX_ELEMENTS elements. Past the first, its compile time outgrows what it saves (measured cold,
# one thread: a 4-step MLP compiles in 3.1 s as one function against 3.4 s as steps, and calls in 18 us against
# 151 us; a 123-step MAML update compiles in 13.6 s of CPU against 2.9 s and calls in 0.15-0.2 ms against
# 0.4-0.6 ms); past the second, the fused kernels' work (vectorized float32 math, staged rows, placed outputs)
# outweighs the dispatch.
WHOLE_PROGRAM_MAX_STEPS = 16
WHOLE_PROGRAM_MAX_ELEMENTS = 4096
# A program of up to WHOLE_PROGRAM_TIERED_MAX_STEPS steps (values as small) starts as its steps and switches to one
# function once it is hot: after ``config.whole_program_hot_calls`` calls it is compiled in a background thread,
# and used from the first call after it is ready. One whose function is already in the kernel cache uses it at
# once. The bound keeps a background compile under about half a minute (about 0.1 s of CPU per step, measured on
# the MAML update).
WHOLE_PROGRAM_TIERED_MAX_STEPS = 256
# A tiered program's values may be larger, since it keeps the faster of its steps and its one function, timed on
# its own calls (``TieredProgram``). Measured on one core: a jitted 35-step hessian of f: R^128 -> R, 107 -> 61 us
# as one function; per-sample gradients of a batch of 64, 6.0 -> 3.7 ms; an MLP 784-256-256-10 train step with
# Adam (batch 128, values up to 784 x 256), 1.74 -> 1.50 ms; a 3-step program of two 128 x 128 products lost
# 5-15% as one function, which is why short programs keep the smaller bound. The bound caps the scratch memory a
# function keeps between calls.
WHOLE_PROGRAM_TIERED_MAX_ELEMENTS = 1 << 18
# calls timed on each side before a tiered program settles on its steps or its function (the function's first
# call after the switch is not counted: it touches its buffers for the first time)
TIERED_TRIALS = 3


class WholeProgram:
    """A whole jitted program as one generated function (``loopgen`` with one iteration, the outputs its stacked
    outputs); ``fallback`` (the program of steps) if it cannot be compiled."""

    kind = "program"

    def __init__(self, kernel, consts: list, n_out: int, fallback: Callable):
        self.kernel = kernel
        self.source = kernel.source
        self.consts = kernel.prepare(consts)  # once: the per-call checks of a dozen constants cost 10-40 us
        self.fallback = fallback
        self.failed = False
        self.ran = False

    def __call__(self, *args):
        if not self.failed:
            try:
                _, ys = self.kernel(1, self.consts + list(args), [], [], len(self.consts))
                self.ran = True
                return [y[0] for y in ys]
            except IndexError:
                # an index out of range (checked as NumPy does): the steps raise NumPy's message, with the shapes
                return self.fallback(*args)
            except Exception as e:
                if self.ran:
                    raise
                log.warning(
                    "program: the generated function failed (%s: %s); running the program's steps", type(e).__name__, e
                )
                self.failed = True
        return self.fallback(*args)


def whole_program(
    jaxpr, consts: list, fallback: Callable, emitter: Emitter, tiered: bool = False
) -> WholeProgram | TieredProgram | None:
    """The program ``jaxpr`` (constvars valued ``consts``) as one generated function, if every equation lowers to
    the loop generator and no value has more than ``WHOLE_PROGRAM_MAX_ELEMENTS`` elements; else ``None``. With
    ``tiered`` (a program past ``WHOLE_PROGRAM_MAX_STEPS``, whose values may have up to
    ``WHOLE_PROGRAM_TIERED_MAX_ELEMENTS``), a ``TieredProgram`` running ``fallback`` until hot.

    A small program's steps cost more in dispatch (a Python call, argument checks and output allocation each,
    1-3 us) than in work, and one function compiles no slower than its separate kernels."""
    avals = [v.aval for v in (*jaxpr.constvars, *jaxpr.invars)] + [v.aval for e in jaxpr.eqns for v in e.outputs]
    limit = WHOLE_PROGRAM_TIERED_MAX_ELEMENTS if tiered else WHOLE_PROGRAM_MAX_ELEMENTS
    if not jaxpr.eqns or any(a.size > limit for a in avals):
        return None
    try:
        items, own = plan_body(jaxpr, emitter)
        vals = BodyValues()
        baked = []
        for v, c in zip(jaxpr.constvars, consts):
            vals.bind(v)
            baked.append(np.asarray(getattr(c, "_value", c)))
        closed: dict = {}
        lits = {id(a): a for a in own}
        for e in jaxpr.eqns:
            subs = _bodies(e)
            for sub in subs:
                for v, c in zip(sub.jaxpr.constvars, sub.consts):
                    closed.setdefault(v, (v, c))
            _nested(subs, emitter, closed, lits)
        for v, c in closed.values():
            vals.bind(v)
            baked.append(np.asarray(getattr(c, "_value", c)))
        for a in lits.values():
            vals.bind(a)
            baked.append(np.asarray(a.val, dtype=a.aval.dtype))
        for v in jaxpr.invars:
            vals.bind(v)
        n_consts = len(vals.values)
        steps = describe_steps(items, vals, emitter)
        spec = loopgen.LoopSpec(
            values=tuple(vals.values),
            n_consts=n_consts,
            n_carry=0,
            n_xs=0,
            steps=tuple(steps),
            carry_out=(),
            ys=tuple(vals.ref(a) for a in jaxpr.outvars),
            reverse=False,
        )
        kernel = emitter.loop_kernel(spec)
    except Unsupported as e:
        log.debug("program: steps (%s)", e)
        return None
    whole = WholeProgram(kernel, baked, len(jaxpr.outvars), fallback)
    if tiered and config.whole_program_hot_calls > 0 and not kernel.on_disk():
        return TieredProgram(whole, fallback, config.whole_program_hot_calls)
    return whole


class TieredProgram:
    """A program that runs as its steps (``fallback``) until its ``hot``-th call, which starts compiling ``whole``
    (a ``WholeProgram``) in a background thread; the calls after the compile finished run ``whole``. The two
    compute the same expressions (BLAS products, fused scalar expressions); sums may round differently, as
    their vectorized reduction order differs. When the steps ran at least ``TIERED_TRIALS`` timed calls before the
    compile started (its second call on), the function is timed over as many calls and kept only if its median
    is below theirs; else the program goes back to its steps for good and lets the function's buffers go.

    ``wait_for_compiles()`` waits for the background compiles (benchmarks and tests that time the steady state).
    """

    kind = "program"

    def __init__(self, whole: WholeProgram, fallback: Callable, hot: int):
        self.whole = whole
        self.source = whole.source
        self.fallback = fallback
        self.hot = hot
        self.calls = 0
        self.ready = False
        self.thread: threading.Thread | None = None
        self.done: Future | None = None
        self.timed_steps: list[float] = []
        self.timed_whole: list[float] = []
        self.settled = False

    @property
    def chose_steps(self) -> bool:
        """Whether the steps ran faster and the function was dropped for good."""
        return self.whole is None

    def __call__(self, *args):
        if self.ready:
            if self.settled:
                return self.whole(*args)
            return self._trial(args)
        if self.chose_steps:
            return self.fallback(*args)
        self.calls += 1
        if 1 < self.calls < self.hot:
            t0 = time.perf_counter()
            out = self.fallback(*args)
            self.timed_steps.append(time.perf_counter() - t0)
            return out
        if self.calls >= self.hot and self.thread is None:
            t = threading.Thread(target=self._compile, args=(args,), name="funclib-compile", daemon=True)
            self.thread = t
            with _pending_lock:
                _pending.add(t)
            self.done = Future()
            compile_pool.track(self.done)  # so that fl.config.wait_for_compilation waits for it too
            t.start()
        return self.fallback(*args)

    def _trial(self, args):
        """A call of the function while it is being compared with the steps."""
        t0 = time.perf_counter()
        out = self.whole(*args)
        self.timed_whole.append(time.perf_counter() - t0)
        if len(self.timed_steps) < TIERED_TRIALS:
            self.settled = True
        elif len(self.timed_whole) > TIERED_TRIALS:
            whole, steps = float(np.median(self.timed_whole[1:])), float(np.median(self.timed_steps))
            if whole >= steps:
                log.info("program: its steps ran faster (%.3g s) than one function (%.3g s)", steps, whole)
                self.ready, self.whole = False, None
            self.settled = True
        return out

    def _compile(self, args) -> None:
        w = self.whole
        try:
            w.kernel(1, w.consts + list(args), [], [], len(w.consts))
            w.ran = True
            self.ready = True
        except Exception as e:
            log.warning(
                "program: the generated function failed (%s: %s); running the program's steps", type(e).__name__, e
            )
            w.failed = True
        finally:
            with _pending_lock:
                _pending.discard(threading.current_thread())
            self.done.set_result(self.ready)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for this program's background compile, if started; whether it runs as one function now."""
        t = self.thread
        if t is not None:
            t.join(timeout)
        return self.ready


_pending: set = set()
_pending_lock = threading.Lock()


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Wait until every background compile of a hot program (``TieredProgram``) has finished; False if
    ``timeout`` seconds passed first.

    >>> from funclib.transforms.native_loops import wait_for_compiles
    >>> wait_for_compiles(timeout=60.0)
    True
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _pending_lock:
            threads = list(_pending)
        if not threads:
            return True
        for t in threads:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            t.join(left)


class BodyValues:
    """The numbered values of a loop body as ``loopgen.Value``s, and which jaxpr atom each one is."""

    def __init__(self):
        self.values: list[loopgen.Value] = []
        self.ids: dict = {}

    def bind(self, a) -> int:
        """A new value for the variable (or literal) ``a``."""
        self.values.append(loopgen.Value(a.aval.dtype.name, tuple(a.aval.shape)))
        self.ids[a if type(a) is Var else id(a)] = len(self.values) - 1
        return len(self.values) - 1

    def ref(self, a) -> int:
        return self.ids[a if type(a) is Var else id(a)]


def plan_body(jaxpr, emitter: Emitter) -> tuple[list, list]:
    """The planned equations of a loop body (fused regions without staging, which the loop generator does not
    emit), and the literals that become loop-invariant inputs: operands of steps other than fused regions, array
    literals and literal outputs."""
    items = plan_groups(jaxpr, emitter, staged=False, scalars=True)
    lits: dict = {}
    for kind, item in items:
        if kind == "group":
            operands = item.inputs
        elif not item.prim.multiple_results and kernel_name(item, emitter) is not None:
            operands = _distinct_inputs(item.inputs)
        else:
            operands = item.inputs
        for a in operands:
            if type(a) is Literal:
                lits.setdefault(id(a), a)
    for a in jaxpr.outvars:
        if type(a) is Literal:
            lits.setdefault(id(a), a)
    return items, list(lits.values())


def describe_steps(items: list, vals: BodyValues, emitter: Emitter) -> list:
    """The ``loopgen`` steps of a planned body (``plan_body``) whose inputs ``vals`` has bound; binds every value
    they compute. ``Unsupported`` for an equation the loop generator does not emit."""
    steps: list = []
    ref, out = vals.ref, vals.bind
    for kind, item in items:
        if kind == "group":
            steps.append(_region(item, ref, out))
            continue
        e = item
        name = e.prim.name
        if not e.prim.multiple_results and kernel_name(e, emitter) is not None:
            g = Group(e.outputs[0].aval.shape)
            g.eqns, g.names, g.vars = [e], [kernel_name(e, emitter)], set(e.outputs)
            g.inputs = _distinct_inputs(e.inputs)
            g.outputs = list(e.outputs)
            steps.append(_region(g, ref, out))
        elif name in REDUCTIONS or name in _BOOL_REDUCTIONS:
            src = ref(e.inputs[0])
            dt = e.outputs[0].aval.dtype
            if name == "reduce_sum" and dt == np.dtype(np.bool_):
                raise Unsupported("a boolean sum")
            ops = (fusion.OpSpec("copy", (("in", 0),), dt.name),)
            axes = tuple(sorted(e.params["axes"]))
            kind = REDUCTIONS.get(name) or _BOOL_REDUCTIONS[name]
            red = loopgen.Reduction(kind, 0, axes, out(e.outputs[0]))
            steps.append(loopgen.Elementwise((src,), ops, (), tuple(e.inputs[0].aval.shape), red))
        elif name == "dot_general":
            if "preferred_element_type" in e.params:
                raise Unsupported("dot_general with a preferred_element_type")
            (lc, rc), (lb, rb) = e.params["dimension_numbers"]
            lhs, rhs = ref(e.inputs[0]), ref(e.inputs[1])
            steps.append(loopgen.Dot(lhs, rhs, out(e.outputs[0]), (tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))))
        elif name == "transpose":
            steps.append(loopgen.Transpose(ref(e.inputs[0]), out(e.outputs[0]), tuple(e.params["permutation"])))
        elif name == "reshape":
            steps.append(loopgen.Reshape(ref(e.inputs[0]), out(e.outputs[0])))
        elif name == "broadcast_in_dim":
            src = ref(e.inputs[0])
            steps.append(loopgen.Broadcast(src, out(e.outputs[0]), tuple(e.params["broadcast_dimensions"])))
        elif name == "slice":
            pr = e.params
            strides = pr["strides"] or (1,) * len(pr["start_indices"])
            steps.append(
                loopgen.Slice(
                    ref(e.inputs[0]),
                    out(e.outputs[0]),
                    tuple(pr["start_indices"]),
                    tuple(pr["limit_indices"]),
                    tuple(strides),
                )
            )
        elif name == "rev":
            steps.append(loopgen.Rev(ref(e.inputs[0]), out(e.outputs[0]), tuple(e.params["dimensions"])))
        elif name == "cond":
            branches = []
            for cj in e.params["branches"]:
                for bv, a in zip(cj.jaxpr.invars, e.inputs[1:]):
                    vals.ids[bv] = ref(a)
                bsteps = describe_steps(plan_body(cj.jaxpr, emitter)[0], vals, emitter)
                branches.append(loopgen.Branch(tuple(bsteps), tuple(ref(a) for a in cj.jaxpr.outvars)))
            ops = tuple(ref(a) for a in e.inputs[1:])
            steps.append(loopgen.Switch(ref(e.inputs[0]), ops, tuple(branches), tuple(out(v) for v in e.outputs)))
        elif name in ("scan", "while"):
            spec, atoms = loop_spec(e, emitter)
            consts = []
            for kind, a in atoms:
                consts.append(ref(e.inputs[a]) if kind == "operand" else ref(a[0] if kind == "closed" else a))
            if name == "scan":
                n_ops, length = e.params["num_consts"], e.params["length"]
                init = e.inputs[n_ops : n_ops + spec.n_carry]
                xs = e.inputs[n_ops + spec.n_carry :]
            else:
                n_ops = e.params["cond_nconsts"] + e.params["body_nconsts"]
                m = e.params["max_steps"]
                length = _UNBOUNDED if m is None else int(m)
                init, xs = e.inputs[n_ops:], []
            steps.append(
                loopgen.Loop(
                    spec,
                    tuple(consts),
                    tuple(ref(a) for a in init),
                    tuple(ref(a) for a in xs),
                    tuple(out(v) for v in e.outputs),
                    length,
                )
            )
        elif name == "pad":
            cfg = tuple(tuple(int(x) for x in c) for c in e.params["padding_config"])
            if any(lo < 0 or hi < 0 for lo, hi, _ in cfg):
                raise Unsupported("pad with negative edges")
            steps.append(loopgen.Pad(ref(e.inputs[0]), ref(e.inputs[1]), out(e.outputs[0]), cfg))
        elif name == "dynamic_slice":
            src, starts = ref(e.inputs[0]), tuple(ref(a) for a in e.inputs[1:])
            steps.append(loopgen.DynamicSlice(src, starts, out(e.outputs[0])))
        elif name == "dynamic_update_slice":
            src, upd = ref(e.inputs[0]), ref(e.inputs[1])
            starts = tuple(ref(a) for a in e.inputs[2:])
            steps.append(loopgen.DynamicUpdateSlice(src, upd, starts, out(e.outputs[0])))
        elif name == "gather":
            src, idx = ref(e.inputs[0]), ref(e.inputs[1])
            steps.append(loopgen.Gather(src, idx, out(e.outputs[0]), tuple(e.params["axes"])))
        elif name == "scatter_add":
            src, idx, upd = (ref(a) for a in e.inputs)
            steps.append(loopgen.ScatterAdd(src, idx, upd, out(e.outputs[0]), tuple(e.params["axes"])))
        elif name == "concatenate":
            srcs = tuple(ref(a) for a in e.inputs)
            steps.append(loopgen.Concat(srcs, out(e.outputs[0]), int(e.params["dimension"])))
        else:
            raise Unsupported(f"primitive {name}")
    return steps


def _distinct_inputs(inputs) -> list:
    seen: set = set()
    out = []
    for a in inputs:
        key = a if type(a) is Var else id(a)
        if key in seen or (type(a) is Literal and np.asarray(a.val).ndim == 0):
            continue
        seen.add(key)
        out.append(a)
    return out


def _region(g: Group, ref: Callable, out: Callable) -> loopgen.Elementwise:
    region, values = fused_region(g)
    inputs = [ref(a) for a in g.inputs]
    n_out = len(region.outputs)
    outputs = tuple((op, out(v)) for op, v in zip(region.outputs, values[:n_out]))
    red = None
    if region.reduction is not None:
        k, r = region.reduction.n_axes, len(g.shape)
        axes = tuple(range(k)) if region.reduction.leading else tuple(range(r - k, r))
        red = loopgen.Reduction(region.reduction.kind, region.reduction.op, axes, out(values[n_out]))
    return loopgen.Elementwise(tuple(inputs), region.ops, outputs, tuple(g.shape), red)
