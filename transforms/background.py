"""Background compilation: a cold jitted program runs its NumPy impls while worker processes compile its kernels.

``runner(jaxpr, program)`` decides what runs a lowered program. When ``fl.config.background_compile`` is on and
the program has kernels that are not cached yet, it is a ``BackgroundProgram``: its first call submits a job to
``kernels.compile_pool`` (the optimized jaxpr in ``fl.export``'s format, its constants, the call's arguments) and
runs the jaxpr through each primitive's NumPy impl (``run_eagerly``), as eager code would; the worker
(``compile_in_worker``) plans the same program, runs it once on those arguments, so every kernel is compiled for
the signatures this process will call it with, and marks the program compiled in the cache (``p_<key>.done``).
The first call after the job finished loads the compiled program from the disk cache (the warm path) and runs
it from then on. A marked program, one with nothing to compile, one with effects or collectives across
processes (a worker's run would repeat them) and one holding a parameter a job cannot carry (a custom rule's
Python function) run their compiled program from the first call, as without background compilation.

>>> import numpy as np
>>> import funclib as fl
>>> f = fl.jit(lambda x: fl.exp(x) * 2.0)
>>> y = f(fl.zeros(3))           # with a cold cache: eager, while a worker compiles the kernel
>>> f.wait_compiled(timeout=120)  # the kernel is compiled and loaded: calls run it from now on
True
>>> np.asarray(f(fl.zeros(3)))
array([2., 2., 2.], dtype=float32)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future

import numpy as np
from funclib.kernels import compile_pool, diskcache

from funclib import config
from funclib.core import _wrap, set_trace
from funclib.jaxpr import Jaxpr, eval_jaxpr, has_effects

from .lowering import compile_program
from .plan import external_axes
from .program import Program

log = logging.getLogger("funclib.jit")


_JOB_VERSION = "1"  # of the job format and the marker key
_eager = threading.local()  # set while a program runs eagerly: nested jit calls run eagerly too


class BackgroundProgram:
    """A program whose kernels are compiled by a worker process (``kernels.compile_pool``) while its calls run the
    optimized jaxpr through each primitive's NumPy impl, as eager code does.

    The first ``run`` submits a job holding the optimized jaxpr (in ``fl.export``'s format), its constants and
    this call's arguments; the worker plans the same program, runs it on those arguments (so every kernel is
    compiled for the signatures this process will call it with) and leaves the machine code in the disk cache.
    When the job has finished, a thread runs the program once on the same arguments, loading its kernels from
    the cache (the warm path) while calls stay eager; the next ``run`` switches, and from then on ``run`` is the
    compiled ``Program.run``. A job that failed (a worker that died, a kernel numba cannot
    compile) leaves the kernels to be compiled here, at that call, as without background compilation, with the
    same warnings and fallbacks.
    """

    def __init__(self, jaxpr: Jaxpr, program_of: Callable[[Jaxpr], Program], job: dict):
        self.jaxpr = jaxpr
        self.program_of = program_of
        self.job = job
        self.future: Future | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._ready = threading.Event()  # the job ended and, if it succeeded, the kernels are loaded
        self._loaded: Future = Future()  # the same, for fl.config.wait_for_compilation
        self._args: list | None = None

    @property
    def program(self) -> Program:
        """The lowered program (lowered at first use: by the loading thread, unless asked for earlier)."""
        return self.program_of(self.jaxpr)

    def __getattr__(self, name):
        # describe(), kernels, ... are the compiled program's (its sources are generated, not compiled)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.program, name)

    @property
    def compiled(self) -> bool:
        """Whether calls run the compiled program."""
        return "run" in self.__dict__

    def run(self, args: list) -> list:
        """The outputs for ``args``: eagerly until the kernels are compiled and loaded, then by the program."""
        fut = self.future
        if fut is None:
            with self._lock:
                if self.future is None:
                    self.future = self._submit(args)
        elif self._ready.is_set():
            return self._switch()(args)
        return run_eagerly(self.jaxpr, args)

    def _submit(self, args: list) -> Future:
        self._args = [np.asarray(a) for a in args]  # held until the kernels are loaded
        try:
            compile_pool.track(self._loaded)
            fut = compile_pool.submit(__name__, "compile_in_worker", dict(self.job, args=self._args))
        except Exception as e:  # e.g. submitted during interpreter exit
            fut = Future()
            fut.set_exception(e)
        fut.add_done_callback(self._job_done)
        return fut

    def _job_done(self, fut: Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self._set_ready()  # the switching call compiles here
            return
        # loading the kernels from the cache takes 0.1-2 s: done by a thread, the calls stay eager meanwhile
        threading.Thread(target=self._load, name="funclib-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self.program.run(self._args)  # every kernel loaded for the signatures the worker compiled
        except Exception as e:  # the switching call runs the program again and fails as a foreground compile would
            log.debug("jit: loading the compiled program failed (%s)", e)
        finally:
            self._set_ready()

    def _set_ready(self) -> None:
        self._args = None
        self._ready.set()
        if not self._loaded.done():
            self._loaded.set_result(None)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker's job (if one was submitted) and the loading of its kernels, then make the compiled
        program the one that runs: True when it is. With no job submitted yet (never called), compiles here."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fut = self.future
        if fut is not None:
            try:
                fut.exception(timeout=timeout)
            except (TimeoutError, CancelledError):
                pass
            if not fut.done() or not self._ready.wait(None if deadline is None else deadline - time.monotonic()):
                return False
        self._switch()
        return True

    def _switch(self):
        with self._lock:
            run = self.__dict__.get("run")
            if run is not None:
                return run
            fut = self.future
            if fut is not None and (fut.cancelled() or fut.exception() is not None):
                self.error = CancelledError() if fut.cancelled() else fut.exception()
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


def runner(jaxpr: Jaxpr, program_of: Callable[[Jaxpr], Program]) -> Program | BackgroundProgram:
    """What runs ``jaxpr``: its program (``program_of(jaxpr)``) when background compilation is off, when it has
    nothing to compile, when its kernels are already cached, or when it cannot be compiled elsewhere (effects,
    collectives across processes, parameters a job cannot carry); else a ``BackgroundProgram``, which lowers the
    program when it loads it, off the first call."""
    if not config.background_compile or not config.fuse_kernels or not _may_compile(jaxpr):
        return program_of(jaxpr)
    d = diskcache.private_dir()
    if d is None or has_effects(jaxpr) or external_axes(jaxpr, {}):
        return program_of(jaxpr)  # nowhere to share kernels, or work that must run exactly once, here
    job = _job(jaxpr)
    if job is None:
        return program_of(jaxpr)
    marker = os.path.join(d, f"p_{job.pop('key')}.done")
    if os.path.exists(marker):
        return program_of(jaxpr)  # compiled by an earlier process: the kernels load from the disk cache
    job["cache_dir"], job["marker"] = d, marker
    return BackgroundProgram(jaxpr, program_of, job)


def _may_compile(jaxpr: Jaxpr) -> bool:
    """Whether lowering ``jaxpr`` may generate a kernel: an op with a kernel lowering, a loop or branch, or a call
    primitive's own step around a body (BLAS products, views and NumPy impls compile nothing)."""
    return any(
        e.prim.kernel is not None or e.prim.name in ("scan", "while", "cond") or e.prim.jit_step is not None
        for e in jaxpr.eqns
    )


def _job(jaxpr: Jaxpr) -> dict | None:
    """What a worker needs to plan ``jaxpr`` as this process does, and the key of its marker file; None when a
    parameter cannot be carried (a Python callable of a custom rule)."""
    from .export._codec import Encoder, ExportError  # the export package imports jit, which imports this module

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
    from .export._codec import Decoder  # the export package imports jit, which imports this module

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


def program_runner(jaxpr: Jaxpr, program_of: Callable[[Jaxpr], Program], lock) -> Program | BackgroundProgram:
    """What runs ``jaxpr`` on the CPU (``runner(jaxpr, program_of)``), made once and cached on the jaxpr."""
    run = jaxpr.cache.get("runner")
    if run is None:
        with lock:
            run = jaxpr.cache.get("runner")
            if run is None:
                run = jaxpr.cache["runner"] = runner(jaxpr, program_of)
    return run


class Eager:
    """Runs a jaxpr by its NumPy impls: a jit call met while an enclosing program runs eagerly."""

    __slots__ = ("jaxpr",)

    def __init__(self, jaxpr: Jaxpr):
        self.jaxpr = jaxpr

    def run(self, args: list) -> list:
        return run_eagerly(self.jaxpr, args)


def wait_programs(progs, timeout: float | None) -> bool:
    """Wait for each ``BackgroundProgram`` among ``progs`` to run compiled; False if ``timeout`` passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for prog in progs:
        if isinstance(prog, BackgroundProgram):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not prog.wait(left):
                return False
    return True
