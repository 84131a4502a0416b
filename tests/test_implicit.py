"""Implicit differentiation: custom_linear_solve, custom_root, fl.linalg.cg/bicgstab, the example script, and the
docstring examples of the debugging, rematerialization and implicit-differentiation modules."""

import doctest
import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funclib as fl
from funclib.testing import assert_allclose, check_grads

ROOT = Path(__file__).resolve().parents[1]
# computed with JAX by tests/data/make_implicit_reference.py (the file says how to regenerate it)
JAX = json.loads((ROOT / "tests" / "data" / "implicit_reference.json").read_text())


def f64(x):
    return fl.asarray(np.asarray(x, np.float64))


def sqrt_newton(a):
    f = lambda x: x * x - a  # noqa: E731
    newton = lambda f, x0: fl.fori_loop(0, 30, lambda i, x: x - f(x) / (2 * x), x0)  # noqa: E731
    return fl.custom_root(f, fl.asarray(1.0, dtype=fl.float64), newton, lambda g, y: y / g(1.0))


def cubic_system(a, c):
    """``y`` with ``A y + y**3 = c`` by Newton's method, differentiated through the root."""

    def f(y):
        return a @ y + y**3 - c

    def newton(f, y0):
        eye = fl.eye(c.shape[0], dtype=c.dtype)
        return fl.fori_loop(0, 30, lambda i, y: y - fl.linalg.solve(a + eye * (3 * y**2), f(y)), y0)

    return fl.custom_root(f, fl.zeros_like(c), newton, lambda g, y: fl.linalg.solve(fl.jacobian(g)(y), y))


def linear(a, b):
    return fl.custom_linear_solve(
        lambda v: a @ v,
        b,
        lambda mv, r: fl.linalg.solve(a, r),
        transpose_solve=lambda vm, r: fl.linalg.solve(fl.matrix_transpose(a), r),
    )


# ---------------------------------------------------------------------------------------------------------------
# Against JAX (reference numbers from jax.lax.custom_root / custom_linear_solve / jax.scipy.sparse.linalg)


def test_newton_solve_matches_jax_and_the_closed_form():
    ref = JAX["sqrt_newton"]
    a = f64(ref["a"])
    assert_allclose(sqrt_newton(a), ref["root"], rtol=1e-15)
    for g in (fl.grad(sqrt_newton), fl.jit(fl.grad(sqrt_newton))):
        assert_allclose(g(a), ref["grad"], rtol=1e-14)
        assert_allclose(g(a), 0.5 / np.sqrt(2.0), rtol=1e-14)
    assert_allclose(fl.grad(fl.grad(sqrt_newton))(a), ref["second"], rtol=1e-13)
    assert_allclose(fl.jvp(sqrt_newton, (a,), (f64(1.0),))[1], ref["grad"], rtol=1e-14)


def test_nonlinear_system_matches_jax():
    ref = JAX["cubic_system"]
    a, c, w = f64(ref["a"]), f64(ref["c"]), f64(ref["weights"])
    assert_allclose(cubic_system(a, c), ref["y"], rtol=1e-13)
    ga, gc = fl.grad(lambda a, c: (cubic_system(a, c) * w).sum(), argnums=(0, 1))(a, c)
    assert_allclose(ga, ref["grads"][0], rtol=1e-12, atol=1e-14)
    assert_allclose(gc, ref["grads"][1], rtol=1e-12, atol=1e-14)


def test_linear_system_matches_jax():
    ref = JAX["linear_system"]
    a, b = f64(ref["a"]), f64(ref["b"])
    assert_allclose(linear(a, b), ref["x"], rtol=1e-13)
    for loss, key in (
        (lambda a, b: (linear(a, b) ** 2).sum(), "grads"),
        (lambda a, b: (fl.linalg.bicgstab(a, b, tol=1e-14)[0] ** 2).sum(), "bicgstab_grads"),
    ):
        got = fl.grad(loss, argnums=(0, 1))(a, b)
        for g, r in zip(got, ref[key]):
            assert_allclose(g, r, rtol=1e-9, atol=1e-12)
    spd = JAX["spd_system"]
    got = fl.grad(lambda a, b: (fl.linalg.cg(a, b, tol=1e-14)[0] ** 2).sum(), argnums=(0, 1))(
        f64(spd["a"]), f64(spd["b"])
    )
    for g, r in zip(got, spd["cg_grads"]):
        assert_allclose(g, r, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# custom_linear_solve


def _well_conditioned(rng, n):
    return f64(rng.normal(size=(n, n)) + n * np.eye(n))


@settings(max_examples=5)
@given(st.integers(0, 2**32 - 1))
def test_linear_solve_derivatives_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    a, b = _well_conditioned(rng, 3), f64(rng.normal(size=3))
    check_grads(lambda a, b: fl.sin(linear(a, b)), (a, b), order=2, modes=("fwd", "rev"))


def test_linear_solve_closed_form_vmap_jit_and_pytrees():
    rng = np.random.default_rng(0)
    a, b = _well_conditioned(rng, 4), f64(rng.normal(size=4))
    an, bn = a.numpy(), b.numpy()
    x = np.linalg.solve(an, bn)
    lam = np.linalg.solve(an.T, 2 * x)
    ga, gb = fl.grad(lambda a, b: (linear(a, b) ** 2).sum(), argnums=(0, 1))(a, b)
    assert_allclose(gb, lam, rtol=1e-12)
    assert_allclose(ga, -np.outer(lam, x), rtol=1e-12)
    bs = f64(rng.normal(size=(5, 4)))
    assert_allclose(fl.vmap(linear, in_axes=(None, 0))(a, bs), np.linalg.solve(an, bs.numpy().T).T, rtol=1e-12)
    as_ = f64(rng.normal(size=(3, 4, 4)) + 4 * np.eye(4))
    got = fl.vmap(fl.grad(lambda a, b: (linear(a, b) ** 2).sum()), in_axes=(0, None))(as_, b)
    for i in range(3):
        assert_allclose(got[i], fl.grad(lambda a: (linear(a, b) ** 2).sum())(as_[i]), rtol=1e-12)
    assert_allclose(fl.jit(fl.grad(lambda b: (linear(a, b) ** 2).sum()))(b), lam, rtol=1e-12)
    assert_allclose(fl.grad(fl.jit(lambda b: (linear(a, b) ** 2).sum()))(b), lam, rtol=1e-12)
    # a pytree right-hand side: two blocks of a block-diagonal system
    tree = {"u": f64([1.0, 2.0]), "v": f64(3.0)}

    def mv(t):
        return {"u": a[:2, :2] @ t["u"], "v": 4.0 * t["v"]}

    def sol(mv_, t):
        return {"u": fl.linalg.solve(a[:2, :2], t["u"]), "v": t["v"] / 4.0}

    def tsol(vm, t):
        return {"u": fl.linalg.solve(fl.matrix_transpose(a[:2, :2]), t["u"]), "v": t["v"] / 4.0}

    out = fl.custom_linear_solve(mv, tree, sol, tsol)
    assert_allclose(out["v"], 0.75, rtol=1e-15)
    g = fl.grad(lambda t: fl.custom_linear_solve(mv, t, sol, tsol)["u"].sum())(tree)
    assert_allclose(g["u"], np.linalg.solve(an[:2, :2].T, np.ones(2)), rtol=1e-12)
    assert float(g["v"]) == 0.0


def test_linear_solve_errors():
    a, b = _well_conditioned(np.random.default_rng(1), 3), f64([1.0, 2.0, 3.0])
    no_transpose = lambda b: fl.custom_linear_solve(lambda v: a @ v, b, lambda mv, r: fl.linalg.solve(a, r))  # noqa
    assert_allclose(fl.jvp(no_transpose, (b,), (b,))[1], np.linalg.solve(a.numpy(), b.numpy()), rtol=1e-12)
    with pytest.raises(TypeError, match="transpose_solve"):
        fl.grad(lambda b: no_transpose(b).sum())(b)
    with pytest.raises(fl.errors.NotLinearError, match="matvec must be linear"):
        fl.custom_linear_solve(lambda v: v * v, b, lambda mv, r: r, lambda vm, r: r)
    with pytest.raises(TypeError, match="solve returned f64\\[2\\] for leaf 0, where b has f64\\[3\\]"):
        fl.custom_linear_solve(lambda v: v, b, lambda mv, r: r[:2])
    with pytest.raises(TypeError, match="floating-point"):
        fl.custom_linear_solve(lambda v: v, fl.asarray([1, 2]), lambda mv, r: r)


# ---------------------------------------------------------------------------------------------------------------
# custom_root


def test_root_derivatives_vmap_jit_and_aux():
    rng = np.random.default_rng(2)
    a, c = f64(rng.normal(size=(3, 3)) * 0.2 + 2 * np.eye(3)), f64(rng.normal(size=3))
    check_grads(lambda a, c: cubic_system(a, c), (a, c), order=1, modes=("fwd", "rev"))
    check_grads(lambda c: cubic_system(a, c), (c,), order=2, modes=("rev",))
    cs = f64(rng.normal(size=(4, 3)))
    want = np.stack([cubic_system(a, cs[i]).numpy() for i in range(4)])
    assert_allclose(fl.vmap(cubic_system, in_axes=(None, 0))(a, cs), want, rtol=1e-12)
    assert_allclose(fl.jit(cubic_system)(a, c), cubic_system(a, c), rtol=1e-12)

    def with_count(a):
        def solve(f, x0):
            x, k = fl.while_loop(lambda s: fl.abs(f(s[0])) > 1e-14, lambda s: (s[0] - f(s[0]) / (2 * s[0]), s[1] + 1),
                                 (x0, 0))
            return x, k

        return fl.custom_root(lambda x: x * x - a, f64(1.0), solve, lambda g, y: y / g(1.0), has_aux=True)

    (root, steps), g = fl.value_and_grad(lambda a: with_count(a), has_aux=True)(f64(9.0))
    assert_allclose(root, 3.0, rtol=1e-15)
    assert int(steps) > 3 and steps.dtype == fl.int64
    assert_allclose(g, 1 / 6, rtol=1e-14)


def test_root_errors():
    with pytest.raises(TypeError, match="solve returned a value of structure"):
        fl.custom_root(lambda x: x, f64(1.0), lambda f, x0: (x0, x0), lambda g, y: y)
    with pytest.raises(TypeError, match="has_aux=True.*pair"):
        fl.custom_root(lambda x: x, f64(1.0), lambda f, x0: x0, lambda g, y: y, has_aux=True)
    with pytest.raises(TypeError, match="floating-point"):
        fl.custom_root(lambda x: x, fl.asarray(1), lambda f, x0: x0, lambda g, y: y)
    with pytest.raises(TypeError, match="linearized f takes tangents like the initial guess"):
        fl.grad(lambda a: fl.custom_root(lambda x: x - a, f64([1.0, 2.0]), lambda f, x0: x0 * 0 + a,
                                         lambda g, y: g(fl.ones(3, dtype=fl.float64)))[0])(f64(1.0))


# ---------------------------------------------------------------------------------------------------------------
# cg and bicgstab


def test_iterative_solvers_solve_and_differentiate_through_the_solution():
    rng = np.random.default_rng(3)
    n = 4
    m = rng.normal(size=(n, n))
    spd, gen = f64(m @ m.T + n * np.eye(n)), f64(rng.normal(size=(n, n)) + 3 * np.eye(n))
    b = f64(rng.normal(size=n))
    for solver, a in ((fl.linalg.cg, spd), (fl.linalg.bicgstab, gen)):
        x, info = solver(a, b, tol=1e-12)
        assert info is None
        assert_allclose(x, np.linalg.solve(a.numpy(), b.numpy()), rtol=1e-9, atol=1e-12)
        x32, _ = solver(a.astype(fl.float32), b.astype(fl.float32))
        assert x32.dtype == fl.float32
        assert_allclose(x32, x, rtol=1e-4, atol=1e-5)
        loss = lambda a, b, s=solver: (s(a, b, tol=1e-13)[0] ** 3).sum()  # noqa: E731
        check_grads(loss, (a, b), order=1, modes=("fwd", "rev"), rtol=1e-6)
        # the backward pass solves one linear system: no residual per iteration, no reversed while_loop
        lin = fl.make_jaxpr(fl.grad(loss, argnums=1))(a, b)
        names = [e.prim.name for e in lin.jaxpr.eqns]
        assert names.count("custom_linear_solve") == 2 and "while" not in names
        assert len(fl.saved_residuals(loss, a, b)) <= 4
    # a matrix-free operator on a pytree, with a preconditioner
    d = f64(np.arange(1.0, 5.0))

    def op(t):
        return {"p": d * t["p"] + 0.1 * t["q"].sum(), "q": 2.0 * t["q"] + 0.1 * t["p"].sum()}

    rhs = {"p": f64(np.ones(4)), "q": f64([1.0, -1.0])}
    x, _ = fl.linalg.cg(op, rhs, tol=1e-13, M=lambda t: {"p": t["p"] / d, "q": t["q"] / 2.0})
    res = op(x)
    assert_allclose(res["p"], rhs["p"], rtol=1e-11)
    assert_allclose(res["q"], rhs["q"], rtol=1e-11, atol=1e-12)
    jit_x = fl.jit(lambda r: fl.linalg.cg(op, r, tol=1e-13)[0])(rhs)
    assert_allclose(jit_x["p"], x["p"], rtol=1e-10)


def test_cg_on_a_complex_hermitian_system():
    rng = np.random.default_rng(4)
    m = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    a = fl.asarray(m @ m.conj().T + 4 * np.eye(4))
    b = fl.asarray(rng.normal(size=4) + 1j * rng.normal(size=4))
    x, _ = fl.linalg.cg(a, b, tol=1e-13)
    assert_allclose(x, np.linalg.solve(a.numpy(), b.numpy()), rtol=1e-10)
    dx = fl.jvp(lambda b: fl.linalg.cg(a, b, tol=1e-13)[0], (b,), (b,))[1]
    assert_allclose(dx, x, rtol=1e-10)


def test_solver_argument_errors():
    b = f64([1.0, 2.0])
    with pytest.raises(ValueError, match="square matrix"):
        fl.linalg.cg(fl.ones((2, 3)), b)
    with pytest.raises(TypeError, match="floating-point"):
        fl.linalg.cg(fl.eye(2), fl.asarray([1, 2]))
    with pytest.raises(ValueError, match="tol"):
        fl.linalg.bicgstab(fl.eye(2), b, tol=-1.0)
    with pytest.raises(ValueError, match="x0 must have the structure"):
        fl.linalg.cg(fl.eye(2), b, x0=fl.zeros(3))
    with pytest.raises(TypeError, match="maxiter"):
        fl.linalg.cg(fl.eye(2), b, maxiter=2.5)


# ---------------------------------------------------------------------------------------------------------------
# The example and the docstrings


def test_example_script_runs(capsys):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import implicit_diff
    finally:
        sys.path.pop(0)
    implicit_diff.main()
    out = capsys.readouterr().out
    assert "fixed-point layer" in out and "Newton solve" in out and "conjugate gradients" in out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the checkify example finds a NaN on purpose
@pytest.mark.parametrize("module", ["callbacks", "checkify", "debug", "remat", "implicit", "solvers"])
def test_docstring_examples_run(module):
    mod = importlib.import_module(f"funclib.transforms.{module}")
    result = doctest.testmod(mod, extraglobs={"fl": fl, "np": np}, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result
