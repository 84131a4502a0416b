"""Per-example gradients of an MLP 784-128-10 (tanh, softmax cross-entropy), float32, batches 64 and 512.

funclib: ``fl.vmap(fl.grad(loss), in_axes=(None, 0, 0))`` eagerly and under ``fl.jit``. Peers:
``torch.func.vmap(torch.func.grad(...))``, ``jax.jit(jax.vmap(jax.grad(...)))`` and a hand-written NumPy batch
gradient (the floor).
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, allclose, optional


def _data(batch):
    rng = np.random.default_rng(0)
    p = {
        "W1": (rng.standard_normal((784, 128)) * 0.05).astype(np.float32),
        "b1": np.zeros(128, np.float32),
        "W2": (rng.standard_normal((128, 10)) * 0.05).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    return p, x, y


def _numpy(p, x, y):
    h = np.tanh(x @ p["W1"] + p["b1"])
    z = h @ p["W2"] + p["b2"]
    z = z - z.max(axis=1, keepdims=True)
    s = np.exp(z)
    s /= s.sum(axis=1, keepdims=True)
    dz = s
    dz[np.arange(len(y)), y] -= 1
    dh = (dz @ p["W2"].T) * (1 - h * h)
    return {
        "W1": x[:, :, None] * dh[:, None, :],
        "b1": dh,
        "W2": h[:, :, None] * dz[:, None, :],
        "b2": dz,
    }


def _setup(batch, jit):
    import funclib as fl

    p, x, y = _data(batch)

    def loss(p, xi, yi):
        h = fl.tanh(xi @ p["W1"] + p["b1"])
        z = h @ p["W2"] + p["b2"]
        return -(fl.log_softmax(z) * fl.one_hot(yi, 10)).sum()

    fp = {k: fl.asarray(v) for k, v in p.items()}
    fx, fy = fl.asarray(x), fl.asarray(y)
    f = fl.vmap(fl.grad(loss), in_axes=(None, 0, 0))
    if jit:
        f = fl.jit(f)
    variants = {"funclib": lambda: f(fp, fx, fy)["W1"], "numpy": lambda: _numpy(p, x, y)["W1"]}
    torch = optional("torch")
    if torch is not None:
        from torch.func import grad, vmap

        tp = {k: torch.from_numpy(v.copy()) for k, v in p.items()}
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)

        def tloss(p, xi, yi):
            h = torch.tanh(xi @ p["W1"] + p["b1"])
            z = h @ p["W2"] + p["b2"]
            return -(torch.log_softmax(z, -1) * (torch.arange(10) == yi)).sum()

        tf = vmap(grad(tloss), in_dims=(None, 0, 0))
        variants["torch"] = lambda: tf(tp, tx, ty)["W1"]
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        jp = {k: jnp.asarray(v) for k, v in p.items()}
        jx, jy = jnp.asarray(x), jnp.asarray(y)

        def jloss(p, xi, yi):
            h = jnp.tanh(xi @ p["W1"] + p["b1"])
            z = h @ p["W2"] + p["b2"]
            return -(jax.nn.log_softmax(z) * jax.nn.one_hot(yi, 10)).sum()

        jf = jax.jit(jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0)))
        variants["jax"] = lambda: jf(jp, jx, jy)["W1"].block_until_ready()
    return variants


def cases() -> list[Case]:
    out = []
    for batch in (64, 512):
        for jit in (False, True):
            out.append(
                Case(
                    f"per-sample grads MLP batch {batch}{' jit' if jit else ''}",
                    lambda b=batch, j=jit: _setup(b, j),
                    calls=2 if batch == 512 else 10,
                    rounds=9,
                    check=allclose(rtol=1e-3, atol=1e-5),
                )
            )
    return out
