"""Looking inside traced code: fl.debug.print/callback (effects), fl.pure_callback, fl.debug.check/checkify."""

import numpy as np
import pytest
import scipy.special as sps
from hypothesis import given
from hypothesis import strategies as st

import funclib as fl
from funclib.testing import assert_allclose, check_grads

# the checks below find NaN, Inf and division by zero on purpose, where NumPy warns
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def f64(x):
    return fl.asarray(np.asarray(x, np.float64))


def lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


# ---------------------------------------------------------------------------------------------------------------
# debug.print / debug.callback


def _printing(x):
    fl.debug.print("x = {x}", x=x)
    y = fl.sin(x)
    fl.debug.print("y = {}", y)
    return (y * y).sum()


def test_print_runs_with_concrete_values_eagerly_jitted_and_at_every_call(capsys):
    x = f64([1.0, 2.0])
    want = [f"x = {np.array([1.0, 2.0])}", f"y = {np.sin([1.0, 2.0])}"]
    _printing(x)
    assert lines(capsys) == want
    f = fl.jit(_printing)
    f(x)
    f(x)  # a cached program prints again: the effect runs at every call, not at trace time
    assert lines(capsys) == want * 2


def test_print_under_grad_shows_primal_values_once_in_the_forward_pass(capsys):
    x = f64([1.0, 2.0])
    want = [f"x = {np.array([1.0, 2.0])}", f"y = {np.sin([1.0, 2.0])}"]
    for g in (fl.grad(_printing), fl.jit(fl.grad(_printing)), fl.grad(fl.jit(_printing))):
        assert_allclose(g(x), 2 * np.sin([1.0, 2.0]) * np.cos([1.0, 2.0]), rtol=1e-12)
        assert lines(capsys) == want


def test_print_under_jit_vmap_grad_prints_each_lane_in_order(capsys):
    """Each print statement runs once per lane, lanes in order; statements keep their program order."""
    xs = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    g = fl.jit(fl.vmap(fl.grad(_printing)))(f64(xs))
    assert_allclose(g, 2 * np.sin(xs) * np.cos(xs), rtol=1e-12)
    want = [f"x = {r}" for r in xs] + [f"y = {np.sin(r)}" for r in xs]
    assert lines(capsys) == want


def test_nested_vmaps_iterate_outer_lanes_first(capsys):
    x = f64(np.arange(6.0).reshape(2, 3))
    fl.vmap(fl.vmap(lambda v: fl.debug.print("{}", v)))(x)
    assert lines(capsys) == [str(v) for v in np.arange(6.0)]


def test_effects_survive_dce_cse_and_constant_folding(capsys):
    def f(x):
        fl.debug.print("a {}", x)  # its value is unused: no output depends on it
        fl.debug.print("a {}", x)  # an identical twin: must not be merged
        fl.debug.print("const {}", fl.asarray(2.0) * 3.0)  # a constant: must not be folded away at compile time
        return x + 1

    jitted = fl.jit(f)
    jitted(f64(1.0))
    assert lines(capsys) == ["a 1.0", "a 1.0", "const 6.0"]
    names = [e.prim.name for e in jitted.trace(f64(1.0)).jaxpr.eqns]
    assert names.count("debug_callback") == 3


def test_prints_inside_jitted_loops_run_every_iteration(capsys):
    def f(x):
        def body(c, v):
            fl.debug.print("step {} {}", c, v)
            return c + v, c

        return fl.scan(body, 0.0, x)[0]

    fl.jit(f)(f64([1.0, 2.0, 3.0]))
    assert lines(capsys) == ["step 0.0 1.0", "step 1.0 2.0", "step 3.0 3.0"]
    fl.jit(fl.grad(f))(f64([1.0, 2.0, 3.0]))  # reverse mode: the forward loop prints, the backward loop does not
    assert lines(capsys) == ["step 0.0 1.0", "step 1.0 2.0", "step 3.0 3.0"]

    def w(x):
        def body(c):
            fl.debug.print("c = {}", c[1])
            return c[0] + 1, c[1] * 2.0

        return fl.while_loop(lambda c: c[0] < 3, body, (0, x), max_steps=4)[1]

    assert float(fl.grad(w)(f64(1.0))) == 8.0  # checkpointed reverse mode recomputes the body, without its prints
    assert lines(capsys) == ["c = 1.0", "c = 2.0", "c = 4.0"]


def test_checkpointed_block_prints_once_under_grad(capsys):
    block = fl.checkpoint(lambda v: (fl.debug.print("v = {}", v), fl.sin(fl.sin(v)))[1])
    for g in (fl.grad(block), fl.jit(fl.grad(block))):
        g(f64(0.5))
        assert lines(capsys) == ["v = 0.5"]


def test_callback_receives_read_only_numpy_and_static_leaves():
    seen = []

    def cb(a, tag, d):
        seen.append((type(a), a.flags.writeable, tag, d["k"].shape))

    fl.jit(lambda x: fl.debug.callback(cb, x, "tag", {"k": x * 2}))(fl.ones(3))
    assert seen == [(np.ndarray, False, "tag", (3,))]


def test_callback_errors_propagate_and_name_the_callback():
    def boom(x):
        raise RuntimeError("nope")

    with pytest.raises(RuntimeError, match="nope") as info:
        fl.jit(lambda x: fl.debug.callback(boom, x))(fl.ones(2))
    assert "boom" in "".join(getattr(info.value, "__notes__", []))
    with pytest.raises(TypeError, match="format string"):
        fl.debug.print(3, fl.ones(2))


# ---------------------------------------------------------------------------------------------------------------
# pure_callback


def _j0(x):
    return fl.pure_callback(sps.j0, fl.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="expand_dims")


@fl.custom_jvp
def bessel_j0(x):
    return _j0(x)


@bessel_j0.defjvp
def _bessel_j0_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    d = fl.pure_callback(lambda v: -sps.j1(v), fl.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")
    return bessel_j0(x), d * t


@fl.custom_vjp
def bessel_j0_v(x):
    return _j0(x)


def _fwd(x):
    return _j0(x), x


def _bwd(x, g):
    return (g * fl.pure_callback(lambda v: -sps.j1(v), fl.ShapeDtypeStruct(x.shape, x.dtype), x,
                                 vmap_method="expand_dims"),)


bessel_j0_v.defvjp(_fwd, _bwd)


def test_pure_callback_under_jit_and_every_vmap_method():
    x = f64([0.5, 1.0, 2.0])
    assert_allclose(fl.jit(_j0)(x), sps.j0(x.numpy()), rtol=1e-14)
    xs = f64(np.linspace(0.1, 3.0, 12).reshape(4, 3))
    calls = []

    def counted(v):
        calls.append(v.shape)
        return np.cumsum(v, axis=-1)

    for method, n_calls in (("sequential", 4), ("sequential_unrolled", 4), ("expand_dims", 1), ("broadcast_all", 1)):
        calls.clear()
        f = lambda v, m=method: fl.pure_callback(counted, fl.ShapeDtypeStruct((3,), fl.float64), v, vmap_method=m)
        assert_allclose(fl.jit(fl.vmap(f))(xs), np.cumsum(xs.numpy(), axis=-1), rtol=1e-14)
        assert len(calls) == n_calls, (method, calls)
    # an unbatched argument: a size-1 axis with expand_dims, the full batch with broadcast_all
    got = {}

    def shapes(a, b):
        got.setdefault("s", []).append((a.shape, b.shape))
        return a + b

    for method, want in (("expand_dims", ((4, 3), (1, 3))), ("broadcast_all", ((4, 3), (4, 3)))):
        got.clear()
        out = fl.vmap(
            lambda v, w, m=method: fl.pure_callback(shapes, fl.ShapeDtypeStruct((3,), fl.float64), v, w, vmap_method=m),
            in_axes=(0, None),
        )(xs, x)
        assert got["s"] == [want]
        assert_allclose(out, xs.numpy() + x.numpy(), rtol=1e-14)


def test_pure_callback_refuses_vmap_without_a_method_and_wrong_results():
    f = lambda v: fl.pure_callback(np.sin, fl.ShapeDtypeStruct((3,), fl.float64), v)
    with pytest.raises(NotImplementedError, match="vmap_method='sequential'"):
        fl.vmap(f)(f64(np.ones((2, 3))))
    with pytest.raises(fl.errors.ShapeError, match="result 0 of shape \\(2,\\).*f64\\[3\\]"):
        fl.pure_callback(lambda v: v[:2], fl.ShapeDtypeStruct((3,), fl.float64), f64(np.ones(3)))
    with pytest.raises(fl.errors.DTypeError, match="float32.*f64\\[3\\]"):
        fl.jit(lambda v: fl.pure_callback(lambda a: a.astype(np.float32), fl.ShapeDtypeStruct((3,), fl.float64), v))(
            f64(np.ones(3))
        )
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        fl.pure_callback(np.sin, fl.ShapeDtypeStruct((3,), fl.float64), f64(np.ones(3)), vmap_method="loop")
    with pytest.raises(fl.errors.MissingRuleError, match="custom_jvp or fl.custom_vjp"):
        fl.grad(lambda v: f(v).sum())(f64(np.ones(3)))


@pytest.mark.parametrize("fn", [bessel_j0, bessel_j0_v], ids=["custom_jvp", "custom_vjp"])
def test_pure_callback_with_a_custom_derivative(fn):
    x = f64([0.3, 1.1, 2.5])
    want = -sps.j1(x.numpy())
    assert_allclose(fl.grad(lambda v: fn(v).sum())(x), want, rtol=1e-13)
    assert_allclose(fl.jit(fl.grad(lambda v: fn(v).sum()))(x), want, rtol=1e-13)
    assert_allclose(fl.vmap(fl.grad(fn))(x), want, rtol=1e-13)
    check_grads(fn, (x,), order=1, modes=("fwd", "rev") if fn is bessel_j0 else ("rev",))


@given(st.floats(0.1, 5.0))
def test_pure_callback_derivative_matches_finite_differences(v):
    check_grads(bessel_j0, (f64(v),), order=1)


# ---------------------------------------------------------------------------------------------------------------
# check / checkify


def _nan_in_loop(x):
    def body(c, v):
        return c * fl.log(v), c

    return fl.scan(body, fl.asarray(1.0, dtype=x.dtype), x)[0]


def _nan_in_while(x):
    return fl.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, fl.sqrt(c[1] - 1.0)), (0, x))[1]


@pytest.mark.parametrize("fn", [_nan_in_loop, _nan_in_while], ids=["scan", "while_loop"])
def test_checkify_reports_a_nan_produced_inside_a_jitted_loop(fn):
    x = f64([2.0, -1.0, 3.0]) if fn is _nan_in_loop else f64(3.0)
    prim = "log" if fn is _nan_in_loop else "sqrt"
    for checked in (
        fl.jit(fl.debug.checkify(fn, errors=fl.debug.nan_checks)),
        fl.debug.checkify(fl.jit(fn), errors=fl.debug.nan_checks),
    ):
        err, y = checked(x)
        assert np.isnan(y.numpy()).all()
        msg = err.get()
        assert msg is not None and f"NaN produced by primitive '{prim}'" in msg, msg
        with pytest.raises(fl.debug.CheckError, match=prim):
            err.throw()
    good = f64([2.0, 1.5, 3.0]) if fn is _nan_in_loop else f64(1e6)
    err, _ = fl.jit(fl.debug.checkify(fn, errors=fl.debug.nan_checks))(good)
    assert err.get() is None
    err.throw()


def test_checkify_names_the_source_line_of_the_failing_operation():
    def f(x):
        y = fl.exp(x)  # the line reported below
        return fl.log(y - 2.0)

    err, _ = fl.debug.checkify(f, errors=fl.debug.nan_checks)(f64(0.0))
    assert "'log'" in err.get() and "test_debug.py" in err.get() and "in f" in err.get()
    err, _ = fl.debug.checkify(f, errors=fl.debug.inf_checks)(f64(800.0))
    assert "Inf produced from finite inputs by primitive 'exp'" in err.get()


def test_user_checks_format_runtime_values_and_raise_outside_checkify():
    def f(x):
        fl.debug.check(fl.all(x > 0), "x must be positive, got {} (first: {first})", x, first=x[0])
        return fl.log(x)

    x = f64([1.0, -2.0])
    for checked in (fl.debug.checkify(f), fl.jit(fl.debug.checkify(f))):
        err, _ = checked(x)
        assert err.get().startswith(f"x must be positive, got {np.array([1.0, -2.0])} (first: 1.0) (check failed at")
    err, _ = fl.debug.checkify(f)(f64([1.0, 2.0]))
    assert err.get() is None and repr(err) == "Error(no failure)"
    with pytest.raises(fl.debug.CheckError, match="x must be positive"):
        f(x)  # eagerly, outside checkify: an assertion
    with pytest.raises(fl.debug.CheckError, match="x must be positive"):
        fl.jit(f)(x)  # inside a jitted call
    # errors= selects the categories: user checks off, the NaN check on
    err, _ = fl.debug.checkify(f, errors=fl.debug.nan_checks)(x)
    assert "NaN produced by primitive 'log'" in err.get()


def test_user_checks_inside_jitted_loops():
    def f(xs):
        def body(c, x):
            fl.debug.check(x < 10.0, "step value too large: {}", x)
            return c + x, c

        return fl.scan(body, fl.asarray(0.0, dtype=xs.dtype), xs)[0]

    err, total = fl.jit(fl.debug.checkify(f))(f64([1.0, 20.0, 30.0]))
    assert err.get().startswith("step value too large: 20.0") and float(total) == 51.0
    err, _ = fl.debug.checkify(fl.jit(f))(f64([1.0, 2.0, 3.0]))
    assert err.get() is None
    with pytest.raises(fl.debug.CheckError, match="too large: 30.0"):
        fl.jit(f)(f64([1.0, 2.0, 30.0]))

    def w(x):
        def body(c):
            fl.debug.check(c[1] > 0, "went negative at step {}: {}", c[0], c[1])
            return c[0] + 1, c[1] - 1.5

        return fl.while_loop(lambda c: c[0] < 4, body, (0, x))[1]

    err, _ = fl.jit(fl.debug.checkify(w))(f64(4.0))
    assert err.get().startswith("went negative at step 3: -0.5")


def test_out_of_bounds_indices_are_reported_and_clamped():
    def f(x, i):
        return x[i] * 2

    checked_f = fl.debug.checkify(f, errors=fl.debug.index_checks)
    for checked in (checked_f, fl.jit(checked_f)):
        err, y = checked(fl.arange(3.0), fl.asarray(5))
        assert "out-of-bounds index in primitive 'gather'" in err.get() and "5 along axis 0" in err.get()
        assert float(y) == 4.0  # clamped to the last element, so the call completed
        err, _ = checked(fl.arange(3.0), fl.asarray(-4))  # wraps to -1: still out of bounds
        assert "-1 along axis 0, where the valid range is [0, 2]" in err.get()
        err, _ = checked(fl.arange(3.0), fl.asarray(-3))
        assert err.get() is None
    err, _ = fl.debug.checkify(lambda x, i: fl.dynamic_slice(x, (i,), (2,)), errors=fl.debug.index_checks)(
        fl.arange(3.0), fl.asarray(2)
    )
    assert "start index in primitive 'dynamic_slice'" in err.get()
    err, _ = fl.debug.checkify(lambda x, i: x.at[i].add(1.0), errors=fl.debug.index_checks)(fl.zeros(3), fl.asarray(7))
    assert "scatter_add" in err.get()


def test_integer_division_by_zero():
    err, _ = fl.debug.checkify(lambda a, b: a // b, errors=fl.debug.div_checks)(fl.asarray([3, 4]), fl.asarray([1, 0]))
    assert "integer division by zero in primitive 'floor_divide'" in err.get()
    err, _ = fl.debug.checkify(lambda a, b: a // b, errors=fl.debug.div_checks)(fl.asarray([3.0]), fl.asarray([0.0]))
    assert err.get() is None  # float division by zero is an infinity, not a division error


def test_first_failure_wins_and_vmap_reports_the_failing_lane():
    def f(x):
        fl.debug.check(fl.all(x > 0), "positive, got {}", x)
        fl.debug.check(fl.all(x < 10), "small, got {}", x)
        return x

    err, _ = fl.debug.checkify(f)(f64([-1.0, 20.0]))
    assert err.get().startswith("positive")
    # program order first, then lane order: the first check fails in lane 2, before the second runs
    err, _ = fl.vmap(fl.debug.checkify(f))(f64([[1.0, 2.0], [3.0, 40.0], [-1.0, 1.0]]))
    assert err.get().startswith(f"positive, got {np.array([-1.0, 1.0])}")
    err, _ = fl.vmap(fl.debug.checkify(f))(f64([[1.0, 2.0], [3.0, 40.0], [1.0, 50.0]]))
    assert err.get().startswith(f"small, got {np.array([3.0, 40.0])}")
    err, _ = fl.jit(fl.vmap(fl.debug.checkify(f)))(f64([[1.0, 2.0], [3.0, 4.0]]))
    assert err.get() is None


def test_checkify_composes_with_grad():
    def f(x):
        fl.debug.check(fl.all(x > 0), "x must be positive")
        return fl.sqrt(x).sum()

    x = f64([1.0, 4.0])
    g = fl.grad(lambda v: fl.debug.checkify(f)(v)[1])(x)
    assert_allclose(g, [0.5, 0.25], rtol=1e-14)
    (val, err), g = fl.value_and_grad(lambda v: fl.debug.checkify(f)(v)[::-1], has_aux=True)(f64([-1.0, 4.0]))
    assert err.get().startswith("x must be positive")
    # the backward pass is checked too: sqrt's derivative at 0 is an infinity
    err, g = fl.debug.checkify(fl.grad(lambda v: fl.sqrt(v).sum()), errors=fl.debug.float_checks)(f64([1.0, 0.0]))
    assert "Inf produced from finite inputs" in err.get()
    err, g = fl.jit(fl.debug.checkify(fl.grad(lambda v: fl.sqrt(v).sum()), errors=fl.debug.float_checks))(x)
    assert err.get() is None
    assert_allclose(g, [0.5, 0.25], rtol=1e-14)


def test_checkify_bad_arguments():
    with pytest.raises(TypeError, match="set of fl.debug error kinds"):
        fl.debug.checkify(lambda x: x, errors={"nan"})
    with pytest.raises(TypeError, match="boolean"):
        fl.debug.check(fl.ones(2), "x")
    with pytest.raises(TypeError, match="still traced"):
        fl.jit(lambda x: fl.debug.checkify(lambda v: v)(x)[0].get())(fl.ones(2))
