"""jit: equality with eager, composition with every transform, caching and retraces, kernels, disk cache."""

import functools
import logging
import threading

import numpy as np
import pytest
from funclib.kernels import fusion
from funclib.transforms.jit import RetraceError
from hypothesis import given, settings
from hypothesis import strategies as st

import funclib as fl


def f64(x):
    return fl.asarray(np.asarray(x, dtype=np.float64))


def rnd(*shape, seed=0, dtype=np.float32):
    return fl.asarray(np.random.default_rng(seed).normal(size=shape).astype(dtype))


def test_jit_equals_eager_and_fuses():
    def f(x, y):
        z = fl.gelu(x) * fl.sigmoid(x) + y
        return (z - z.mean(axis=-1, keepdims=True)) / fl.sqrt(z.var(axis=-1, keepdims=True) + 1e-5)

    x, y = rnd(8, 16), rnd(16, seed=1)
    jf = fl.jit(f)
    np.testing.assert_allclose(jf(x, y).numpy(), f(x, y).numpy(), rtol=2e-5, atol=2e-6)
    low = jf.lower(x, y)
    assert low.kernels, "expected at least one fused kernel"
    assert "def kernel(" in low.kernels[0] and "for i0 in range" in low.kernels[0]
    assert "np.empty" not in "".join(low.kernels)  # outputs come from the executor
    text = low.as_text()
    assert "optimized jaxpr" in text and "program" in text


@pytest.mark.parametrize(
    "fn, dtype",
    [(fl.erf, np.float32), (fl.sigmoid, np.float32), (fl.gelu, np.float32)]
    + [(fl.erf, np.float16), (fl.sigmoid, np.float16)],
)
def test_jit_transcendentals_equal_eager_bit_for_bit(fn, dtype):
    # eager float32 erf/logistic run the same vmath functions as the fused kernels (a fused float16 chain keeps
    # its intermediates in float32, so only single half ops compare bit for bit)
    x = fl.asarray((np.random.default_rng(3).normal(size=(7, 33)) * 4).astype(dtype))
    eager, jitted = fn(x).numpy(), fl.jit(fn)(x).numpy()
    np.testing.assert_array_equal(eager.view(np.uint8), jitted.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_jit_dtypes(dtype):
    x = fl.asarray((np.arange(12).reshape(3, 4) % 5).astype(dtype))

    def f(a):
        if a.dtype == fl.bool:
            return fl.logical_xor(a, a[::-1]) | a
        return fl.maximum(a * 2 - a[:, ::-1], a) + (a > 1).astype(a.dtype)

    np.testing.assert_array_equal(fl.jit(f)(x).numpy(), f(x).numpy())


def test_half_precision_under_jit():
    for d in (fl.float16, fl.bfloat16):
        x = fl.asarray(np.linspace(-2, 2, 9), dtype=d)
        f = lambda a: fl.tanh(a) * a + 1.0  # noqa: E731
        out = fl.jit(f)(x)
        assert out.dtype == d
        np.testing.assert_allclose(out.numpy().astype(np.float32), f(x).numpy().astype(np.float32), rtol=1e-2)


def test_compositions():
    f = lambda x: (fl.sin(x) * fl.exp(-x * x)).sum()  # noqa: E731
    x = f64([0.1, -0.5, 1.5])
    g = fl.grad(f)(x).numpy()
    np.testing.assert_allclose(fl.jit(fl.grad(f))(x).numpy(), g, rtol=1e-12)
    np.testing.assert_allclose(fl.grad(fl.jit(f))(x).numpy(), g, rtol=1e-12)
    xs = f64(np.random.default_rng(0).normal(size=(4, 3)))
    vg = fl.vmap(fl.grad(f))(xs).numpy()
    np.testing.assert_allclose(fl.jit(fl.vmap(fl.grad(f)))(xs).numpy(), vg, rtol=1e-12)
    np.testing.assert_allclose(fl.vmap(fl.jit(fl.grad(f)))(xs).numpy(), vg, rtol=1e-12)
    np.testing.assert_allclose(fl.jit(fl.jit(f))(x).numpy(), f(x).numpy(), rtol=1e-12)
    h = fl.hessian(f)(x).numpy()
    np.testing.assert_allclose(fl.hessian(fl.jit(f))(x).numpy(), h, rtol=1e-10)
    np.testing.assert_allclose(fl.jit(fl.hessian(f))(x).numpy(), h, rtol=1e-10)


# every example compiles fresh kernels (about 0.3 s each), so a few examples go a long way
@settings(max_examples=8, deadline=None)
@given(
    ops=st.lists(
        st.sampled_from(["tanh", "mul", "add", "exp", "log1p_sq", "max0", "sum", "mm", "where", "rowsum", "rowmax"]),
        min_size=1,
        max_size=7,
    ),
    seed=st.integers(0, 50),
)
def test_random_programs_jit_equals_eager(ops, seed):
    rng = np.random.default_rng(seed)
    m = f64(rng.normal(size=(4, 4)) * 0.3)

    def f(x):
        h = x
        for op in ops:
            if op == "tanh":
                h = fl.tanh(h)
            elif op == "mul":
                h = h * x
            elif op == "add":
                h = h + 0.5
            elif op == "exp":
                h = fl.exp(-h * h)
            elif op == "log1p_sq":
                h = fl.log1p(h * h)
            elif op == "max0":
                h = fl.maximum(h, 0.1)
            elif op == "sum":
                h = h - h.sum(axis=0, keepdims=True)
            elif op == "rowsum":
                h = h * h.sum(axis=-1, keepdims=True)
            elif op == "rowmax":
                h = h - fl.max(h, axis=-1, keepdims=True)
            elif op == "mm":
                h = h @ m
            elif op == "where":
                h = fl.where(h > 0, h, 0.5 * h)
        return h

    x = f64(rng.normal(size=(3, 4)))
    np.testing.assert_allclose(fl.jit(f)(x).numpy(), f(x).numpy(), rtol=1e-12, atol=1e-14)
    loss = lambda x: (f(x) ** 2).sum()  # noqa: E731
    np.testing.assert_allclose(fl.jit(fl.grad(loss))(x).numpy(), fl.grad(loss)(x).numpy(), rtol=1e-10, atol=1e-12)
    xs = f64(rng.normal(size=(2, 3, 4)))
    np.testing.assert_allclose(fl.jit(fl.vmap(f))(xs).numpy(), fl.vmap(f)(xs).numpy(), rtol=1e-12, atol=1e-14)


def _steps(jf, *args):
    return jf.lower(*args).as_text().split("# program")[1].split("import math")[0].strip().splitlines()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_reductions_and_their_consumers_fuse_into_one_kernel(dtype):
    """A normalization, a softmax and a log-softmax each become one staged kernel: every row is read once."""
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    x = rnd(6, 33, dtype=dtype)
    layer_norm = lambda a: (a - a.mean(axis=-1, keepdims=True)) / fl.sqrt(a.var(axis=-1, keepdims=True) + 1e-5)  # noqa: E731
    for f in (layer_norm, lambda a: fl.softmax(a, axis=-1), lambda a: fl.log_softmax(a * 2.0, axis=-1)):
        jf = fl.jit(f)
        np.testing.assert_allclose(jf(x).numpy(), f(x).numpy(), **tol)
        steps = _steps(jf, x)
        assert len(steps) == 1 and "fused[" in steps[0], steps
        src = jf.lower(x).kernels[0]
        assert src.count("for i1 in range(n1):") >= 2  # two or more passes over each row
        g = fl.grad(lambda a: (f(a) * fl.cos(a)).sum())  # noqa: B023
        np.testing.assert_allclose(fl.jit(g)(x).numpy(), g(x).numpy(), **tol)


def test_staged_kernels_broadcasts_outputs_and_shapes():
    rng = np.random.default_rng(3)
    x = fl.asarray(rng.normal(size=(2, 3, 5, 4)))
    w = fl.asarray(rng.normal(size=(4,)))  # broadcast along the rows
    s = fl.asarray(rng.normal(size=(2, 3, 5, 1)))  # one value per row

    def f(a, w, s):
        m = a.mean(axis=-1, keepdims=True)
        c = (a - m) * w
        q = fl.sum(c * c, axis=-1, keepdims=True) * s + 1.0
        return c / q, m, q[..., 0] * 2.0  # per-row values leave the kernel as outputs, keepdims or not

    jf = fl.jit(f)
    for got, want in zip(jf(x, w, s), f(x, w, s)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-13)
    assert len(_steps(jf, x, w, s)) == 1
    # reductions over the last two axes, and over everything
    g = lambda a: a - fl.max(a, axis=(-2, -1), keepdims=True) + fl.sum(a) * 0.5  # noqa: E731
    np.testing.assert_allclose(fl.jit(g)(x).numpy(), g(x).numpy(), rtol=1e-12, atol=1e-13)
    # a per-row result without keepdims broadcasts along the columns: it must not be treated as per-row
    y = fl.asarray(rng.normal(size=(4, 4)))
    h = lambda a: a * fl.sum(a, axis=-1) + fl.exp(a)  # noqa: E731
    np.testing.assert_allclose(fl.jit(h)(y).numpy(), h(y).numpy(), rtol=1e-12)


def test_a_row_value_leaving_a_staged_kernel_as_itself_and_as_its_keepdims_reshape():
    """Both are outputs of one staged kernel: one array and a view of it (the kernel used to write only one of
    them and return the other uninitialized)."""
    rng = np.random.default_rng(1)
    A, B, C, D = rng.standard_normal(4), rng.standard_normal((1, 4)), rng.standard_normal(4), rng.standard_normal(2)
    E, F = np.array([0, 1, 1]), rng.integers(0, 2, (4, 2))

    def f(g, h, i):  # a random program on which jit once disagreed with eager by 0.37
        n = fl.sum(fl.take(h, fl.asarray(E), axis=0)[None, :] ** 2, axis=1)
        s = fl.concat([n.reshape(1, 1), (fl.tanh(n) + 1.0).reshape(1, 1)], axis=0)
        t = s[fl.asarray(F[:, 0]), fl.asarray(F[:, 1])][:, None]
        w = i * g - t + fl.asarray(A)
        y = fl.maximum(w, fl.asarray(B))
        ac = fl.flip(w, axis=0) - fl.cosh(fl.abs(n))
        ad = fl.asinh(y * y) * fl.asarray(C)
        ai = (fl.reshape(y[2:3, 0:2], (2,)) ** 2 + 0.5) ** fl.asarray(D)
        an = fl.concat([fl.reshape(ad, (4, 4, 1)), fl.reshape(ac, (4, 4, 1))], axis=2)
        return an + 0.5801 * (fl.sum(fl.flip(fl.reshape(ai, (2, 1)), axis=0)) / 2.0)

    r = np.random.default_rng(0)
    args = f64(r.standard_normal()), f64(r.standard_normal(2)), f64(r.standard_normal(4))
    np.testing.assert_allclose(fl.jit(f)(*args).numpy(), f(*args).numpy(), rtol=1e-14, atol=1e-14)

    def g(x):
        m = fl.sum(x * x, axis=-1)
        return m, m[:, None] + 1.0, fl.tanh(m)[:, None] * x

    x = rnd(3, 5, dtype=np.float64)
    jg = fl.jit(g)
    for got, want in zip(jg(x), g(x)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)
    assert len(_steps(jg, x)) == 1  # still one kernel
    with pytest.raises(ValueError, match="distinct"):
        fusion.StagedSpec((("float64", "full"),), (fusion.StagedOp("exp", (("in", 0),), "float64"),), (0, 0), 1)


def test_jit_of_callables_without_a_name():
    class Affine:
        def __call__(self, x, a=2.0):
            return x * a + 1.0

    x = rnd(3)
    for fn in (Affine(), functools.partial(Affine(), a=3.0)):
        jf = fl.jit(fn)
        np.testing.assert_allclose(jf(x).numpy(), fn(x).numpy(), rtol=1e-6)
        assert type(fn).__name__ in repr(jf)


def test_a_python_float_argument_keeps_full_precision():
    x = fl.ones(1, dtype=fl.float64)
    assert fl.jit(lambda x, s: x * s)(x, 0.1).numpy()[0] == 0.1  # was rounded to float32: 0.10000000149


def _same(eager, jitted):
    if not isinstance(eager, fl.Tensor):  # a Python scalar eagerly: a Python scalar of the same type jitted
        return type(jitted) is type(eager) and jitted == eager
    return eager.dtype == jitted.dtype and np.array_equal(eager.numpy(), jitted.numpy())


_scaled_jvp = fl.custom_jvp(lambda a, b: a * b)
_scaled_jvp.defjvp(lambda p, t: (p[0] * p[1], t[0] * p[1]))
_scaled_vjp = fl.custom_vjp(lambda a, b: a * b)
_scaled_vjp.defvjp(lambda a, b: (a * b, (a, b)), lambda r, g: (g * r[1], fl.sum(g * r[0])))

_WEAK_CASES = [
    ("f64 * float", lambda x, s: x * s, fl.float64, 0.1),
    ("float * f64", lambda x, s: s * x, fl.float64, 0.1),
    ("f32 * float stays f32", lambda x, s: x * s, fl.float32, 0.1),
    ("f16 * float stays f16", lambda x, s: x * s, fl.float16, 0.1),
    ("scalar arithmetic stays weak", lambda x, s: x * (s * 3 - s / 7 + s**2 - abs(-s)), fl.float64, 0.1),
    ("f32 with scalar arithmetic", lambda x, s: x * (1 - s) ** 3, fl.float32, 0.1),
    ("int ** into f64", lambda x, k: x * 0.99**k, fl.float64, 7),
    ("int into f32", lambda x, k: x * 0.99**k, fl.float32, 7),
    ("int32 * int stays int32", lambda x, k: x * k + k // 2, fl.int32, 3),
    ("int32 * float is the default float", lambda x, s: x * s, fl.int32, 3.5),
    ("int8 + int", lambda x, k: x + k, fl.int8, 5),
    ("f32 * complex is complex64", lambda x, s: x * s, fl.float32, 0.1 + 1j),
    ("f64 * complex is complex128", lambda x, s: x * s, fl.float64, 0.1 + 1j),
    ("f32 * bool stays f32", lambda x, b: x * b, fl.float32, True),
    ("bool & bool", lambda x, b: x & b, fl.bool, True),
    ("where", lambda x, s: fl.where(x > 0, s, x), fl.float64, 0.1),
    ("maximum", lambda x, s: fl.maximum(x, s * 2), fl.float64, 0.6),
    ("a function of a scalar is the default dtype", lambda x, s: x * fl.sin(s), fl.float64, 0.1),
    ("asarray of a scalar", lambda x, s: x * fl.asarray(s), fl.float64, 0.1),
    ("asarray with a dtype", lambda x, s: x * fl.asarray(s, dtype=fl.float64), fl.float32, 0.1),
    ("astype", lambda x, s: x.astype(fl.float32) * fl.asarray(s).astype(fl.float64), fl.float64, 0.1),
    ("the scalar returned", lambda x, s: s, fl.float64, 0.1),
    ("scalar arithmetic returned", lambda x, k: (x * k, k + 1, k * 0.5, k > 2), fl.float32, 3),
    ("a closed-over scalar in a loop", lambda x, s: fl.fori_loop(0, 3, lambda i, c: c * s, x), fl.float64, 0.1),
    ("a scalar carry", lambda x, s: fl.fori_loop(0, 3, lambda i, c: c * 0.5, s) * x, fl.float64, 0.1),
    ("under grad", lambda x, s: fl.grad(lambda y: fl.sum(y * y * s))(x), fl.float64, 0.1),
    ("under vmap", lambda x, s: fl.vmap(lambda y: y * s)(x), fl.float64, 0.1),
    ("through an inner jit", lambda x, s: fl.jit(lambda a, b: a * b)(x, s * 2), fl.float64, 0.1),
    ("a custom_jvp function", lambda x, s: _scaled_jvp(x, s), fl.float64, 0.1),
    ("a custom_vjp function", lambda x, s: _scaled_vjp(x, s), fl.float64, 0.1),
]


@pytest.mark.parametrize("name, f, dtype, scalar", _WEAK_CASES, ids=[c[0] for c in _WEAK_CASES])
def test_python_scalar_arguments_are_weakly_typed_as_in_eager(name, f, dtype, scalar):
    x = fl.asarray(np.array([1.5, -0.25, 3.0]), dtype=dtype)
    eager, jitted = f(x, scalar), fl.jit(f)(x, scalar)
    for e, j in zip(*(fl.tree.leaves(v) for v in (eager, jitted))):
        assert _same(e, j), (e, j)


@settings(max_examples=30, deadline=None)
@given(s=st.floats(-1e6, 1e6), k=st.integers(-(2**40), 2**40), dtype=st.sampled_from([np.float32, np.float64]))
def test_jitted_scalar_arithmetic_equals_eager_bit_for_bit(s, k, dtype):
    x = fl.asarray(np.array([0.3, -2.0, 7.0], dtype=dtype))

    def f(x, s, k):
        c = (s * 3 - k) / 7 + s**2
        return x * c - s, k * 2 + 1

    jf = fl.jit(f)
    for e, j in zip(f(x, s, k), jf(x, s, k)):
        assert _same(e, j), (e, j)
    assert jf.num_traces == 1


def test_a_python_int_out_of_range_of_the_integer_tensor_it_meets_raises_as_eagerly():
    x8, u8 = fl.ones(2, dtype=fl.int8), fl.ones(2, dtype=fl.uint8)
    inner = fl.jit(lambda a, b: a + b)
    cases = [
        (lambda x, k: x + k, x8, 100, 300),
        (lambda x, k: x + k * 2, x8, 50, 100),  # the value it meets is computed from the argument
        (lambda x, k: x - k, u8, 1, -1),
        (lambda x, k: inner(x, k + 1), x8, 5, 127),  # in a jitted function called by the jitted one
        (lambda x, k: fl.asarray(k, dtype=fl.int16) * x.astype(fl.int16), x8, 7, 40_000),
    ]
    for f, x, ok, bad in cases:
        jf = fl.jit(f)
        assert _same(f(x, ok), jf(x, ok))
        with pytest.raises(OverflowError, match=f"{f(x, ok).dtype.name}|int16"):
            f(x, bad)
        with pytest.raises(OverflowError, match=r"Python integer -?\d+ is out of range for u?int"):
            jf(x, bad)
        assert jf.num_traces == 1
    assert fl.jit(lambda x, k: x.astype(fl.int64) + k)(x8, 2**40).numpy()[0] == 2**40 + 1


def test_weak_scalars_in_jaxprs_and_signatures():
    x = fl.ones(2, dtype=fl.float64)
    text = str(fl.make_jaxpr(lambda x, s: x * (s * 3))(x, 0.1))
    assert "b:f64[]" in text and "convert" not in text  # the float is held in float64 and never rounded
    jf = fl.jit(lambda x, s: x * s, max_traces=1)
    jf(x, 0.1)
    jf(x, 0.2)  # a new value, same signature
    with pytest.raises(RetraceError, match="'s' changed from a Python float to f64"):
        jf(x, fl.asarray(0.2, dtype=fl.float64))


def _scan_grad(variant):
    def loss(w, xs):
        def cell(h, x):
            h = fl.tanh(h @ w + x)
            return h, (h * 2.0 if variant != "none" else None)

        h, ys = fl.scan(cell, fl.zeros((2, 3), dtype=w.dtype), xs)
        return fl.sum(ys * ys) if variant == "ys" else fl.sum(h * h)

    return fl.jit(fl.grad(loss))


@pytest.mark.parametrize("variant", ["none", "unused ys", "ys"])
def test_a_jitted_gradient_through_scan_does_not_depend_on_the_trip_count(variant, monkeypatch):
    """The program, its kernels and its constants are the same for 10 and 10,000 steps (sizes are arguments of
    the generated loops); per-step outputs the loss ignores are neither stored by the forward loop nor read, as
    a (length, ...) array of zero cotangents, by the backward one."""
    monkeypatch.setattr(fl.config, "whole_programs", False)  # the program's steps are what is checked
    w = rnd(3, 3, dtype=np.float64) * 0.3
    lows = [_scan_grad(variant).lower(w, rnd(t, 2, 3, dtype=np.float64)) for t in (10, 10_000)]
    assert [k for k in lows[0].kernels if "loop kernel" in k] == [k for k in lows[1].kernels if "loop kernel" in k]
    if variant != "ys":  # there the loss's per-step cotangent is a real (length, ...) input of the backward loop
        assert lows[0].kernels == lows[1].kernels
        assert lows[0].program.describe() == lows[1].program.describe()
        for low in lows:
            assert all(np.size(c) <= 9 for c in low.jaxpr.consts)  # nothing scales with the length
            steps = low.program.describe().splitlines()
            assert not any("broadcast_in_dim" in s for s in steps), steps
            assert steps[0].split("=")[0].count(",") == 2, steps  # the final carry and two residuals
    xs = rnd(7, 2, 3, dtype=np.float64)
    g = _scan_grad(variant)
    np.testing.assert_allclose(g(w, xs).numpy(), g.fun(w, xs).numpy(), rtol=1e-13)


def test_staged_kernels_nan_integers_and_half_precision():
    x = np.random.default_rng(4).normal(size=(3, 7)).astype(np.float32)
    x[1, 2] = np.nan
    f = lambda a: fl.exp(a - fl.max(a, axis=-1, keepdims=True))  # noqa: E731
    np.testing.assert_array_equal(np.isnan(fl.jit(f)(fl.asarray(x)).numpy()), np.isnan(f(fl.asarray(x)).numpy()))
    i = fl.asarray(np.arange(-10, 11, dtype=np.int32).reshape(3, 7) % 6)
    gi = lambda a: a * 2 - fl.max(a, axis=-1, keepdims=True) + fl.min(a * 3, axis=-1, keepdims=True)  # noqa: E731
    np.testing.assert_array_equal(fl.jit(gi)(i).numpy(), gi(i).numpy())
    for d in (fl.float16, fl.bfloat16):
        h = fl.asarray(np.nan_to_num(x), dtype=d)
        ln = lambda a: (a - a.mean(axis=-1, keepdims=True)) * fl.sum(a * a, axis=-1, keepdims=True)  # noqa: E731
        out = fl.jit(ln)(h)
        assert out.dtype == d
        np.testing.assert_allclose(
            out.numpy().astype(np.float32), ln(h).numpy().astype(np.float32), rtol=2e-2, atol=2e-2
        )


def test_staged_kernels_with_heavy_math_call_a_row_function_on_long_rows():
    """gelu-and-sigmoid rows of 256+ columns run each row's passes in a function of their own (register pressure);
    short rows, and light math, keep the inline row loop. Both give the eager result."""
    rng = np.random.default_rng(5)

    def f(a, w):
        y = fl.gelu(a) * fl.sigmoid(a) * w
        m = y.mean(axis=-1, keepdims=True)
        c = y - m
        v = (c * c).mean(axis=-1, keepdims=True)
        return c / fl.sqrt(v + 1e-5), m[..., 0]

    for shape, row_calls in (((3, 300), True), ((2, 3, 512), True), ((4, 40), False)):
        for dtype in (np.float32, np.float16):
            x = fl.asarray((rng.normal(size=shape) * 3).astype(dtype))
            w = fl.asarray(rng.normal(size=shape[-1:]).astype(dtype))
            jf = fl.jit(f)
            src = jf.lower(x, w).kernels[0]
            assert ("_row(i0," in src) == row_calls  # float16 computes in float32, with the same math
            tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=2e-2, atol=2e-2)
            for got, want in zip(jf(x, w), f(x, w)):
                np.testing.assert_allclose(got.numpy().astype(np.float32), want.numpy().astype(np.float32), **tol)
    # elementwise nests that broadcast (rank 2 and 3 after collapsing) do the same with their innermost loop
    g = lambda a, b: fl.gelu(a + b) * fl.sigmoid(a)  # noqa: E731
    for a_shape, b_shape in (((3, 300), (300,)), ((2, 3, 260), (2, 1, 260)), ((5, 9), (9,))):
        a = fl.asarray(rng.normal(size=a_shape).astype(np.float32))
        b = fl.asarray(rng.normal(size=b_shape).astype(np.float32))
        jg = fl.jit(g)
        assert ("_row(i0," in jg.lower(a, b).kernels[0]) == (a_shape[-1] >= 256)
        np.testing.assert_array_equal(jg(a, b).numpy(), g(a, b).numpy())  # eager runs the same float32 math
    # light math (exp alone) keeps the inline loop even on long rows
    sm = fl.jit(lambda a: fl.softmax(a, axis=-1))
    assert "_row(i0," not in sm.lower(fl.asarray(rng.normal(size=(2, 1024)).astype(np.float32))).kernels[0]


def test_staged_kernels_keep_values_in_output_rows_and_recompute_cheap_ones():
    """A value needed by a later pass lives in the row of an output written only in the last pass, or is recomputed
    there when it is one add/sub/mul/neg of held values; the results stay the eager ones."""
    rng = np.random.default_rng(6)

    def mid_output(x):  # an output of the middle pass, and one of the last
        a = fl.sin(x)
        a = a - fl.max(a, axis=-1, keepdims=True)
        return a * fl.sum(a, axis=-1, keepdims=True), a

    def three_pass(x):
        y = fl.exp(x)
        z = y / fl.sum(y, axis=-1, keepdims=True)
        return z * fl.sum(z * y, axis=-1, keepdims=True)

    def chained(x):  # -(y * s) is buffered: its argument y * s is not held anywhere
        y = fl.tanh(x)
        n = -(y * fl.sum(y, axis=-1, keepdims=True))
        return n * fl.max(n, axis=-1, keepdims=True) + y

    def wider_output(x):  # a float64 output cannot hold a float32 value
        g = fl.gelu(x)
        c = g - fl.mean(g, axis=-1, keepdims=True)
        return (c / fl.sum(c * c, axis=-1, keepdims=True)).astype(fl.float64), fl.mean(g, axis=-1)

    for f in (mid_output, three_pass, chained, wider_output):
        for shape in ((5, 7), (3, 300)):
            for dtype in (np.float32, np.float64, np.float16):
                x = fl.asarray(rng.normal(size=shape).astype(dtype))
                want = f(x)
                want = want if isinstance(want, tuple) else (want,)
                got = fl.jit(f)(x)
                got = got if isinstance(got, tuple) else (got,)
                for g, w in zip(got, want):
                    w = w.numpy().astype(np.float64)
                    tol = 3e-2 * np.abs(w).max() if dtype == np.float16 else 3e-5  # half: eager rounds each step
                    np.testing.assert_allclose(g.numpy().astype(np.float64), w, rtol=3e-5, atol=tol)
    x = rnd(4, 16)
    layer_norm = fl.jit(lambda a: (a - a.mean(axis=-1, keepdims=True)) / fl.sqrt(a.var(axis=-1, keepdims=True) + 1e-5))
    src = layer_norm.lower(x).kernels[0]
    assert "buf0" not in src  # the centred value waits in the output row for the last pass
    three = fl.jit(three_pass).lower(x).kernels[0]
    assert "out0[i0, i1] = t" in three.split("for i1")[1]  # the first pass stores exp(x) in the output row


def test_staged_kernels_split_heavy_math_into_passes_over_the_row(monkeypatch):
    """On long rows a pass whose float32 math needs more vector constants than the registers hold (erf and logistic)
    becomes several passes over the row, each value crossing them held in a row (the output's when it can, one
    after another); reductions accumulate where their operand is computed. Results stay the eager ones."""
    rng = np.random.default_rng(7)

    def gelu_sig_norm(a):
        y = fl.gelu(a) * fl.sigmoid(a)
        c = y - y.mean(axis=-1, keepdims=True)
        return c / fl.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5)

    def three_funcs(a):  # erf, erf, logistic: three passes; e is needed until the last
        e = fl.erf(a)
        y = e * fl.erf(a * 0.5)
        z = y * fl.sigmoid(a) + e
        return z - fl.max(z, axis=-1, keepdims=True), fl.sum(e, axis=-1) * fl.sum(y, axis=-1)

    def passes(src):
        return src.split("for i1 in range(n1):")[1:]

    for dtype in (np.float32, np.float16, np.float64):
        x = fl.asarray((rng.normal(size=(3, 300)) * 3).astype(dtype))
        tol = dict(rtol=3e-5, atol=3e-5) if dtype != np.float16 else dict(rtol=3e-2, atol=3e-2)
        for f in (gelu_sig_norm, three_funcs):
            jf = fl.jit(f)
            got, want = jf(x), f(x)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64), **tol)
            src = jf.lower(x).kernels[0]
            heavy = [p for p in passes(src) if "ferf(" in p or "flogistic(" in p]
            if dtype == np.float64:  # libm calls: nothing to split
                assert "ferf(" not in src
                continue
            assert len(heavy) == (2 if f is gelu_sig_norm else 3), src
            assert all(p.count("ferf(") + p.count("flogistic(") == 1 for p in heavy)
        ln = fl.jit(gelu_sig_norm).lower(x).kernels[0]
        if dtype == np.float32:
            assert "buf0" not in ln  # gelu(x), then gelu(x) * sigmoid(x), wait in the output row
    g = fl.grad(lambda a: (gelu_sig_norm(a) * fl.cos(a)).sum())
    x = fl.asarray(rng.normal(size=(2, 512)).astype(np.float32))
    np.testing.assert_allclose(fl.jit(g)(x).numpy(), g(x).numpy(), rtol=2e-4, atol=2e-5)
    # short rows keep one pass
    short = fl.jit(gelu_sig_norm).lower(fl.asarray(rng.normal(size=(4, 40)).astype(np.float32))).kernels[0]
    assert len([p for p in passes(short) if "ferf(" in p or "flogistic(" in p]) == 1

    # an elementwise nest's row function splits the same way, bit for bit as one loop: values cross loops in their
    # own output's row, in another output's, or in a row buffer (no float32 output row is free for erf(a) * 3)
    def many(a, b):
        e = fl.erf(a + b)
        big = fl.tanh(fl.erf(a * 2.0)).astype(fl.float16)
        return e, e * fl.sigmoid(a) > 0.1, big, fl.exp(fl.erf(a - b)) * fl.sigmoid(b)

    def buffered(a, b):
        return (fl.erf(a) * 3.0 * fl.sigmoid(a + b)).astype(fl.float16)

    a = fl.asarray(rng.normal(size=(3, 300)).astype(np.float32))
    b = fl.asarray(rng.normal(size=(300,)).astype(np.float32))
    for f, bufs in ((many, False), (buffered, True)):
        src = fl.jit(f).lower(a, b).kernels[0]
        assert len(passes(src)) >= 2 and ("buf0" in src) == bufs, src
        split = fl.jit(f)(a, b)
        monkeypatch.setattr(fusion, "SPLIT_MIN_CONSTANTS", 10**6)
        assert len(passes(fl.jit(f).lower(a, b).kernels[0])) == 1
        one = fl.jit(f)(a, b)
        monkeypatch.undo()
        split, one = (split, one) if isinstance(one, tuple) else ((split,), (one,))
        for got, want in zip(split, one):
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_independent_regions_get_kernels_of_their_own_and_scalars_run_their_impls(monkeypatch):
    """Same-shape computations that share no array become separate kernels (one source for identical ones, so each
    compiles once); those reading one array stay one kernel; scalar arithmetic compiles nothing."""
    monkeypatch.setattr(fl.config, "whole_programs", False)  # the program's steps are what is checked
    rng = np.random.default_rng(8)
    a, b, c, d, e = (fl.asarray(rng.normal(size=(4, 5)).astype(np.float32)) for _ in range(5))
    t = fl.asarray(np.float32(3.0))

    def adam_like(a, b, c, d, e, t):
        t = t + 1.0
        corr = 1.0 - 0.9**t
        return a * 0.5 + b / corr, c * 0.5 + d / corr, fl.exp(e) * 2.0, fl.sin(e) + 1.0

    args = (a, b, c, d, e, t)
    jf = fl.jit(adam_like)
    for got, want in zip(jf(*args), adam_like(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    steps = _steps(jf, *args)
    fused = [s for s in steps if "fused[" in s]
    # a*0.5 + b/corr and c*0.5 + d/corr: one source twice; exp(e)*2 and sin(e)+1 read e: one kernel
    assert len(fused) == 3, steps
    sources = [k.source for k in jf.lower(*args).program.kernels]
    assert len(sources) == 3 and len(set(sources)) == 2
    assert not any("pow" in s for s in fused)  # t + 1 and 1 - 0.9**t: scalar ops, run by their impls
    assert any(s.split(" = ")[1].startswith("pow") for s in steps), steps


def test_pytree_arguments_take_the_fast_table_keyed_by_tree_shapes_and_dtypes():
    calls = []

    def f(state, x):
        calls.append(1)
        return {"w": state["w"] * x, "n": state["n"] + 1}

    jf = fl.jit(f)
    s = {"w": fl.ones(3), "n": fl.asarray(np.int32(0))}
    for _ in range(4):
        s = jf(s, fl.full((3,), 2.0))
    np.testing.assert_array_equal(s["w"].numpy(), np.full(3, 16.0, np.float32))
    assert int(s["n"]) == 4 and len(calls) == 1
    assert any(hasattr(k[0][0], "num_leaves") for k in jf._fast)  # (tree, leaf signatures, named axes)
    # another shape, dtype or tree is another program, never the table's
    out = jf({"w": fl.ones(2), "n": fl.asarray(np.int32(5))}, fl.full((2,), 3.0))
    np.testing.assert_array_equal(out["w"].numpy(), np.full(2, 3.0, np.float32))
    out = jf({"w": fl.ones(3, dtype=fl.float64), "n": fl.asarray(np.int32(0))}, fl.full((3,), 2.0))
    assert out["w"].dtype == fl.float64
    out = jf({"n": fl.asarray(np.int32(1)), "w": fl.ones(3), "v": fl.ones(1)}, fl.full((3,), 2.0))
    assert int(out["n"]) == 2 and len(calls) == 4
    # leaves that are not tensors take the full lookup
    out = jf({"w": np.ones(3, np.float32), "n": 7}, 2.0)
    np.testing.assert_array_equal(out["w"].numpy(), np.full(3, 2.0, np.float32))
    assert int(out["n"]) == 8


def test_no_retrace_on_new_values_and_retrace_counting():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2

    jf = fl.jit(f)
    for v in range(5):
        jf(fl.full((3,), float(v)))
    assert len(calls) == 1 and jf.num_traces == 1
    jf(fl.ones(4))
    assert jf.num_traces == 2
    jf(fl.ones(4, dtype=fl.float64))
    assert jf.num_traces == 3
    # repeat calls on positional Tensors take a shortcut past flattening; it must agree with the full lookup
    w = fl.asarray(np.array([0.5], np.float32))  # a captured constant array
    g = fl.jit(lambda a, b: {"s": a * b + w, "t": (a, b.sum())})
    a, b = fl.ones(3), fl.full((3,), 2.0)
    first, again, from_numpy = g(a, b), g(a, b), g(np.ones(3, np.float32), b)
    for out in (again, from_numpy):
        np.testing.assert_array_equal(out["s"].numpy(), first["s"].numpy())
        np.testing.assert_array_equal(out["t"][1].numpy(), first["t"][1].numpy())
    assert g.num_traces == 1
    g(fl.ones(4), fl.ones(4))
    assert g.num_traces == 2 and g(a, b)["s"].shape == (3,)


def test_max_traces_and_explanations(caplog):
    jf = fl.jit(lambda x, n: x * n, static_argnums=1, max_traces=2)
    jf(fl.ones(3), 2)
    jf(fl.ones(3), 3)
    with pytest.raises(RetraceError, match="static n.*changed from 3 to 4"):
        jf(fl.ones(3), 4)
    old = fl.config.explain_retraces
    fl.config.explain_retraces = True
    try:
        g = fl.jit(lambda x: x + 1)
        g(fl.ones(3))
        with caplog.at_level(logging.WARNING, logger="funclib.jit"):
            g(fl.ones(5))
        assert "argument 'x' changed from f32[3] to f32[5]" in caplog.text
    finally:
        fl.config.explain_retraces = old


def test_static_args_and_errors():
    jf = fl.jit(lambda x, shape: fl.reshape(x, shape), static_argnames="shape")
    assert jf(fl.ones(6), shape=(2, 3)).shape == (2, 3)
    with pytest.raises(TypeError, match="unhashable.*tuple"):
        jf(fl.ones(6), shape=[2, 3])
    with pytest.raises(fl.errors.ConcretizationError, match="static_argnames"):
        fl.jit(lambda x: fl.zeros(int(x.sum())))(fl.ones(3))


def test_graph_passes():
    def f(x):
        a = x * 1.0 + 0.0
        b = fl.permute_dims(fl.permute_dims(a, (1, 0)), (1, 0))
        c = fl.reshape(fl.reshape(b, (6,)), (2, 3))
        dead = fl.exp(x)  # noqa: F841
        return fl.sin(c) + fl.sin(c) + (fl.ones(3) * 2.0)

    closed = fl.jit(f).trace(fl.ones((2, 3)))
    names = [e.prim.name for e in closed.eqns]
    assert "exp" not in names  # dead code
    assert names.count("sin") == 1  # CSE
    assert "transpose" not in names and "reshape" not in names  # double transpose, reshape chain
    assert "mul" not in names  # x * 1 simplified, ones(3) * 2 folded to a constant
    np.testing.assert_allclose(fl.jit(f)(fl.ones((2, 3))).numpy(), f(fl.ones((2, 3))).numpy())


def test_a_transpose_moving_only_size_one_axes_is_a_reshape():
    def f(x):
        y = fl.reshape(x * 2.0, (4, 1, 3, 1))
        z = fl.permute_dims(y, (1, 0, 3, 2))  # the 4 and the 3 keep their order
        return fl.reshape(z, (12,)), fl.permute_dims(y, (2, 1, 0, 3))  # this one swaps them

    x = rnd(4, 3)
    closed = fl.jit(f).trace(x)
    names = [e.prim.name for e in closed.eqns]
    assert names.count("transpose") == 1 and names.count("reshape") == 2, names  # the chain is one reshape
    for got, want in zip(fl.jit(f)(x), f(x)):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_transpose_between_reshapes_of_size_one_axes_drops_them():
    def f(x):
        y = fl.reshape(x * 2.0, (4, 1, 3, 1))
        z = fl.permute_dims(y, (2, 1, 3, 0))  # the 4 and the 3 swap, with the axes of size 1 around them
        w = fl.permute_dims(y, (3, 1, 0, 2))  # the same axes keep their order: left as a reshape
        return fl.reshape(z, (3, 4)), fl.reshape(w, (12,)), fl.reshape(fl.permute_dims(y, (2, 1, 0, 3)), (3, 1, 4))

    x = rnd(4, 3)
    closed = fl.jit(f).trace(x)
    transposes = [e for e in closed.eqns if e.prim.name == "transpose"]
    # the first is a transpose of x * 2 itself; the third keeps a size-1 axis in its result, so it stays
    assert [e.inputs[0].aval.shape for e in transposes] == [(4, 3), (4, 1, 3, 1)], closed
    for got, want in zip(fl.jit(f)(x), f(x)):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def _dots(jf, *args):
    return sum(e.prim.name == "dot_general" for e in jf.trace(*args).eqns)


@pytest.mark.parametrize("transform", ["jacfwd", "jacrev", "hessian"])
def test_products_with_the_standard_basis_are_scalings(transform):
    rng = np.random.default_rng(3)
    A = fl.asarray(rng.standard_normal((5, 4)).astype(np.float32))
    B = fl.asarray(rng.standard_normal((4, 6)).astype(np.float32))
    x = rnd(4, seed=1)
    for f in (lambda v: A @ fl.tanh(v), lambda v: fl.tanh(v) @ B, lambda v: fl.logsumexp(A @ fl.tanh(v))):
        t = getattr(fl, transform)(f)
        if transform == "hessian" and f(x).ndim:
            continue
        jt = fl.jit(t)
        np.testing.assert_allclose(jt(x).numpy(), t(x).numpy(), rtol=1e-5, atol=1e-6)
    # jacfwd of A @ tanh(v) multiplies A by diag(1 - tanh(v)^2): a scaling of A's columns, no matrix product
    assert _dots(fl.jit(fl.jacfwd(lambda v: A @ fl.tanh(v))), x) == 0
    assert _dots(fl.jit(fl.hessian(lambda v: fl.logsumexp(A @ fl.tanh(v)))), x) == 3


def test_a_product_with_a_constant_that_is_not_the_identity_stays_a_product():
    m = np.eye(4, dtype=np.float32)
    m[0, 1] = 1e-3
    M = fl.asarray(m)
    A = fl.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    f = fl.jit(lambda g: A @ (M * g))
    g = rnd(4, seed=2)
    assert _dots(f, g) == 1
    np.testing.assert_allclose(f(g).numpy(), (A @ (M * g)).numpy(), rtol=1e-6)
    eye = fl.jit(lambda g: (fl.eye(4) * g) @ fl.reshape(A, (4, 3)))  # the diagonal on the left
    assert _dots(eye, g) == 0
    np.testing.assert_allclose(eye(g).numpy(), (fl.eye(4) * g @ fl.reshape(A, (4, 3))).numpy(), rtol=1e-6)


def test_threads_get_correct_results():
    jf = fl.jit(lambda x: fl.tanh(x) * 3.0 + x)
    xs = [rnd(64, seed=i) for i in range(8)]
    expected = [(fl.tanh(x) * 3.0 + x).numpy() for x in xs]
    errors = []

    def work(i):
        for _ in range(20):
            out = jf(xs[i]).numpy()
            if not np.allclose(out, expected[i], rtol=1e-5, atol=1e-6):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_conv_input_gradient_folds_each_example_while_in_cache():
    """A convolution's input gradient (batched matmul, reshape, col2im) lowers to one per-example step; results
    equal eager for strides, padding and groups."""
    import funclib.nn as nn

    rng = np.random.default_rng(5)
    for cin, cout, k, pad, stride, groups in [(4, 6, 3, 0, 1, 1), (4, 6, 3, 1, 2, 2), (3, 5, 2, (1, 0), 1, 1)]:
        conv = nn.Conv2d(cin, cout, k, padding=pad, stride=stride, groups=groups, key=fl.random.key(0))
        x = fl.asarray(rng.standard_normal((3, cin, 9, 9)).astype(np.float32))

        def f(m, x):
            y, vjp = fl.vjp(lambda m, x: m(x), m, x)
            gm, gx = vjp(fl.tanh(y))
            return y, gm.weight, gx

        jf = fl.jit(f)
        for got, want in zip(jf(conv, x), f(conv, x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
        steps = _steps(jf, conv, x)
        assert any("dot_col2im" in s for s in steps) and not any("conv_patches_transpose" in s for s in steps)


def test_jit_of_a_custom_rule_function_keeps_the_rule():
    # jit copies the wrapped function's metadata; it must not take custom_jvp's inner `fun` as its own
    @fl.custom_jvp
    def f(x):
        return fl.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        return fl.sin(primals[0]), 100.0 * tangents[0]

    @fl.custom_vjp
    def g(x):
        return fl.sin(x)

    g.defvjp(lambda x: (fl.sin(x), x), lambda res, ct: (-7.0 * ct,))
    x = fl.ones(2)
    assert fl.jit(f).fun is f and fl.jit(g).fun is g
    np.testing.assert_array_equal(fl.grad(lambda x: fl.sum(fl.jit(f)(x)))(x).numpy(), [100.0, 100.0])
    np.testing.assert_array_equal(fl.jvp(fl.jit(f), (x,), (x,))[1].numpy(), [100.0, 100.0])


def test_retrace_error_counts_in_english():
    from funclib.transforms.jit import _ordinal

    assert [_ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th", "112th",
    ]
    jf = fl.jit(lambda x: x * 2, max_traces=2)
    jf(fl.ones(1))
    jf(fl.ones(2))
    with pytest.raises(RetraceError, match="would trace a 3rd time"):
        jf(fl.ones(3))


def test_fused_narrow_integer_ops_wrap_like_numpy():
    # numba computes int8 + int8 in int64: without a cast per op the overflowed sum reached the comparison and the
    # maximum unwrapped, so jit disagreed with eager
    a = fl.asarray(np.array([100, 120, -100, 7], np.int8))
    b = fl.asarray(np.array([100, 100, -100, 9], np.int8))
    for f in (
        lambda a, b: (a + b) > b,
        lambda a, b: fl.maximum(a + b, b),
        lambda a, b: fl.minimum(a * b, a - b),
        lambda a, b: -(a * a) < b,
    ):
        np.testing.assert_array_equal(fl.jit(f)(a, b).numpy(), f(a, b).numpy())
    u = fl.asarray(np.array([200, 100], np.uint8))
    np.testing.assert_array_equal(fl.jit(lambda u: (u + u) // 2)(u).numpy(), ((u + u) // 2).numpy())


@pytest.mark.parametrize("how", [{"static_argnames": "n"}, {"static_argnums": 1}])
def test_a_static_argument_is_static_whether_passed_by_position_or_by_name(how):
    # the concretization error advises static_argnames=('n',) for an argument passed by position, so that must work
    f = fl.jit(lambda x, n: x * n if n > 1 else x, **how)
    np.testing.assert_array_equal(f(fl.ones(2), 3).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(f(fl.ones(2), n=1).numpy(), [1.0, 1.0])
    assert f.num_traces == 2
    f(fl.ones(2), 3)
    assert f.num_traces == 2
