"""Run benchmark modules: ``python -m benchmarks NAME [NAME ...] | all [--rounds N] [--filter TEXT]``."""

import os

# before NumPy, numba, torch or jax load: every library single-threaded, so that variants compare fairly on a
# shared machine
for _var in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "VECLIB_NUM_THREADS",
):
    os.environ[_var] = "1"
_XLA_SINGLE = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_XLA_SINGLE}".strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # funclib's eager path is CPU; compare like with like

# XLA's CPU runtime runs independent operations on a thread pool that no flag above shrinks (measured: jax.jit of
# the MLP train step used 1.7 cores): only CPU affinity holds every library to one core. Threads inherit the mask
# of the thread that starts them, so it is set before any library starts one; FUNCLIB_BENCH_ONE_CORE=0 lifts it.
_ALL_CPUS = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
if _ALL_CPUS and os.environ.get("FUNCLIB_BENCH_ONE_CORE", "1") != "0":
    os.sched_setaffinity(0, {min(_ALL_CPUS)})

import sys  # noqa: E402

from benchmarks import _harness  # noqa: E402
from benchmarks._harness import main  # noqa: E402

_harness.ALL_CPUS = _ALL_CPUS

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
