"""Memory controls: checkpoint policies (what reverse mode keeps) and max_bytes on the Jacobians."""

import tracemalloc

import numpy as np
import pytest

import funclib as fl
from funclib.testing import assert_allclose, check_grads

P = fl.checkpoint_policies


def f64(x):
    return fl.asarray(np.asarray(x, np.float64))


def _mlp_block(x, w1, w2):
    return fl.tanh(fl.tanh(x @ w1) @ w2)


def _inputs(rng=None):
    rng = rng or np.random.default_rng(0)
    return f64(rng.normal(size=(4, 8))), f64(rng.normal(size=(8, 16))), f64(rng.normal(size=(16, 8)))


def _loss(policy):
    block = _mlp_block if policy is None else fl.checkpoint(_mlp_block, policy=policy)
    return lambda x, w1, w2: block(x, w1, w2).sum()


def _sizes(res):
    return sorted(a.shape for a, _ in res)


def test_policies_decide_the_saved_residuals():
    x, w1, w2 = _inputs()
    plain = fl.saved_residuals(_loss(None), x, w1, w2)
    nothing = fl.saved_residuals(_loss(P.nothing_saveable), x, w1, w2)
    dots = fl.saved_residuals(_loss(P.dots_saveable), x, w1, w2)
    everything = fl.saved_residuals(_loss(P.everything_saveable), x, w1, w2)
    # nothing: the inputs only, every intermediate is recomputed in the backward pass
    assert sorted(d for _, d in nothing) == ["argument [0]", "argument [1]", "argument [2]"]
    # dots: the inputs and the two matrix products, (4, 16) and (4, 8)
    assert _sizes(dots) == sorted([(4, 8), (8, 16), (16, 8), (4, 16), (4, 8)])
    assert sorted(d.split(" at ")[0] for _, d in dots if not d.startswith("argument")) == ["output of dot_general"] * 2
    # everything: what reverse mode keeps without checkpoint
    assert _sizes(everything) == _sizes(plain) and len(plain) == 6
    assert "output of tanh" in {d.split(" at ")[0] for _, d in everything}
    nbytes = [sum(a.size * a.dtype.itemsize for a, _ in r) for r in (nothing, dots, everything)]
    assert nbytes[0] < nbytes[1] < nbytes[2]
    assert fl.checkpoint_policies.checkpoint_dots is P.dots_saveable


def test_gradients_do_not_depend_on_the_policy():
    x, w1, w2 = _inputs()
    want = fl.grad(_loss(None), argnums=(0, 1, 2))(x, w1, w2)
    policies = [P.nothing_saveable, P.dots_saveable, P.dots_with_no_batch_dims_saveable, P.everything_saveable]
    for policy in policies:
        got = fl.grad(_loss(policy), argnums=(0, 1, 2))(x, w1, w2)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())  # the same operations on the same values
        for g, w in zip(fl.jit(fl.grad(_loss(policy), argnums=(0, 1, 2)))(x, w1, w2), want):
            assert_allclose(g, w, rtol=1e-12, atol=1e-13)
        for g, w in zip(fl.grad(fl.jit(_loss(policy)), argnums=(0, 1, 2))(x, w1, w2), want):
            assert_allclose(g, w, rtol=1e-12, atol=1e-13)


def test_checkpoint_composes_with_every_transform():
    x, w1, w2 = _inputs()
    f = fl.checkpoint(_mlp_block, policy=P.dots_saveable)
    check_grads(lambda x: f(x, w1, w2), (x,), order=2, modes=("fwd", "rev"))
    assert_allclose(fl.vmap(f, in_axes=(0, None, None))(x, w1, w2), _mlp_block(x, w1, w2), rtol=1e-14)
    per_example = fl.vmap(fl.grad(lambda xi: f(xi[None], w1, w2).sum()))(x)
    assert_allclose(per_example, fl.grad(_loss(None))(x, w1, w2), rtol=1e-12)
    h = fl.hessian(lambda v: fl.checkpoint(lambda u: fl.sin(fl.sin(u)))(v).sum())(f64([0.3, 0.7]))
    s, c = np.sin([0.3, 0.7]), np.cos([0.3, 0.7])
    assert_allclose(h, np.diag(-np.sin(s) * c**2 - np.cos(s) * s), rtol=1e-12)
    assert_allclose(fl.jacfwd(lambda v: fl.checkpoint(fl.sin)(v))(f64([0.3])), [[np.cos(0.3)]], rtol=1e-14)


def test_checkpointed_scan_body_recomputes_each_step():
    rng = np.random.default_rng(1)
    ws = f64(rng.normal(size=(6, 8, 8)) * 0.3)
    x = f64(rng.normal(size=(4, 8)))

    def run(step):
        return lambda x, ws: fl.scan(lambda c, w: (step(c, w), None), x, ws)[0].sum()

    plain = run(lambda c, w: fl.sin(fl.tanh(c @ w)))
    remat = run(fl.checkpoint(lambda c, w: fl.sin(fl.tanh(c @ w))))
    assert_allclose(fl.grad(remat, argnums=(0, 1))(x, ws)[1], fl.grad(plain, argnums=(0, 1))(x, ws)[1], rtol=1e-12)
    assert_allclose(fl.jit(fl.grad(remat))(x, ws), fl.grad(plain)(x, ws), rtol=1e-12)
    # per step, plain reverse mode keeps the carry and two derivatives of the body; the checkpointed one the carry
    per_step = lambda f: [a.shape for a, _ in fl.saved_residuals(f, x, ws)].count((6, 4, 8))  # noqa: E731
    assert (per_step(plain), per_step(remat)) == (3, 1)


def test_checkpoint_static_argnums_decorator_and_errors():
    @fl.checkpoint(policy=P.dots_saveable, static_argnums=(1,))
    def scaled(x, n):
        for _ in range(n):  # a Python int: static
            x = fl.sin(x)
        return x

    assert_allclose(fl.grad(lambda v: scaled(v, 2))(f64(0.5)), np.cos(np.sin(0.5)) * np.cos(0.5), rtol=1e-14)
    with pytest.raises(TypeError, match="policy"):
        fl.checkpoint(fl.sin, policy="dots")
    with pytest.raises(ValueError, match="static_argnums"):
        fl.checkpoint(fl.sin, static_argnums=(2,))(f64(1.0))


def test_remat_recomputation_is_not_merged_with_the_forward_pass_under_jit():
    x, w1, w2 = _inputs()
    low = fl.jit(fl.grad(_loss(P.nothing_saveable), argnums=1)).lower(x, w1, w2)
    # the forward pass and the backward pass each run their own checkpoint call: CSE cannot see through them
    assert [e.prim.name for e in low.jaxpr.eqns].count("checkpoint") == 2


def test_checkpoint_lowers_peak_memory_under_jit():
    """Under jit(grad) the recomputation must stay a recomputation: merged into the forward pass by CSE (as it was
    when checkpoint re-ran the function inline in its backward rule) it would keep every activation alive."""
    rng = np.random.default_rng(5)
    ws = [(f64(rng.normal(size=(128, 512)) / 12), f64(rng.normal(size=(512, 128)) / 23)) for _ in range(4)]
    x = f64(rng.normal(size=(64, 128)))

    def block(h, w):
        return h + fl.tanh(h @ w[0]) @ w[1]

    def grad_of(f):
        def loss(x, ws):
            h = x
            for w in ws:
                h = f(h, w)
            return (h * h).mean()

        return fl.jit(fl.grad(loss))

    plain, remat = grad_of(block), grad_of(fl.checkpoint(block))
    want = plain(x, ws)
    assert_allclose(remat(x, ws), want, rtol=1e-12)
    _, p_plain = _peak(plain, x, ws)
    got, p_remat = _peak(remat, x, ws)
    assert_allclose(got, want, rtol=1e-12)
    assert p_remat < 0.7 * p_plain, (p_remat, p_plain)


# ---------------------------------------------------------------------------------------------------------------
# max_bytes on jacfwd, jacrev and hessian


def _wide(a, m):
    """R^n -> R^m through (k, n) intermediates per direction, which dwarf the input, the output and the Jacobian."""
    return lambda x: (fl.sin(a * x[None, :]) + fl.cos(a * x[None, :])).sum(axis=1).reshape(m, -1).sum(axis=1)


def _peak(f, *args):
    tracemalloc.start()
    try:
        out = f(*args)
        _, pk = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, pk


@pytest.mark.parametrize("jac", [fl.jacfwd, fl.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_max_bytes_bounds_peak_memory(jac):
    rng = np.random.default_rng(2)
    n, k, m = 48, 256, 32
    a, x = f64(rng.normal(size=(k, n))), f64(rng.normal(size=n))
    f = _wide(a, m)
    full, p_full = _peak(jac(f), x)
    # what any Jacobian costs beyond its chunks: the function itself, or its forward pass and residuals
    _, p_base = _peak(lambda v: fl.vjp(f, v)[0], x)
    budget = p_full // 8
    chunked, p_chunk = _peak(jac(f, max_bytes=budget), x)
    np.testing.assert_array_equal(chunked.numpy(), full.numpy())
    np.testing.assert_array_equal(jac(f, chunk_size=5)(x).numpy(), full.numpy())
    jac_bytes = m * n * 8
    assert p_chunk <= p_base + budget + 2 * jac_bytes, (p_chunk, p_base, budget)
    assert p_chunk * 3 < p_full, (p_chunk, p_full)


def test_hessian_max_bytes_bounds_peak_memory_and_keeps_the_result():
    rng = np.random.default_rng(3)
    n, k = 48, 256
    a, x = f64(rng.normal(size=(k, n))), f64(rng.normal(size=n))
    f = lambda v: _wide(a, 1)(v).sum()  # noqa: E731
    full, p_full = _peak(fl.hessian(f), x)
    budget = p_full // 8
    chunked, p_chunk = _peak(fl.hessian(f, max_bytes=budget), x)
    assert_allclose(chunked, full, rtol=1e-13, atol=1e-10)
    assert_allclose(fl.hessian(f, chunk_size=7)(x), full, rtol=1e-13, atol=1e-10)
    assert p_chunk * 3 < p_full, (p_chunk, p_full)
    with pytest.raises(ValueError, match="max_bytes"):
        fl.jacfwd(f, max_bytes=0)(x)
