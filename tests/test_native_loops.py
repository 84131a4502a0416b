"""Every loop kind lowered to one generated loop (``transforms/native_loops.py``): ``while_loop``, ``fori_loop``,
``cond`` inside loop bodies, loops nested in loops, and the backward loops of reverse mode.

Each program runs three ways, which must agree: jitted with native loops, jitted with the executor loops
(``fl.config.native_loops = False``) and eagerly; under ``grad``, ``vmap`` and nesting, in float32 and float64.
"""

import math
import time

import numpy as np
import pytest
from funclib.kernels import loopgen
from funclib.transforms import native_loops
from funclib.transforms.native_loops import NativeLoop, TieredProgram, WholeProgram, wait_for_compiles

import funclib as fl

RNG = np.random.default_rng(11)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-12)}
DTYPES = [np.float32, np.float64]


@pytest.fixture(autouse=True)
def _native_on(monkeypatch):
    monkeypatch.setattr(fl.config, "native_loops", True)
    monkeypatch.setattr(fl.config, "fuse_kernels", True)


def native_steps(jitted, *args) -> list:
    """The generated loops of the program, and the program itself when it is one generated function."""
    return [s[0] for s in jitted.lower(*args).program.steps if isinstance(s[0], (NativeLoop, WholeProgram))]


def check(f, *args, n_native: int, dtype):
    """``f`` jitted with native loops (``n_native`` top-level loops, all run), with executor loops, and eagerly."""
    g = fl.jit(f)
    got = fl.tree.leaves(g(*args))
    steps = native_steps(g, *args)
    loops = [s for s in steps if isinstance(s, NativeLoop)]
    if len(steps) == 1 and isinstance(steps[0], WholeProgram):
        # a small program: one function holding the loops, each a function of its own
        assert steps[0].source.count("for it in range(n):") >= n_native + 1
    else:
        assert len(loops) == n_native, g.lower(*args).program.describe()
    assert all(s.ran and not s.failed for s in steps)
    fl.config.native_loops = False
    ref = fl.jit(f)
    via_executor = fl.tree.leaves(ref(*args))
    assert not native_steps(ref, *args)
    fl.config.native_loops = True
    eager = fl.tree.leaves(f(*args))
    for want in (via_executor, eager):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            a, b = np.asarray(a), np.asarray(b)
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, **TOL[dtype])
    return got


def arr(*shape, dtype):
    return fl.asarray(RNG.normal(size=shape).astype(dtype))


# ---------------------------------------------------------------------------------------------------------------
# while_loop


def pendulum(y0, steps):
    def body(s):
        k, y = s
        th, om = y[0], y[1]
        return k + 1, fl.stack([th + 0.01 * om, om - 0.0981 * fl.sin(th)])

    return fl.while_loop(lambda s: s[0] < steps, body, (0, y0))[1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_while_loop_forward_and_trip_count_at_run_time(dtype):
    y0 = arr(2, dtype=dtype)
    out = check(lambda y: pendulum(y, 50), y0, n_native=1, dtype=dtype)
    # the trip count is data: the same kernel serves another count
    g = fl.jit(pendulum)
    a, b = g(y0, fl.asarray(7)), g(y0, fl.asarray(300))
    src = native_steps(g, y0, fl.asarray(7))[0].source
    assert "300" not in src and "(7)" not in src
    np.testing.assert_allclose(np.asarray(b), np.asarray(pendulum(y0, 300)), **TOL[dtype])
    np.testing.assert_allclose(np.asarray(a), np.asarray(pendulum(y0, 7)), **TOL[dtype])
    assert out[0].dtype == dtype


def heun(y0, a, max_steps=400):
    """Adaptive Heun steps of a pendulum up to t = 2: a predicate on a float carry, a reduction, selects."""

    def f(y):
        return fl.stack([y[1], -a * fl.sin(y[0])])

    def body(s):
        t, y, h = s
        k1 = f(y)
        k2 = f(y + h * k1)
        err = fl.max(fl.abs(0.5 * h * (k2 - k1)))
        ok = err < 1e-4
        t2 = fl.where(ok, t + h, t)
        y2 = fl.where(ok, y + 0.5 * h * (k1 + k2), y)
        h2 = h * fl.clip(0.9 * fl.sqrt(1e-4 / (err + 1e-12)), 0.2, 5.0)
        return t2, y2, fl.minimum(h2, 2.0 - t2 + 1e-6)

    dt = y0.dtype
    init = (fl.asarray(0.0, dtype=dt), y0, fl.asarray(0.05, dtype=dt))
    _, y, _ = fl.while_loop(lambda s: s[0] < 2.0, body, init, max_steps=max_steps)
    return (y * y).sum()


@pytest.mark.parametrize("dtype", DTYPES)
def test_while_loop_max_steps_forward_and_grad(dtype):
    y0, a = fl.asarray(np.array([1.0, 0.0], dtype)), fl.asarray(np.asarray(1.3, dtype))
    check(heun, y0, a, n_native=1, dtype=dtype)
    # reverse mode: the checkpointing forward sweep (a while nested in a while) and the segment scan (a cond
    # inside a scan nested in a scan) are generated loops
    check(fl.grad(heun, argnums=(0, 1)), y0, a, n_native=2, dtype=dtype)
    if dtype == np.float64:
        g = fl.jit(fl.grad(heun, argnums=1))(y0, a)
        eps = 1e-6
        fd = (heun(y0, a + eps) - heun(y0, a - eps)) / (2 * eps)
        np.testing.assert_allclose(np.asarray(g), np.asarray(fd), rtol=1e-4, atol=1e-6)


def test_while_loop_max_steps_stops_a_loop_that_would_not():
    def f(x):
        return fl.while_loop(lambda c: c[0] > -1.0, lambda c: c * 1.5, x, max_steps=5)

    x = fl.asarray(np.ones(3))
    got = check(f, x, n_native=1, dtype=np.float64)
    np.testing.assert_allclose(np.asarray(got[0]), 1.5**5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_while_loop_under_vmap(dtype):
    # a batched predicate: lanes finish at different steps
    def f(x, n):
        return fl.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 0.9 + fl.tanh(s[1])), (0, x))[1]

    xs = arr(4, 3, dtype=dtype)
    ns = fl.asarray(np.array([1, 5, 3, 0]))
    check(fl.vmap(f), xs, ns, n_native=1, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------------
# fori_loop


@pytest.mark.parametrize("dtype", DTYPES)
def test_fori_loop_static_and_traced_bounds(dtype):
    W = arr(3, 3, dtype=dtype) * 0.3

    def body(i, h):
        return fl.tanh(h @ W + i.astype(h.dtype) * 0.01)

    h0 = arr(2, 3, dtype=dtype)
    check(lambda h: fl.fori_loop(0, 6, body, h), h0, n_native=1, dtype=dtype)  # a scan
    check(lambda h, n: fl.fori_loop(0, n, body, h), h0, fl.asarray(6), n_native=1, dtype=dtype)  # a while
    # reverse mode through the static form
    check(fl.grad(lambda h: fl.fori_loop(0, 6, body, h).sum()), h0, n_native=2, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------------
# cond and nesting


@pytest.mark.parametrize("dtype", DTYPES)
def test_cond_and_switch_inside_loops(dtype):
    def f(xs):
        def step(c, x):
            c = fl.cond(x.sum() > 0, lambda c: c + x, lambda c: c * 0.5 - fl.sin(x), c)
            k = (fl.abs(x[0]) * 2).astype(fl.int32)  # 0, 1, 2 or more (clamped)
            y = fl.switch(k, [lambda c: c, lambda c: -c, lambda c: c * c], c)
            return c, y.sum()

        return fl.scan(step, fl.zeros(3, dtype=xs.dtype), xs)

    xs = arr(7, 3, dtype=dtype)
    check(f, xs, n_native=1, dtype=dtype)
    check(fl.grad(lambda xs: f(xs)[1].sum()), xs, n_native=2, dtype=dtype)
    check(fl.vmap(f), arr(2, 7, 3, dtype=dtype), n_native=1, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_loops_nested_in_loops(dtype):
    def f(x, xs):
        def outer(c, x):
            # a while inside a scan, a scan inside that while
            def body(s):
                k, v = s
                v, _ = fl.scan(lambda a, b: (a * 0.7 + b, None), v, fl.stack([x, -x]))
                return k + 1, v

            _, c = fl.while_loop(lambda s: s[0] < 3, body, (0, c), max_steps=3)
            return c, c.sum()

        return fl.scan(outer, x, xs)

    x, xs = arr(3, dtype=dtype), arr(4, 3, dtype=dtype)
    check(f, x, xs, n_native=1, dtype=dtype)
    check(fl.grad(lambda x, xs: f(x, xs)[1].sum(), argnums=(0, 1)), x, xs, n_native=2, dtype=dtype)


def test_bodies_are_optimized_and_lower_shows_them():
    def f(x):
        def body(s):
            k, a = s
            return k + 1, fl.sin(a) * 1.0 + fl.sin(a) + 0.0

        return fl.while_loop(lambda s: s[0] < 4, body, (0, x))[1]

    x = fl.asarray(np.linspace(0, 1, 5))
    text = fl.jit(f).lower(x).as_text()
    body = text[text.index("body_jaxpr") :]
    assert body.count(" sin ") == 1 and " mul " not in body.split("in (")[0]  # CSE and x*1, x+0 in the body
    assert "funclib loop kernel" in text and "break" in text  # the generated loop itself


def test_unsupported_while_body_keeps_the_executor_loop():
    def f(x):
        return fl.while_loop(lambda c: c.sum() < 10, lambda c: c + fl.sort(c), x)

    x = fl.asarray(np.array([3.0, 1.0, 2.0]))
    g = fl.jit(f)
    assert not native_steps(g, x)
    np.testing.assert_allclose(np.asarray(g(x)), np.asarray(f(x)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_slice_from_zero_is_not_read_as_its_whole_base(dtype):
    # x[:, :1] keeps the identity index map of x; a matmul or reshape of it must see one column, not x
    W = arr(1, 3, dtype=dtype)

    def f(xs):
        def step(c, x):
            c = c + x[:, :1] @ W + x[:, :2].reshape((4,)).sum()
            return c, None

        return fl.scan(step, fl.zeros((2, 3), dtype=xs.dtype), xs)[0]

    check(f, arr(5, 2, 3, dtype=dtype), n_native=1, dtype=dtype)


def _meta_step(dtype):
    """A few inner gradient steps and the outer gradient through them (MAML's shape): over 16 steps, small values."""

    def loss(w, x, y):
        return ((fl.tanh(x @ w) - y) ** 2).mean()

    def outer(w, x, y):
        for _ in range(2):
            w = w - 0.1 * fl.grad(loss)(w, x, y)
        return loss(w, x, y)

    return fl.value_and_grad(outer), (arr(3, 2, dtype=dtype), arr(4, 3, dtype=dtype), arr(4, 2, dtype=dtype))


def _program_step(g, *args):
    (step,) = [s[0] for s in g.lower(*args).program.steps]
    return step


def _assert_close(got, want, dtype):
    for a, b in zip(fl.tree.leaves(got), fl.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **TOL[dtype])


@pytest.fixture
def cold_cache(monkeypatch):
    """As if the kernel cache did not hold the program's function yet (an earlier run may have stored it)."""
    monkeypatch.setattr(loopgen.LoopKernel, "on_disk", lambda self: False)
    return monkeypatch


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_hot_program_switches_to_one_function_compiled_in_the_background(cold_cache, dtype):
    cold_cache.setattr(fl.config, "whole_program_hot_calls", 2)
    f, args = _meta_step(dtype)
    g = fl.jit(f)
    want = f(*args)
    step = _program_step(g, *args)
    assert isinstance(step, TieredProgram) and not step.ready
    _assert_close(g(*args), want, dtype)
    assert step.thread is None  # one call: still the steps, nothing compiling
    _assert_close(g(*args), want, dtype)
    assert step.thread is not None
    # the public wait covers these compiles as well as the worker processes' (float32 case), this module's own wait
    waited = fl.config.wait_for_compilation(timeout=600.0) if dtype == DTYPES[0] else wait_for_compiles(timeout=600.0)
    assert waited and step.ready and not step.whole.failed
    _assert_close(g(*args), want, dtype)
    assert step.whole.ran
    # the function is in the kernel cache now: the same program lowered again uses it from its first call
    cold_cache.undo()
    if loopgen.LoopKernel.on_disk(step.whole.kernel):
        assert isinstance(_program_step(fl.jit(f), *args), WholeProgram)


def test_hot_calls_zero_compiles_the_one_function_at_the_first_call(cold_cache):
    cold_cache.setattr(fl.config, "whole_program_hot_calls", 0)
    f, args = _meta_step(np.float32)
    g = fl.jit(f)
    step = _program_step(g, *args)
    assert isinstance(step, WholeProgram)
    _assert_close(g(*args), f(*args), np.float32)
    assert step.ran and not step.failed


def _tiered(cold_cache, hot: int, dtype):
    """The meta-learning step jitted as a tiered program becoming hot at call ``hot``: ``f, args, g, step``."""
    cold_cache.setattr(fl.config, "whole_program_hot_calls", hot)
    f, args = _meta_step(dtype)
    g = fl.jit(f)
    step = _program_step(g, *args)
    assert isinstance(step, TieredProgram)
    return f, args, g, step


def test_a_background_compile_that_fails_keeps_the_steps(cold_cache, caplog):
    f, args, g, step = _tiered(cold_cache, 1, np.float64)

    def broken(*a, **k):
        raise RuntimeError("no machine code today")

    cold_cache.setattr(step.whole, "kernel", broken)
    want = f(*args)
    _assert_close(g(*args), want, np.float64)
    assert wait_for_compiles(timeout=60.0)
    assert step.whole.failed and not step.ready
    assert "no machine code today" in caplog.text
    _assert_close(g(*args), want, np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_long_program_of_128_by_128_values_runs_as_one_function_and_a_short_one_as_steps(monkeypatch, dtype):
    monkeypatch.setattr(fl.config, "whole_program_hot_calls", 0)
    a, x = arr(64, 128, dtype=dtype), arr(128, dtype=dtype)
    h = fl.hessian(lambda v: fl.logsumexp(a @ fl.tanh(v)))
    g = fl.jit(h)
    assert len(g.lower(x).program.describe().splitlines()) == 1
    monkeypatch.setattr(fl.config, "whole_programs", False)
    steps = fl.jit(h)
    n_steps = len(steps.lower(x).program.steps)
    assert native_loops.WHOLE_PROGRAM_MAX_STEPS < n_steps <= native_loops.WHOLE_PROGRAM_TIERED_MAX_STEPS
    monkeypatch.setattr(fl.config, "whole_programs", True)
    step = _program_step(g, x)
    assert isinstance(step, WholeProgram)
    assert any(math.prod(v.shape) > native_loops.WHOLE_PROGRAM_MAX_ELEMENTS for v in step.kernel.spec.values)
    got = g(x)
    assert step.ran and not step.failed
    _assert_close(got, h(x), dtype)
    _assert_close(got, steps(x), dtype)

    w = arr(128, 128, dtype=dtype)
    short = fl.jit(lambda m: fl.tanh(m @ w) @ w)
    assert not native_steps(short, w)
    _assert_close(short(w), fl.tanh(w @ w) @ w, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_generated_function_reuses_a_buffer_only_after_its_last_read(monkeypatch, dtype):
    # a is read through a transpose long after it is computed, and b and c after a chain of same-shape values:
    # their buffers must outlive every value computed in between, while the chain's reuse one another
    def f(x, w):
        a = fl.tanh(x @ w)
        b = fl.exp(a) * 0.5
        c = b
        for k in range(6):
            c = fl.sin(0.1 * (c @ w.T @ w) + float(k))  # contracting: rounding does not grow
        return (a.T @ c).sum() + (b * c).sum(), a

    monkeypatch.setattr(fl.config, "whole_program_hot_calls", 0)
    x, w = arr(4, 4, dtype=dtype), arr(4, 4, dtype=dtype)
    g = fl.jit(f)
    step = _program_step(g, x, w)
    assert isinstance(step, (WholeProgram, TieredProgram))
    whole = step if isinstance(step, WholeProgram) else step.whole
    kernel = whole.kernel
    n_computed = len(kernel.spec.values) - kernel.spec.n_consts
    assert len(kernel._temps) < n_computed // 2
    _assert_close(g(x, w), f(x, w), dtype)
    _assert_close(g(x, w), f(x, w), dtype)  # the kept scratch buffers hold the last call's values: no matter
    assert whole.ran and not whole.failed


def _classifier_loss(w, x, labels):
    logp = fl.log_softmax(fl.tanh(x @ w), axis=-1)
    return -fl.mean(fl.take_along_axis(logp, labels[:, None], axis=1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_and_its_scatter_add_run_in_one_function_as_numpy_indexes(monkeypatch, dtype):
    # negative labels count from the end; the gradient scatters with repeated labels, which must add up
    monkeypatch.setattr(fl.config, "whole_program_hot_calls", 0)
    w, x = arr(6, 5, dtype=dtype), arr(8, 6, dtype=dtype)
    labels = fl.asarray(np.array([0, 4, -1, 2, 2, -5, 3, 2]))
    f = fl.value_and_grad(_classifier_loss)
    g = fl.jit(f)
    step = _program_step(g, w, x, labels)
    assert isinstance(step, WholeProgram) and "raise IndexError('gather" in step.source
    assert "scatter_add: index out of bounds" in step.source
    got = g(w, x, labels)
    assert step.ran and not step.failed
    monkeypatch.setattr(fl.config, "whole_programs", False)
    _assert_close(got, fl.jit(f)(w, x, labels), dtype)  # sums may round differently in one function
    _assert_close(got, f(w, x, labels), dtype)
    with pytest.raises(IndexError, match=r"out of bounds for operand shape \(8, 5\).*index 5 is out of bounds"):
        g(w, x, fl.asarray(np.array([0, 4, 5, 2, 2, 1, 3, 2])))
    _assert_close(g(w, x, labels), got, dtype)  # an error leaves the function in use
    assert not step.failed


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_of_rows_inside_a_native_scan(dtype):
    # each iteration gathers two rows (the axis not indexed is copied whole) and adds them into the carry
    table, picks = arr(7, 3, dtype=dtype), fl.asarray(np.array([[0, 6], [-1, 2], [3, 3], [5, -7]]))

    def f(table, picks):
        def body(h, p):
            rows = table[p]
            h = fl.tanh(h + rows.sum(axis=0))
            return h, rows
        return fl.scan(body, fl.zeros(3, dtype=dtype), picks)

    check(f, table, picks, n_native=1, dtype=dtype)
    check(lambda t, p: fl.grad(lambda t: f(t, p)[0].sum())(t), table, picks, n_native=2, dtype=dtype)
    g = fl.jit(f)
    g(table, picks)
    with pytest.raises(IndexError, match=r"operand shape \(7, 3\)"):
        g(table, fl.asarray(np.array([[0, 6], [-1, 2], [3, 7], [5, -7]])))
    (loop,) = native_steps(g, table, picks)
    assert loop.ran and not loop.failed


def test_a_tiered_program_keeps_its_steps_when_they_ran_faster(cold_cache, caplog):
    f, args, g, step = _tiered(cold_cache, 5, np.float64)
    want = f(*args)
    for _ in range(5):
        _assert_close(g(*args), want, np.float64)
    assert wait_for_compiles(timeout=600.0) and step.ready
    fast = step.whole

    def slow(*a):
        time.sleep(0.05)
        return fast(*a)

    step.whole = slow
    with caplog.at_level("INFO", logger="funclib.jit"):
        for _ in range(native_loops.TIERED_TRIALS + 1):
            _assert_close(g(*args), want, np.float64)
    assert step.chose_steps and not step.ready and step.whole is None
    assert "steps ran faster" in caplog.text
    _assert_close(g(*args), want, np.float64)


def test_a_tiered_program_keeps_its_function_when_it_ran_faster(cold_cache):
    f, args, g, step = _tiered(cold_cache, 5, np.float32)
    slow_steps = step.fallback

    def slower(*a):
        time.sleep(0.02)
        return slow_steps(*a)

    step.fallback = slower
    for _ in range(5):
        g(*args)
    assert len(step.timed_steps) == 3 and wait_for_compiles(timeout=600.0)
    for _ in range(native_loops.TIERED_TRIALS + 2):
        _assert_close(g(*args), f(*args), np.float32)
    assert step.settled and step.ready and not step.chose_steps and step.whole.ran
