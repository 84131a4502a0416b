"""Lowering a jaxpr to a ``Program``: plan, then steps, then the straight-line program.

``compile_program(jaxpr)`` plans the equations (``plan.plan_program``: fused regions, staged groups, slots), makes
each planned step executable for the emitter (``kernels.numba_cpu.CPU`` unless another is given; see
``kernels/backend.py``) and hands them to a ``Program``. Equations that are not fused run as steps of their own:
``dot_general`` on BLAS, views, a collective across processes, ``scan``/``while``/``cond`` around their bodies'
programs (a loop whose bodies lower entirely becomes one generated loop, ``native_loops``), a call primitive's own
``prim.jit_step(eqn, body_program) -> step`` (``checkpoint``, ``checkify``, ``custom_linear_solve``), and every
other primitive's NumPy impl.

>>> import numpy as np
>>> import funclib as fl
>>> jaxpr = fl.jit(lambda x: fl.sum(fl.exp(x))).trace(fl.zeros(3)).jaxpr
>>> prog = compile_program(jaxpr)
>>> print(prog.describe())
[1] = fused[exp, reduce_sum][0]
>>> prog.run([np.zeros(3, np.float32)])
[array(3., dtype=float32)]
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
from funclib.kernels import compile_pool, diskcache
from funclib.kernels.backend import Emitter
from funclib.kernels.numba_cpu import CPU

from funclib import config
from funclib.core import _wrap, set_trace
from funclib.jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr, has_effects
from funclib.primitives.collectives import ExternalAxis

from . import steps
from .native_loops import WHOLE_PROGRAM_MAX_STEPS, native_scan, native_while, whole_program
from .plan import PlannedStep, ProgramPlan, external_axes, plan_program
from .program import Program

log = logging.getLogger("funclib.jit")


def compile_program(jaxpr: Jaxpr, guard: bool = True, name: str = "program", emitter: Emitter = CPU) -> Program:
    """Lower ``jaxpr`` (no constvars, or constvars with values in ``jaxpr.cache['consts']``) to a Program.

    A program with collectives over process axes starts with each axis' guard step (unless ``guard`` is off, for
    loop bodies): the ranks agree that they run the same program before any of them enters a collective.
    """
    plan = plan_program(jaxpr, emitter, guard=guard)
    made = [(st, _step(st, plan.jaxpr, name, emitter)) for st in plan.steps]
    made = [(st, fn) for st, fn in made if fn is not None]  # a guard step of an axis with nothing to check
    prog = Program(replace(plan, steps=[st for st, _ in made]), [fn for _, fn in made], emitter)
    if (
        guard
        and config.fuse_kernels
        and config.native_loops
        and config.whole_programs
        and 1 < len(made) <= WHOLE_PROGRAM_MAX_STEPS
        and all(st.kind != "guard" for st, _ in made)
    ):
        whole = _whole(jaxpr, prog, emitter)
        if whole is not None:
            return whole
    return prog


def _whole(jaxpr: Jaxpr, prog: Program, emitter: Emitter) -> Program | None:
    """A small program as one generated function (``native_loops.whole_program``), as a Program of one step."""
    whole = whole_program(jaxpr, jaxpr.cache.get("consts", []), lambda *a: prog.run(list(a)), emitter)
    if whole is None:
        return None
    n_in, n_out = len(jaxpr.invars), len(jaxpr.outvars)
    ins, outs = list(range(n_in)), list(range(n_in, n_in + n_out))
    step = PlannedStep("whole", whole, ins, outs, True, "program", tuple(ins))
    plan = ProgramPlan(jaxpr, ins, outs, [], [step], set())
    return Program(plan, [whole], emitter)


def body_program(cj: ClosedJaxpr, emitter: Emitter = CPU) -> Program | None:
    """The Program of a body ``ClosedJaxpr`` (a loop's, a branch's, a call's), its constants baked in; None if a
    constant is not concrete. Cached on the jaxpr, per emitter."""
    j = cj.jaxpr
    key = ("closed_program", emitter.name)
    prog = j.cache.get(key)
    if prog is None:
        consts = []
        for c in cj.consts:
            v = getattr(c, "_value", c)
            if not isinstance(v, (np.ndarray, np.generic, int, float, bool, complex)) or hasattr(c, "_trace"):
                return None
            consts.append(np.asarray(v))
        body = Jaxpr(j.constvars, j.invars, j.eqns, j.outvars)
        body.cache["consts"] = consts
        prog = compile_program(body, guard=False, emitter=emitter)  # the enclosing program's guard covers its bodies
        j.cache[key] = prog
    return prog


def _step(st: PlannedStep, jaxpr: Jaxpr, name: str, emitter: Emitter):
    if st.kind == "fused":
        return steps.FusedStep(st.what, emitter)
    if st.kind == "staged":
        return steps.StagedStep(st.what, emitter)
    if st.kind == "guard":
        return st.what.program_guard(jaxpr, name)
    eqn = st.what
    prim = eqn.prim
    if getattr(prim, "collective", False):
        axes = eqn.params["axes"]
        if len(axes) == 1 and isinstance(axes[0], ExternalAxis):
            # across processes: the axis runs it (MPI), in program order; the program's guard checked the ranks
            return axes[0].program_step(prim.name, {k: v for k, v in eqn.params.items() if k != "axes"})
    step = None
    if prim.name in _LOOPS:
        step = _LOOPS[prim.name](eqn, emitter)
    elif prim.jit_step is not None:
        step = prim.jit_step(eqn, functools.partial(body_program, emitter=emitter))
    if step is not None:
        return step
    impl = steps.LOWERED[prim.name] if prim.family == "lowered" else prim.rule("impl")
    return emitter.primitive(prim.name, impl, eqn.params)


def _lower_scan(eqn, emitter: Emitter):
    prog = body_program(eqn.params["jaxpr"], emitter)
    if prog is None:
        return None
    loop = steps.ScanLoop(prog, eqn.params, emitter)
    if config.fuse_kernels and config.native_loops:
        # the whole loop as one generated function where the body allows; the executor loop otherwise
        native = native_scan(eqn, loop, emitter)
        if native is not None:
            return native
    return loop


def _lower_while(eqn, emitter: Emitter):
    p = eqn.params
    cprog, bprog = body_program(p["cond_jaxpr"], emitter), body_program(p["body_jaxpr"], emitter)
    if cprog is None or bprog is None:
        return None
    loop = steps.WhileLoop(cprog, bprog, p, emitter)
    if config.fuse_kernels and config.native_loops:
        native = native_while(eqn, loop, emitter)
        if native is not None:
            return native
    return loop


def _lower_cond(eqn, emitter: Emitter):
    progs = [body_program(b, emitter) for b in eqn.params["branches"]]
    if any(pr is None for pr in progs):
        return None
    return steps.Switch(progs, emitter)


# loops run natively around their compiled bodies: one executor pass per iteration, no tracing or dispatch
_LOOPS = {"scan": _lower_scan, "while": _lower_while, "cond": _lower_cond}


# ---------------------------------------------------------------------------------------------------------------
# Background compilation: a cold program runs its equations' NumPy impls while worker processes compile its kernels

_JOB_VERSION = "1"  # of the job format and the marker key
_eager = threading.local()  # set while a program runs eagerly: nested jit calls run eagerly too


class BackgroundProgram:
    """A program whose kernels are compiled by a worker process (``kernels.compile_pool``) while its calls run the
    optimized jaxpr through each primitive's NumPy impl, as eager code does.

    The first ``run`` submits a job holding the optimized jaxpr (in ``fl.export``'s format), its constants and
    this call's arguments; the worker plans the same program, runs it on those arguments (so every kernel is
    compiled for the signatures this process will call it with) and leaves the machine code in the disk cache.
    The first ``run`` after the job finished loads the program from there (the warm path) and from then on
    ``run`` is the compiled ``Program.run``. A job that failed (a worker that died, a kernel numba cannot
    compile) leaves the kernels to be compiled here, at that call, as without background compilation, with the
    same warnings and fallbacks.
    """

    def __init__(self, jaxpr: Jaxpr, program: Program, job: dict):
        self.jaxpr = jaxpr
        self.program = program
        self.job = job
        self.future: Future | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name):
        # describe(), kernels, ... are the compiled program's (its sources are generated, not compiled)
        return getattr(self.__dict__["program"], name)

    @property
    def compiled(self) -> bool:
        """Whether calls run the compiled program."""
        return "run" in self.__dict__

    def run(self, args: list) -> list:
        """The outputs for ``args``: eagerly until the kernels are compiled, then by the compiled program."""
        fut = self.future
        if fut is None:
            with self._lock:
                if self.future is None:
                    self.future = self._submit(args)
        elif fut.done():
            return self._switch()(args)
        return run_eagerly(self.jaxpr, args)

    def _submit(self, args: list) -> Future:

        job = dict(self.job, args=[np.asarray(a) for a in args])
        try:
            return compile_pool.submit(__name__, "compile_in_worker", job)
        except Exception as e:  # e.g. submitted during interpreter exit
            fut: Future = Future()
            fut.set_exception(e)
            return fut

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker's job (if one was submitted), then make the compiled program the one that runs:
        True when it is. With no job submitted yet (never called), compiles here."""
        fut = self.future
        if fut is not None:
            try:
                fut.exception(timeout=timeout)
            except TimeoutError:
                return False
        self._switch()
        return True

    def _switch(self):
        with self._lock:
            run = self.__dict__.get("run")
            if run is not None:
                return run
            fut = self.future
            if fut is not None and fut.exception() is not None:
                self.error = fut.exception()
                log.info("jit: background compilation failed (%s); compiling in this process", self.error)
            self.job = None
            run = self.program.run
            self.__dict__["run"] = run  # later calls skip this method (and Jitted's cached entry with it)
            return run


def run_eagerly(jaxpr: Jaxpr, args: list) -> list:
    """``jaxpr``'s outputs for ``args`` by each equation's NumPy impl, as eager code computes them."""
    consts = [_wrap(c) for c in jaxpr.cache.get("consts", [])]
    prev = getattr(_eager, "on", False)
    _eager.on = True
    try:
        with set_trace(None):
            outs = eval_jaxpr(jaxpr, consts, *[_wrap(np.asarray(a)) for a in args])
    finally:
        _eager.on = prev
    return [np.asarray(getattr(o, "_value", o), dtype=v.aval.dtype) for o, v in zip(outs, jaxpr.outvars)]


def running_eagerly() -> bool:
    """Whether this thread is inside ``run_eagerly`` (a nested jit then runs eagerly as well)."""
    return getattr(_eager, "on", False)


def runner(jaxpr: Jaxpr, program: Program):
    """What runs ``jaxpr`` (already lowered to ``program``): the program itself when background compilation is
    off, when it has nothing to compile, when its kernels are already cached, or when it cannot be compiled
    elsewhere (effects, collectives across processes, parameters a job cannot carry); else a
    ``BackgroundProgram``."""
    if not config.background_compile or not _needs_compile(program):
        return program
    d = diskcache.private_dir()
    if d is None or has_effects(jaxpr) or external_axes(jaxpr, {}):
        return program  # nowhere to share kernels, or work that must run exactly once, here
    job = _job(jaxpr)
    if job is None:
        return program
    marker = os.path.join(d, f"p_{job.pop('key')}.done")
    if os.path.exists(marker):
        return program  # compiled by an earlier process: the kernels load from the disk cache
    job["cache_dir"], job["marker"] = d, marker
    return BackgroundProgram(jaxpr, program, job)


def _needs_compile(prog) -> bool:
    """Whether running ``prog`` compiles anything: a kernel, or a step around bodies that may hold some."""
    for fn, *_ in prog.steps:
        if hasattr(fn, "source"):
            return True
        bodies = [getattr(fn, a, None) for a in ("body", "cond")] + list(getattr(fn, "branches", ()))
        if any(isinstance(b, Program) and _needs_compile(b) for b in bodies):
            return True
        if not isinstance(fn, (steps.ScanLoop, steps.WhileLoop, steps.Switch, functools.partial)) and not getattr(
            fn, "__module__", "").startswith(("numpy", "funclib.primitives")):
            return True  # a call primitive's own step (checkpoint, checkify, ...): assume it compiles a body
    return False


def _job(jaxpr: Jaxpr) -> dict | None:
    """What a worker needs to plan ``jaxpr`` as this process does, and the key of its marker file; None when a
    parameter cannot be carried (a Python callable of a custom rule)."""
    from .export._codec import Encoder, ExportError

    enc = Encoder("background compilation")
    try:
        program = enc.jaxpr(jaxpr)
    except (ExportError, TypeError) as e:
        log.debug("jit: compiling in this process (%s)", e)
        return None
    consts = [np.asarray(c) for c in jaxpr.cache.get("consts", [])]
    flags = {k: getattr(config, k) for k in ("fuse_kernels", "native_loops", "whole_programs")}
    h = hashlib.sha256()
    for part in (_JOB_VERSION, diskcache.FUNCLIB_KERNEL_VERSION, diskcache.VMATH_VERSION, repr(flags)):
        h.update(part.encode())
    h.update(json.dumps(program, sort_keys=True, default=repr).encode())
    for a in enc.pool + consts:
        h.update(f"{a.dtype.str}{a.shape}".encode())
    return {
        "key": h.hexdigest()[:32],
        "program": program,
        "pool": enc.pool,
        "consts": consts,
        "flags": flags,
        "name": jaxpr.cache.get("fun_name", "program"),
    }


def _write_marker(path: str) -> None:
    """Mark a program's kernels as cached: a later process loads them at its first call instead of running eagerly."""
    try:
        diskcache.write_atomic(path, b"")
    except OSError:
        pass  # only a hint: without it the next process compiles in the background again


def compile_in_worker(job: dict) -> str:
    """A compile worker's job (``kernels.compile_pool``): plan the program, run it once on the caller's arguments
    so that every kernel compiles into the disk cache, and return its description."""
    from .export._codec import Decoder

    os.environ["FUNCLIB_CACHE_DIR"] = job["cache_dir"]  # the caller's, even if it changed since this worker started
    for k, v in job["flags"].items():
        setattr(config, k, v)
    pool = job["pool"]
    jaxpr = Decoder(pool.__getitem__, None, "background compilation").jaxpr(job["program"])
    jaxpr.cache["consts"] = job["consts"]
    jaxpr.cache["fun_name"] = job["name"]
    prog = compile_program(jaxpr, name=job["name"])
    prog.run(job["args"])
    _write_marker(job["marker"])
    return prog.describe()
