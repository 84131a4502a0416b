"""Jacobians and Hessians, eager and jitted.

- ``hessian``: ``f(x) = logsumexp(A @ tanh(x))`` with x in R^128, A of shape (64, 128); peer ``torch.func.hessian``.
  The jitted case compiles the same Hessian: ``fl.jit(fl.hessian(f))`` against ``jax.jit(jax.hessian(f))``.
- ``jacobians``: ``f(x) = tanh(W2 @ tanh(W1 @ x))`` from R^256 to R^256 with ``jacfwd`` and ``jacrev``; peers
  ``torch.func.jacfwd``/``jacrev``. NumPy's variant is the closed form.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, allclose, optional


def _hess_setup(jit=False):
    import funclib as fl

    rng = np.random.default_rng(0)
    A = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    x = rng.standard_normal(128).astype(np.float32)
    fA, fx = fl.asarray(A), fl.asarray(x)
    h = fl.hessian(lambda v: fl.logsumexp(fA @ fl.tanh(v)))
    if jit:
        h = fl.jit(h)

    def numpy_hess():
        t = np.tanh(x)
        z = A @ t
        s = np.exp(z - z.max())
        s /= s.sum()
        J = A * (1 - t * t)[None, :]  # dz/dx
        g_t = A.T @ s
        H_z = J.T @ (np.diag(s) - np.outer(s, s)) @ J
        return H_z + np.diag(g_t * (-2 * t * (1 - t * t)))

    variants = {"funclib": lambda: h(fx), "numpy": numpy_hess}
    torch = optional("torch")
    if torch is not None and not jit:
        from torch.func import hessian

        tA, tx = torch.from_numpy(A), torch.from_numpy(x)
        th = hessian(lambda v: torch.logsumexp(tA @ torch.tanh(v), 0))
        variants["torch"] = lambda: th(tx)
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp
        from jax.scipy.special import logsumexp

        jA, jx = jnp.asarray(A), jnp.asarray(x)
        jh = jax.hessian(lambda v: logsumexp(jA @ jnp.tanh(v)))
        if jit:
            jh = jax.jit(jh)
        variants["jax"] = lambda: jh(jx).block_until_ready()
    return variants


def _jac_setup(mode):
    import funclib as fl

    rng = np.random.default_rng(1)
    W1 = (rng.standard_normal((256, 256)) * 0.06).astype(np.float32)
    W2 = (rng.standard_normal((256, 256)) * 0.06).astype(np.float32)
    x = rng.standard_normal(256).astype(np.float32)
    f1, f2, fx = fl.asarray(W1), fl.asarray(W2), fl.asarray(x)
    fun = lambda v: fl.tanh(f2 @ fl.tanh(f1 @ v))  # noqa: E731
    j = (fl.jacfwd if mode == "jacfwd" else fl.jacrev)(fun)

    def numpy_jac():
        a = np.tanh(W1 @ x)
        b = np.tanh(W2 @ a)
        return ((1 - b * b)[:, None] * W2) @ ((1 - a * a)[:, None] * W1)

    variants = {"funclib": lambda: j(fx), "numpy": numpy_jac}
    torch = optional("torch")
    if torch is not None:
        import torch.func as tf

        t1, t2, tx = torch.from_numpy(W1), torch.from_numpy(W2), torch.from_numpy(x)
        tj = getattr(tf, mode)(lambda v: torch.tanh(t2 @ torch.tanh(t1 @ v)))
        variants["torch"] = lambda: tj(tx)
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        j1, j2, jx = jnp.asarray(W1), jnp.asarray(W2), jnp.asarray(x)
        jj = getattr(jax, mode)(lambda v: jnp.tanh(j2 @ jnp.tanh(j1 @ v)))
        variants["jax"] = lambda: jj(jx).block_until_ready()
    return variants


def cases() -> list[Case]:
    return [
        Case(
            "hessian logsumexp(A tanh x) x:f32[128]",
            _hess_setup,
            calls=10,
            rounds=15,
            check=allclose(rtol=1e-3, atol=1e-5),
        ),
        Case(
            "hessian jit logsumexp(A tanh x) x:f32[128]",
            lambda: _hess_setup(jit=True),
            calls=100,
            rounds=15,
            check=allclose(rtol=1e-3, atol=1e-5),
        ),
        Case(
            "jacfwd tanh(W2 tanh(W1 x)) 256->256",
            lambda: _jac_setup("jacfwd"),
            calls=10,
            rounds=15,
            check=allclose(rtol=1e-3, atol=1e-5),
        ),
        Case(
            "jacrev tanh(W2 tanh(W1 x)) 256->256",
            lambda: _jac_setup("jacrev"),
            calls=10,
            rounds=15,
            check=allclose(rtol=1e-3, atol=1e-5),
        ),
    ]
