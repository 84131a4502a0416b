"""Autodiff semantics: transforms' API, define-by-run, nesting, custom rules, numerical care, properties."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funclib as fl
from funclib.errors import ConcretizationError, DTypeError


def f64(x):
    return fl.asarray(np.asarray(x, dtype=np.float64))


def test_grad_basic_and_value_and_grad():
    x = f64([0.3, -1.2, 2.0])
    g = fl.grad(lambda x: (fl.sin(x) ** 2).sum())(x)
    np.testing.assert_allclose(g.numpy(), np.sin(2 * x.numpy()), rtol=1e-12)
    v, g2 = fl.value_and_grad(lambda x: (x * x).sum())(x)
    assert float(v) == pytest.approx(float((x.numpy() ** 2).sum()))
    np.testing.assert_allclose(g2.numpy(), 2 * x.numpy())


def test_argnums_tuple_and_argnames():
    def f(a, b, *, c):
        return (a * b + c * c).sum()

    a, b, c = f64([1.0, 2.0]), f64([3.0, 4.0]), f64([0.5, 1.5])
    ga, gb = fl.grad(f, argnums=(0, 1))(a, b, c=c)
    np.testing.assert_allclose(ga.numpy(), b.numpy())
    np.testing.assert_allclose(gb.numpy(), a.numpy())
    gc = fl.grad(f, argnames="c")(a, b, c=c)
    np.testing.assert_allclose(gc.numpy(), 2 * c.numpy())
    (pos, kw) = fl.grad(f, argnums=(0,), argnames=("c",))(a, b, c=c)
    np.testing.assert_allclose(pos[0].numpy(), b.numpy())
    np.testing.assert_allclose(kw["c"].numpy(), 2 * c.numpy())


def test_has_aux_and_pytrees():
    params = {"w": f64([[1.0, 2.0], [3.0, 4.0]]), "b": f64([0.5, -0.5])}
    x = f64([1.0, -1.0])

    def loss(p, x):
        y = p["w"] @ x + p["b"]
        return (y * y).sum(), {"y": y}

    g, aux = fl.grad(loss, has_aux=True)(params, x)
    assert set(g) == {"w", "b"}
    y = params["w"].numpy() @ x.numpy() + params["b"].numpy()
    np.testing.assert_allclose(g["b"].numpy(), 2 * y)
    np.testing.assert_allclose(g["w"].numpy(), 2 * np.outer(y, x.numpy()))
    np.testing.assert_allclose(aux["y"].numpy(), y)
    assert not isinstance(aux["y"], fl.Tracer)


def test_grad_errors_are_clear():
    with pytest.raises(TypeError, match="scalar output"):
        fl.grad(lambda x: x * 2)(f64([1.0, 2.0]))
    with pytest.raises(DTypeError, match="int64"):
        fl.grad(lambda x: (x * 2).sum())(fl.tensor([1, 2]))
    with pytest.raises(ValueError, match="argnums"):
        fl.grad(lambda x: x.sum(), argnums=3)(f64([1.0]))


def test_define_by_run_control_flow():
    def f(x):
        if x > 0:  # concrete under grad
            return x * x
        return -x * 3.0

    assert float(fl.grad(f)(f64(2.0))) == pytest.approx(4.0)
    assert float(fl.grad(f)(f64(-2.0))) == pytest.approx(-3.0)

    def recurse(x, n):
        if n == 0:
            return x
        return fl.sin(recurse(x, n - 1))

    x0 = 0.7
    d = float(fl.grad(lambda x: recurse(x, 3))(f64(x0)))
    a = math.sin(x0)
    b = math.sin(a)
    assert d == pytest.approx(math.cos(b) * math.cos(a) * math.cos(x0), rel=1e-12)

    def loop(x):
        acc = x
        for _ in range(int(x.item() * 0) + 4):
            acc = acc * x
            if float(acc) > 100:
                break
        return acc

    assert float(fl.grad(loop)(f64(1.5))) == pytest.approx(5 * 1.5**4)


def test_no_perturbation_confusion():
    out = fl.grad(lambda x: x * fl.grad(lambda y: x + y)(1.0))(2.0)
    assert float(out) == 1.0
    # the classic: d/dx [x * d/dy (x * y)] = 2x
    assert float(fl.grad(lambda x: x * fl.grad(lambda y: x * y)(3.0))(f64(1.5))) == pytest.approx(3.0)


@pytest.mark.parametrize(
    "fn,derivs",
    [
        (fl.sin, [math.cos, lambda x: -math.sin(x), lambda x: -math.cos(x), math.sin]),
        (fl.exp, [math.exp] * 4),
        (lambda x: x**5, [lambda x: 5 * x**4, lambda x: 20 * x**3, lambda x: 60 * x**2, lambda x: 120 * x]),
        (fl.log, [lambda x: 1 / x, lambda x: -1 / x**2, lambda x: 2 / x**3, lambda x: -6 / x**4]),
    ],
)
def test_nested_grad_to_order_four(fn, derivs):
    x0 = 0.8
    f = fn
    for k, d in enumerate(derivs):
        f = fl.grad(f)
        assert float(f(f64(x0))) == pytest.approx(d(x0), rel=1e-10), f"order {k + 1}"


def test_jvp_linearize_vjp_agree():
    def f(x):
        return fl.tanh(x) * fl.exp(x[::-1])

    x = f64([0.1, 0.2, -0.4])
    v = f64([1.0, -2.0, 0.5])
    y, jv = fl.jvp(f, (x,), (v,))
    y2, f_jvp = fl.linearize(f, x)
    np.testing.assert_allclose(f_jvp(v).numpy(), jv.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y2.numpy(), y.numpy())
    u = f64([0.3, 0.7, -1.1])
    _, f_vjp = fl.vjp(f, x)
    (ju,) = f_vjp(u)
    (ju2,) = f_vjp(u)  # vjp_fn can be called many times
    assert float((u * jv).sum()) == pytest.approx(float((ju * v).sum()), rel=1e-12)
    np.testing.assert_array_equal(ju.numpy(), ju2.numpy())


def test_integer_outputs_carry_zero_tangents():
    x = f64([1.5, -2.5])
    (_, t) = fl.jvp(lambda x: fl.argmax(x), (x,), (fl.ones_like(x),))
    assert t.dtype == fl.int64 and int(t) == 0
    g = fl.grad(lambda x: (x * fl.astype(x > 0, fl.float64)).sum())(x)
    np.testing.assert_allclose(g.numpy(), [1.0, 0.0])


def test_holomorphic_and_complex_convention():
    z = fl.asarray(np.array(1.0 + 2.0j, dtype=np.complex128))
    g = fl.grad(lambda z: z * z, holomorphic=True)(z)
    assert complex(g) == pytest.approx(2 * (1 + 2j))
    with pytest.raises(DTypeError, match="holomorphic"):
        fl.grad(lambda z: z * z)(z)
    # real-valued function of a complex input: JAX's convention gives conj of the ascent direction
    g2 = fl.grad(lambda z: fl.real(z * fl.conj(z)))(z)
    assert complex(g2) == pytest.approx(2 * (1 - 2j))


def test_stop_gradient_and_linear_transpose():
    assert float(fl.grad(lambda x: x * fl.stop_gradient(x))(f64(3.0))) == 3.0
    t = fl.linear_transpose(lambda x: (2.0 * x[::-1], x.sum()), f64([1.0, 2.0, 3.0]))
    (ct,) = t((f64([1.0, 0.0, 0.0]), f64(1.0)))
    np.testing.assert_allclose(ct.numpy(), [1.0, 1.0, 3.0])


def test_checkpoint_matches_plain_grad():
    def body(x):
        return fl.sin(fl.cos(x) * x)

    x = f64([0.3, 1.1])
    g1 = fl.grad(lambda x: fl.checkpoint(body)(x).sum())(x)
    g2 = fl.grad(lambda x: body(x).sum())(x)
    np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-12)
    h1 = fl.hessian(lambda x: fl.checkpoint(body)(x).sum())(x)
    h2 = fl.hessian(lambda x: body(x).sum())(x)
    np.testing.assert_allclose(h1.numpy(), h2.numpy(), rtol=1e-10)


def test_custom_jvp_everywhere():
    @fl.custom_jvp
    def softplus(x):
        return fl.log1p(fl.exp(x))

    @softplus.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), fl.sigmoid(x) * t

    x = f64([-1.0, 0.0, 3.0])
    g = fl.grad(lambda x: softplus(x).sum())(x)
    np.testing.assert_allclose(g.numpy(), 1 / (1 + np.exp(-x.numpy())), rtol=1e-12)
    gv = fl.vmap(fl.grad(softplus))(x)
    np.testing.assert_allclose(gv.numpy(), g.numpy(), rtol=1e-12)
    gj = fl.jit(fl.grad(lambda x: softplus(x).sum()))(x)
    np.testing.assert_allclose(gj.numpy(), g.numpy(), rtol=1e-12)
    h = fl.hessian(lambda x: softplus(x).sum())(x)
    s = 1 / (1 + np.exp(-x.numpy()))
    np.testing.assert_allclose(np.diag(h.numpy()), s * (1 - s), rtol=1e-10)


def test_custom_vjp_forward_mode_falls_back_to_primal():
    @fl.custom_vjp
    def clip_gradient(x):
        return fl.sin(x)

    clip_gradient.defvjp(lambda x: (fl.sin(x), (x,)), lambda res, g: (fl.clip(g, -0.1, 0.1),))
    x = f64([0.5])
    assert float(fl.grad(lambda x: clip_gradient(x).sum())(x)) == pytest.approx(0.1)
    _, t = fl.jvp(clip_gradient, (x,), (f64([1.0]),))
    assert float(t[0]) == pytest.approx(math.cos(0.5))  # derivative of the primal function
    j = fl.jacfwd(clip_gradient)(x)
    assert float(j[0, 0]) == pytest.approx(math.cos(0.5))
    gv = fl.vmap(fl.grad(lambda x: clip_gradient(x)))(f64([0.5, 1.0]))
    np.testing.assert_allclose(gv.numpy(), [0.1, 0.1])


def test_custom_vjp_nondiff_argnums():
    def f(n, x):
        return x**n

    cf = fl.custom_vjp(f, nondiff_argnums=(0,))
    cf.defvjp(lambda n, x: (x**n, (x,)), lambda n, res, g: (g * n * res[0] ** (n - 1),))
    assert float(fl.grad(lambda x: cf(3, x))(f64(2.0))) == pytest.approx(12.0)


def _vjp_with_bwd(bwd, fun=None):
    @fl.custom_vjp
    def f(x, y):
        return fl.sin(x) * fl.sum(y["w"])

    f.defvjp(lambda x, y: (f(x, y), (x, y)), bwd)
    return f


def _each_mode(f, x, y):
    """d/d(x, y["w"]) eagerly, under jit and under vmap (each must check bwd's output the same way)."""

    def loss(x, w):
        return f(x, {"w": w, "n": y["n"]}).sum()

    g = fl.grad(loss, argnums=(0, 1))
    yield lambda: g(x, y["w"])
    yield lambda: fl.jit(g)(x, y["w"])
    yield lambda: fl.vmap(g, in_axes=(0, None))(fl.stack([x, x]), y["w"])


class TestCustomVJPChecksBwd:
    """bwd's cotangents must have the structure, shapes and dtypes of the primal inputs (as JAX checks)."""

    x = fl.asarray(np.linspace(0.1, 0.3, 3, dtype=np.float32))
    y = {"w": fl.ones((2,)), "n": fl.asarray(np.arange(2))}

    def test_a_wrong_shape_names_the_argument_and_both_avals(self):
        f = _vjp_with_bwd(lambda r, g: (fl.ones((4, 3)), {"w": fl.ones(2), "n": None}))
        for run in _each_mode(f, self.x, self.y):
            with pytest.raises(ValueError, match=r"argument 0 \('x'\) is f32\[4,3\], but that input is f32\[3\]"):
                run()
        f = _vjp_with_bwd(lambda r, g: (g, {"w": fl.ones(3), "n": None}))
        for run in _each_mode(f, self.x, self.y):
            with pytest.raises(ValueError, match=r"argument 1 \('y'\)\['w'\] is f32\[3\], but that input is f32\[2\]"):
                run()

    def test_a_wrong_dtype_names_the_cast(self):
        f = _vjp_with_bwd(lambda r, g: (g.astype(fl.float64), None))
        for run in _each_mode(f, self.x, self.y):
            with pytest.raises(DTypeError, match=r"f64\[3\], but that input is f32\[3\].*astype\(fl.float32\)"):
                run()

    def test_a_wrong_structure_or_count_is_a_type_error(self):
        f = _vjp_with_bwd(lambda r, g: (g, [fl.ones(2), None]))
        with pytest.raises(TypeError, match=r"argument 1 \('y'\) has structure .* but the input has"):
            fl.grad(lambda x, y: f(x, y).sum())(self.x, self.y)
        f = _vjp_with_bwd(lambda r, g: (g, {"w": {"deep": fl.ones(2)}, "n": None}))
        with pytest.raises(TypeError, match="cotangent for argument 1"):
            fl.grad(lambda x, y: f(x, y).sum())(self.x, self.y)
        f = _vjp_with_bwd(lambda r, g: (g,))
        with pytest.raises(TypeError, match=r"one cotangent per differentiable argument \(2\), got tuple of length 1"):
            fl.grad(lambda x, y: f(x, y).sum())(self.x, self.y)

        @fl.custom_vjp
        def h(x):
            return x

        h.defvjp(lambda x: (x, None), lambda r, g: g)
        with pytest.raises(TypeError, match=r"return \(g,\)"):
            fl.grad(lambda x: h(x).sum())(self.x)

    def test_none_is_zero_and_integer_inputs_take_anything(self):
        def bwd(r, g):
            x, y = r
            return fl.cos(x) * g * fl.sum(y["w"]), {"w": None, "n": fl.ones(7)}  # n is integer: ignored

        f = _vjp_with_bwd(bwd)
        for run in _each_mode(f, self.x, self.y):
            gx, gw = run()
            assert not np.any(gw.numpy())
            np.testing.assert_allclose(gx.numpy().reshape(-1, 3)[0], 2 * np.cos(self.x.numpy()), rtol=1e-6)
        f = _vjp_with_bwd(lambda r, g: (None, None))
        for run in _each_mode(f, self.x, self.y):
            assert not any(np.any(g.numpy()) for g in run())

    def test_a_python_scalar_takes_the_input_dtype_and_nondiff_args_keep_positions(self):
        def f(n, x):
            return x * n

        cf = fl.custom_vjp(f, nondiff_argnums=(0,))
        cf.defvjp(lambda n, x: (x * n, None), lambda n, r, g: (float(n),))
        assert float(fl.grad(lambda x: cf(3.0, x))(f64(2.0))) == 3.0
        cf.defvjp(lambda n, x: (x * n, None), lambda n, r, g: (fl.ones(2),))
        with pytest.raises(ValueError, match=r"argument 1 \('x'\) is f32\[2\], but that input is f64\[\]"):
            fl.grad(lambda x: cf(3.0, x))(f64(2.0))


class TestNumericalCare:
    def test_where_sqrt_log_at_zero(self):
        assert float(fl.grad(lambda x: fl.where(x > 0, fl.sqrt(x), 0.0))(0.0)) == 0.0
        with np.errstate(divide="ignore"):
            assert float(fl.grad(lambda x: fl.where(x > 0, fl.log(x), 0.0))(0.0)) == 0.0
        assert float(fl.grad(fl.grad(lambda x: fl.where(x > 0, fl.sqrt(x), 0.0)))(0.0)) == 0.0

    def test_subgradient_conventions(self):
        assert float(fl.grad(fl.abs)(0.0)) == 0.0
        assert float(fl.grad(lambda x: fl.maximum(x, 0.0))(0.0)) == 0.5
        assert float(fl.grad(lambda x: fl.minimum(x, 0.0))(0.0)) == 0.5
        assert float(fl.grad(fl.relu)(0.0)) == 0.0
        g = fl.grad(lambda x: fl.max(x))(fl.tensor([1.0, 3.0, 3.0]))
        np.testing.assert_allclose(g.numpy(), [0.0, 0.5, 0.5])

    @pytest.mark.parametrize(
        "fn",
        [
            lambda x: fl.logsumexp(x),
            lambda x: fl.softmax(x)[0],
            lambda x: fl.log_softmax(x)[1],
            lambda x: fl.log1p(fl.abs(x)).sum(),
            lambda x: fl.expm1(-fl.abs(x)).sum(),
            lambda x: fl.sigmoid(x).sum(),
            lambda x: fl.softplus(x).sum(),
        ],
    )
    def test_stable_for_large_inputs(self, fn):
        x = fl.tensor([1e4, -1e4, 0.0])
        g = fl.grad(fn)(x)
        assert g.dtype == fl.float32
        assert np.all(np.isfinite(g.numpy())), g


@settings(max_examples=30, deadline=None)
@given(
    ops=st.lists(
        st.sampled_from(["sin", "tanh", "mul", "add_c", "exp_neg", "square", "rev", "cumsum"]), min_size=1, max_size=6
    ),
    data=st.lists(st.floats(-2, 2), min_size=4, max_size=4),
)
def test_random_programs_grad_matches_finite_differences(ops, data):
    def f(x):
        h = x
        for op in ops:
            if op == "sin":
                h = fl.sin(h)
            elif op == "tanh":
                h = fl.tanh(h)
            elif op == "mul":
                h = h * x
            elif op == "add_c":
                h = h + 0.5
            elif op == "exp_neg":
                h = fl.exp(-(h * h))
            elif op == "square":
                h = h * h
            elif op == "rev":
                h = h[::-1]
            elif op == "cumsum":
                h = fl.cumulative_sum(h)
        return (h * fl.arange(1.0, 5.0, dtype=fl.float64)).sum()

    x = f64(data)
    g = fl.grad(f)(x).numpy()
    eps = 1e-6
    fd = np.array(
        [
            (
                float(f(f64(np.where(np.arange(4) == i, x.numpy() + eps, x.numpy()))))
                - float(f(f64(np.where(np.arange(4) == i, x.numpy() - eps, x.numpy()))))
            )
            / (2 * eps)
            for i in range(4)
        ]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)
    v = f64([0.3, -0.2, 0.1, 0.5])
    _, jv = fl.jvp(f, (x,), (v,))
    assert float(jv) == pytest.approx(float((g * v.numpy()).sum()), rel=1e-9, abs=1e-12)


def test_tracer_in_bool_under_jit_names_argument():
    with pytest.raises(ConcretizationError, match="'x'"):
        fl.jit(lambda x: x if x.sum() > 0 else -x)(fl.ones(3))


def test_softmax_and_logsumexp_agree_across_transforms():
    # eagerly and under grad the stabilizing shift comes from the concrete values; under jit and vmap it is traced
    x = fl.asarray(np.array([[0.5, -1.0, 3.0], [-np.inf, -np.inf, -np.inf], [1e4, 0.0, -1e4], [2.0, 2.0, 2.0]]))
    with np.errstate(divide="ignore"):  # log(0) for the row of -inf
        want = np.array([np.logaddexp.reduce(r) for r in np.asarray(x)])
        np.testing.assert_allclose(fl.logsumexp(x, axis=1), want)
        np.testing.assert_allclose(fl.jit(lambda a: fl.logsumexp(a, axis=1))(x), want)
        np.testing.assert_allclose(fl.vmap(lambda r: fl.logsumexp(r, axis=0))(x), want)
    fin = x[np.array([0, 2, 3])]
    g = fl.grad(lambda a: fl.sum(fl.logsumexp(a, axis=1)))(fin)
    np.testing.assert_allclose(g, fl.softmax(fin, axis=1), rtol=1e-12)
    np.testing.assert_allclose(fl.jit(fl.grad(lambda a: fl.sum(fl.logsumexp(a, axis=1))))(fin), g, rtol=1e-12)
    np.testing.assert_allclose(fl.vmap(fl.grad(lambda r: fl.logsumexp(r, axis=0)))(fin), g, rtol=1e-12)
    s = np.asarray(fl.softmax(fin[0], axis=0))
    h = fl.hessian(lambda r: fl.logsumexp(r, axis=0))(fin[0])
    np.testing.assert_allclose(h, np.diag(s) - np.outer(s, s), atol=1e-12)


def test_concrete_operations_inside_a_transform_respect_outer_traces():
    # under jvp/grad an operation on values without tangents runs eagerly only when nothing but eager work is below;
    # an outer vmap (or jvp) still sees its own tracers
    x0 = fl.asarray(np.array([1.0, 2.0, 3.0]))
    a = fl.asarray(np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]))
    got = fl.vmap(lambda r: fl.grad(lambda x: fl.sum(x * fl.exp(fl.max(r))))(x0))(a)
    np.testing.assert_allclose(got, np.exp(np.asarray(a).max(1))[:, None] * np.ones(3))
    # d/dx of x * exp(c x) with c a constant under an inner grad and x traced by an outer one
    f = lambda x: fl.grad(lambda y: fl.sum(y * fl.exp(fl.stop_gradient(y) * x)))(fl.ones(3))  # noqa: E731
    np.testing.assert_allclose(fl.grad(lambda x: fl.sum(f(x)))(fl.asarray(0.5)), 3 * np.exp(0.5))


# ---------------------------------------------------------------------------------------------------------------
# Leaving funclib under a derivative transform: an error, never a silent zero


_EXPORTS = {
    "np.sin": lambda x: np.sin(x),
    "np.asarray": lambda x: np.asarray(x),
    "np.array": lambda x: np.array(x, dtype=np.float64),
    ".numpy()": lambda x: x.numpy(),
    ".tolist()": lambda x: x.tolist(),
    "np.from_dlpack": lambda x: np.from_dlpack(x),
    "fl.asarray(x.numpy())": lambda x: fl.asarray(x.numpy()),
}


@pytest.mark.parametrize("how", sorted(_EXPORTS))
@pytest.mark.parametrize("transform", ["grad", "jvp", "vjp", "jacrev", "hessian"])
def test_converting_a_value_with_a_derivative_to_numpy_raises(how, transform):
    export = _EXPORTS[how]
    x = f64([0.5, 1.5])

    def f(x):
        return fl.sum(fl.asarray(export(x)) * 1.0)

    run = {
        "grad": lambda: fl.grad(f)(x),
        "jvp": lambda: fl.jvp(f, (x,), (f64([1.0, 1.0]),)),
        "vjp": lambda: fl.vjp(f, x),
        "jacrev": lambda: fl.jacrev(f)(x),
        "hessian": lambda: fl.hessian(f)(x),
    }[transform]
    with pytest.raises(ConcretizationError) as e:
        run()
    msg = str(e.value)
    assert "carries a derivative" in msg and "fl.stop_gradient(x)" in msg and "x.detach()" in msg, msg


def test_scalar_conversions_and_comparisons_still_work_under_grad():
    def f(x):
        s = x.sum()
        assert isinstance(bool(s > 0), bool) and isinstance(float(s), float) and isinstance(s.item(), float)
        n = int(x[0] * 0 + 2)
        scale = 2.0 if s > 0 else -1.0
        return scale * (x**n).sum()

    np.testing.assert_allclose(fl.grad(f)(f64([1.0, 2.0])).numpy(), [4.0, 8.0])
    np.testing.assert_allclose(fl.grad(f)(f64([-1.0, -2.0])).numpy(), [2.0, 4.0])


def test_detached_values_convert_to_numpy_under_grad():
    x = f64([0.5, 1.5])
    for cut in (fl.stop_gradient, lambda v: v.detach()):
        g = fl.grad(lambda x: (x * fl.asarray(np.sin(cut(x).numpy()))).sum())(x)  # noqa: B023
        np.testing.assert_allclose(g.numpy(), np.sin(x.numpy()), rtol=1e-15)
    assert float(fl.grad(lambda x: x * x.detach())(f64(3.0))) == 3.0
    y = f64([1.0, 2.0])
    assert y.detach() is y  # eagerly there is nothing to cut


@given(st.lists(st.floats(-3, 3), min_size=1, max_size=5))
def test_no_grad_cuts_derivatives_in_every_transform(vals):
    x = f64(vals)

    def f(x):
        with fl.no_grad():
            c = fl.sin(x) * 2.0  # a constant for differentiation
        return (x * c).sum()

    want = 2.0 * np.sin(x.numpy())
    np.testing.assert_allclose(fl.grad(f)(x).numpy(), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fl.jit(fl.grad(f))(x).numpy(), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fl.grad(fl.jit(f))(x).numpy(), want, rtol=1e-13, atol=1e-15)
    _, t = fl.jvp(f, (x,), (fl.ones_like(x),))
    assert float(t) == pytest.approx(float(want.sum()), rel=1e-12, abs=1e-14)
    xs = fl.stack([x, 2.0 * x])
    np.testing.assert_allclose(fl.vmap(fl.grad(f))(xs).numpy()[1], 2.0 * np.sin(2.0 * x.numpy()), rtol=1e-13,
                               atol=1e-15)
    np.testing.assert_allclose(fl.grad(lambda a: fl.vmap(f)(a).sum())(xs).numpy()[0], want, rtol=1e-13, atol=1e-15)


def test_no_grad_is_free_eagerly_and_lets_inner_transforms_differentiate():
    x = f64([1.0, 2.0])
    with fl.no_grad():
        from funclib.core import current_trace

        assert current_trace() is None
        # a transform started inside the block differentiates as usual
        np.testing.assert_allclose(fl.grad(lambda a: (a * a).sum())(x).numpy(), [2.0, 4.0])

    def outer(a):
        with fl.no_grad():
            inner = fl.grad(lambda b: (b * b * a).sum())(a)  # derivative in b works, the one in a is cut
        return (inner * a).sum()

    np.testing.assert_allclose(fl.grad(outer)(x).numpy(), 2 * x.numpy() ** 2)

    @fl.no_grad()
    def stat(a):
        return fl.max(fl.abs(a))

    np.testing.assert_allclose(fl.grad(lambda a: (a / stat(a)).sum())(f64([1.0, -2.0])).numpy(), [0.5, 0.5])


def test_tensor_backward_explains_the_functional_equivalent():
    loss = f64([1.0]).sum()
    with pytest.raises(TypeError) as e:
        loss.backward()
    msg = str(e.value)
    assert "nn.value_and_grad(model, loss_fn)(model, x, y)" in msg and "optimizer.update(model, grads)" in msg


def test_linear_transpose_of_a_non_linear_function_names_the_primitive():
    from funclib.errors import NotLinearError

    x = f64([1.0, 2.0])
    cases = [
        (lambda x: fl.sin(x), x, r"applies 'sin' \(not linear\) to a value computed from the input"),
        (lambda x, y: x + fl.exp(y), (x, x), "applies 'exp' .* from input 1"),
        (lambda x: x * x, x, "multiply: both operands depend on the linear input"),
        (lambda x: 1.0 / x, x, "div: the denominator depends on the linear input"),
        (fl.jit(lambda x: fl.tanh(x) * 2.0), x, "applies 'tanh'"),  # inside a nested jaxpr
    ]
    for f, args, pattern in cases:
        args = args if isinstance(args, tuple) else (args,)
        with pytest.raises(NotLinearError, match="linear_transpose: the function is not linear in its input") as e:
            fl.linear_transpose(f, *args)(fl.ones_like(x))
        assert re.search(pattern, str(e.value)), str(e.value)
        assert "elementwise.py" not in str(e.value)


def test_jvp_dtype_mismatch_names_the_fix():
    with pytest.raises(DTypeError, match=r"tangent 0 has dtype float32 .*tangent\.astype\(fl\.float64\)"):
        fl.jvp(fl.sin, (f64([1.0]),), (fl.ones(1),))


def test_custom_vjp_rule_survives_jit_in_reverse_mode():
    # jit's JVP rule stages the tangent map that grad then transposes: custom_lin must be recorded there, or the
    # gradient silently becomes the primal function's derivative instead of bwd's
    @fl.custom_vjp
    def g(x):
        return fl.sin(x)

    g.defvjp(lambda x: (fl.sin(x), x), lambda res, ct: (-7.0 * ct,))
    x = fl.ones(2)
    want = [-7.0, -7.0]
    loss = lambda x: fl.sum(g(x))
    for got in (
        fl.grad(lambda x: fl.sum(fl.jit(g)(x)))(x),
        fl.grad(fl.jit(loss))(x),
        fl.jit(fl.grad(loss))(x),
        fl.vjp(fl.jit(g), x)[1](fl.ones(2))[0],
        fl.vmap(fl.grad(lambda x: fl.jit(g)(x)))(x),
        fl.grad(lambda x: fl.sum(fl.scan(lambda c, xi: (c + fl.jit(g)(xi), None), 0.0, x)[0]))(x),
    ):
        np.testing.assert_array_equal(got.numpy(), want)
    # forward mode still differentiates the primal function, jitted or not
    np.testing.assert_allclose(fl.jvp(fl.jit(g), (x,), (x,))[1].numpy(), np.cos(1.0) * np.ones(2), rtol=1e-6)
