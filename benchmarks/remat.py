"""Rematerialization: peak memory and time of a gradient through 16 residual tanh layers (width 512, batch 256,
float32), each layer under ``fl.checkpoint`` with each policy, against no checkpoint, eagerly and under ``jit``.

Peak memory is measured with tracemalloc (NumPy's allocations are traced), time as the median of interleaved rounds
(the variants take turns, so background load hits all alike). The gradients must be equal.
"""

from __future__ import annotations

import json
import statistics
import time
import tracemalloc

import numpy as np

DEPTH, WIDTH, BATCH = 16, 512, 256
ROUNDS = 5


def main() -> None:
    import funclib as fl
    from benchmarks._harness import RESULTS_DIR

    rng = np.random.default_rng(0)
    ws = [fl.asarray((rng.normal(size=(WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)) for _ in range(DEPTH)]
    x = fl.asarray(rng.normal(size=(BATCH, WIDTH)).astype(np.float32))

    def layer(h, w):
        return h + fl.tanh(h @ w)

    P = fl.checkpoint_policies
    policies = {
        "no checkpoint": None,
        "nothing_saveable": P.nothing_saveable,
        "dots_saveable": P.dots_saveable,
        "everything_saveable": P.everything_saveable,
    }

    def make(policy):
        f = layer if policy is None else fl.checkpoint(layer, policy=policy)

        def loss(ws, x):
            h = x
            for w in ws:
                h = f(h, w)
            return (h * h).mean()

        return fl.grad(loss)

    variants = {}
    for name, policy in policies.items():
        g = make(policy)
        variants[f"{name} (eager)"] = g
        variants[f"{name} (jit)"] = fl.jit(g)
    ref = None
    rows = {}
    for label, g in variants.items():  # warm-up (compiles), correctness and peak memory
        out = g(ws, x)
        tracemalloc.start()
        out = g(ws, x)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        if ref is None:
            ref = [o.numpy() for o in out]
        for o, r in zip(out, ref):
            np.testing.assert_allclose(o.numpy(), r, rtol=2e-4, atol=1e-6)
        rows[label] = {"peak_MB": peak / 2**20, "times": []}
    labels = list(variants)
    for r in range(ROUNDS):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            t0 = time.perf_counter()
            variants[label](ws, x)
            rows[label]["times"].append(time.perf_counter() - t0)
    print(f"grad through {DEPTH} checkpointed layers {BATCH}x{WIDTH} float32 ({ROUNDS} interleaved rounds)")
    for label, row in rows.items():
        row["median_s"] = statistics.median(row.pop("times"))
        print(f"  {label:<30} peak {row['peak_MB']:8.1f} MB   median {row['median_s'] * 1e3:8.1f} ms")
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "remat.json").write_text(json.dumps(rows, indent=1))
