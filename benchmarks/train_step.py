"""A jitted training step: MLP 784-256-256-10 (relu), batch 128, softmax cross-entropy, hand-written Adam over
a params dict, all in one ``fl.jit``. Peers: ``jax.jit`` of the same step, PyTorch eager ``nn`` + ``optim.Adam``.
NumPy's variant is the forward pass with a hand-written backward pass and Adam (no autodiff); ``matmuls`` is its
eight matrix products alone (three forward, two per layer backward but none for the input's gradient), the floor
under every variant.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, optional

SIZES = (784, 256, 256, 10)
B1, B2, LR, EPS = 0.9, 0.999, 1e-3, 1e-8


def init(seed=0):
    rng = np.random.default_rng(seed)
    p = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        p[f"W{i}"] = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        p[f"b{i}"] = np.zeros(b, np.float32)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    return p, x, y


def make_step(fl):
    def loss(p, x, y):
        h = x
        for i in range(3):
            h = h @ p[f"W{i}"] + p[f"b{i}"]
            if i < 2:
                h = fl.relu(h)
        logp = fl.log_softmax(h, axis=-1)
        return -fl.mean(fl.take_along_axis(logp, y[:, None], axis=1))

    def step(p, m, v, t, x, y):
        l, g = fl.value_and_grad(loss)(p, x, y)
        t = t + 1.0
        new_p, new_m, new_v = {}, {}, {}
        for k in p:
            new_m[k] = B1 * m[k] + (1 - B1) * g[k]
            new_v[k] = B2 * v[k] + (1 - B2) * g[k] * g[k]
            mh = new_m[k] / (1 - B1**t)
            vh = new_v[k] / (1 - B2**t)
            new_p[k] = p[k] - LR * mh / (fl.sqrt(vh) + EPS)
        return new_p, new_m, new_v, t, l

    return step


def _numpy_step(p, m, v, t, x, y):
    hs, h = [x], x
    for i in range(3):
        h = h @ p[f"W{i}"] + p[f"b{i}"]
        if i < 2:
            h = np.maximum(h, 0)
        hs.append(h)
    z = h - h.max(1, keepdims=True)
    s = np.exp(z)
    s /= s.sum(1, keepdims=True)
    dz = s
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    g = {}
    for i in (2, 1, 0):
        g[f"W{i}"] = hs[i].T @ dz
        g[f"b{i}"] = dz.sum(0)
        if i:
            dz = (dz @ p[f"W{i}"].T) * (hs[i] > 0)
    t = t + 1
    for k in p:
        m[k] = B1 * m[k] + (1 - B1) * g[k]
        v[k] = B2 * v[k] + (1 - B2) * g[k] * g[k]
        p[k] = p[k] - LR * (m[k] / (1 - B1**t)) / (np.sqrt(v[k] / (1 - B2**t)) + EPS)
    return p, m, v, t


def _setup():
    import funclib as fl

    p, x, y = init()
    fp = {k: fl.asarray(a) for k, a in p.items()}
    state = {
        "p": fp,
        "m": {k: fl.zeros_like(a) for k, a in fp.items()},
        "v": {k: fl.zeros_like(a) for k, a in fp.items()},
        "t": fl.asarray(np.float32(0)),
    }
    fx, fy = fl.asarray(x), fl.asarray(y)
    step = fl.jit(make_step(fl))

    def run_fl():
        state["p"], state["m"], state["v"], state["t"], loss = step(
            state["p"], state["m"], state["v"], state["t"], fx, fy
        )
        return loss

    np_state = [dict(p), {k: np.zeros_like(a) for k, a in p.items()}, {k: np.zeros_like(a) for k, a in p.items()}, 0]

    def run_np():
        np_state[:] = _numpy_step(*np_state, x, y)

    W0, W1, W2 = p["W0"], p["W1"], p["W2"]
    dz = np.ones((128, SIZES[-1]), np.float32)

    def run_matmuls():
        a = x @ W0
        b = a @ W1
        c = b @ W2
        d2 = dz @ W2.T
        d1 = d2 @ W1.T
        return c, b.T @ dz, a.T @ d2, x.T @ d1

    variants = {"funclib": run_fl, "numpy": run_np, "matmuls": run_matmuls}
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        class J:
            relu = staticmethod(jax.nn.relu)
            log_softmax = staticmethod(jax.nn.log_softmax)
            mean = staticmethod(jnp.mean)
            take_along_axis = staticmethod(jnp.take_along_axis)
            sqrt = staticmethod(jnp.sqrt)
            value_and_grad = staticmethod(jax.value_and_grad)

        jstep = jax.jit(make_step(J))
        js = {"p": {k: jnp.asarray(a) for k, a in p.items()}}
        js["m"] = {k: jnp.zeros_like(a) for k, a in js["p"].items()}
        js["v"] = {k: jnp.zeros_like(a) for k, a in js["p"].items()}
        js["t"] = jnp.float32(0)
        jx, jy = jnp.asarray(x), jnp.asarray(y)

        def run_jax():
            js["p"], js["m"], js["v"], js["t"], loss = jstep(js["p"], js["m"], js["v"], js["t"], jx, jy)
            return loss.block_until_ready()

        variants["jax"] = run_jax
    torch = optional("torch")
    if torch is not None:
        nn = torch.nn
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)

        def run_torch():
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(tx), ty)
            loss.backward()
            opt.step()
            return loss

        variants["torch"] = run_torch
    return variants


def cases() -> list[Case]:
    return [Case("train_step MLP 784-256-256-10 b128 Adam", _setup, calls=10, rounds=15)]
