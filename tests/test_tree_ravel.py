"""``fl.tree.ravel`` (a pytree as one vector and back, as JAX's ``ravel_pytree``) and leaf paths shown by key
(``p['w']``) in jit's retrace explanations and in the errors that name pytree leaves."""

from __future__ import annotations

import logging

import funclib.nn as nn
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funclib as fl
from funclib.errors import ConcretizationError, DTypeError, ShapeError

DTYPES = [fl.float32, fl.float64, fl.int32, fl.int64, fl.bool, fl.float16]


@st.composite
def trees(draw):
    n = draw(st.integers(0, 4))
    shapes = draw(st.lists(st.lists(st.integers(0, 3), max_size=2).map(tuple), min_size=n, max_size=n))
    kinds = draw(st.lists(st.sampled_from(DTYPES), min_size=n, max_size=n))
    rng = np.random.default_rng(n)
    leaves = [fl.asarray((rng.standard_normal(s) * 3).astype(d)) for s, d in zip(shapes, kinds)]
    return {"w": leaves[: n // 2], "b": tuple(leaves[n // 2 :])}


@settings(deadline=None)
@given(trees())
def test_ravel_round_trips_and_promotes_mixed_dtypes_as_jax(t):
    flat, unravel = fl.tree.ravel(t)
    leaves = fl.tree.leaves(t)
    assert flat.ndim == 1 and flat.shape[0] == sum(x.size for x in leaves)
    assert flat.dtype == (fl.result_type(*leaves) if leaves else fl.float32)
    back = unravel(flat)
    assert fl.tree.structure(back) == fl.tree.structure(t)
    for a, b in zip(fl.tree.leaves(back), leaves):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    if leaves:
        want = np.concatenate([np.asarray(x).astype(flat.dtype).ravel() for x in leaves])
        np.testing.assert_array_equal(flat, want)


def test_ravel_is_differentiable_both_ways_and_works_under_jit_and_vmap():
    params = {"w": fl.asarray([[1.0, 2.0], [3.0, 4.0]]), "b": fl.asarray([0.5, -1.0])}
    flat, unravel = fl.tree.ravel(params)
    np.testing.assert_array_equal(flat, [0.5, -1.0, 1.0, 2.0, 3.0, 4.0])  # dict keys in sorted order, as flatten

    def loss(v):
        p = unravel(v)
        return fl.sum(p["w"] ** 2) + fl.sum(p["b"] * 3.0)

    np.testing.assert_allclose(fl.grad(loss)(flat), [3.0, 3.0, 2.0, 4.0, 6.0, 8.0])
    g_tree = fl.grad(lambda p: fl.sum(fl.tree.ravel(p)[0] ** 2))(params)
    np.testing.assert_allclose(g_tree["w"], 2 * np.asarray(params["w"]))
    np.testing.assert_allclose(fl.jit(loss)(flat), loss(flat))
    batch = fl.stack([flat, 2 * flat])
    np.testing.assert_allclose(fl.vmap(lambda v: unravel(v)["b"])(batch), [[0.5, -1.0], [1.0, -2.0]])
    # a Hessian over all parameters at once, the reason ravel exists
    h = fl.hessian(loss)(flat)
    np.testing.assert_allclose(h, np.diag([0.0, 0.0, 2.0, 2.0, 2.0, 2.0]))


def test_mixed_dtypes_come_back_in_their_own_dtypes_and_int_leaves_get_no_gradient():
    t = {"n": fl.asarray([1, 2]), "x": fl.asarray([0.5], dtype=fl.float32)}
    flat, unravel = fl.tree.ravel(t)
    assert flat.dtype == fl.float32
    g = fl.grad(lambda v: fl.sum(unravel(v)["x"] * 2.0) + fl.sum(unravel(v)["n"].astype(fl.float32)))(flat)
    np.testing.assert_array_equal(g, [0.0, 0.0, 2.0])


def test_ravel_errors_name_the_expected_vector():
    flat, unravel = fl.tree.ravel({"a": fl.ones(3)})
    with pytest.raises(ShapeError, match=r"unravel: expected a vector of shape \(3,\)"):
        unravel(fl.ones(4))
    with pytest.raises(DTypeError, match="dtype float32.*got float64"):
        unravel(fl.ones(3, dtype=fl.float64))
    with pytest.raises(TypeError, match="tree.ravel: leaves must be tensors"):
        fl.tree.ravel({"a": "text"})
    empty, unravel_empty = fl.tree.ravel({})
    assert empty.shape == (0,) and unravel_empty(empty) == {}


def test_map_with_path_gives_key_paths():
    out = fl.tree.map_with_path(lambda p, x: fl.tree.keystr(p), {"w": fl.ones(1), "layers": [fl.ones(1)]})
    assert out == {"w": "['w']", "layers": ["['layers'][0]"]}


# ---------------------------------------------------------------------------------------------------------------
# leaf paths in explanations and errors


def test_retrace_explanations_name_leaves_by_key(caplog):
    f = fl.jit(lambda p, x: p["w"] * x + p["b"])
    old = fl.config.explain_retraces
    fl.config.explain_retraces = True
    try:
        f({"w": fl.ones(3), "b": fl.ones(3)}, fl.ones(3))
        with caplog.at_level(logging.WARNING, logger="funclib.jit"):
            f({"w": fl.ones(3, dtype=fl.float64), "b": fl.ones(3)}, fl.ones(3))
            f({"w": fl.ones(3, dtype=fl.float64), "b": fl.ones(3)}, x=fl.ones(3, dtype=fl.float64))
    finally:
        fl.config.explain_retraces = old
    assert "argument p['w'] changed from f32[3] to f64[3]" in caplog.text
    assert "the argument structure changed" in caplog.text
    assert "argument 'x' changed from f32[3] to f64[3]" in caplog.text


def test_a_modules_leaves_are_named_by_attribute_in_retrace_explanations(caplog):
    f = fl.jit(lambda model, x: model(x))
    old = fl.config.explain_retraces
    fl.config.explain_retraces = True
    try:
        f(nn.Linear(2, 2, key=fl.random.key(0)), fl.ones(2))
        with caplog.at_level(logging.WARNING, logger="funclib.jit"):
            f(nn.Linear(2, 2, key=fl.random.key(0)).double(), fl.ones(2, dtype=fl.float64))
    finally:
        fl.config.explain_retraces = old
    assert "argument model.weight changed from f32[2,2] to f64[2,2]" in caplog.text


def test_errors_about_leaves_name_them_by_key():
    params = {"w": fl.ones(3, dtype=fl.int32), "b": fl.ones(3)}
    with pytest.raises(DTypeError, match=r"grad: differentiated input params\['w'\] has dtype int32"):
        fl.grad(lambda params, x: fl.sum(params["w"] * x))(params, 2.0)
    with pytest.raises(DTypeError, match=r"jacrev: differentiated input params\['w'\] has dtype int32"):
        fl.jacrev(lambda params: params["w"] * 1.0)(params)
    with pytest.raises(ValueError, match=r"size 3 for p\['w'\], size 4 for x"):
        fl.vmap(lambda p, x: p["w"] * x)({"w": fl.ones((3, 2))}, fl.ones((4, 2)))
    with pytest.raises(ValueError, match=r"in_axes=2 is out of range for argument p\['w'\]"):
        fl.vmap(lambda p: p["w"], in_axes=({"w": 2},))({"w": fl.ones((3, 2))})
    with pytest.raises(ConcretizationError, match=r"depends on argument p\['x'\].*static_argnames=\('p',\)"):
        fl.jit(lambda p: float(p["x"]))({"x": fl.ones(())})


def test_the_examples_in_the_docstrings_run():
    import doctest

    import funclib.ops.pytree as mod

    result = doctest.testmod(mod, extraglobs={"fl": fl})
    assert result.attempted > 0 and result.failed == 0
