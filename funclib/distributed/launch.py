"""Run a script on N local ranks without a cluster: ``python -m funclib.distributed.launch -n 4 train.py [args]``.

It starts the MPICH wheel's ``mpiexec`` (from ``pip install funclib[dist]``) on the loopback interface only
(``-iface lo -host 127.0.0.1``), or with ``--gforker`` its forking launcher (no sockets at all). Each rank runs the
script under ``python -m mpi4py``, so an uncaught exception on any rank prints it and aborts every rank; the exit
status is non-zero when any rank failed. BLAS, OpenMP and numba threads default to one per rank (set the
variables yourself to override), so N ranks do not oversubscribe the cores.

On a cluster, use its launcher directly: ``srun -n 64 python train.py`` or ``mpirun -n 64 python train.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys

from ._comm import INSTALL_HINT

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def find_mpiexec(gforker: bool = False) -> str:
    """The path of the MPICH wheel's ``mpiexec`` (``mpiexec.gforker`` with ``gforker``), beside this Python first."""
    name = "mpiexec.gforker" if gforker else "mpiexec"
    here = os.path.join(os.path.dirname(sys.executable), name)
    found = here if os.access(here, os.X_OK) else shutil.which(name)
    if found is None:
        raise FileNotFoundError(
            f"funclib.distributed.launch: no {name} found beside {sys.executable} or on PATH; {INSTALL_HINT} "
            "installs MPICH's launcher"
        )
    return found


def command(n: int, argv: list[str], *, gforker: bool = False, python: str | None = None) -> list[str]:
    """The mpiexec command line that runs ``python -m mpi4py ARGV`` on ``n`` local ranks."""
    exe = find_mpiexec(gforker)
    where = [] if gforker else ["-iface", "lo", "-host", "127.0.0.1"]
    return [exe, "-n", str(n), *where, python or sys.executable, "-m", "mpi4py", *argv]


def environment() -> dict:
    env = dict(os.environ)
    for var in _THREAD_VARS:
        env.setdefault(var, "1")
    return env


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m funclib.distributed.launch",
        description="Run a Python script (or -m module) on N local MPI ranks on the loopback.",
    )
    p.add_argument("-n", "--nproc", type=int, default=2, help="number of ranks (default 2)")
    p.add_argument("--gforker", action="store_true", help="fork the ranks with mpiexec.gforker (no sockets)")
    p.add_argument("--timeout", type=float, default=None, help="end every rank after this many seconds")
    p.add_argument("-m", dest="module", help="run a module (as python -m) instead of a script")
    p.add_argument("script", nargs="?", help="the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    ns = p.parse_args(argv)
    if ns.nproc < 1:
        p.error(f"-n must be at least 1, got {ns.nproc}")
    if (ns.module is None) == (ns.script is None):
        p.error("give a script or -m MODULE (one of them)")
    target = ["-m", ns.module] if ns.module else [ns.script]
    if ns.module and ns.script is not None:
        ns.args = [ns.script, *ns.args]
    try:
        import mpi4py  # noqa: F401  (the dist extra: the ranks need it, so say so before starting them)
    except ImportError:
        print(f"funclib.distributed.launch needs mpi4py: {INSTALL_HINT}", file=sys.stderr)
        return 2
    try:
        cmd = command(ns.nproc, [*target, *ns.args], gforker=ns.gforker)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    proc = subprocess.Popen(cmd, env=environment(), start_new_session=True)
    try:
        return proc.wait(timeout=ns.timeout)
    except subprocess.TimeoutExpired:
        print(f"funclib.distributed.launch: ranks still running after {ns.timeout} s; ending them", file=sys.stderr)
        return _end(proc)
    except KeyboardInterrupt:
        return _end(proc)


def _end(proc: subprocess.Popen) -> int:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue
    return 124


if __name__ == "__main__":
    sys.exit(main())
