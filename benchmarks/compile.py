"""Compile latency of four training steps, each in fresh processes with an empty kernel cache.

Steps: the MLP train step (``train_step.py``), a DP-SGD step of a small CNN (per-example gradients by ``vmap`` of
``value_and_grad``, clipping, Gaussian noise, SGD), the GRU step (``loops.py``) and one transformer encoder layer
(d=32, 4 heads) with AdamW through ``funclib.nn``/``funclib.optim``. Per step, each in a process of its own:

- ``fg``: the first call with background compilation off (it compiles every kernel first);
- ``bg``: the first call with it on, then ``wait_compiled()`` and one call: the time from the first call until a
  call has run the compiled program (``compiled``), and that switching call alone (it loads the kernels);
- ``eager``: the step without ``jit``, its first call in a fresh process and the median of the 3 after it, plus
  the time to trace and optimize it (``fl.jit(step).trace``): the target is ``bg`` first call <= 3x (eager
  first call + trace); the ratio to the steady eager call is shown too;
- ``warm``: the first call of a new process with the cache the ``fg`` process filled;
- ``jax.jit``'s first call (MLP and GRU, when jax is installed).

Wall times from inside each process; CPU seconds (``resource.getrusage`` of children) for the whole process and
its compile workers, since on a loaded machine wall time alone says little.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

CASES = ("mlp", "dp_sgd_cnn", "gru", "transformer")
TARGETS = {"mlp": 1.5, "dp_sgd_cnn": 3.0, "gru": 4.0, "transformer": 5.0}  # cold first call, seconds


def build(case: str):
    """``(step, args)``: the step function (not jitted) and its arguments."""
    import funclib as fl

    if case == "mlp":
        from benchmarks.train_step import init, make_step

        p, x, y = init()
        fp = {k: fl.asarray(a) for k, a in p.items()}
        m = {k: fl.zeros_like(a) for k, a in fp.items()}
        return make_step(fl), (fp, m, m, fl.asarray(np.float32(0)), fl.asarray(x), fl.asarray(y))
    if case == "gru":
        from benchmarks.loops import _gru_data, _gru_step

        p, xs, target = _gru_data()
        fp = {k: fl.asarray(v) for k, v in p.items()}
        return _gru_step(fl, fl.grad, fl.scan, fl.sigmoid), (fp, fl.asarray(xs), fl.asarray(target))
    if case == "dp_sgd_cnn":
        return _dp_sgd()
    if case == "transformer":
        return _transformer()
    raise ValueError(f"compile benchmark: unknown case {case!r}; one of {CASES}")


def _dp_sgd():
    import funclib.nn as nn
    import funclib.nn.functional as F
    import funclib.optim as optim

    import funclib as fl
    from funclib import random as frandom

    k1, k2, k3 = frandom.split(frandom.key(0), 3)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, key=k1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, key=k2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64, 10, key=k3),
    )
    opt = optim.SGD(model.named_parameters(), lr=0.1)
    clip, sigma = 1.0, 0.8

    def per_sample_loss(model, x, y):
        return F.cross_entropy(model(x[None]), y[None])

    def step(model, state, hyper, x, y, key):
        losses, grads = fl.vmap(fl.value_and_grad(per_sample_loss), in_axes=(None, 0, 0))(model, x, y)
        leaves, treedef = fl.tree.flatten(grads)
        sq = sum(fl.sum(fl.reshape(g * g, (g.shape[0], -1)), axis=1) for g in leaves)
        scale = fl.minimum(1.0, clip / (fl.sqrt(sq) + 1e-6))
        keys = frandom.split(key, len(leaves))
        noisy = []
        for i, g in enumerate(leaves):
            clipped = fl.sum(g * fl.reshape(scale, (-1,) + (1,) * (g.ndim - 1)), axis=0)
            noise = frandom.normal(keys[i], tuple(clipped.shape), clipped.dtype) * (sigma * clip)
            noisy.append((clipped + noise) / x.shape[0])
        model, state = opt.functional_update(model, fl.tree.unflatten(treedef, noisy), state, hyper)
        return model, state, fl.mean(losses)

    rng = np.random.default_rng(0)
    x = fl.asarray(rng.random((64, 1, 8, 8), dtype=np.float32))
    y = fl.asarray(rng.integers(0, 10, 64))
    return step, (model, opt.state, opt.hyperparams(), x, y, frandom.key(1))


def _transformer():
    import funclib.nn as nn
    import funclib.optim as optim

    import funclib as fl
    from funclib import random as frandom

    model = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True, key=frandom.key(0))
    opt = optim.AdamW(model.named_parameters(), lr=1e-3, weight_decay=0.01)

    def loss_fn(model, x, t):
        return fl.mean((model(x) - t) ** 2)

    def step(model, state, hyper, x, t):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, t)
        model, state = opt.functional_update(model, grads, state, hyper)
        return model, state, loss

    rng = np.random.default_rng(0)
    x = fl.asarray(rng.standard_normal((8, 16, 32), dtype=np.float32))
    t = fl.asarray(rng.standard_normal((8, 16, 32), dtype=np.float32))
    return step, (model, opt.state, opt.hyperparams(), x, t)


def _block(out) -> None:
    import funclib as fl

    for leaf in fl.tree.leaves(out):
        np.asarray(leaf)


def child(case: str, mode: str) -> dict:
    """One measurement in this (fresh) process; ``mode`` is ``fg``, ``bg``, ``warm`` or ``eager``."""
    from funclib.kernels import compile_pool

    import funclib as fl

    fl.config.background_compile = mode == "bg"
    step, args = build(case)
    res: dict = {}
    if mode == "eager":
        t0 = time.perf_counter()
        _block(step(*args))
        res["eager_first"] = time.perf_counter() - t0
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            _block(step(*args))
            times.append(time.perf_counter() - t0)
        res["eager"] = statistics.median(times)
        t0 = time.perf_counter()
        fl.jit(step).trace(*args)
        res["trace"] = time.perf_counter() - t0
        return res
    f = fl.jit(step)
    t0 = time.perf_counter()
    _block(f(*args))
    res["first_call"] = time.perf_counter() - t0
    if mode == "bg":
        res["eager_calls"] = 0
        while not f.wait_compiled(timeout=0):  # what a training loop sees: eager steps until the switch
            t1 = time.perf_counter()
            _block(f(*args))
            res.setdefault("eager_call", time.perf_counter() - t1)
            res["eager_calls"] += 1
            time.sleep(0.05)
        t1 = time.perf_counter()
        _block(f(*args))
        now = time.perf_counter()
        res["switch_call"] = now - t1
        res["compiled"] = now - t0
    t1 = time.perf_counter()
    _block(f(*args))
    res["steady_call"] = time.perf_counter() - t1
    if compile_pool._pool is not None:
        compile_pool._pool.shutdown()  # reap the workers, so their CPU time is counted
    return res


def thread_or_process(how: str) -> dict:
    """The MLP step's kernels compiled by a thread of this process or by a compile worker, while this process
    runs eager steps: the median eager step during the compile and the time until the compile is done."""
    import threading

    from funclib.kernels import compile_pool
    from funclib.transforms import background
    from funclib.transforms.lowering import compile_program

    import funclib as fl

    step, args = build("mlp")
    f = fl.jit(step)
    f.trace(*args)
    (entry,) = f._cache.values()
    leaves = [x._value for x in fl.tree.leaves(args)]
    consts = [np.asarray(c) for c in entry.consts]
    for _ in range(3):
        _block(step(*args))
    base = []
    for _ in range(10):
        t0 = time.perf_counter()
        _block(step(*args))
        base.append(time.perf_counter() - t0)
    done = threading.Event()
    t_start = time.perf_counter()
    if how == "thread":
        def work():
            compile_program(entry.jaxpr).run(consts + leaves)
            done.set()

        threading.Thread(target=work, daemon=True).start()
    else:
        job = background._job(entry.jaxpr)
        job.update(args=consts + leaves, cache_dir=os.environ["FUNCLIB_CACHE_DIR"], marker=os.devnull)
        job.pop("key")
        compile_pool.submit(background.__name__, "compile_in_worker", job).add_done_callback(lambda _: done.set())
    during = []
    t_done = None
    while t_done is None:
        t0 = time.perf_counter()
        _block(step(*args))
        during.append(time.perf_counter() - t0)
        if done.is_set():
            t_done = time.perf_counter() - t_start
    if compile_pool._pool is not None:
        compile_pool._pool.shutdown()
    return {"eager_before": statistics.median(base), "eager_during": statistics.median(during), "compile": t_done}


_CHILD = "import json, sys; from benchmarks.compile import child; print(json.dumps(child(sys.argv[1], sys.argv[2])))"

_JAX = r"""
import json, sys, time
import jax, jax.numpy as jnp
case = sys.argv[1]
if case == "mlp":
    from benchmarks.train_step import init, make_step
    class J:
        relu = staticmethod(jax.nn.relu); log_softmax = staticmethod(jax.nn.log_softmax)
        mean = staticmethod(jnp.mean); take_along_axis = staticmethod(jnp.take_along_axis)
        sqrt = staticmethod(jnp.sqrt); value_and_grad = staticmethod(jax.value_and_grad)
    p, x, y = init()
    jp = {k: jnp.asarray(a) for k, a in p.items()}; m = {k: jnp.zeros_like(a) for k, a in jp.items()}
    f, args = jax.jit(make_step(J)), (jp, m, m, jnp.float32(0), jnp.asarray(x), jnp.asarray(y))
else:
    from benchmarks.loops import _gru_data, _gru_step
    p, xs, target = _gru_data()
    f = jax.jit(_gru_step(jnp, jax.grad, jax.lax.scan, jax.nn.sigmoid))
    args = ({k: jnp.asarray(v) for k, v in p.items()}, jnp.asarray(xs), jnp.asarray(target))
t0 = time.perf_counter()
jax.block_until_ready(f(*args))
print(json.dumps({"first_call": time.perf_counter() - t0}))
"""


def _run(argv: list[str], env: dict) -> tuple[dict, float]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, *argv], env=env, cwd=root, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        raise RuntimeError(f"compile benchmark: {' '.join(argv[-2:])} failed:\n{r.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(r.stdout.strip().splitlines()[-1]), cpu


def measure(case: str, jax: bool) -> dict:
    out: dict = {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2, tempfile.TemporaryDirectory() as d3:
        # eager with an empty cache too: its first call compiles funclib's own numba functions (samplers, conv)
        for mode, d in (("fg", d1), ("bg", d2), ("warm", d1), ("eager", d3)):
            env = dict(base, FUNCLIB_CACHE_DIR=os.path.join(d, "cache"))
            res, cpu = _run(["-c", _CHILD, case, mode], env)
            out[mode] = dict(res, cpu=cpu)
    if jax and case in ("mlp", "gru"):
        res, cpu = _run(["-c", _JAX, case], base)
        out["jax"] = dict(res, cpu=cpu)
    return out


def main() -> None:
    import importlib.util

    from benchmarks._harness import RESULTS_DIR

    jax = importlib.util.find_spec("jax") is not None
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; seconds (CPU seconds of process and workers)")
    head = (
        f"{'step':<12} {'fg first':>15} {'bg first':>15} {'compiled at':>12} {'switch':>7} "
        f"{'eager 1st/med+trace':>20} {'bg/(e+t)':>10} {'warm first':>11} {'jax first':>10} {'target':>7}"
    )
    print(head)
    rows = {}
    for case in CASES:
        r = rows[case] = measure(case, jax)
        fg, bg, warm, eager = r["fg"], r["bg"], r["warm"], r["eager"]
        et, et1 = eager["eager"] + eager["trace"], eager["eager_first"] + eager["trace"]
        jx = f"{r['jax']['first_call']:10.2f}" if "jax" in r else f"{'-':>10}"
        print(
            f"{case:<12} {fg['first_call']:6.2f} ({fg['cpu']:5.1f}) {bg['first_call']:6.2f} ({bg['cpu']:5.1f}) "
            f"{bg['compiled']:12.2f} {bg['switch_call']:7.2f} {et1:9.3f}/{et:9.3f} "
            f"{bg['first_call'] / et1:4.1f}/{bg['first_call'] / et:4.1f} "
            f"{warm['first_call']:11.2f} {jx} {TARGETS[case]:7.1f}"
        )
    print("MLP kernels compiled by a thread or by a worker process while eager steps run (median eager step):")
    code = "import json, sys; from benchmarks.compile import thread_or_process as t; print(json.dumps(t(sys.argv[1])))"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for how in ("thread", "process", "thread", "process"):
        with tempfile.TemporaryDirectory() as d:
            res, cpu = _run(["-c", code, how], dict(base, FUNCLIB_CACHE_DIR=os.path.join(d, "cache")))
        rows.setdefault(f"compile_by_{how}", []).append(dict(res, cpu=cpu))
        print(
            f"  {how:<8} eager step {res['eager_before'] * 1e3:6.1f} ms before, {res['eager_during'] * 1e3:6.1f} ms "
            f"during; compiled after {res['compile']:6.2f} s; CPU {cpu:5.1f} s"
        )
    rows["load_average"] = load
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "compile.json").write_text(json.dumps(rows, indent=1))
