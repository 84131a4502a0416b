"""Worker processes that compile kernels into the disk cache while the calling process goes on.

``submit(module, function, job)`` runs ``module.function(job)`` in a worker process and returns a
``concurrent.futures.Future`` of its (picklable) result. Workers are plain ``python -c`` subprocesses talking
length-prefixed pickles over their stdin/stdout, not ``multiprocessing`` children: a spawned ``multiprocessing``
child imports the parent's ``__main__``, which would run a user's unguarded script again. Each worker serves one
job at a time; ``workers()`` of them (``FUNCLIB_COMPILE_WORKERS``, default: the cores less one, at most 4, at
least 1) run independent jobs in parallel. A separate process rather than a thread because numba's compiler
holds the GIL for most of its time, so a compiling thread slows the caller's own Python work.

A worker that dies (killed, out of memory, a crash in LLVM) fails its job's future with ``WorkerDied`` and is
replaced for the next job. At interpreter exit the workers are killed, never waited for: what they had not
written yet is simply compiled again later, since the cache only ever renames complete files into place.

>>> from funclib.kernels import compile_pool
>>> compile_pool.submit("math", "factorial", 5).result(timeout=60)  # doctest: +SKIP
120
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future, wait

_HEADER = struct.Struct("<Q")
_BOOT = (
    "import pickle, sys; sys.path[:0] = pickle.load(sys.stdin.buffer); "
    "from funclib.kernels.compile_pool import serve; serve()"
)


class WorkerDied(RuntimeError):
    """A compile worker exited before returning its job's result."""


class JobFailed(RuntimeError):
    """A compile job raised in its worker; the message holds the worker's exception."""


def workers() -> int:
    """How many worker processes run jobs at once: ``FUNCLIB_COMPILE_WORKERS``, else the cores less one (1-4)."""
    v = os.environ.get("FUNCLIB_COMPILE_WORKERS", "").strip()
    if v:
        try:
            n = int(v)
        except ValueError:
            raise ValueError(f"FUNCLIB_COMPILE_WORKERS must be a positive integer, got {v!r}") from None
        if n < 1:
            raise ValueError(f"FUNCLIB_COMPILE_WORKERS must be a positive integer, got {v!r}")
        return n
    return max(1, min(4, (os.cpu_count() or 2) - 1))


def _send(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEADER.pack(len(data)) + data)
    f.flush()


def _recv(f):
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    (n,) = _HEADER.unpack(head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)


def serve() -> None:
    """A worker's loop: read ``(module, function, job)``, answer ``("ok", result)`` or ``("err", message)``."""
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the protocol
    while True:
        try:
            msg = _recv(inp)
        except EOFError:
            return
        module, function, job = msg
        try:
            res = ("ok", getattr(importlib.import_module(module), function)(job))
        except BaseException as e:  # reported to the caller, which falls back to compiling in its own process
            res = ("err", f"{type(e).__name__}: {e}")
        _send(out, res)


class _Worker:
    """One worker process and the thread feeding it jobs from the pool's queue."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self.proc: subprocess.Popen | None = None
        self.thread = threading.Thread(target=self._loop, name="funclib-compile", daemon=True)
        self.thread.start()

    def _start(self) -> subprocess.Popen:
        p = subprocess.Popen(
            [sys.executable, "-c", _BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=os.getcwd(),
            env=dict(os.environ),
        )
        pickle.dump([s for s in sys.path if isinstance(s, str)], p.stdin)  # read by _BOOT, before any job
        return p

    def _loop(self) -> None:
        while True:
            item = self.pool.jobs.get()
            if item is None:
                return
            fut, msg = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                with self.pool.lock:
                    if self.pool.closed:
                        raise WorkerDied("the compile pool was shut down")
                    if self.proc is None or self.proc.poll() is not None:
                        self.proc = self._start()
                    proc = self.proc
                _send(proc.stdin, msg)
                status, value = _recv(proc.stdout)
            except (EOFError, OSError, WorkerDied) as e:
                code = None
                if self.proc is not None:
                    try:
                        code = self.proc.wait(timeout=5)  # its pipe closed: it is exiting, or hung
                    except subprocess.TimeoutExpired:
                        pass
                self._stop()
                why = f"exit status {code}" if code is not None else str(e) or type(e).__name__
                fut.set_exception(WorkerDied(f"funclib compile worker died during {msg[0]}.{msg[1]} ({why})"))
                continue
            except BaseException as e:  # e.g. the job could not be pickled
                fut.set_exception(e)
                continue
            if status == "ok":
                fut.set_result(value)
            else:
                fut.set_exception(JobFailed(value))

    def _stop(self) -> None:
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def kill(self) -> None:
        """Kill the process at once (interpreter exit), and reap it."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass


class Pool:
    """A fixed number of worker processes (started with their first job) serving one queue of jobs."""

    def __init__(self, n: int):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.closed = False
        self.pending: set[Future] = set()
        self._workers = [_Worker(self) for _ in range(n)]

    def submit(self, module: str, function: str, job) -> Future:
        fut: Future = Future()
        with self.lock:
            if self.closed:
                raise RuntimeError("the compile pool is shut down")
            self.pending.add(fut)
        fut.add_done_callback(self._done)
        self.jobs.put((fut, (module, function, job)))
        return fut

    def track(self, fut: Future) -> None:
        """Count ``fut`` (work that follows a job in the caller, such as loading what it compiled) in ``wait``."""
        with self.lock:
            self.pending.add(fut)
        fut.add_done_callback(self._done)

    def _done(self, fut: Future) -> None:
        with self.lock:
            self.pending.discard(fut)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every job submitted so far has finished; False if ``timeout`` passed first."""
        with self.lock:
            futs = list(self.pending)
        return not wait(futs, timeout=timeout).not_done

    def kill_workers(self) -> None:
        for w in self._workers:
            w.kill()

    def shutdown(self) -> None:
        """Kill the workers and fail every job not finished (what interpreter exit does)."""
        with self.lock:
            self.closed = True
        while True:
            try:
                item = self.jobs.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        self.kill_workers()
        for _ in self._workers:
            self.jobs.put(None)


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool() -> Pool:
    """The process's compile pool, created at its first use."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = Pool(workers())
                atexit.register(_pool.shutdown)
    return _pool


def submit(module: str, function: str, job) -> Future:
    """Run ``module.function(job)`` in a worker process; the future of its result (``WorkerDied`` if the worker
    exits first, ``JobFailed`` if the function raises)."""
    return pool().submit(module, function, job)


def track(fut: Future) -> None:
    """Make ``wait_all`` wait for ``fut`` too (the caller's work that completes a job, e.g. loading its kernels)."""
    pool().track(fut)


def wait_all(timeout: float | None = None) -> bool:
    """Wait for every job submitted so far; False if ``timeout`` (seconds) passed first."""
    return True if _pool is None else _pool.wait(timeout)
