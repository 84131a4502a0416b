"""Eager reverse mode: the gradient of a 30-op elementwise chain over a float32 (100,) vector.

``h = x; 5 times: h = tanh(h); h = h*x; h = h+0.5; h = exp(h); h = h+1.0; h = log(h)``; ``f = sum(h)``.
funclib: ``fl.grad(f)(x)``. Peers: PyTorch ``f(x).backward()`` with ``x.requires_grad_()``, and JAX's
un-jitted ``jax.grad`` when installed. NumPy has no autodiff; its variant is the hand-written backward pass.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, allclose, optional


def _chain(ops, x):
    h = x
    for _ in range(5):
        h = ops.tanh(h)
        h = h * x
        h = h + 0.5
        h = ops.exp(h)
        h = h + 1.0
        h = ops.log(h)
    return h.sum()


def _numpy_grad(x):
    # forward, keeping what the backward pass needs, then the chain rule by hand
    h, tape = x, []
    for _ in range(5):
        t = np.tanh(h)
        m = t * x
        e = np.exp(m + np.float32(0.5))
        lg = np.log(e + np.float32(1.0))
        tape.append((t, e))
        h = lg
    g_h = np.ones_like(x)
    g_x = np.zeros_like(x)
    for t, e in reversed(tape):
        g_e = g_h / (e + np.float32(1.0))
        g_m = g_e * e
        g_x = g_x + g_m * t
        g_t = g_m * x
        g_h = g_t * (np.float32(1.0) - t * t)
    return g_x + g_h


def _setup():
    import funclib as fl

    x = np.random.default_rng(0).uniform(-1, 1, 100).astype(np.float32)
    fx = fl.asarray(x)
    g = fl.grad(lambda v: _chain(fl, v))
    variants = {"funclib": lambda: g(fx), "numpy": lambda: _numpy_grad(x)}
    torch = optional("torch")
    if torch is not None:
        tx = torch.from_numpy(x.copy()).requires_grad_()

        def torch_backward():
            tx.grad = None
            _chain(torch, tx).backward()
            return tx.grad

        variants["torch"] = torch_backward
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        jg = jax.grad(lambda v: _chain(jnp, v))
        jx = jnp.asarray(x)
        variants["jax"] = lambda: jg(jx).block_until_ready()
    return variants


def cases() -> list[Case]:
    return [Case("grad of 30-op chain f32[100]", _setup, calls=20, rounds=25, check=allclose(rtol=2e-4, atol=1e-5))]
