"""Rematerialization: peak memory and time of the gradient with respect to the input of 8 residual MLP blocks
(``h + tanh(h @ w1) @ w2``, width 512, hidden 2048, batch 128, float32), each block under ``fl.checkpoint`` with each
policy, against no checkpoint, eagerly and under ``jit``.

The gradient is taken with respect to the input only, so the weights' gradients (4 MB a block) do not hide the
activations the backward pass keeps. Peak memory is measured with tracemalloc (NumPy's allocations are traced), time
as the median of interleaved rounds (the variants take turns, so background load hits all alike). The gradients
must be equal.
"""

from __future__ import annotations

import json
import statistics
import time
import tracemalloc

import numpy as np

DEPTH, WIDTH, HIDDEN, BATCH = 8, 512, 2048, 128
ROUNDS = 5


def main() -> None:
    import funclib as fl
    from benchmarks._harness import RESULTS_DIR

    rng = np.random.default_rng(0)
    def weight(n, m):
        return fl.asarray((rng.normal(size=(n, m)) / np.sqrt(n)).astype(np.float32))

    ws = [(weight(WIDTH, HIDDEN), weight(HIDDEN, WIDTH)) for _ in range(DEPTH)]
    x = fl.asarray(rng.normal(size=(BATCH, WIDTH)).astype(np.float32))

    def layer(h, w):
        return h + fl.tanh(h @ w[0]) @ w[1]

    P = fl.checkpoint_policies
    policies = {
        "no checkpoint": None,
        "nothing_saveable": P.nothing_saveable,
        "dots_saveable": P.dots_saveable,
        "everything_saveable": P.everything_saveable,
    }

    def make(policy):
        f = layer if policy is None else fl.checkpoint(layer, policy=policy)

        def loss(x, ws):
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
        out = g(x, ws)
        tracemalloc.start()
        out = g(x, ws)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        if ref is None:
            ref = out.numpy()
        np.testing.assert_allclose(out.numpy(), ref, rtol=2e-4, atol=1e-7)
        rows[label] = {"peak_MB": peak / 2**20, "times": []}
    labels = list(variants)
    for r in range(ROUNDS):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            t0 = time.perf_counter()
            variants[label](x, ws)
            rows[label]["times"].append(time.perf_counter() - t0)
    print(f"grad through {DEPTH} checkpointed blocks {BATCH}x{WIDTH}x{HIDDEN} float32 ({ROUNDS} interleaved rounds)")
    for label, row in rows.items():
        row["median_s"] = statistics.median(row.pop("times"))
        print(f"  {label:<30} peak {row['peak_MB']:8.1f} MB   median {row['median_s'] * 1e3:8.1f} ms")
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "remat.json").write_text(json.dumps(rows, indent=1))
