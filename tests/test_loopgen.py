"""Whole-loop scan kernels (``kernels/loopgen.py``, driven by ``transforms/native_loops.py``).

Under ``jit``, a ``scan`` whose body lowers to numba runs as one generated loop. It must give the executor loop's
results (``fl.config.native_loops = False``), for forward and transposed (reverse) bodies, in float32 and
float64; bodies it cannot generate keep the executor loop; a kernel that fails to compile falls back at run time.
"""

import logging

import numpy as np
import pytest
from funclib.kernels import loopgen
from funclib.kernels.fusion import OpSpec
from funclib.transforms.native_loops import NativeScan

import funclib as fl

RNG = np.random.default_rng(7)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


@pytest.fixture(autouse=True)
def _native_on(monkeypatch):
    monkeypatch.setattr(fl.config, "native_loops", True)
    monkeypatch.setattr(fl.config, "fuse_kernels", True)
    monkeypatch.setattr(fl.config, "whole_programs", False)  # the loops as steps of their own


def native_steps(jitted, *args) -> list:
    return [s[0] for s in jitted.lower(*args).program.steps if isinstance(s[0], NativeScan)]


def run_both(f, *args, n_native: int):
    """``jit(f)(*args)`` through the generated loops and through the executor loop; checks the loops ran."""
    g = fl.jit(f)
    got = g(*args)
    steps = native_steps(g, *args)
    assert len(steps) == n_native
    assert all(s.ran and not s.failed for s in steps)
    fl.config.native_loops = False
    ref = fl.jit(f)
    want = ref(*args)
    assert not native_steps(ref, *args)
    fl.config.native_loops = True
    return fl.tree.leaves(got), fl.tree.leaves(want)


def close(got, want, dtype):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, **TOL[dtype])


# ---------------------------------------------------------------------------------------------------------------
# the RNN of the benchmark, forward and transposed scans


def rnn_loss(W, U, xs):
    def cell(h, x):
        return fl.tanh(h @ W + x @ U), None

    h, _ = fl.scan(cell, fl.zeros((4, 8), dtype=W.dtype), xs)
    return (h * h).sum()


def rnn_grad_numpy(W, U, xs):
    hs = [np.zeros((4, 8), W.dtype)]
    for x in xs:
        hs.append(np.tanh(hs[-1] @ W + x @ U))
    gW, gU, gh = np.zeros_like(W), np.zeros_like(U), 2 * hs[-1]
    for t in range(len(xs) - 1, -1, -1):
        gz = gh * (1 - hs[t + 1] ** 2)
        gW += hs[t].T @ gz
        gU += xs[t].T @ gz
        gh = gz @ W.T
    return gW, gU


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rnn_grad_matches_executor_and_bptt(dtype):
    W = (RNG.normal(size=(8, 8)) * 0.3).astype(dtype)
    U = (RNG.normal(size=(3, 8)) * 0.3).astype(dtype)
    xs = RNG.normal(size=(9, 4, 3)).astype(dtype)
    args = (fl.asarray(W), fl.asarray(U), fl.asarray(xs))
    got, want = run_both(fl.grad(rnn_loss, argnums=(0, 1)), *args, n_native=2)
    close(got, want, dtype)
    bptt = rnn_grad_numpy(W, U, xs)
    for a, b in zip(got, bptt):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-6)


def test_kernel_source_does_not_depend_on_sizes():
    # trip count and sizes are run-time values: 5 or 500 steps, batch 4 or 6, compile the same kernels
    def srcs(steps, batch):
        def loss(W, xs):
            h, _ = fl.scan(lambda h, x: (fl.tanh(h @ W + x), None), fl.zeros((batch, 8)), xs)
            return (h * h).sum()

        W, xs = fl.ones((8, 8)), fl.ones((steps, batch, 8))
        return [s.source for s in native_steps(fl.jit(fl.grad(loss)), W, xs)]

    a = srcs(5, 4)
    assert len(a) == 2
    assert srcs(500, 4) == a
    assert srcs(5, 6) == a


# ---------------------------------------------------------------------------------------------------------------
# other bodies


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_carry_swap_and_sum(dtype):
    def f(xs):
        def body(c, x):
            a, b = c
            return (b * 0.5 + x, a), a.sum()  # the new second carry reads the old first one

        return fl.scan(body, (fl.zeros(3, dtype=dtype), fl.ones(3, dtype=dtype)), xs)

    xs = RNG.normal(size=(6, 3)).astype(dtype)
    got, want = run_both(f, fl.asarray(xs), n_native=1)
    close(got, want, dtype)
    a, b, sums = np.zeros(3, dtype), np.ones(3, dtype), []
    for x in xs:
        sums.append(a.sum())
        a, b = b * dtype(0.5) + x, a
    for g, w in zip(got, (a, b, sums)):
        np.testing.assert_allclose(np.asarray(g), w, **TOL[dtype])


def test_reverse_scan_with_ys_of_every_kind():
    def f(xs, w):
        def body(c, x):
            y = fl.sin(c * w) + x
            # rank-0 carry; ys: the old carry, a region output, a reversal, a slice, a constant
            return c + y.sum(), (c, y, 2.0 * x[::-1], x[1:], fl.ones(2, dtype=fl.float64))

        return fl.scan(body, fl.asarray(0.5, dtype=fl.float64), xs, reverse=True)

    xs, w = RNG.normal(size=(6, 4)), RNG.normal(size=(4,))
    got, want = run_both(f, fl.asarray(xs), fl.asarray(w), n_native=1)
    close(got, want, np.float64)
    c, ys = 0.5, [None] * 6
    for i in range(5, -1, -1):
        y = np.sin(c * w) + xs[i]
        ys[i] = (c, y)
        c = c + y.sum()
    np.testing.assert_allclose(np.asarray(got[0]), c, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got[1]), [a for a, _ in ys], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got[3]), 2.0 * xs[:, ::-1], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got[4]), xs[:, 1:], rtol=1e-12)


def test_batched_dot_transposes_reshapes_and_their_grad():
    def f(xs, W):
        def body(h, x):
            z = fl.matmul(h[:, None, :], W)[:, 0, :]  # a batched dot_general
            h = fl.tanh(z + x).T.reshape((2, 3)).T.reshape((3, 2))
            return h, fl.broadcast_to(h.sum(axis=0), (4, 2))

        return fl.scan(body, fl.ones((3, 2)), xs)

    xs = fl.asarray(RNG.normal(size=(5, 3, 2)).astype(np.float32))
    W = fl.asarray(RNG.normal(size=(3, 2, 2)).astype(np.float32))
    got, want = run_both(f, xs, W, n_native=1)
    close(got, want, np.float32)
    got, want = run_both(fl.grad(lambda xs, W: f(xs, W)[1].sum(), argnums=1), xs, W, n_native=2)
    close(got, want, np.float32)


# ---------------------------------------------------------------------------------------------------------------
# the fallbacks


def test_unsupported_bodies_keep_the_executor_loop():
    def with_sort(xs):
        return fl.scan(lambda c, x: (c + fl.sort(x), c.sum()), fl.zeros(4, dtype=fl.float64), xs)

    def with_gather(xs):
        return fl.scan(lambda c, x: (c + x[fl.argmax(x)], c.sum()), fl.zeros(4, dtype=fl.float32), xs)

    for f, xs in ((with_sort, RNG.normal(size=(5, 4))), (with_gather, RNG.normal(size=(5, 4)).astype(np.float32))):
        g = fl.jit(f)
        assert not native_steps(g, fl.asarray(xs))
        for a, b in zip(fl.tree.leaves(g(fl.asarray(xs))), fl.tree.leaves(f(fl.asarray(xs)))):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_kernel_failure_falls_back_with_a_warning(monkeypatch, caplog):
    def broken(self, *a):
        raise loopgen.numba.core.errors.TypingError("cannot type this")

    monkeypatch.setattr(loopgen.LoopKernel, "__call__", broken)

    def f(xs):
        return fl.scan(lambda c, x: (c * 0.9 + x, c), fl.zeros(3), xs)

    xs = fl.asarray(RNG.normal(size=(4, 3)).astype(np.float32))
    g = fl.jit(f)
    with caplog.at_level(logging.WARNING, logger="funclib.jit"):
        got = g(xs)
    assert "generated loop kernel failed" in caplog.text
    (step,) = native_steps(g, xs)
    assert step.failed and not step.ran
    for a, b in zip(fl.tree.leaves(got), fl.tree.leaves(f(xs))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    assert np.asarray(g(xs)[0]).shape == (3,)  # later calls go straight to the executor loop


# ---------------------------------------------------------------------------------------------------------------
# the generator on its own: views of every layout, copies where BLAS needs them, staging, literal outputs


def test_loop_spec_with_every_step_kind():
    f64 = "float64"
    V = loopgen.Value
    values = (
        V(f64, (3, 3)),  # 0 W
        V(f64, (3, 2, 4)),  # 1 K
        V(f64, (4, 3, 5)),  # 2 M
        V(f64, (2,)),  # 3 a constant output
        V(f64, (2, 3)),  # 4 carry A
        V(f64, (3, 2)),  # 5 carry B
        V(f64, (2, 3)),  # 6 x
        V(f64, ()),  # 7 s
        V(f64, (2, 3)),  # 8 t = B.T (F-ordered view)
        V(f64, (2, 3)),  # 9 u = A * t + x * s
        V(f64, (6,)),  # 10 r = reshape(t): a copy first
        V(f64, (4, 6)),  # 11 broadcast r
        V(f64, (3, 3)),  # 12 strided slice (neither C nor F)
        V(f64, (3, 3)),  # 13 sl.T @ W.T
        V(f64, (4, 2, 5)),  # 14 batch axis last on the left, first on the right
        V(f64, (2, 3)),  # 15 u reversed along axis 1
        V(f64, (3,)),  # 16 max over axis 0
        V(f64, (3, 2)),  # 17 u.T
    )
    mul = OpSpec("mul", (("in", 0), ("in", 1)), f64)
    steps = (
        loopgen.Transpose(5, 8, (1, 0)),
        loopgen.Elementwise(
            (4, 8, 6, 7),
            (mul, OpSpec("mul", (("in", 2), ("in", 3)), f64), OpSpec("add", (("op", 0), ("op", 1)), f64)),
            ((2, 9),),
            (2, 3),
        ),
        loopgen.Reshape(8, 10),
        loopgen.Broadcast(10, 11, (1,)),
        loopgen.Slice(11, 12, (1, 0), (4, 6), (1, 2)),
        loopgen.Dot(12, 0, 13, ((0,), (1,)), ((), ())),
        loopgen.Dot(1, 2, 14, ((0,), (1,)), ((2,), (0,))),
        loopgen.Rev(9, 15, (1,)),
        loopgen.Elementwise(
            (15,), (OpSpec("copy", (("in", 0),), f64),), (), (2, 3), loopgen.Reduction("max", 0, (0,), 16)
        ),
        loopgen.Transpose(9, 17, (1, 0)),
    )
    spec = loopgen.LoopSpec(values, 4, 2, 2, steps, carry_out=(8, 17), ys=(13, 14, 16, 3, 6), reverse=True)
    k = loopgen.build(spec)
    n = 5
    W, K, M, lit = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 2, 4)), RNG.normal(size=(4, 3, 5)), np.ones(2)
    A0, B0 = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 2))
    X, S = RNG.normal(size=(n, 2, 3)), RNG.normal(size=(n,))
    (A, B), ys = k(n, [W, K, M, lit], [A0, B0], [X, S])
    a, b = A0.copy(), B0.copy()
    want = [np.empty((n, 3, 3)), np.empty((n, 4, 2, 5)), np.empty((n, 3)), np.empty((n, 2)), np.empty((n, 2, 3))]
    for i in range(n - 1, -1, -1):
        t = b.T
        u = a * t + X[i] * S[i]
        sl = np.broadcast_to(t.reshape(6), (4, 6))[1:4, 0:6:2]
        for buf, y in zip(want, (sl.T @ W.T, np.einsum("kfb,bkg->bfg", K, M), u[:, ::-1].max(axis=0), lit, X[i])):
            buf[i] = y
        a, b = t.copy(), u.T.copy()
    np.testing.assert_allclose(A, a, rtol=1e-12)
    np.testing.assert_allclose(B, b, rtol=1e-12)
    for got, w in zip(ys, want):
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(A0, A0.copy())  # inputs are never written


def test_unsupported_specs_raise():
    v = loopgen.Value("int32", (2, 2))
    dot = loopgen.Dot(0, 1, 3, ((1,), (0,)), ((), ()))
    spec = loopgen.LoopSpec((v, v, v, v), 2, 1, 0, (dot,), carry_out=(3,), ys=(), reverse=False)
    with pytest.raises(loopgen.Unsupported, match="dot_general"):
        loopgen.build(spec)
    h = loopgen.Value("float16", (2,))
    spec = loopgen.LoopSpec((h,), 0, 1, 0, (), carry_out=(0,), ys=(), reverse=False)
    with pytest.raises(loopgen.Unsupported, match="float16"):
        loopgen.build(spec)



def _sums_spec(read_reversed: bool):
    """carry c; body: c += x, ys = (x * x).sum(-1) twice (a gradient's reductions are often alike), the sums
    reading x itself or x reversed along its last axis (a view whose map reads a size of its own)."""
    f32 = "float32"
    V = loopgen.Value
    values = (V(f32, (2, 3)), V(f32, (2, 3)), V(f32, (2, 3)), V(f32, (2,)), V(f32, (2,)), V(f32, (2, 3)))
    add = (OpSpec("add", (("in", 0), ("in", 1)), f32),)
    square = (OpSpec("mul", (("in", 0), ("in", 0)), f32),)
    src = 5 if read_reversed else 1
    steps = (
        loopgen.Elementwise((0, 1), add, ((0, 2),), (2, 3)),
        *((loopgen.Rev(1, 5, (1,)),) if read_reversed else ()),
        loopgen.Elementwise((src,), square, (), (2, 3), loopgen.Reduction("sum", 0, (1,), 3)),
        loopgen.Elementwise((src,), square, (), (2, 3), loopgen.Reduction("sum", 0, (1,), 4)),
    )
    return loopgen.LoopSpec(values, 0, 1, 1, steps, carry_out=(2,), ys=(3, 4), reverse=False)


@pytest.mark.parametrize("read_reversed", [False, True])
def test_identical_sums_share_one_helper(read_reversed):
    # a helper is typed, optimized and compiled once however often the body calls it
    k = loopgen.build(_sums_spec(read_reversed))
    src = k.source
    assert src.count("def r") == 1 and src.count("r0(") == 3  # its definition and two calls
    assert "no_cpython_wrapper=True, no_cfunc_wrapper=True, fastmath={'reassoc', 'contract'}" in src
    assert ("def r0(d, " in src) == read_reversed  # sizes outside the region's own come from the table
    assert src.count("s0_t0 = (s0_x0 + s0_x1)") == 1  # an elementwise nest stays inline in the loop
    n = 4
    c0 = RNG.normal(size=(2, 3)).astype(np.float32)
    xs = RNG.normal(size=(n, 2, 3)).astype(np.float32)
    (c,), (y0, y1) = k(n, [], [c0], [xs])
    want = c0
    for x in xs:
        want = want + x
    np.testing.assert_array_equal(c, want)
    np.testing.assert_allclose(y0, (xs * xs).sum(-1), rtol=1e-6)
    np.testing.assert_array_equal(y0, y1)
