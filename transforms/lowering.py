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
from dataclasses import replace

import numpy as np
from funclib.kernels.backend import Emitter
from funclib.kernels.numba_cpu import CPU

from funclib import config
from funclib.jaxpr import ClosedJaxpr, Jaxpr
from funclib.primitives.collectives import ExternalAxis

from . import steps
from .native_loops import (
    WHOLE_PROGRAM_MAX_STEPS,
    WHOLE_PROGRAM_TIERED_MAX_STEPS,
    native_scan,
    native_while,
    whole_program,
)
from .plan import PlannedStep, ProgramPlan, plan_program
from .program import Program


def compile_program(jaxpr: Jaxpr, guard: bool = True, name: str = "program", emitter: Emitter = CPU) -> Program:
    """Lower ``jaxpr`` (no constvars, or constvars with values in ``jaxpr.cache['consts']``) to a Program.

    A program with collectives over process axes starts with each axis' guard step (unless ``guard`` is off, for
    loop bodies): the ranks agree that they run the same program before any of them enters a collective.
    """
    plan = plan_program(jaxpr, emitter, guard=guard)
    leaving = frozenset(plan.out_slots)
    made = [(st, _step(st, plan.jaxpr, name, emitter, leaving)) for st in plan.steps]
    made = [(st, fn) for st, fn in made if fn is not None]  # a guard step of an axis with nothing to check
    prog = Program(replace(plan, steps=[st for st, _ in made]), [fn for _, fn in made], emitter)
    if (
        guard
        and config.fuse_kernels
        and config.native_loops
        and config.whole_programs
        and 1 < len(made) <= WHOLE_PROGRAM_TIERED_MAX_STEPS
        and all(st.kind != "guard" for st, _ in made)
    ):
        whole = _whole(jaxpr, prog, emitter)
        if whole is not None:
            return whole
    return prog


def _whole(jaxpr: Jaxpr, prog: Program, emitter: Emitter) -> Program | None:
    """A small program as one generated function (``native_loops.whole_program``), as a Program of one step."""
    tiered = len(prog.steps) > WHOLE_PROGRAM_MAX_STEPS
    whole = whole_program(jaxpr, jaxpr.cache.get("consts", []), lambda *a: prog.run(list(a)), emitter, tiered)
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


def _step(st: PlannedStep, jaxpr: Jaxpr, name: str, emitter: Emitter, leaving: frozenset = frozenset()):
    # a step whose every output is a result of the program reuses its output buffers across calls (see
    # NumbaCPU.recycler); an intermediate's are freed within the call, so holding them would only add memory
    recycle = bool(st.outs) and leaving.issuperset(st.outs)
    if st.kind == "fused":
        return steps.FusedStep(st.what, emitter, recycle)
    if st.kind == "staged":
        return steps.StagedStep(st.what, emitter, recycle)
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

