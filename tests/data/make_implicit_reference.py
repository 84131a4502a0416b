"""Reference values for tests/test_implicit.py, computed with JAX's implicit differentiation.

Run in an environment with JAX (not funclib's: JAX is no dependency of funclib):

    python -m venv /tmp/jaxref && /tmp/jaxref/bin/pip install "jax[cpu]" numpy
    /tmp/jaxref/bin/python tests/data/make_implicit_reference.py > tests/data/implicit_reference.json

The problems (and their inputs, stored beside the results) are those the test solves with funclib:
a scalar Newton solve (x^2 = a) through ``jax.lax.custom_root``, a nonlinear system ``A y + y^3 = c`` by Newton's
method through ``custom_root`` with a Jacobian tangent solve, a linear system through
``jax.lax.custom_linear_solve``, and the same system by ``jax.scipy.sparse.linalg.cg`` and ``bicgstab``.
"""

import json
import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402


def sqrt_newton(a):
    f = lambda x: x * x - a  # noqa: E731
    newton = lambda f, x0: jax.lax.fori_loop(0, 30, lambda i, x: x - f(x) / (2 * x), x0)  # noqa: E731
    return jax.lax.custom_root(f, jnp.float64(1.0), newton, lambda g, y: y / g(1.0))


def cubic_system(a, c):
    def f(y):
        return a @ y + y**3 - c

    def newton(f, y0):
        return jax.lax.fori_loop(0, 30, lambda i, y: y - jnp.linalg.solve(a + jnp.diag(3 * y**2), f(y)), y0)

    return jax.lax.custom_root(f, jnp.zeros_like(c), newton, lambda g, y: jnp.linalg.solve(jax.jacobian(g)(y), y))


def linear(a, b):
    return jax.lax.custom_linear_solve(
        lambda v: a @ v, b, lambda mv, r: jnp.linalg.solve(a, r), lambda vm, r: jnp.linalg.solve(a.T, r)
    )


def main():
    rng = np.random.default_rng(20240521)
    n = 4
    a_cubic = rng.normal(size=(n, n)) * 0.2 + 2 * np.eye(n)
    c_cubic = rng.normal(size=n)
    weights = np.arange(1.0, n + 1.0)
    m = rng.normal(size=(n, n))
    a_spd = m @ m.T + n * np.eye(n)
    a_gen = rng.normal(size=(n, n)) + 3 * np.eye(n)
    b = rng.normal(size=n)

    cubic_loss = lambda a, c: jnp.sum(cubic_system(a, c) * weights)  # noqa: E731
    lin_loss = lambda a, b: jnp.sum(linear(a, b) ** 2)  # noqa: E731
    cg_loss = lambda a, b: jnp.sum(jax.scipy.sparse.linalg.cg(a, b, tol=1e-14)[0] ** 2)  # noqa: E731
    bicg_loss = lambda a, b: jnp.sum(jax.scipy.sparse.linalg.bicgstab(a, b, tol=1e-14)[0] ** 2)  # noqa: E731

    def grads(loss, *args):
        return [np.asarray(g).tolist() for g in jax.grad(loss, argnums=tuple(range(len(args))))(*args)]

    out = {
        "made_with": f"jax {jax.__version__}, float64",
        "sqrt_newton": {
            "a": 2.0,
            "root": float(sqrt_newton(2.0)),
            "grad": float(jax.grad(sqrt_newton)(2.0)),
            "second": float(jax.grad(jax.grad(sqrt_newton))(2.0)),
        },
        "cubic_system": {
            "a": a_cubic.tolist(),
            "c": c_cubic.tolist(),
            "weights": weights.tolist(),
            "y": np.asarray(cubic_system(a_cubic, c_cubic)).tolist(),
            "grads": grads(cubic_loss, a_cubic, c_cubic),
        },
        "linear_system": {
            "a": a_gen.tolist(),
            "b": b.tolist(),
            "x": np.asarray(linear(a_gen, b)).tolist(),
            "grads": grads(lin_loss, a_gen, b),
            "bicgstab_grads": grads(bicg_loss, a_gen, b),
        },
        "spd_system": {"a": a_spd.tolist(), "b": b.tolist(), "cg_grads": grads(cg_loss, a_spd, b)},
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
