"""Implicit differentiation: gradients through the solution of an equation, not through the solver's iterations.

Three problems, each solved by an iteration that is never differentiated (a ``while_loop`` or ``fori_loop``) and
differentiated through its solution with ``fl.custom_root`` or ``fl.custom_linear_solve``:

1. a fixed-point layer ``z = tanh(W z + U x + b)`` (a deep equilibrium model), solved by iterating the map;
2. a Newton solve of ``A y + y**3 = c``, a nonlinear system;
3. a linear system ``A x = b`` solved by conjugate gradients (``fl.linalg.cg``).

Each gradient is checked against central finite differences (``fl.testing.check_grads``) and, where there is one,
a closed form. Run with ``python examples/implicit_diff.py``.
"""

from __future__ import annotations

import numpy as np

import funclib as fl
from funclib.testing import assert_allclose, check_grads


def f64(x):
    return fl.asarray(np.asarray(x, np.float64))


# ---------------------------------------------------------------------------------------------------------------
# 1. a fixed-point layer


def fixed_point_layer(params, x):
    """``z*`` with ``z* = tanh(W z* + U x + b)``, by fixed-point iteration, differentiable in ``params`` and ``x``."""
    w, u, b = params["W"], params["U"], params["b"]

    def residual(z):
        return z - fl.tanh(w @ z + u @ x + b)

    def iterate(f, z0):
        # z <- z - f(z) is the map itself; stop when a step is tiny (a while_loop: reverse mode never sees it)
        def body(state):
            z, _, k = state
            z_new = z - f(z)
            return z_new, fl.max(fl.abs(z_new - z)), k + 1

        return fl.while_loop(lambda s: (s[1] > 1e-13) & (s[2] < 500), body, (z0, f64(1.0), 0))[0]

    # the tangent system (I - J) dz = y is solved matrix-free by BiCGSTAB on the linearized residual
    def tangent_solve(g, y):
        return fl.linalg.bicgstab(g, y, tol=1e-13)[0]

    return fl.custom_root(residual, fl.zeros_like(b), iterate, tangent_solve)


def fixed_point_demo(rng) -> None:
    n, d = 6, 4
    params = {
        "W": f64(rng.normal(size=(n, n)) * 0.3 / np.sqrt(n)),  # a contraction, so the iteration converges
        "U": f64(rng.normal(size=(n, d))),
        "b": f64(rng.normal(size=n) * 0.1),
    }
    x = f64(rng.normal(size=d))

    def loss(params, x):
        return (fixed_point_layer(params, x) ** 2).sum()

    z = fixed_point_layer(params, x)
    w, u, b = (params[k].numpy() for k in ("W", "U", "b"))
    assert_allclose(z, np.tanh(w @ z.numpy() + u @ x.numpy() + b), rtol=1e-12, atol=1e-12)
    grads = fl.grad(loss)(params, x)

    # against differentiating through many unrolled iterations of the same map (a long, memory-hungry way round)
    def unrolled(params, x):
        z = fl.zeros_like(params["b"])
        for _ in range(200):
            z = fl.tanh(params["W"] @ z + params["U"] @ x + params["b"])
        return (z**2).sum()

    for k, g in fl.grad(unrolled)(params, x).items():
        assert_allclose(grads[k], g, rtol=1e-9, atol=1e-12)
    check_grads(loss, (params, x), order=1, modes=("rev",))
    jitted = fl.jit(fl.grad(loss))(params, x)
    for k in grads:
        assert_allclose(jitted[k], grads[k], rtol=1e-10, atol=1e-12)
    print(
        f"fixed-point layer: |z*| = {float(fl.linalg.vector_norm(z)):.6f}, "
        f"|dL/dW| = {float(fl.linalg.vector_norm(grads['W'])):.6f} (as through 200 unrolled steps, and by finite "
        "differences)"
    )


# ---------------------------------------------------------------------------------------------------------------
# 2. a Newton solve of a nonlinear system


def newton_solve(a, c):
    """``y`` with ``A y + y**3 = c``, by Newton's method, differentiable in ``A`` and ``c``."""

    def f(y):
        return a @ y + y**3 - c

    def newton(f, y0):
        def step(i, y):
            jac = a + fl.eye(y.shape[0], dtype=y.dtype) * (3 * y**2)  # A + 3 diag(y^2)
            return y - fl.linalg.solve(jac, f(y))

        return fl.fori_loop(0, 30, step, y0)

    # a small system: solve the tangent equation with the Jacobian of the linearized f
    def tangent_solve(g, y):
        return fl.linalg.solve(fl.jacobian(g)(y), y)

    return fl.custom_root(f, fl.zeros_like(c), newton, tangent_solve)


def newton_demo(rng) -> None:
    n = 4
    a = f64(rng.normal(size=(n, n)) * 0.2 + 2 * np.eye(n))
    c = f64(rng.normal(size=n))
    y = newton_solve(a, c)
    assert_allclose(a @ y + y**3, c, rtol=1e-12, atol=1e-12)
    loss = lambda a, c: (newton_solve(a, c) * fl.arange(1.0, n + 1.0, dtype=fl.float64)).sum()  # noqa: E731
    ga, gc = fl.grad(loss, argnums=(0, 1))(a, c)
    # implicit function theorem by hand: J dy = dc - dA y with J = A + 3 diag(y^2), so dL/dc = J^-T w
    jac = a.numpy() + np.diag(3 * y.numpy() ** 2)
    lam = np.linalg.solve(jac.T, np.arange(1.0, n + 1.0))
    assert_allclose(gc, lam, rtol=1e-12)
    assert_allclose(ga, -np.outer(lam, y.numpy()), rtol=1e-12)
    check_grads(loss, (a, c), order=1, modes=("fwd", "rev"))
    check_grads(lambda c: loss(a, c), (c,), order=2, modes=("rev",))  # second order: implicit all the way down
    print(f"Newton solve: y = {np.round(y.numpy(), 6)}, dL/dc = {np.round(gc.numpy(), 6)} (the closed form)")


# ---------------------------------------------------------------------------------------------------------------
# 3. a linear system by conjugate gradients


def cg_demo(rng) -> None:
    n = 5
    m = rng.normal(size=(n, n))
    a = f64(m @ m.T + n * np.eye(n))  # symmetric positive definite
    b = f64(rng.normal(size=n))

    def loss(a, b):
        x, _ = fl.linalg.cg(a, b, tol=1e-14)
        return (x * x).sum()

    ga, gb = fl.grad(loss, argnums=(0, 1))(a, b)
    x = np.linalg.solve(a.numpy(), b.numpy())
    lam = np.linalg.solve(a.numpy().T, 2 * x)
    assert_allclose(gb, lam, rtol=1e-10)
    assert_allclose(ga, -np.outer(lam, x), rtol=1e-10)
    check_grads(loss, (a, b), order=1, modes=("fwd", "rev"))
    print(f"conjugate gradients: dL/db = {np.round(gb.numpy(), 6)} (the closed form: A^-T 2x)")


def main() -> None:
    rng = np.random.default_rng(0)
    fixed_point_demo(rng)
    newton_demo(rng)
    cg_demo(rng)


if __name__ == "__main__":
    main()
