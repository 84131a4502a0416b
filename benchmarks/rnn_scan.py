"""Reverse mode through a 1000-step ``scan`` of a small RNN cell (hidden 64, batch 32), jitted.

funclib: ``fl.jit(fl.grad(loss))`` with ``fl.scan``. Peer: ``jax.jit(jax.grad(loss))`` with ``jax.lax.scan``.
NumPy's variant is a hand-written forward and backward pass (BPTT). Also reports trace + compile time of the
jitted gradient at 10 and 10,000 steps, which must not grow with the trip count.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks._harness import Case, allclose, optional

H, B, D, T = 64, 32, 16, 1000


def _data(steps=T):
    rng = np.random.default_rng(0)
    W = (rng.standard_normal((H, H)) * 0.1).astype(np.float32)
    U = (rng.standard_normal((D, H)) * 0.1).astype(np.float32)
    xs = rng.standard_normal((steps, B, D)).astype(np.float32)
    return W, U, xs


def _fl_loss(fl):
    def loss(W, U, xs):
        def cell(h, x):
            h = fl.tanh(h @ W + x @ U)
            return h, None

        h, _ = fl.scan(cell, fl.zeros((B, H)), xs)
        return (h * h).sum()

    return loss


def _numpy_grad(W, U, xs):
    hs = [np.zeros((B, H), np.float32)]
    for x in xs:
        hs.append(np.tanh(hs[-1] @ W + x @ U))
    gW, gU = np.zeros_like(W), np.zeros_like(U)
    gh = 2 * hs[-1]
    for t in range(len(xs) - 1, -1, -1):
        gz = gh * (1 - hs[t + 1] ** 2)
        gW += hs[t].T @ gz
        gU += xs[t].T @ gz
        gh = gz @ W.T
    return gW


def _setup():
    import funclib as fl

    W, U, xs = _data()
    g = fl.jit(fl.grad(_fl_loss(fl), argnums=(0, 1)))
    fW, fU, fxs = fl.asarray(W), fl.asarray(U), fl.asarray(xs)
    variants = {"funclib": lambda: g(fW, fU, fxs)[0], "numpy": lambda: _numpy_grad(W, U, xs)}
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        def jloss(W, U, xs):
            def cell(h, x):
                return jnp.tanh(h @ W + x @ U), None

            h, _ = jax.lax.scan(cell, jnp.zeros((B, H)), xs)
            return (h * h).sum()

        jg = jax.jit(jax.grad(jloss, argnums=(0, 1)))
        jW, jU, jxs = jnp.asarray(W), jnp.asarray(U), jnp.asarray(xs)
        variants["jax"] = lambda: jg(jW, jU, jxs)[0].block_until_ready()
    return variants


def compile_times() -> dict[str, float]:
    import funclib as fl

    out = {}
    for steps in (10, 10_000):
        W, U, xs = _data(steps)
        g = fl.jit(fl.grad(_fl_loss(fl), argnums=(0, 1)))
        t0 = time.perf_counter()
        g.lower(fl.asarray(W), fl.asarray(U), fl.asarray(xs))
        out[f"trace+lower {steps} steps"] = time.perf_counter() - t0
    return out


def cases() -> list[Case]:
    for k, v in compile_times().items():
        print(f"  {k}: {v:.3f} s")
    return [
        Case("grad through 1000-step RNN scan, jit", _setup, calls=1, rounds=7, check=allclose(rtol=2e-3, atol=1e-3))
    ]
