"""Loops with small state and small programs under ``jit``, side by side with ``jax.jit``.

- pendulum: explicit Euler, 1,000 steps of a 2-vector through ``while_loop``, float64;
- adaptive Heun ODE through ``while_loop(max_steps=2000)``, forward and ``grad`` (JAX cannot reverse a while
  loop: its variant is the bounded form a JAX user writes, a ``scan`` of 2,000 steps that stop updating);
- RNN through ``scan``, state 8x16, 200 steps;
- GRU through ``scan``, T = 50, one SGD train step;
- MAML: ``value_and_grad`` through 3 inner SGD steps of a small MLP.

NumPy variants are plain Python loops (forward programs only).
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, allclose, optional

STEPS, DT, G = 1000, 0.01, 9.81
T_END, TOL, MAX_STEPS = 10.0, 1e-6, 2000


def _pendulum(fl):
    def run(y0):
        def body(s):
            k, y = s
            th, om = y[0], y[1]
            return k + 1, fl.stack([th + DT * om, om - DT * G * fl.sin(th)])

        return fl.while_loop(lambda s: s[0] < STEPS, body, (0, y0))[1]

    return run


def _pendulum_np(y0):
    th, om = float(y0[0]), float(y0[1])
    for _ in range(STEPS):
        th, om = th + DT * om, om - DT * G * np.sin(th)
    return np.array([th, om])


def _heun_step(xp, a, s):
    t, y, h = s

    def f(y):
        return xp.stack([y[1], -a * xp.sin(y[0])])

    k1 = f(y)
    k2 = f(y + h * k1)
    err = xp.max(xp.abs(0.5 * h * (k2 - k1)))
    ok = err < TOL
    t2 = xp.where(ok, t + h, t)
    y2 = xp.where(ok, y + 0.5 * h * (k1 + k2), y)
    h2 = h * xp.clip(0.9 * xp.sqrt(TOL / (err + 1e-12)), 0.2, 5.0)
    return t2, y2, xp.minimum(h2, T_END - t2 + 1e-9)


def _heun(fl):
    def run(y0, a):
        init = (fl.asarray(0.0, dtype=fl.float64), y0, fl.asarray(0.01, dtype=fl.float64))
        _, y, _ = fl.while_loop(lambda s: s[0] < T_END, lambda s: _heun_step(fl, a, s), init, max_steps=MAX_STEPS)
        return (y * y).sum()

    return run


def _heun_np(y0, a):
    s = (0.0, np.asarray(y0), 0.01)
    k = 0
    while s[0] < T_END and k < MAX_STEPS:
        s = _heun_step(np, a, s)
        k += 1
    return (s[1] * s[1]).sum()


def _heun_jax(jax, jnp):
    def run(y0, a):
        def step(s, _):
            active = s[0] < T_END
            new = _heun_step(jnp, a, s)
            return tuple(jnp.where(active, n, o) for n, o in zip(new, s)), None

        init = (jnp.asarray(0.0, jnp.float64), y0, jnp.asarray(0.01, jnp.float64))
        (_, y, _), _ = jax.lax.scan(step, init, None, length=MAX_STEPS)
        return (y * y).sum()

    return run


def _rnn_data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((16, 16)) * 0.3).astype(np.float32), rng.standard_normal((200, 8, 16)).astype(
        np.float32
    )


def _rnn(xp, scan):
    def run(W, xs):
        def cell(h, x):
            return xp.tanh(h @ W + x), None

        return scan(cell, xp.zeros((8, 16), dtype=xp.float32), xs)[0]

    return run


def _gru_data():
    rng = np.random.default_rng(1)
    D, H, B, T = 8, 32, 8, 50
    params = {
        k: (rng.standard_normal(s) * 0.2).astype(np.float32)
        for k, s in (("Wz", (D, H)), ("Uz", (H, H)), ("Wr", (D, H)), ("Ur", (H, H)), ("Wh", (D, H)), ("Uh", (H, H)))
    }
    return params, rng.standard_normal((T, B, D)).astype(np.float32), rng.standard_normal((B, H)).astype(np.float32)


def _gru_step(xp, grad, scan, sigmoid):
    def loss(p, xs, target):
        def cell(h, x):
            z = sigmoid(x @ p["Wz"] + h @ p["Uz"])
            r = sigmoid(x @ p["Wr"] + h @ p["Ur"])
            c = xp.tanh(x @ p["Wh"] + (r * h) @ p["Uh"])
            return (1 - z) * h + z * c, None

        h, _ = scan(cell, xp.zeros(target.shape, dtype=xp.float32), xs)
        return ((h - target) ** 2).mean()

    def step(p, xs, target):
        g = grad(loss)(p, xs, target)
        return {k: p[k] - 0.1 * g[k] for k in p}

    return step


def _maml_data():
    rng = np.random.default_rng(2)
    params = {
        "W1": (rng.standard_normal((1, 40)) * 0.5).astype(np.float32),
        "b1": np.zeros(40, np.float32),
        "W2": (rng.standard_normal((40, 1)) * 0.2).astype(np.float32),
        "b2": np.zeros(1, np.float32),
    }
    x = rng.uniform(-5, 5, (10, 1)).astype(np.float32)
    return params, x, np.sin(x), x + 0.1, np.sin(x + 0.1)


def _maml(xp, grad, value_and_grad):
    def net(p, x):
        return xp.tanh(x @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]

    def loss(p, x, y):
        return ((net(p, x) - y) ** 2).mean()

    def outer(p, xs, ys, xq, yq):
        q = p
        for _ in range(3):
            g = grad(loss)(q, xs, ys)
            q = {k: q[k] - 0.01 * g[k] for k in q}
        return loss(q, xq, yq)

    return value_and_grad(outer)


def _hot(f, *args) -> None:
    """Call ``f`` until it is hot and wait for its background compile: the steady state of a training loop is
    what is timed (a 17-256 step program runs as its steps until ``fl.config.whole_program_hot_calls`` calls)."""
    import funclib as fl

    f(*args)
    fl.config.wait_for_compilation()  # the first call ran eagerly while the program's kernels compiled
    for _ in range(max(fl.config.whole_program_hot_calls, 1)):
        f(*args)
    fl.config.wait_for_compilation()


def cases() -> list[Case]:
    import funclib as fl

    jax = optional("jax")
    jnp = None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

    def pendulum():
        y0 = np.array([1.0, 0.0])
        f = fl.jit(_pendulum(fl))
        fy = fl.asarray(y0)
        out = {"funclib": lambda: f(fy), "numpy": lambda: _pendulum_np(y0)}
        if jax is not None:

            def jrun(y0):
                def body(s):
                    k, y = s
                    return k + 1, jnp.stack([y[0] + DT * y[1], y[1] - DT * G * jnp.sin(y[0])])

                return jax.lax.while_loop(lambda s: s[0] < STEPS, body, (0, y0))[1]

            jf, jy = jax.jit(jrun), jnp.asarray(y0)
            out["jax"] = lambda: jf(jy).block_until_ready()
        return out

    def heun_forward():
        y0, a = np.array([1.0, 0.0]), np.float64(1.0)
        f = fl.jit(_heun(fl))
        fy, fa = fl.asarray(y0), fl.asarray(a)
        out = {"funclib": lambda: f(fy, fa), "numpy": lambda: _heun_np(y0, a)}
        if jax is not None:
            jf, jy, ja = jax.jit(_heun_jax(jax, jnp)), jnp.asarray(y0), jnp.asarray(a)
            out["jax"] = lambda: jf(jy, ja).block_until_ready()
        return out

    def heun_grad():
        y0, a = np.array([1.0, 0.0]), np.float64(1.0)
        f = fl.jit(fl.grad(_heun(fl), argnums=1))
        fy, fa = fl.asarray(y0), fl.asarray(a)
        out = {"funclib": lambda: f(fy, fa)}
        if jax is not None:
            jf, jy, ja = jax.jit(jax.grad(_heun_jax(jax, jnp), argnums=1)), jnp.asarray(y0), jnp.asarray(a)
            out["jax"] = lambda: jf(jy, ja).block_until_ready()
        return out

    def rnn():
        W, xs = _rnn_data()
        f = fl.jit(_rnn(fl, fl.scan))
        fW, fxs = fl.asarray(W), fl.asarray(xs)

        def np_rnn():
            h = np.zeros((8, 16), np.float32)
            for x in xs:
                h = np.tanh(h @ W + x)
            return h

        out = {"funclib": lambda: f(fW, fxs), "numpy": np_rnn}
        if jax is not None:
            jf = jax.jit(_rnn(jnp, jax.lax.scan))
            jW, jxs = jnp.asarray(W), jnp.asarray(xs)
            out["jax"] = lambda: jf(jW, jxs).block_until_ready()
        return out

    def gru():
        p, xs, target = _gru_data()
        f = fl.jit(_gru_step(fl, fl.grad, fl.scan, fl.sigmoid))
        fp = {k: fl.asarray(v) for k, v in p.items()}
        fxs, ft = fl.asarray(xs), fl.asarray(target)
        out = {"funclib": lambda: f(fp, fxs, ft)["Uh"]}
        if jax is not None:
            jf = jax.jit(_gru_step(jnp, jax.grad, jax.lax.scan, jax.nn.sigmoid))
            jp = {k: jnp.asarray(v) for k, v in p.items()}
            jxs, jt = jnp.asarray(xs), jnp.asarray(target)
            out["jax"] = lambda: jf(jp, jxs, jt)["Uh"].block_until_ready()
        return out

    def maml():
        p, xs, ys, xq, yq = _maml_data()
        f = fl.jit(_maml(fl, fl.grad, fl.value_and_grad))
        fp = {k: fl.asarray(v) for k, v in p.items()}
        fa = [fl.asarray(v) for v in (xs, ys, xq, yq)]
        _hot(f, fp, *fa)
        out = {"funclib": lambda: f(fp, *fa)[1]["W1"]}
        if jax is not None:
            jf = jax.jit(_maml(jnp, jax.grad, jax.value_and_grad))
            jp = {k: jnp.asarray(v) for k, v in p.items()}
            ja = [jnp.asarray(v) for v in (xs, ys, xq, yq)]
            out["jax"] = lambda: jf(jp, *ja)[1]["W1"].block_until_ready()
        return out

    ref = "jax" if jax is not None else "funclib"
    return [
        Case("pendulum while_loop, Euler 1000 steps, f64", pendulum, calls=20, rounds=15, check=allclose(1e-9)),
        Case("adaptive Heun while_loop(max_steps=2000), forward", heun_forward, calls=5, rounds=15,
             check=allclose(1e-8)),
        Case("adaptive Heun while_loop(max_steps=2000), grad", heun_grad, calls=1, rounds=11,
             check=allclose(1e-6, reference=ref)),
        Case("scan RNN 8x16, 200 steps, f32", rnn, calls=20, rounds=15, check=allclose(2e-4, 1e-5)),
        Case("GRU scan T=50, one SGD train step", gru, calls=5, rounds=15,
             check=allclose(1e-4, 1e-6, reference=ref)),
        Case("MAML value_and_grad through 3 inner SGD steps", maml, calls=20, rounds=15,
             check=allclose(1e-4, 1e-6, reference=ref)),
    ]
