"""jit's background compilation: a cold program runs its NumPy impls while a worker process compiles its kernels.

The rest of the suite compiles in the foreground (tests/conftest.py); here it is on, with a fresh cache per test.
Both paths must agree: bit for bit for elementwise kernels of arithmetic, comparisons and selects, ``abs``,
``sqrt``, squares, and float32 ``erf`` and ``logistic`` (eager code calls the kernels' own vector math functions
for those); within a few ulp for the other transcendentals (NumPy's ``exp``, ``tanh``, ``sin``, ``log`` against
the kernels' vector math in float32 and libm in float64), higher integer powers (``np.power`` against repeated
multiplication) and kernels holding a sum (its loop nest is
compiled with reassociation and contraction, so the elementwise outputs it computes may round through a fused
multiply-add too).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from funclib.kernels import compile_pool
from funclib.transforms import background
from funclib.transforms.background import BackgroundProgram, run_eagerly
from funclib.transforms.lowering import compile_program
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
from funclib import config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def bg(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    monkeypatch.setenv("FUNCLIB_CACHE_DIR", str(cache))
    monkeypatch.setattr(config, "background_compile", True)
    yield cache
    assert config.wait_for_compilation(timeout=300)  # no job left running into the next test


def _running(f):
    """What runs the (only) signature ``f`` was called with."""
    (entry,) = f._cache.values()
    return entry.program


def _exact(x, y):
    """Elementwise work whose kernels promise the eager result bit for bit."""
    a = (x * y + x) / (y * y + 3.0) - fl.maximum(x, y)
    b = fl.sqrt(fl.abs(x)) * y + x**2
    if x.dtype == fl.float32:
        b = b + fl.sigmoid(x - y) * fl.erf(y)
    return a, fl.where(x > y, a, b)


def _rounded(x, y):
    """Reductions and NumPy's transcendentals: equal within rounding."""
    t = fl.exp(x) + fl.tanh(y) * fl.sin(x) + fl.log(fl.abs(y) + 1.0) + x**3
    return fl.sum(x * y, axis=-1), fl.softmax(x, axis=-1), t, fl.mean(x, axis=0)


def _data(dtype, shape=(16, 40)):
    rng = np.random.default_rng(0)
    return [fl.asarray(rng.standard_normal(shape).astype(dtype)) for _ in range(2)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_both_paths_agree(bg, dtype):
    x, y = _data(dtype)
    exact, rounded = fl.jit(_exact), fl.jit(_rounded)
    e1, r1 = exact(x, y), rounded(x, y)
    for f in (exact, rounded):
        prog = _running(f)
        assert isinstance(prog, BackgroundProgram) and not prog.compiled  # the first call did not wait for numba
        assert f.wait_compiled(timeout=300)
        assert prog.compiled and prog.error is None
    e2, r2 = exact(x, y), rounded(x, y)
    for a, b in zip(e1, e2):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    tol = 2e-5 if dtype == "float32" else 1e-12
    for a, b in zip(r1, r2):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)
    assert sum(n.startswith("p_") for n in os.listdir(bg)) == 2  # each program marked compiled


@given(
    hnp.arrays(np.float32, (3, 5), elements=st.floats(-30, 30, width=32)),
    hnp.arrays(np.float32, (3, 5), elements=st.floats(-30, 30, width=32)),
)
def test_eager_path_is_the_kernels_bit_for_bit(x, y):
    jaxpr = _exact_jaxpr()
    a = run_eagerly(jaxpr, [x, y])
    b = compile_program(jaxpr).run([x, y])
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def _exact_jaxpr():
    return fl.jit(_exact).trace(fl.zeros((3, 5)), fl.zeros((3, 5))).jaxpr


def test_gradients_run_in_the_background(bg):
    rng = np.random.default_rng(1)
    w = fl.asarray(rng.standard_normal((8, 4)).astype(np.float32))
    x = fl.asarray(rng.standard_normal((6, 8)).astype(np.float32))

    def loss(w, x):
        return fl.mean(fl.log_softmax(fl.tanh(x @ w), axis=-1) ** 2)

    want = fl.grad(loss)(w, x)
    for f in (fl.jit(fl.grad(loss)), fl.grad(fl.jit(loss))):
        first = f(w, x)
        config.wait_for_compilation(timeout=300)
        f(w, x)  # switches to the compiled program
        np.testing.assert_allclose(np.asarray(f(w, x)), np.asarray(first), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(np.asarray(first), np.asarray(want), rtol=1e-5, atol=1e-7)


def test_a_later_process_loads_the_cached_program(bg):
    def f(x):
        return fl.exp(x) * 2.0 + 1.0

    x = fl.ones((4, 3))
    g = fl.jit(f)
    g(x)
    assert isinstance(_running(g), BackgroundProgram)
    assert g.wait_compiled(timeout=300)
    h = fl.jit(f)  # traced afresh, as in a new process: the marker says its kernels are in the cache
    np.testing.assert_array_equal(np.asarray(h(x)), np.asarray(g(x)))
    assert not isinstance(_running(h), BackgroundProgram)


def test_lower_does_not_wait(bg):
    f = fl.jit(lambda x: fl.sum(fl.exp(x)))
    assert f.lower(fl.ones(3)).kernels  # sources are generated, not compiled
    f(fl.ones(3))
    assert isinstance(_running(f), BackgroundProgram)


def test_the_worker_sees_the_same_program(bg):
    def f(xs, w):
        def cell(h, x):
            return fl.tanh(h @ w + x), fl.sum(h)

        h, ys = fl.scan(cell, fl.zeros((2, 3)), xs)
        return fl.softmax(h, axis=-1), ys

    jf = fl.jit(f)
    jf.lower(fl.ones((5, 2, 3)), fl.ones((3, 3)))
    (entry,) = jf._cache.values()
    jaxpr = entry.jaxpr  # what the program is lowered from
    job = background._job(jaxpr)
    from funclib.transforms.export._codec import Decoder

    back = Decoder(job["pool"].__getitem__, None, "test").jaxpr(job["program"])
    back.cache["consts"] = job["consts"]
    assert compile_program(back).kernel_sources() == compile_program(jaxpr).kernel_sources()


def test_a_dying_worker_falls_back(bg, monkeypatch, caplog):
    submit = compile_pool.submit
    monkeypatch.setattr(compile_pool, "submit", lambda module, function, job: submit("os", "_exit", 3))
    f = fl.jit(lambda x: fl.sqrt(fl.abs(x)) * 3.0 - x)
    x = fl.asarray(np.linspace(-2, 2, 7, dtype=np.float32))
    first = f(x)
    prog = _running(f)
    with caplog.at_level("INFO", logger="funclib.jit"):
        assert f.wait_compiled(timeout=300)
    assert isinstance(prog.error, compile_pool.WorkerDied) and "exit status 3" in str(prog.error)
    assert "background compilation failed" in caplog.text
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(first))
    xs = np.asarray(x)
    np.testing.assert_array_equal(np.asarray(first), np.sqrt(np.abs(xs)) * np.float32(3) - xs)


def test_pool_reports_failures_and_replaces_dead_workers():
    with pytest.raises(compile_pool.JobFailed, match="no_such_function"):
        compile_pool.submit("funclib", "no_such_function", None).result(timeout=120)
    with pytest.raises(compile_pool.WorkerDied):
        compile_pool.submit("os", "_exit", 1).result(timeout=120)
    assert compile_pool.submit("math", "factorial", 5).result(timeout=120) == 120


def test_effects_compile_in_the_foreground(bg, capsys):
    def f(x):
        fl.debug.print("x = {}", fl.sum(x))
        return fl.exp(x) + 1.0

    g = fl.jit(f)
    g(fl.zeros(2))
    assert not isinstance(_running(g), BackgroundProgram)  # a worker's rehearsal would print again
    assert capsys.readouterr().out.count("x = ") == 1


def test_switches():
    env = dict(os.environ, FUNCLIB_BACKGROUND_COMPILE="0", PYTHONPATH=ROOT)
    out = subprocess.run(
        [sys.executable, "-c", "import funclib as fl; print(fl.config.background_compile)"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.stdout.strip() == "False", out.stderr
    with pytest.raises(ValueError, match="FUNCLIB_COMPILE_WORKERS"):
        os.environ["FUNCLIB_COMPILE_WORKERS"] = "none"
        try:
            compile_pool.workers()
        finally:
            del os.environ["FUNCLIB_COMPILE_WORKERS"]


def test_exit_does_not_wait_for_workers(tmp_path):
    script = textwrap.dedent(
        """
        import funclib as fl
        from funclib.kernels import compile_pool
        fl.config.background_compile = True
        compile_pool.submit("time", "sleep", 600)
        f = fl.jit(lambda x: fl.sin(x) * fl.exp(x))
        print(float(fl.sum(f(fl.ones(3)))))
        """
    )
    env = dict(os.environ, FUNCLIB_CACHE_DIR=str(tmp_path / "cache"), FUNCLIB_COMPILE_WORKERS="1", PYTHONPATH=ROOT)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert abs(float(out.stdout) - 3 * np.sin(1.0) * np.e) < 1e-4
    assert time.monotonic() - t0 < 60  # the sleeping job and the queued compile were killed, not awaited


@pytest.mark.parametrize("which", ["cond", "scan", "while"])
def test_loop_bodies_that_return_a_constant_run_eagerly(bg, which):
    # an optimized body's constants are NumPy arrays: returned as they are, eval_jaxpr handed the loop's impl a raw
    # array where it expected a Tensor (AttributeError on the eager path of a cold program)
    fns = {
        "cond": lambda x: fl.cond(x.sum() > 0, lambda x: fl.arange(3.0), lambda x: x * 2.0, x),
        "scan": lambda x: fl.scan(lambda c, a: (c + 1.0, fl.asarray([1.0, 2.0])), x.sum(), x)[1],
        "while": lambda x: fl.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, fl.ones(3)), (0, x))[1],
    }
    f, x = fns[which], fl.ones(3)
    jf = fl.jit(f)
    got = jf(x)
    prog = _running(jf)
    assert isinstance(prog, BackgroundProgram) and not prog.compiled
    np.testing.assert_array_equal(got.numpy(), f(x).numpy())
    assert jf.wait_compiled(timeout=300)
    np.testing.assert_array_equal(jf(x).numpy(), f(x).numpy())
