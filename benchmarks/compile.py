"""Compile time of the ``train_step`` jit: the first call in a fresh process, with an empty kernel cache (cold)
and with the cache filled by an earlier process (warm). ``jax.jit`` is measured the same way when installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_SCRIPT = r"""
import time, json, numpy as np
t0 = time.perf_counter()
import funclib as fl
t_import = time.perf_counter() - t0
from benchmarks.train_step import init, make_step
p, x, y = init()
fp = {k: fl.asarray(a) for k, a in p.items()}
m = {k: fl.zeros_like(a) for k, a in fp.items()}
step = fl.jit(make_step(fl))
t0 = time.perf_counter()
out = step(fp, m, m, fl.asarray(np.float32(0)), fl.asarray(x), fl.asarray(y))
first = time.perf_counter() - t0
t0 = time.perf_counter()
step(fp, m, m, fl.asarray(np.float32(0)), fl.asarray(x), fl.asarray(y))
second = time.perf_counter() - t0
print(json.dumps({"import": t_import, "first_call": first, "second_call": second}))
"""

_JAX = r"""
import time, json, numpy as np
import jax, jax.numpy as jnp
from benchmarks.train_step import init, make_step
class J:
    relu = staticmethod(jax.nn.relu); log_softmax = staticmethod(jax.nn.log_softmax); mean = staticmethod(jnp.mean)
    take_along_axis = staticmethod(jnp.take_along_axis); sqrt = staticmethod(jnp.sqrt)
    value_and_grad = staticmethod(jax.value_and_grad)
p, x, y = init()
jp = {k: jnp.asarray(a) for k, a in p.items()}; m = {k: jnp.zeros_like(a) for k, a in jp.items()}
step = jax.jit(make_step(J))
t0 = time.perf_counter()
jax.block_until_ready(step(jp, m, m, jnp.float32(0), jnp.asarray(x), jnp.asarray(y)))
print(json.dumps({"first_call": time.perf_counter() - t0}))
"""


def _run(script, env):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, FUNCLIB_CACHE_DIR=d)
        cold = _run(_SCRIPT, env)
        warm = _run(_SCRIPT, env)
        warm2 = _run(_SCRIPT, env)
    rows.append(("funclib cold (empty cache)", cold["first_call"]))
    rows.append(("funclib warm (cache from an earlier process)", min(warm["first_call"], warm2["first_call"])))
    rows.append(("funclib steady-state call", warm["second_call"]))
    rows.append(("funclib import", warm["import"]))
    try:
        import jax  # noqa: F401

        j = _run(_JAX, dict(os.environ))
        rows.append(("jax.jit first call", j["first_call"]))
    except ImportError:
        rows.append(("jax not installed", float("nan")))
    w = max(len(r[0]) for r in rows)
    for name, t in rows:
        print(f"{name:<{w}}  {t:8.3f} s")
    from benchmarks._harness import RESULTS_DIR

    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "compile.json").write_text(json.dumps(dict(rows), indent=1))
