"""Eager reverse mode records a tape (``transforms/tape.py``); under a transform it stages a jaxpr. Both agree.

The op table checks every primitive (``test_op_registry.test_eager_tape_matches_staged_reverse_mode``); here the
compositions: higher order, custom rules, checkpoint, control flow, calls of ``vjp_fn`` under transforms, and
the tape's bookkeeping (no reference cycles, NaN semantics of safe products).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from funclib.transforms import autodiff
from funclib.transforms.tape import Tape
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
from funclib.testing import assert_allclose


def staged_grad(f, *xs):
    """The gradient through linearize + partial evaluation + transpose, which eager ``grad`` skips."""

    def flat(*a):
        return [f(*a)], None

    out, lin, _ = autodiff.linearize_flat(flat, list(xs), [True] * len(xs))
    ct = fl.ones_like(out[0])
    return autodiff._transpose_linearized(lin, [ct])


def tape_grad(f, *xs):
    assert fl.core.current_trace() is None
    return list(fl.grad(f, argnums=tuple(range(len(xs))))(*xs))


def assert_same(f, *xs, rtol=1e-12):
    for g, w in zip(tape_grad(f, *xs), staged_grad(f, *xs), strict=True):
        assert_allclose(g, w, rtol=rtol, atol=rtol)


@fl.custom_vjp
def clip_grad(x):
    return x


clip_grad.defvjp(lambda x: (x, None), lambda _, g: (fl.clip(g, -0.5, 0.5),))


@fl.custom_jvp
def softplus(x):
    return fl.log1p(fl.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * fl.sigmoid(x)


def _chain(x, y):
    h = x
    for _ in range(2):
        h = fl.tanh(h) * y + 0.5
        h = fl.log(fl.exp(h) + 1.0)
    return (h * x).sum() + (y**2).mean()


COMPOSITIONS = {
    "chain": _chain,
    "broadcast": lambda x, y: (x[:, None] * y[None, :] - fl.sin(y)).sum(),
    "reductions": lambda x, y: fl.max(x * y) + fl.logsumexp(x - y) + fl.sort(x * 2.0)[0],
    "indexing": lambda x, y: (x[1:] * y[:-1]).sum() + x.at[0].set(y[2]).prod(),
    "matmul": lambda x, y: (fl.outer(x, y) @ fl.cos(y)).sum(),
    "custom_vjp": lambda x, y: (clip_grad(x * y) * 3.0).sum(),
    "custom_jvp": lambda x, y: softplus(x - y).sum(),
    "checkpoint": lambda x, y: fl.checkpoint(lambda a, b: fl.sin(a) * fl.exp(b))(x, y).sum(),
    "jit inside": lambda x, y: fl.jit(lambda a, b: fl.tanh(a) * b)(x, y).sum(),
    "cond": lambda x, y: fl.cond(x.sum() > 0, lambda a: (a * y).sum(), lambda a: fl.sin(a).sum(), x),
    "scan": lambda x, y: fl.scan(lambda c, a: (c * a + fl.sin(c), c), x, fl.stack([y, y * 2.0]))[0].sum(),
    "fori": lambda x, y: fl.fori_loop(0, 3, lambda i, c: c * fl.cos(c) + y, x).sum(),
    "no_grad": lambda x, y: (x * _detached(y)).sum(),
    "python scalar ops": lambda x, y: (2.0 - x / 3.0 + 1.5 * y**3 - (x * 0.0)).sum(),
    "inner grad": lambda x, y: fl.grad(lambda a: (fl.sin(a) * y).sum())(x).sum(),
}


def _detached(y):
    with fl.no_grad():
        return y * 2.0


vecs = hnp.arrays(np.float64, 4, elements=st.floats(-1.5, 1.5, allow_nan=False, width=64))


@pytest.mark.parametrize("name", list(COMPOSITIONS))
@settings(max_examples=4)
@given(x=vecs, y=vecs)
def test_tape_equals_staged_path(name, x, y):
    assert_same(COMPOSITIONS[name], fl.asarray(x), fl.asarray(y))


def test_higher_order_and_transforms_of_grad():
    x = fl.asarray(np.linspace(-1.0, 1.0, 5))

    def f(v):
        return (fl.sin(v) * v**2).sum()

    g = fl.grad(f)
    want = np.cos(x.numpy()) * x.numpy() ** 2 + 2 * x.numpy() * np.sin(x.numpy())
    assert_allclose(g(x), want, rtol=1e-12)
    # grad of grad: the outer one records the tape, the inner one stages beneath it
    assert_allclose(fl.grad(lambda v: g(v).sum())(x), np.diag(fl.hessian(f)(x).numpy()), rtol=1e-10)
    assert_allclose(fl.jit(g)(x), want, rtol=1e-10)
    assert_allclose(fl.vmap(g)(fl.stack([x, x])), np.stack([want, want]), rtol=1e-12)
    xv = x.numpy()
    assert_allclose(fl.jacrev(lambda v: fl.sin(v) * v)(x), np.diag(np.cos(xv) * xv + np.sin(xv)), rtol=1e-12)


def test_vjp_fn_reused_and_transformed():
    x = fl.asarray(np.array([0.3, -0.7, 1.1]))
    y, f_vjp = fl.vjp(lambda v: fl.exp(v) * fl.sin(v), x)
    d = np.exp(x.numpy()) * (np.sin(x.numpy()) + np.cos(x.numpy()))
    ct = fl.asarray(np.array([1.0, 2.0, 3.0]))
    (a,) = f_vjp(ct)
    (b,) = f_vjp(ct)
    assert_allclose(a, d * ct.numpy(), rtol=1e-12)
    assert_allclose(b, a, rtol=0)
    (c,) = fl.jit(f_vjp)(ct)
    assert_allclose(c, a, rtol=1e-12)
    rows = fl.vmap(f_vjp)(fl.eye(3, dtype=fl.float64))[0]
    assert_allclose(rows, np.diag(d), rtol=1e-12)
    # a gradient through vjp_fn: the backward pass itself runs under a tape
    e = fl.grad(lambda c: (f_vjp(c)[0] ** 2).sum())(ct)
    assert_allclose(e, 2 * d * d * ct.numpy(), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")  # the forward pass meets the poles on purpose
def test_safe_products_keep_masked_gradients_zero():
    # the first pass takes plain products; a NaN reaching the result redoes it with safe ones
    x = fl.asarray(np.array([0.0, 1.0, 2000.0]))

    def f(v):
        return fl.where(v > 0, v * fl.log(v), 0.0).sum() + fl.where(v < 100, fl.exp(v), 0.0).sum()

    g = fl.grad(f)(x)
    assert np.all(np.isfinite(g.numpy()))
    assert_allclose(g, [1.0, 1.0 + np.e, np.log(2000.0) + 1.0], rtol=1e-12)
    assert_allclose(g, staged_grad(f, x)[0], rtol=0)
    # a genuine NaN gradient stays NaN
    assert np.isnan(fl.grad(lambda v: fl.sqrt(v).sum())(fl.asarray(np.array([-1.0]))).numpy()).all()


def test_float32_chain_matches_staged_path():
    x = fl.asarray(np.linspace(-1.0, 1.0, 7, dtype=np.float32))
    y = fl.asarray(np.linspace(0.5, 1.5, 7, dtype=np.float32))
    for g, w in zip(tape_grad(_chain, x, y), staged_grad(_chain, x, y), strict=True):
        assert g.dtype == fl.float32
        assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_tape_leaves_no_reference_cycles():
    # steps hold indices and avals, not tracers: everything a gradient recorded is freed by reference counting
    x = fl.asarray(np.linspace(-1.0, 1.0, 5))
    f = fl.grad(lambda v: (fl.sum(fl.tanh(v) * v) + fl.max(v) + fl.cumsum(v)[-1]))
    f(x)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        f(x)
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()


def test_tape_records_elementwise_rows_as_diagonal_steps():
    x = fl.asarray(np.ones(3, np.float32))
    tape = Tape("test", autodiff.JVPTracer)
    jt = autodiff.JVPTrace(tape)
    jt.tape = tape
    t = jt.new(x, tape.new(fl.core.ShapedArray((3,), np.dtype(np.float32))))
    with fl.core.set_trace(jt):
        y = fl.sin(t) * t + 1.0
        s = y.sum()
    kinds = [step[0] for step in tape.steps]
    assert kinds == [0, 1, 1, 2]  # sin, mul, add: diagonal; reduce_sum: a linear step
    env = tape.backward([s.tangent], [fl.asarray(np.float32(1.0))])
    assert_allclose(env[0], np.full(3, np.cos(1.0) + np.sin(1.0)), rtol=1e-6)
