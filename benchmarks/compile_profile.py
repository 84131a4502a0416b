"""Where a cold first call's time goes: for the MLP train step, a DP-SGD CNN step, the GRU step and a transformer
encoder layer step with AdamW, each in a fresh process with an empty kernel cache, the first call's wall and CPU
time, numba's CPU time split into type inference, lowering, LLVM optimization and machine-code generation
(``numba other``: the rest of its pipeline), and how many kernels (and distinct ones) were compiled. Background
compilation is switched off (``FUNCLIB_BACKGROUND_COMPILE=0``), so the first call is the compile.
``python -m benchmarks compile_profile``; ``PROGRAMS=mlp,gru`` picks some of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

PROGRAMS = ("mlp", "dpsgd", "gru", "transformer")


def mlp(fl):
    from benchmarks.train_step import init, make_step

    p, x, y = init()
    fp = {k: fl.asarray(a) for k, a in p.items()}
    m = {k: fl.zeros_like(a) for k, a in fp.items()}
    return fl.jit(make_step(fl)), (fp, m, m, fl.asarray(np.float32(0)), fl.asarray(x), fl.asarray(y))


def dpsgd(fl):
    """Per-example gradients of a small CNN (conv 1->8, conv 8->16, linear), clipped to norm 1, summed, noised."""
    import funclib.nn.functional as F

    rng = np.random.default_rng(0)
    p = {
        "c1": fl.asarray((rng.standard_normal((8, 1, 3, 3)) * 0.3).astype(np.float32)),
        "b1": fl.zeros(8),
        "c2": fl.asarray((rng.standard_normal((16, 8, 3, 3)) * 0.1).astype(np.float32)),
        "b2": fl.zeros(16),
        "w": fl.asarray((rng.standard_normal((16 * 6 * 6, 10)) * 0.05).astype(np.float32)),
        "b": fl.zeros(10),
    }
    x = fl.asarray(rng.standard_normal((32, 1, 28, 28)).astype(np.float32))
    y = fl.asarray(rng.integers(0, 10, 32))

    def loss(p, xi, yi):
        h = fl.relu(F.conv2d(xi[None], p["c1"], p["b1"], stride=2))
        h = fl.relu(F.conv2d(h, p["c2"], p["b2"], stride=2))
        logits = h.reshape(1, -1) @ p["w"] + p["b"]
        return -fl.log_softmax(logits, axis=-1)[0, yi]

    def step(p, x, y, key):
        g = fl.vmap(fl.grad(loss), in_axes=(None, 0, 0))(p, x, y)
        norms = fl.sqrt(sum((v.reshape(v.shape[0], -1) ** 2).sum(axis=1) for v in g.values()))
        scale = fl.minimum(1.0, 1.0 / (norms + 1e-6))
        keys = fl.random.split(key, len(p))
        out = {}
        for k, kk in zip(p, keys):
            s = (g[k] * scale.reshape((-1,) + (1,) * (g[k].ndim - 1))).sum(axis=0)
            noisy = (s + 1.1 * fl.random.normal(kk, s.shape)) / x.shape[0]
            out[k] = p[k] - 0.05 * noisy
        return out

    return fl.jit(step), (p, x, y, fl.random.key(0))


def gru(fl):
    from benchmarks.loops import _gru_data, _gru_step

    p, xs, target = _gru_data()
    step = fl.jit(_gru_step(fl, fl.grad, fl.scan, fl.sigmoid))
    return step, ({k: fl.asarray(v) for k, v in p.items()}, fl.asarray(xs), fl.asarray(target))


def transformer(fl):
    """One ``nn.TransformerEncoderLayer`` (d=32, 4 heads, feed-forward 64, no dropout) trained with AdamW."""
    import funclib.nn as nn
    import funclib.optim as optim

    model = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    opt.bind(model)
    rng = np.random.default_rng(0)
    x = fl.asarray(rng.standard_normal((8, 16, 32)).astype(np.float32))
    t = fl.asarray(rng.standard_normal((8, 16, 32)).astype(np.float32))

    def loss_fn(m, x, t):
        return ((m(x) - t) ** 2).mean()

    def step(model, state, hyper, x, t):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, t)
        return (*opt.functional_update(model, grads, state, hyper), loss)

    return fl.jit(step), (model, opt.state, opt.hyperparams(), x, t)


_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from benchmarks.compile_profile import profile_child
print(json.dumps(profile_child({name!r})))
"""


class _Timers:
    """Exclusive CPU time (of the compiling thread) per category over patched numba internals (nested compiles
    are charged to their own categories, not to the caller's)."""

    def __init__(self):
        self.total: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self._stack: list[list] = []

    def wrap(self, owner, attr: str, cat: str) -> None:
        orig = getattr(owner, attr)
        timers = self

        def wrapper(*a, **k):
            frame = [cat, time.thread_time(), 0.0]
            timers._stack.append(frame)
            try:
                return orig(*a, **k)
            finally:
                timers._stack.pop()
                dt = time.thread_time() - frame[1]
                timers.total[cat] = timers.total.get(cat, 0.0) + dt - frame[2]
                timers.count[cat] = timers.count.get(cat, 0) + 1
                if timers._stack:
                    timers._stack[-1][2] += dt

        setattr(owner, attr, wrapper)


def profile_child(name: str) -> dict:
    import resource

    t0 = time.perf_counter()
    import numba
    from funclib.kernels import diskcache
    from numba.core import codegen, compiler, typed_passes

    import funclib as fl

    t_import = time.perf_counter() - t0
    timers = _Timers()
    timers.wrap(compiler, "compile_extra", "numba other")
    timers.wrap(typed_passes.NopythonTypeInference, "run_pass", "typing")
    timers.wrap(typed_passes.NativeLowering, "run_pass", "lowering")
    timers.wrap(codegen.CPUCodeLibrary, "_optimize_functions", "llvm opt")
    timers.wrap(codegen.CPUCodeLibrary, "_optimize_final_module", "llvm opt")
    timers.wrap(codegen.JITCodeLibrary, "_finalize_specific", "codegen")
    sources: list[str] = []
    orig_load = diskcache.load_kernel

    def load_kernel(src):
        sources.append(src)
        return orig_load(src)

    diskcache.load_kernel = load_kernel  # the emitters call it through the module
    step, args = globals()[name](fl)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    step(*args)
    first = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    step(*args)
    second = time.perf_counter() - t0
    distinct = set(sources)
    return {
        "program": name,
        "import": t_import,
        "first_wall": first,
        "first_cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
        "second": second,
        "kernels": len(sources),
        "distinct_kernels": len(distinct),
        "source_chars": sum(len(s) for s in distinct),
        "phases": {k: round(v, 3) for k, v in sorted(timers.total.items())},
        "compiles": timers.count.get("numba other", 0),
        "numba": numba.__version__,
    }


def run_cold(name: str) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, FUNCLIB_CACHE_DIR=d, FUNCLIB_BACKGROUND_COMPILE="0")
        r = subprocess.run(
            [sys.executable, "-c", _CHILD.format(root=root, name=name)], env=env, capture_output=True, text=True
        )
    if r.returncode:
        raise RuntimeError(r.stderr[-4000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    names = [n for n in os.environ.get("PROGRAMS", "").split(",") if n in PROGRAMS] or list(PROGRAMS)
    print(f"load: {os.getloadavg()[0]:.2f}")
    for name in names:
        r = run_cold(name)
        ph = ", ".join(f"{k} {v:.2f}" for k, v in r["phases"].items())
        print(
            f"{name:<12} first {r['first_wall']:6.2f} s wall {r['first_cpu']:6.2f} s cpu  second "
            f"{r['second'] * 1e3:7.2f} ms  kernels {r['kernels']} ({r['distinct_kernels']} distinct, "
            f"{r['source_chars']} chars)  numba compiles {r['compiles']}: {ph}"
        )


if __name__ == "__main__":
    main()
