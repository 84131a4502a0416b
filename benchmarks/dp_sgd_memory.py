"""Peak memory of the DP-SGD clipping step at batch 4096 (MLP 784-128-10), with and without chunking.

Per-example gradients are reduced to per-example squared norms inside the vmapped function, so only the norms
leave it; peak memory is measured with tracemalloc (NumPy allocations are traced). The results must be equal.
"""

from __future__ import annotations

import json
import time
import tracemalloc

import numpy as np


def main() -> None:
    import funclib as fl
    from benchmarks._harness import RESULTS_DIR
    from benchmarks.per_sample_grads import _data

    p, x, y = _data(4096)
    params = {k: fl.asarray(v) for k, v in p.items()}
    fx, fy = fl.asarray(x), fl.asarray(y)

    def loss(p, xi, yi):
        h = fl.tanh(xi @ p["W1"] + p["b1"])
        z = h @ p["W2"] + p["b2"]
        return -(fl.log_softmax(z) * fl.one_hot(yi, 10)).sum()

    def sq_norm(p, xi, yi):
        g = fl.grad(loss)(p, xi, yi)
        return sum((v * v).sum() for v in fl.tree.leaves(g))

    rows = {}
    ref = None
    for label, kw in (
        ("unchunked", {}),
        ("chunk_size=256", {"chunk_size": 256}),
        ("max_bytes=64MB", {"max_bytes": 64 << 20}),
    ):
        tracemalloc.start()
        t0 = time.perf_counter()
        out = fl.vmap(sq_norm, in_axes=(None, 0, 0), **kw)(params, fx, fy)
        dt = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        if ref is None:
            ref = out.numpy()
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5)
        rows[label] = {"peak_MB": peak / 2**20, "seconds": dt}
        print(f"{label:<16} peak {peak / 2**20:9.1f} MB   {dt:6.2f} s")
    base = rows["unchunked"]["peak_MB"]
    for k, v in rows.items():
        print(f"{k:<16} peak reduction {base / v['peak_MB']:.1f}x")
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "dp_sgd_memory.json").write_text(json.dumps(rows, indent=1))
