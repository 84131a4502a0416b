"""Every check over every row of the op table (tests/op_table.py).

Each check is one function decorated with ``@over_rows(rows)``: it is parametrized by row and receives a
Hypothesis ``data`` object to draw a case with ``draw_case``. Adding a check over all rows is one more function.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from op_table import COLLECTIVE_LANE, ROWS, as_tensors, draw_case, grad_dtypes, main_dtype, reference, tolerance

import funclib as fl
from funclib import dtypes as D
from funclib import tree
from funclib.core import PRIMITIVES
from funclib.errors import MissingRuleError
from funclib.testing import (
    assert_allclose,
    assert_trees_allclose,
    check_adjoint,
    check_grads,
    check_jvp,
    check_vjp,
)

# a few examples per row keep the whole table fast; the dev profile scales them up
EXAMPLES = max(3, settings.default.max_examples // 4)

DIFF = [r for r in ROWS if not r.nondiff and grad_dtypes(r)]


@functools.cache
def _float_input_dtype(row):
    """A dtype at which the row's inputs include floating-point ones (None: its inputs are integers only)."""
    for d in (D.float64, D.complex128, D.float32):
        if d in row.dtypes:

            @st.composite
            def case(draw, d=d):
                return draw_case(draw, row, d)[1]

            args = find(case(), lambda _: True, settings=settings(database=None, phases=[Phase.generate]))
            if any(np.asarray(a).dtype in D.INEXACT for a in args):
                return d
    return None


# non-differentiable rows with floating-point inputs: derivatives with respect to integers are not defined at all
NONDIFF = [r for r in ROWS if r.nondiff and _float_input_dtype(r) is not None]
LINEAR = [r for r in ROWS if r.linear and grad_dtypes(r)]
# convert_element_type narrows complex128 to complex64 in its row, where finite differences mean little
COMPLEX_DIFF = [
    r for r in DIFF if D.complex128 in r.dtypes and D.float64 in r.dtypes and r.name != "convert_element_type"
]


def over_rows(rows, examples: int = EXAMPLES):
    """Parametrize a check ``f(row, data)`` by the rows, with Hypothesis drawing its cases."""

    def deco(f):
        @pytest.mark.parametrize("row", rows, ids=[r.name for r in rows])
        @settings(max_examples=examples)
        @given(data=st.data())
        @functools.wraps(f)
        def test(row, data):
            f(row, data)

        return test

    return deco


def _leaves(x) -> list:
    return tree.leaves(x)


def _apply_fn(row, cfg):
    def f(*args):
        return row.apply(cfg, *args)

    f.__name__ = row.name
    return f


def _diff_fn(row, cfg, args):
    """``row`` as a function of its floating-point arguments only (the others are closed over)."""
    pos = [i for i, a in enumerate(args) if a.dtype in D.INEXACT]

    def f(*xs):
        full = list(args)
        for i, x in zip(pos, xs):
            full[i] = x
        return row.apply(cfg, *full)

    f.__name__ = row.name
    return f, tuple(args[i] for i in pos), pos


# ---------------------------------------------------------------------------------------------------------------
# Eager results


@over_rows(ROWS, examples=max(2, EXAMPLES // 2))
def test_eager_matches_numpy(row, data):
    """Eager results equal the NumPy reference at every supported dtype; shapes and dtypes match abstract eval."""
    for dtype in row.dtypes:
        cfg, args = draw_case(data.draw, row, dtype)
        xs = as_tensors(args)
        out = _leaves(row.apply(cfg, *xs))
        where = f"{row.name} at {np.dtype(dtype).name}, cfg={cfg}"
        avals = _leaves(fl.eval_shape(_apply_fn(row, cfg), *xs))
        for o, a in zip(out, avals, strict=True):
            assert (tuple(o.shape), o.dtype) == (tuple(a.shape), a.dtype), (
                f"{where}: eager result {o.dtype.name}{list(o.shape)} but abstract eval says {a.str_short()}"
            )
        if row.ref is None:
            row.check(cfg, args, out)
            continue
        ref = reference(row, cfg, args)
        want = list(ref) if isinstance(ref, list | tuple) else [ref]
        assert len(out) == len(want), f"{where}: {len(out)} outputs, reference has {len(want)}"
        for o, w in zip(out, want):
            rtol, atol = tolerance(o.dtype, row.tol)
            assert_allclose(o, np.asarray(w), rtol=rtol, atol=atol, err_msg=where)


# ---------------------------------------------------------------------------------------------------------------
# Derivatives (float64; complex128 where supported)


def _grad_case(row, data, dtype):
    cfg, args = draw_case(data.draw, row, dtype, smooth=True)
    xs = as_tensors(args)
    f, diff_args, _ = _diff_fn(row, cfg, xs)
    ref = row.fd_ref(cfg, xs) if row.fd_ref else f
    return cfg, f, ref, diff_args


@over_rows(DIFF)
def test_jvp_matches_finite_differences(row, data):
    cfg, f, ref, xs = _grad_case(row, data, grad_dtypes(row)[0])
    rtol, atol = row.grad_tol
    check_jvp(ref, lambda p, t: fl.jvp(f, p, t), xs, rtol=rtol, atol=atol, err_msg=f"cfg={cfg}")


@over_rows(DIFF)
def test_vjp_matches_finite_differences(row, data):
    cfg, f, ref, xs = _grad_case(row, data, grad_dtypes(row)[0])
    rtol, atol = row.grad_tol
    check_vjp(ref, lambda *p: fl.vjp(f, *p), xs, rtol=rtol, atol=atol, err_msg=f"cfg={cfg}")


def _staged_vjp(f, xs, cts):
    """Reverse mode through the staged path (linearize into a jaxpr, transpose it), which eager ``vjp`` skips."""
    from funclib.transforms import autodiff

    def flat(*a):
        return tree.leaves(f(*a)), None

    _, lin, _ = autodiff.linearize_flat(flat, list(xs), [True] * len(xs))
    return autodiff._transpose_linearized(lin, tree.leaves(cts))


@over_rows(DIFF)
def test_eager_tape_matches_staged_reverse_mode(row, data):
    """Eager ``vjp`` records a tape (elementwise rows as diagonal steps); it equals the transposed jaxpr of the
    staged path at float32 and float64 (and complex128 where the row has it)."""
    for dtype in [d for d in (D.float32, D.float64, D.complex128) if d in row.dtypes]:
        cfg, f, _, xs = _grad_case(row, data, dtype)
        out, f_vjp = fl.vjp(f, *xs)
        cts = tree.map(lambda o: fl.asarray(np.cos(np.arange(o.size)).reshape(o.shape), dtype=o.dtype), out)
        got = _leaves(f_vjp(cts))
        want = _staged_vjp(f, xs, cts)
        rtol = 2e-5 if dtype == D.float32 else 1e-10
        for g, w in zip(got, want, strict=True):
            scale = max(1.0, float(np.max(np.abs(np.asarray(w)), initial=0.0)))
            assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=f"{row.name} at {dtype.name}, cfg={cfg}")


@over_rows(DIFF)
def test_jvp_and_vjp_are_adjoint(row, data):
    """<u, jvp(v)> == <vjp(u), v>: forward and reverse mode agree."""
    cfg, f, _, xs = _grad_case(row, data, grad_dtypes(row)[0])
    check_adjoint(f, xs, rtol=1e-9, atol=1e-9, err_msg=f"cfg={cfg}")


@over_rows(LINEAR, examples=2 * EXAMPLES)
def test_transpose_is_adjoint(row, data):
    """For each group of arguments the primitive is linear in: <u, f(v)> == <f^T(u), v>."""
    dtype = grad_dtypes(row)[0]
    cfg, args = draw_case(data.draw, row, dtype, smooth=True)
    xs = as_tensors(args)
    for group in row.linear_groups(len(xs)):

        def f_lin(*lin, group=group):
            full = list(xs)
            for i, x in zip(group, lin):
                full[i] = x
            return row.apply(cfg, *full)

        f_lin.__name__ = f"{row.name} in arguments {group}"
        check_adjoint(f_lin, tuple(xs[i] for i in group), linear=True, rtol=1e-9, atol=1e-9, err_msg=f"cfg={cfg}")


@over_rows([r for r in DIFF if r.order >= 2])
def test_second_order(row, data):
    cfg, f, _, xs = _grad_case(row, data, grad_dtypes(row)[0])
    rtol, atol = row.grad_tol
    check_grads(f, xs, order=2, rtol=rtol, atol=atol)


@over_rows(COMPLEX_DIFF)
def test_complex_derivatives(row, data):
    cfg, f, ref, xs = _grad_case(row, data, D.complex128)
    rtol, atol = row.grad_tol
    check_jvp(ref, lambda p, t: fl.jvp(f, p, t), xs, rtol=rtol, atol=atol, err_msg=f"complex, cfg={cfg}")
    check_vjp(ref, lambda *p: fl.vjp(f, *p), xs, rtol=rtol, atol=atol, err_msg=f"complex, cfg={cfg}")


@over_rows(NONDIFF)
def test_nondifferentiable_rows_have_zero_derivatives(row, data):
    """Primitives without a derivative give zero tangents and cotangents, or a MissingRuleError naming the file."""
    cfg, args = draw_case(data.draw, row, _float_input_dtype(row))
    xs = as_tensors(args)
    f, diff_args, _ = _diff_fn(row, cfg, xs)
    tangents = tuple(fl.ones_like(x) for x in diff_args)
    prim = PRIMITIVES[row.name]
    if prim.jvp is None:
        with pytest.raises(MissingRuleError, match=prim.defined_in):
            fl.jvp(f, diff_args, tangents)
        return
    out, t_out = fl.jvp(f, diff_args, tangents)
    for t in _leaves(t_out):
        assert not np.any(np.asarray(t)), f"{row.name}: nonzero tangent {t} for a non-differentiable primitive"
    out, f_vjp = fl.vjp(f, *diff_args)
    cts = f_vjp(tree.map(fl.ones_like, out))
    for c in _leaves(cts):
        assert not np.any(np.asarray(c)), f"{row.name}: nonzero cotangent {c} for a non-differentiable primitive"


# ---------------------------------------------------------------------------------------------------------------
# vmap against a loop


_AXES = (0, 1, -1, None)
LANES = 3


def in_axes_plans(n: int) -> list[tuple]:
    """Each argument takes each of in_axes 0, 1, -1 and None once, across len(_AXES) plans."""
    return [tuple(_AXES[(k + j) % len(_AXES)] for j in range(n)) for k in range(len(_AXES))]


@over_rows([r for r in ROWS if r.name != "iota"])
def test_vmap_matches_loop(row, data):
    """vmap of the primitive equals a Python loop plus stack, for every in_axes position of every argument."""
    dtype = main_dtype(row)
    cfg = data.draw(row.config(np.dtype(dtype)))
    lanes = [row.sample(data.draw, cfg, np.dtype(dtype), False) for _ in range(LANES)]
    for plan in in_axes_plans(len(lanes[0])):
        plan = tuple(
            None if ax is None else (0 if ax == 1 and np.ndim(a) == 0 else ax) for ax, a in zip(plan, lanes[0])
        )
        batched = [
            fl.asarray(lanes[0][j] if ax is None else np.stack([lane[j] for lane in lanes], axis=ax))
            for j, ax in enumerate(plan)
        ]
        got = fl.vmap(_apply_fn(row, cfg), in_axes=plan, axis_size=LANES)(*batched)
        per_lane = [
            row.apply(cfg, *[fl.asarray(lanes[0][j] if ax is None else lane[j]) for j, ax in enumerate(plan)])
            for lane in lanes
        ]
        want = tree.map(lambda *ys: fl.stack(list(ys)), *per_lane)
        assert_trees_allclose(got, want, check_dtype=True, err_msg=f"{row.name} vmap in_axes={plan}, cfg={cfg}")


# ---------------------------------------------------------------------------------------------------------------
# jaxprs


@over_rows(ROWS)
def test_jaxpr_typechecks_and_evaluates(row, data):
    """make_jaxpr records the primitive, the jaxpr typechecks, and eval_jaxpr equals eager."""
    cfg, args = draw_case(data.draw, row, main_dtype(row))
    xs = as_tensors(args)
    closed = fl.make_jaxpr(_apply_fn(row, cfg))(*xs)
    fl.typecheck(closed.jaxpr)
    if row.staged:
        names = {e.prim.name for e in closed.jaxpr.eqns}
        assert row.name in names, f"the row for {row.name} does not apply it: the jaxpr has {sorted(names)}"
    got = fl.eval_jaxpr(closed.jaxpr, closed.consts, *xs)
    want = _leaves(row.apply(cfg, *xs))
    assert [a.str_short() for a in closed.out_avals] == [fl.ShapedArray(w.shape, w.dtype).str_short() for w in want]
    assert_trees_allclose(list(got), want, check_dtype=True, err_msg=f"{row.name}, cfg={cfg}")


# ---------------------------------------------------------------------------------------------------------------
# Collectives: their rows apply them inside a named vmap, whose batching rule consumes them. Here they are staged,
# differentiated and transposed inside the vmap itself, which exercises their own jaxpr, jvp and transpose rules.


@over_rows([r for r in ROWS if r.name in COLLECTIVE_LANE])
def test_collectives_inside_the_named_vmap(row, data):
    dtype = D.float64 if D.float64 in row.dtypes else main_dtype(row)
    cfg, args = draw_case(data.draw, row, dtype, smooth=True)
    (x,) = as_tensors(args)
    n = x.shape[0]

    def lane(xi):
        return COLLECTIVE_LANE[row.name](xi, n)

    def staged(xi):
        closed = fl.make_jaxpr(lane)(xi)
        fl.typecheck(closed.jaxpr)
        assert row.name in {e.prim.name for e in closed.jaxpr.eqns}
        return fl.eval_jaxpr(closed.jaxpr, closed.consts, xi)[0]

    assert_allclose(fl.vmap(staged, axis_name="i")(x), row.apply(cfg, x), check_dtype=True)
    if dtype != D.float64:
        return
    rng = np.random.default_rng(0)
    t = fl.asarray(rng.standard_normal(x.shape))
    inside = fl.vmap(lambda xi, ti: fl.jvp(lane, (xi,), (ti,))[1], axis_name="i")(x, t)
    outside = fl.jvp(lambda v: row.apply(cfg, v), (x,), (t,))[1]
    assert_allclose(inside, outside, rtol=1e-12, atol=1e-12, err_msg=f"{row.name}: jvp inside the vmap")
    out = row.apply(cfg, x)
    u = fl.asarray(rng.standard_normal(out.shape))
    inside = fl.vmap(lambda xi, ui: fl.vjp(lane, xi)[1](ui)[0], axis_name="i")(x, u)
    outside = fl.vjp(lambda v: row.apply(cfg, v), x)[1](u)[0]
    assert_allclose(inside, outside, rtol=1e-12, atol=1e-12, err_msg=f"{row.name}: vjp inside the vmap")
