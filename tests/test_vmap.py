"""vmap: in_axes/out_axes, errors, chunking and max_bytes, named axes, jacobians, per-sample gradients."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funclib as fl
from funclib.errors import ConcretizationError


def f64(x):
    return fl.asarray(np.asarray(x, dtype=np.float64))


def loop_stack(f, xs, axis=0):
    return np.stack([np.asarray(f(fl.asarray(np.take(xs, i, axis=axis))).numpy()) for i in range(xs.shape[axis])])


def test_in_axes_out_axes_negative_and_none():
    x = np.random.default_rng(0).normal(size=(3, 4, 5))
    y = np.random.default_rng(1).normal(size=(5,))
    with pytest.raises(ValueError, match="broadcast"):
        fl.vmap(lambda a, b: fl.tanh(a) * b, in_axes=(-1, None))(fl.asarray(x), fl.asarray(y))
    g = lambda a, b: (fl.tanh(a) * b[0]).sum(axis=0)  # noqa: E731
    out = fl.vmap(g, in_axes=(-1, None), out_axes=-1)(fl.asarray(x), fl.asarray(y))
    ref = np.stack([(np.tanh(x[..., i]) * y[0]).sum(0) for i in range(5)], axis=-1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)


def test_pytree_prefix_axes_and_kwargs():
    params = {"w": f64(np.ones((2, 3))), "b": f64(np.zeros(2))}
    xs = f64(np.arange(12.0).reshape(4, 3))

    def f(p, x, *, scale):
        return p["w"] @ x * scale + p["b"]

    out = fl.vmap(f, in_axes=({"w": None, "b": None}, 0))(params, xs, scale=f64(np.full(4, 2.0)))
    np.testing.assert_allclose(out.numpy(), np.stack([np.ones((2, 3)) @ x * 2.0 for x in xs.numpy()]))


def test_axis_size_and_nested_vmaps():
    out = fl.vmap(lambda: fl.ones(2), in_axes=(), axis_size=3)()
    assert out.shape == (3, 2)
    x = np.random.default_rng(2).normal(size=(3, 4))
    outer = fl.vmap(fl.vmap(lambda a: a * 2.0 + 1.0, in_axes=0), in_axes=1)(fl.asarray(x))
    np.testing.assert_allclose(outer.numpy(), (x * 2 + 1).T)


def test_errors_are_clear():
    with pytest.raises(ValueError, match="different sizes"):
        fl.vmap(lambda a, b: a + b)(fl.ones(3), fl.ones(4))
    with pytest.raises(ValueError, match="out of range"):
        fl.vmap(lambda a: a, in_axes=2)(fl.ones((3, 4)))
    with pytest.raises(ValueError, match="prefix"):
        fl.vmap(lambda a: a, in_axes=({"x": 0},))([fl.ones(3)])
    with pytest.raises(ValueError, match="axis_size"):
        fl.vmap(lambda a: a, in_axes=None)(fl.ones(3))
    with pytest.raises(ConcretizationError, match="fl.where"):
        fl.vmap(lambda a: a if a > 0 else -a)(fl.ones(3))


def test_python_control_flow_on_unbatched_values():
    def f(x, n):
        return x * 2 if n > 1 else x

    out = fl.vmap(f, in_axes=(0, None))(fl.ones(3), fl.tensor(2))
    np.testing.assert_allclose(out.numpy(), 2.0)


@settings(max_examples=25, deadline=None)
@given(
    ops=st.lists(
        st.sampled_from(["sin", "mul_y", "sum_last", "cumsum", "matmul", "rev", "max"]), min_size=1, max_size=5
    ),
    ax_x=st.sampled_from([0, 1, -1]),
    ax_y=st.sampled_from([0, None]),
    seed=st.integers(0, 100),
)
def test_random_programs_vmap_equals_loop(ops, ax_x, ax_y, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 3, 3))
    y = rng.normal(size=(3, 3))
    m = rng.normal(size=(3, 3))

    def f(a, b):
        h = a
        for op in ops:
            if op == "sin":
                h = fl.sin(h)
            elif op == "mul_y":
                h = h * b[0]
            elif op == "sum_last":
                h = h + h.sum(axis=-1, keepdims=True)
            elif op == "cumsum":
                h = fl.cumulative_sum(h, axis=0)
            elif op == "matmul":
                h = h @ fl.asarray(m)
            elif op == "rev":
                h = fl.flip(h, axis=0)
            elif op == "max":
                h = h - fl.max(h, axis=0, keepdims=True)
        return h

    out = fl.vmap(f, in_axes=(ax_x, ax_y))(fl.asarray(x), fl.asarray(y))
    lanes = []
    for i in range(3):
        a = np.take(x, i, axis=ax_x)
        b = y if ax_y is None else y[i]
        lanes.append(f(fl.asarray(a), fl.asarray(b)).numpy())
    np.testing.assert_allclose(out.numpy(), np.stack(lanes), rtol=1e-10, atol=1e-12)


def test_chunk_size_and_max_bytes_give_identical_results():
    x = f64(np.random.default_rng(3).normal(size=(10, 7)))
    f = lambda v: fl.softmax(v) * v.sum()  # noqa: E731
    full = fl.vmap(f)(x)
    np.testing.assert_array_equal(fl.vmap(f, chunk_size=3)(x).numpy(), full.numpy())
    np.testing.assert_array_equal(fl.vmap(f, max_bytes=500)(x).numpy(), full.numpy())


def _mlp_loss(params, x, y):
    h = fl.tanh(x @ params["W1"] + params["b1"])
    logits = h @ params["W2"] + params["b2"]
    return -(fl.log_softmax(logits) * fl.one_hot(y, 10)).sum()


def _mlp(rng, din=20, dh=16):
    return {
        "W1": fl.asarray(rng.normal(size=(din, dh)).astype(np.float32) * 0.1),
        "b1": fl.zeros(dh),
        "W2": fl.asarray(rng.normal(size=(dh, 10)).astype(np.float32) * 0.1),
        "b2": fl.zeros(10),
    }


def test_per_sample_gradients_equal_loop():
    rng = np.random.default_rng(4)
    params = _mlp(rng)
    x = fl.asarray(rng.normal(size=(8, 20)).astype(np.float32))
    y = fl.asarray(rng.integers(0, 10, size=8))
    g = fl.vmap(fl.grad(_mlp_loss), in_axes=(None, 0, 0))(params, x, y)
    for i in range(8):
        gi = fl.grad(_mlp_loss)(params, x[i], y[i])
        for k in params:
            np.testing.assert_allclose(g[k][i].numpy(), gi[k].numpy(), rtol=2e-5, atol=1e-6)


def test_dp_sgd_norms_peak_memory_cut_by_chunking():
    rng = np.random.default_rng(5)
    params = _mlp(rng, din=64, dh=64)
    B = 1024
    x = fl.asarray(rng.normal(size=(B, 64)).astype(np.float32))
    y = fl.asarray(rng.integers(0, 10, size=B))

    def sq_norm(p, xi, yi):
        g = fl.grad(_mlp_loss)(p, xi, yi)
        return sum((v * v).sum() for v in fl.tree.leaves(g))

    def peak(**kw):
        tracemalloc.start()
        out = fl.vmap(sq_norm, in_axes=(None, 0, 0), **kw)(params, x, y)
        _, pk = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return out, pk

    full, p_full = peak()
    chunked, p_chunk = peak(chunk_size=64)
    np.testing.assert_allclose(chunked.numpy(), full.numpy(), rtol=1e-6)
    assert p_chunk * 4 <= p_full, (p_chunk, p_full)


def test_named_axes_collectives_and_their_gradients():
    x = f64([1.0, 2.0, 3.0])
    np.testing.assert_allclose(fl.vmap(lambda v: fl.psum(v, "i"), axis_name="i")(x).numpy(), 6.0)
    np.testing.assert_allclose(fl.vmap(lambda v: fl.pmean(v, "i"), axis_name="i")(x).numpy(), 2.0)
    np.testing.assert_allclose(fl.vmap(lambda v: fl.pmax(v, "i"), axis_name="i")(x).numpy(), 3.0)
    np.testing.assert_allclose(fl.vmap(lambda v: fl.pmin(v, "i"), axis_name="i")(x).numpy(), 1.0)
    np.testing.assert_allclose(fl.vmap(lambda v: fl.axis_index("i"), axis_name="i")(x).numpy(), [0, 1, 2])
    ag = fl.vmap(lambda v: fl.all_gather(v, "i"), axis_name="i")(x)
    np.testing.assert_allclose(ag.numpy(), np.tile(x.numpy(), (3, 1)))

    # d/dx_j sum_i (x_i / sum_k x_k)^2 through psum, against the unbatched formula
    def normalized_sq(v):
        return (v / fl.psum(v, "i")) ** 2

    g = fl.grad(lambda x: fl.vmap(normalized_sq, axis_name="i")(x).sum())(x)
    g_ref = fl.grad(lambda x: ((x / x.sum()) ** 2).sum())(x)
    np.testing.assert_allclose(g.numpy(), g_ref.numpy(), rtol=1e-12)
    g2 = fl.grad(lambda x: fl.vmap(lambda v: fl.all_gather(v, "i")[0] * v, axis_name="i")(x).sum())(x)
    g2_ref = fl.grad(lambda x: (x[0] * x).sum())(x)
    np.testing.assert_allclose(g2.numpy(), g2_ref.numpy(), rtol=1e-12)
    with pytest.raises(NameError, match="axis_name"):
        fl.psum(x, "nope")


def test_jacobians_pytrees_and_hessian_symmetry():
    def f(p):
        return {"a": fl.sin(p["x"]) * p["y"].sum(), "b": (p["x"] ** 2).sum()}

    p = {"x": f64([0.1, 0.2, 0.3]), "y": f64([1.0, 2.0])}
    jf, jr = fl.jacfwd(f)(p), fl.jacrev(f)(p)
    assert jf["a"]["x"].shape == (3, 3) and jf["a"]["y"].shape == (3, 2) and jf["b"]["x"].shape == (3,)
    for o in ("a", "b"):
        for i in ("x", "y"):
            np.testing.assert_allclose(jf[o][i].numpy(), jr[o][i].numpy(), rtol=1e-12)
    A = f64(np.random.default_rng(6).normal(size=(4, 5)))

    def g(x):
        return fl.logsumexp(A @ fl.tanh(x))

    x = f64(np.linspace(-1, 1, 5))
    H = fl.hessian(g)(x).numpy()
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)
    eps = 1e-6
    gr = fl.grad(g)
    fd = np.stack(
        [(gr(x + eps * np.eye(5)[i]).numpy() - gr(x - eps * np.eye(5)[i]).numpy()) / (2 * eps) for i in range(5)]
    )
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-7)
    _, hv = fl.hvp(g, (x,), (f64(np.ones(5)),))
    np.testing.assert_allclose(hv.numpy(), H @ np.ones(5), rtol=1e-10)
    np.testing.assert_allclose(fl.jacrev(g, chunk_size=2)(x).numpy(), fl.jacfwd(g, chunk_size=2)(x).numpy(), rtol=1e-12)


def test_compositions():
    f = lambda x: (fl.sin(x) * x).sum()  # noqa: E731
    x = f64(np.random.default_rng(7).normal(size=(4, 3)))
    vg = fl.vmap(fl.grad(f))(x)
    gv = fl.grad(lambda x: fl.vmap(f)(x).sum())(x)
    np.testing.assert_allclose(vg.numpy(), gv.numpy(), rtol=1e-12)
    vj = fl.vmap(lambda v: fl.jvp(f, (v,), (fl.ones_like(v),))[1])(x)
    np.testing.assert_allclose(vj.numpy(), (vg * 1).sum(axis=1).numpy(), rtol=1e-12)
    vh = fl.vmap(fl.hessian(f))(x)
    assert vh.shape == (4, 3, 3)
    np.testing.assert_allclose(fl.jacrev(fl.jacfwd(f))(x[0]).numpy(), vh[0].numpy(), rtol=1e-12)
