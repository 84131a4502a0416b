"""First-call overhead of a jitted ``grad`` through a ``scan``, by trip count: it must not grow with the length.

Two RNN programs: a cell with no per-step output, and one whose per-step output the loss ignores.

Each measurement is a fresh process with an empty kernel cache (``FUNCLIB_CACHE_DIR``): the overhead is the first
call (trace, optimize, lower, compile) minus a steady call, so the loop's own run time cancels. Trip counts are
interleaved over several rounds and the medians compared, in wall time and in the process's CPU time (which other
jobs on a shared machine disturb less): ``python -m benchmarks scan_compile`` (5 rounds), or
``python -m benchmarks.scan_compile N`` for N rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

STEPS = (10, 10_000)

_SCRIPT = r"""
import json, sys, time
import numpy as np
import funclib as fl

steps, variant = int(sys.argv[1]), sys.argv[2]
H, B, D = 64, 32, 16
rng = np.random.default_rng(0)
W = fl.asarray((rng.standard_normal((H, H)) * 0.1).astype(np.float32))
U = fl.asarray((rng.standard_normal((D, H)) * 0.1).astype(np.float32))
xs = fl.asarray(rng.standard_normal((steps, B, D)).astype(np.float32))

def loss(W, U, xs):
    def cell(h, x):
        h = fl.tanh(h @ W + x @ U)
        return h, (h if variant == "unused-ys" else None)
    h, _ = fl.scan(cell, fl.zeros((B, H)), xs)
    return (h * h).sum()

g = fl.jit(fl.grad(loss, argnums=(0, 1)))

def timed():
    t0, c0 = time.perf_counter(), time.process_time()
    g(W, U, xs)[0].numpy()
    return time.perf_counter() - t0, time.process_time() - c0

first = timed()
steady = [timed() for _ in range(3)]
print(json.dumps({"first": first[0], "steady": min(s[0] for s in steady),
                  "first_cpu": first[1], "steady_cpu": min(s[1] for s in steady)}))
"""


VARIANTS = ("rnn", "unused-ys")  # the cell returns no per-step output / one the loss ignores


def measure(steps: int, variant: str = "rnn") -> dict[str, float]:
    """One fresh process with an empty cache: first and steady call, wall and CPU seconds."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, FUNCLIB_CACHE_DIR=d)
        r = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(steps), variant], env=env, cwd=root, capture_output=True, text=True
        )
    if r.returncode:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(rounds: int = 5) -> None:
    for variant in VARIANTS:
        runs: dict[int, list[dict]] = {n: [] for n in STEPS}
        for _ in range(rounds):
            for n in STEPS:
                runs[n].append(measure(n, variant))
        print(f"== {variant}")
        for clock, suffix in (("wall", ""), ("process CPU", "_cpu")):
            over = {}
            for n in STEPS:
                o = [r["first" + suffix] - r["steady" + suffix] for r in runs[n]]
                over[n] = statistics.median(o)
                first = statistics.median(r["first" + suffix] for r in runs[n])
                steady = statistics.median(r["steady" + suffix] for r in runs[n])
                print(
                    f"{clock:>11} {n:>6} steps: first call {first:7.3f} s, steady {steady:7.4f} s, "
                    f"overhead {over[n]:7.3f} s (median of {rounds}; min {min(o):.3f})"
                )
            ratio = over[STEPS[-1]] / over[STEPS[0]]
            print(f"{clock:>11} overhead ratio {STEPS[-1]} / {STEPS[0]} steps: {ratio:.2f}")

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
