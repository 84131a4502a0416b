"""funclib.testing: the derivative checks catch wrong derivatives (and say where), the comparisons report the
worst element, and the Hypothesis strategies produce what they promise."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funclib as fl
from funclib import dtypes as D
from funclib.testing import (
    assert_allclose,
    assert_trees_allclose,
    check_adjoint,
    check_custom_rule,
    check_grads,
    check_jvp,
    check_vjp,
    default_tolerance,
)
from funclib.testing import strategies as fst


def _x(*vals):
    return fl.asarray(np.asarray(vals, np.float64))


# ---------------------------------------------------------------------------------------------------------------
# check_grads and friends on correct functions


def test_check_grads_passes_for_correct_derivatives():
    check_grads(lambda x: fl.sin(x) * x, (_x(0.5, 1.0, -2.0),), order=3)
    check_grads(lambda x, y: fl.exp(x) * y, (_x(0.1, 0.2), fl.tensor(3.0)), order=2)
    # pytrees in and out, float32 inputs (cast to float64 for the check), an integer argument held fixed
    check_grads(
        lambda p, k: {"a": p["w"] * fl.tanh(p["b"]), "b": [fl.sum(p["w"] ** 2) * k]},
        ({"w": fl.ones(3), "b": fl.tensor([0.1, 0.2, 0.3])}, fl.tensor(2)),
    )
    # complex inputs
    check_grads(lambda z: fl.exp(z) * z, (fl.asarray(np.array([0.3 + 0.4j, -1.0 + 0.1j])),), order=2)


def test_check_grads_in_one_mode_and_at_scale():
    check_grads(lambda x: fl.cumsum(x * x, axis=0), (fl.asarray(np.linspace(-1, 1, 80)),), modes=("rev",))
    check_grads(lambda x: fl.cumsum(x * x, axis=0), (fl.asarray(np.linspace(-1, 1, 80)),), modes=("fwd",))


def test_check_grads_rejects_bad_arguments():
    with pytest.raises(ValueError, match="order"):
        check_grads(fl.sin, (_x(1.0),), order=0)
    with pytest.raises(ValueError, match="modes"):
        check_grads(fl.sin, (_x(1.0),), modes=("forward",))


# ---------------------------------------------------------------------------------------------------------------
# ... and on wrong ones


def _wrong_at(index: int, scale: float = 1.5):
    """x**2 with a custom jvp that is wrong at one element only."""

    @fl.custom_jvp
    def sq(x):
        return x * x

    @sq.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        bump = np.ones(x.shape)
        bump[index] = scale
        return sq(x), 2.0 * x * t * fl.asarray(bump)

    return sq


WORST = re.compile(r"worst element at index \((\d+),\): expected (\S+), got (\S+)\n\s+abs error (\S+), rel error")


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_check_grads_catches_a_wrong_custom_derivative_and_names_the_worst_element(mode):
    x = _x(0.5, -1.0, 2.0, 0.25)
    with pytest.raises(AssertionError) as info:
        check_grads(_wrong_at(2), (x,), order=1, modes=(mode,))
    msg = str(info.value)
    assert ("JVP" if mode == "fwd" else "VJP") in msg and "finite differences" in msg, msg
    m = WORST.search(msg)
    assert m is not None, msg
    assert m.group(1) == "2", msg
    expected, got, abs_err = float(m.group(2)), float(m.group(3)), float(m.group(4))
    assert abs(got / expected - 1.5) < 1e-6 and abs(abs_err - abs(got - expected)) < 1e-3 * abs(expected), msg


def test_check_grads_catches_a_wrong_second_derivative():
    @fl.custom_jvp
    def cube(x):
        return x * x * x

    @cube.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        # right at first order, but its own derivative is zero: the second order must catch it
        return cube(x), 3.0 * fl.stop_gradient(x * x) * t

    x = _x(0.5, 1.5)
    check_grads(cube, (x,), order=1)
    with pytest.raises(AssertionError, match="of JVP of"):
        check_grads(cube, (x,), order=2, modes=("fwd",))
    with pytest.raises(AssertionError, match="of VJP of"):
        check_grads(cube, (x,), order=2, modes=("rev",))


def test_check_vjp_catches_a_wrong_rule_along_a_random_direction_for_large_inputs():
    x = fl.asarray(np.linspace(0.1, 1.0, 60))  # above the element-by-element limit
    with pytest.raises(AssertionError, match=r"<vjp\(u\), v> against <u, J v>"):
        check_vjp(fl.sin, lambda x: (fl.sin(x), lambda u: (fl.cos(x) * u * 1.01,)), (x,))
    check_vjp(fl.sin, lambda x: (fl.sin(x), lambda u: (fl.cos(x) * u,)), (x,))


def test_check_jvp_catches_a_wrong_primal_output():
    with pytest.raises(AssertionError, match="primal output"):
        check_jvp(fl.sin, lambda p, t: (fl.cos(p[0]), fl.cos(p[0]) * t[0]), (_x(0.3),))


def test_check_adjoint_catches_inconsistent_modes_and_transposes():
    a = np.array([[1.0, 2.0], [0.5, -1.0]])

    @fl.custom_vjp
    def apply_a(x):
        return fl.asarray(a) @ x

    # the cotangent should be a.T @ u; a @ u disagrees with forward mode (which differentiates the primal)
    apply_a.defvjp(lambda x: (apply_a(x), None), lambda _, u: (fl.asarray(a) @ u,))
    with pytest.raises(AssertionError, match="adjointness"):
        check_adjoint(apply_a, (_x(1.0, 2.0),))
    check_adjoint(lambda x: fl.asarray(a) @ x, (_x(1.0, 2.0),))
    check_adjoint(lambda x: fl.asarray(a) @ x, (_x(1.0, 2.0),), linear=True)


# ---------------------------------------------------------------------------------------------------------------
# check_custom_rule


def test_check_custom_rule_accepts_correct_rules_and_catches_wrong_ones():
    @fl.custom_jvp
    def f(x):
        return fl.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), fl.cos(p[0]) * t[0]))
    check_custom_rule(f, (_x(0.5, 1.0),))

    @fl.custom_vjp
    def g(x, y):
        return x * fl.exp(y)

    g.defvjp(lambda x, y: (g(x, y), (x, y)), lambda r, u: (u * fl.exp(r[1]), u * r[0] * fl.exp(r[1])))
    check_custom_rule(g, (_x(0.5, 1.0), _x(0.1, -0.3)))

    g.defvjp(lambda x, y: (g(x, y), (x, y)), lambda r, u: (u * fl.exp(r[1]), u * fl.exp(r[1])))
    with pytest.raises(AssertionError, match=r"custom rule of g: VJP vs the VJP of the primal function"):
        check_custom_rule(g, (_x(0.5, 1.0), _x(0.1, -0.3)))

    with pytest.raises(AssertionError, match=r"custom rule of h: JVP"):
        check_custom_rule(_named(_wrong_at(0), "h"), (_x(0.5, 1.0),), modes=("fwd",))


def _named(f, name):
    f.__name__ = name
    return f


def test_check_custom_rule_requires_a_custom_function():
    with pytest.raises(TypeError, match="custom_jvp/custom_vjp"):
        check_custom_rule(fl.sin, (_x(1.0),))


# ---------------------------------------------------------------------------------------------------------------
# assert_allclose / assert_trees_allclose


def test_assert_allclose_reports_the_worst_element():
    assert_allclose(fl.tensor([1.0, 2.0]), [1.0, 2.0000001])
    with pytest.raises(AssertionError) as info:
        assert_allclose(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 2.1], [3.0, 4.5]]), rtol=0, atol=0.01)
    msg = str(info.value)
    assert "worst element at index (1, 1): expected 4.5, got 4" in msg and "2 of 4 elements differ" in msg, msg
    assert "abs error 0.5, rel error 0.111" in msg, msg


def test_assert_allclose_shapes_dtypes_nans_and_integers():
    with pytest.raises(AssertionError, match=r"shapes differ: actual \(2,\), desired \(3,\)"):
        assert_allclose(np.zeros(2), np.zeros(3))
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_allclose(fl.zeros(2), np.zeros(2), check_dtype=True)
    assert_allclose(np.array([np.nan, np.inf, 1.0]), np.array([np.nan, np.inf, 1.0]))
    with pytest.raises(AssertionError, match="expected nan"):
        assert_allclose(np.array([0.0]), np.array([np.nan]))
    with pytest.raises(AssertionError):
        assert_allclose(np.array([np.inf]), np.array([-np.inf]))
    with pytest.raises(AssertionError, match="expected 9223372036854775807, got 9223372036854775806"):
        assert_allclose(np.array([2**63 - 2]), np.array([2**63 - 1]))
    with pytest.raises(AssertionError, match="equal_nan|expected nan"):
        assert_allclose(np.array([np.nan]), np.array([np.nan]), equal_nan=False)
    # defaults follow the less precise dtype
    assert default_tolerance(fl.bfloat16) > default_tolerance(fl.float32) > default_tolerance(fl.float64)
    assert_allclose(fl.asarray(np.array([1.0, 3.0], D.bfloat16)), np.array([1.001, 3.01]))
    assert default_tolerance(fl.int32) == (0.0, 0.0)


def test_assert_trees_allclose_shows_both_structures_and_the_leaf():
    assert_trees_allclose({"w": fl.ones(2), "b": [fl.zeros(1)]}, {"w": np.ones(2), "b": [np.zeros(1)]})
    with pytest.raises(AssertionError) as info:
        assert_trees_allclose({"w": fl.ones(2)}, [fl.ones(2)])
    msg = str(info.value)
    assert "structures differ" in msg and "{'w': *}" in msg and "[*]" in msg, msg
    with pytest.raises(AssertionError, match=r"leaf \['b'\]\[1\]"):
        assert_trees_allclose({"b": [fl.zeros(1), fl.ones(1)]}, {"b": [fl.zeros(1), fl.zeros(1)]})


# ---------------------------------------------------------------------------------------------------------------
# strategies


@settings(max_examples=30)
@given(st.data())
def test_tensors_have_the_promised_dtype_shape_and_elements(data):
    dtype = data.draw(fst.dtypes())
    shape = data.draw(fst.shapes(max_dims=3, max_side=3))
    x = data.draw(fst.tensors(dtype=dtype, shape=shape))
    assert isinstance(x, fl.Tensor) and x.dtype == dtype and x.shape == shape
    v = np.asarray(x)
    if dtype in D.INEXACT:
        assert np.all(np.isfinite(v))
        assert np.all(np.abs(v.astype(np.complex128)) ** 2 < np.inf)
    y = data.draw(fst.tensors(dtype=fl.float64, shape=(4,), elements=fst.floats_for(fl.float64, -1.0, 0.5)))
    assert np.all((np.asarray(y) >= -1.0) & (np.asarray(y) <= 0.5))


@settings(max_examples=30)
@given(st.data())
def test_floats_for_are_exact_finite_and_bounded(data):
    dtype = data.draw(st.sampled_from([fl.float16, fl.bfloat16, fl.float32, fl.float64]))
    v = data.draw(fst.floats_for(dtype, -3.3, 1.1))
    assert -3.3 <= v <= 1.1 and np.isfinite(v)
    assert float(np.asarray(v, dtype)) == v, f"{v} is not exactly representable in {dtype}"
    w = data.draw(fst.floats_for(dtype))
    assert float(np.asarray(w, dtype)) ** 2 < float(fl.finfo(dtype).max)
    z = data.draw(fst.floats_for(fl.complex64, -1.0, 1.0))
    assert isinstance(z, complex) and abs(z.real) <= 1 and abs(z.imag) <= 1
    i = data.draw(fst.elements_for(fl.uint8))
    assert 0 <= i <= 15


@settings(max_examples=30)
@given(st.data())
def test_shape_strategies(data):
    s = data.draw(fst.shapes(min_dims=1, max_dims=2, min_side=2, max_side=3))
    assert 1 <= len(s) <= 2 and all(2 <= d <= 3 for d in s)
    b = data.draw(fst.broadcastable_shapes(s))
    assert np.broadcast_shapes(s, b) in (s, np.broadcast_shapes(b, s))
    np.broadcast_shapes(s, b)
    shapes = data.draw(fst.mutually_broadcastable_shapes(3))
    assert len(shapes) == 3
    np.broadcast_shapes(*shapes)


@settings(max_examples=30)
@given(st.data())
def test_pytrees_of_and_dtypes(data):
    tree = data.draw(fst.pytrees_of(fst.tensors(shape=(2,)), max_leaves=5))
    leaves = fl.tree.leaves(tree)
    assert len(leaves) <= 5 and all(isinstance(x, fl.Tensor) and x.shape == (2,) for x in leaves)
    d = data.draw(fst.dtypes(("bool", "unsigned integer")))
    assert d == fl.bool or d in D.UNSIGNED
    assert data.draw(fst.dtypes("complex floating")) in D.COMPLEX


def test_strategy_arguments_are_checked():
    with pytest.raises(ValueError, match="unknown kind"):
        fst.dtypes("floats")
    with pytest.raises(ValueError, match="not a floating-point dtype"):
        fst.floats_for(fl.int32)
    with pytest.raises(ValueError, match="need 0 <= min_dims <= max_dims"):
        fst.shapes(min_dims=3, max_dims=1)


@pytest.mark.parametrize("module", ["funclib.testing", "funclib.testing.strategies"])
def test_docstring_examples_run(module):
    import doctest
    import importlib
    import warnings

    import funclib.testing as ft

    mod = importlib.import_module(module)
    globs = {"fl": fl, "np": np, "fst": fst, **{k: getattr(ft, k) for k in ft.__all__}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Hypothesis warns about .example() outside an interactive session
        result = doctest.testmod(mod, extraglobs=globs, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 5, result


def test_strategies_is_an_attribute_of_funclib_testing():
    import sys

    import funclib.testing as T

    saved = sys.modules.pop("funclib.testing.strategies")
    T.__dict__.pop("strategies", None)
    try:
        assert hasattr(T.strategies, "tensors")  # loaded on first access, without a separate import
    finally:
        sys.modules["funclib.testing.strategies"] = saved
        T.strategies = saved
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        T.nope  # noqa: B018
