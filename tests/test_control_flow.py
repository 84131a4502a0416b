"""Control flow (cond, switch, while_loop, fori_loop, scan, map, associative_scan) under every transform.

Each function is checked against a plain Python loop (the reference), eagerly and under jvp, grad, vmap,
jit and compositions of them; derivatives are also checked against finite differences (float64). Reverse
mode through ``while_loop`` is checked for values, finite differences and memory sublinear in the steps.
"""

from __future__ import annotations

import numpy as np
import pytest
from funclib.transforms.autodiff import linearize_flat
from funclib.transforms.control_flow import CarryTypeError, WhileGradientError

import funclib as fl
from funclib.testing import assert_trees_allclose, check_grads

f64 = fl.float64
RNG = np.random.default_rng(0)


def t64(a):
    return fl.asarray(np.asarray(a, np.float64))


def close(a, b, tol=1e-10):
    assert_trees_allclose(a, b, rtol=tol, atol=tol)


# ------------------------------------------------------------------------------------------------------------
# scan


def body_sin(c, x):
    return fl.sin(c) * x + c, c * x


def scan_fn(xs):
    c, ys = fl.scan(body_sin, t64(0.5), xs)
    return c + (ys * ys).sum()


def scan_ref(xs):
    c, tot = t64(0.5), 0.0
    for i in range(xs.shape[0]):
        c, y = body_sin(c, xs[i])
        tot = tot + y * y
    return c + tot


XS = t64(np.linspace(0.1, 1.0, 6))
XB = t64(RNG.normal(size=(3, 6)) * 0.5)


def test_scan_matches_loop_under_every_transform():
    close(scan_fn(XS), scan_ref(XS))
    t = fl.ones_like(XS)
    close(fl.jvp(scan_fn, (XS,), (t,)), fl.jvp(scan_ref, (XS,), (t,)))
    close(fl.grad(scan_fn)(XS), fl.grad(scan_ref)(XS))
    close(fl.vmap(scan_fn)(XB), fl.stack([scan_ref(x) for x in XB]))


def test_scan_compositions():
    ref = fl.stack([fl.grad(scan_ref)(x) for x in XB])
    close(fl.vmap(fl.grad(scan_fn))(XB), ref)
    close(fl.hessian(scan_fn)(XS), fl.hessian(scan_ref)(XS), 1e-9)
    close(fl.jacfwd(fl.grad(scan_fn))(XS), fl.jacrev(fl.grad(scan_ref))(XS), 1e-9)
    check_grads(scan_fn, (XS,), order=2)


def test_scan_pytrees_reverse_and_batched_axes():
    def f(init, xs):
        def body(c, x):
            h = fl.tanh(c["h"] * x["a"] + x["b"])
            return {"h": h, "n": c["n"] + 1}, (h.sum(), h * 2.0)

        return fl.scan(body, init, xs, reverse=True)

    def ref(init, xs):
        c, ys = init, [None] * xs["a"].shape[0]
        for i in reversed(range(xs["a"].shape[0])):
            h = fl.tanh(c["h"] * xs["a"][i] + xs["b"][i])
            c, ys[i] = {"h": h, "n": c["n"] + 1}, (h.sum(), h * 2.0)
        return c, (fl.stack([y[0] for y in ys]), fl.stack([y[1] for y in ys]))

    init = {"h": t64([0.1, -0.2]), "n": fl.asarray(0)}
    xs = {"a": t64(RNG.normal(size=(5, 2))), "b": t64(RNG.normal(size=(5, 2)))}
    close(f(init, xs), ref(init, xs))
    out = f(init, xs)
    assert out[0]["n"].dtype == fl.int64 and int(out[0]["n"]) == 5
    # batch the xs along axis 1 and the carry along axis 0
    xb = {"a": t64(RNG.normal(size=(5, 3, 2))), "b": t64(RNG.normal(size=(5, 3, 2)))}
    hb = t64(RNG.normal(size=(3, 2)))
    got = fl.vmap(lambda h, x: f({"h": h, "n": fl.asarray(0)}, x), in_axes=(0, {"a": 1, "b": 1}))(hb, xb)
    for j in range(3):
        want = ref({"h": hb[j], "n": fl.asarray(0)}, {"a": xb["a"][:, j], "b": xb["b"][:, j]})
        close(fl.tree.map(lambda v, j=j: v[j], got), want)

    def loss(h, xs):
        c, (s, y) = f({"h": h, "n": fl.asarray(0)}, xs)
        return (c["h"] ** 2).sum() + s.sum() + y.sum()

    def loss_ref(h, xs):
        c, (s, y) = ref({"h": h, "n": fl.asarray(0)}, xs)
        return (c["h"] ** 2).sum() + s.sum() + y.sum()

    close(fl.grad(loss, argnums=(0, 1))(init["h"], xs), fl.grad(loss_ref, argnums=(0, 1))(init["h"], xs))


def test_scan_closure_gradients_rnn():
    W = t64(RNG.normal(size=(4, 4)) * 0.5)
    U = t64(RNG.normal(size=(3, 4)) * 0.5)
    xs = t64(RNG.normal(size=(7, 2, 3)))

    def rnn(params, xs):
        W, U = params
        h, ys = fl.scan(lambda h, x: (fl.tanh(h @ W + x @ U),) * 2, fl.zeros((2, 4), dtype=f64), xs)
        return (h**2).sum() + ys.sum()

    def ref(params, xs):
        W, U = params
        h, tot = fl.zeros((2, 4), dtype=f64), 0.0
        for i in range(xs.shape[0]):
            h = fl.tanh(h @ W + xs[i] @ U)
            tot = tot + h.sum()
        return (h**2).sum() + tot

    close(fl.grad(rnn, argnums=(0, 1))((W, U), xs), fl.grad(ref, argnums=(0, 1))((W, U), xs))
    # the weights are loop invariant: reverse mode keeps one copy, not one per step
    outs, lin, _ = linearize_flat(lambda w: ([rnn((w, U), xs)], None), [W], [True])
    shapes = [tuple(np.shape(c)) for c in lin.consts]
    assert (7, 4, 4) not in shapes and sum(s == (4, 4) for s in shapes) <= 2, shapes


def test_nested_scan_and_scan_of_cond():
    def nested(x):
        def outer(c, xi):
            d, ys = fl.scan(lambda d, y: (fl.sin(d * y) + d, d * y), c, xi * t64([1.0, 2.0, 3.0]))
            return d, ys.sum()

        c, ys = fl.scan(outer, t64(0.3), x)
        return c + ys.sum()

    def nested_ref(x):
        c, tot = t64(0.3), 0.0
        for i in range(x.shape[0]):
            d = c
            for y in x[i] * t64([1.0, 2.0, 3.0]):
                tot, d = tot + d * y, fl.sin(d * y) + d
            c = d
        return c + tot

    x = t64(RNG.normal(size=(4, 3)) * 0.3)
    close(nested(x), nested_ref(x))
    close(fl.grad(nested)(x), fl.grad(nested_ref)(x))
    close(fl.hessian(nested)(x), fl.hessian(nested_ref)(x), 1e-9)

    def sc(x):
        def body(c, xi):
            c = fl.cond(xi > 0, lambda c: c * xi + fl.sin(c), lambda c: c - xi * c * c, c)
            return c, c

        c, ys = fl.scan(body, t64(0.5), x)
        return c + ys.sum()

    def sc_ref(x):
        c, tot = t64(0.5), 0.0
        for xi in x:
            c = c * xi + fl.sin(c) if float(xi) > 0 else c - xi * c * c
            tot = tot + c
        return c + tot

    x = t64(RNG.normal(size=6))
    close(sc(x), sc_ref(x))
    close(fl.grad(sc)(x), fl.grad(sc_ref)(x))
    xb = fl.stack([x, -x])
    close(fl.vmap(fl.grad(sc))(xb), fl.stack([fl.grad(sc_ref)(x), fl.grad(sc_ref)(-x)]))


def test_scan_linear_transpose_and_jacobians():
    x = t64(RNG.normal(size=5))

    def lin(v):
        return fl.scan(lambda c, xi: (c * 0.5 + xi, c * 2.0), t64(0.0), v)

    J = fl.jacrev(lin)(x)
    Jf = fl.jacfwd(lin)(x)
    close(J, Jf)
    ct = (t64(1.0), t64(RNG.normal(size=5)))
    (got,) = fl.linear_transpose(lin, x)(ct)
    close(got, J[0] * ct[0] + ct[1] @ J[1])


def test_scan_length_zero_and_no_xs():
    c, ys = fl.scan(lambda c, x: (c + x, c), 1.0, fl.zeros(0))
    assert float(c) == 1.0 and ys.shape == (0,)
    assert (
        float(fl.grad(lambda v: fl.scan(lambda c, x: (c + x, c), v, fl.zeros(0))[0])(fl.tensor(2.0))) == 1.0
    )
    c, ys = fl.scan(lambda c, _: (c * 2.0, c), t64(1.0), None, length=4)
    close(ys, t64([1.0, 2.0, 4.0, 8.0]))
    close(
        fl.grad(lambda v: fl.scan(lambda c, _: (c * v, None), t64(1.0), None, length=4)[0])(t64(3.0)),
        t64(108.0),
    )


def test_scan_is_not_unrolled():
    def f(n):
        return fl.make_jaxpr(lambda x: fl.grad(lambda y: fl.scan(body_sin, y, fl.ones(n, dtype=f64))[0])(x))(
            t64(0.1)
        )

    short, long = f(10), f(10_000)
    assert len(short.eqns) == len(long.eqns)
    fl.typecheck(long.jaxpr)
    assert "scan" in str(long)


def test_scan_weak_init_and_errors():
    c, _ = fl.scan(lambda c, x: (c + x, None), 0, fl.ones(3))
    assert c.dtype == fl.float32 and float(c) == 3.0
    with pytest.raises(CarryTypeError) as e:
        fl.scan(
            lambda c, x: ({"h": c["h"], "n": c["n"] + 0.5}, None),
            {"h": fl.zeros(3), "n": fl.asarray(0)},
            fl.ones(4),
        )
    msg = str(e.value)
    assert "{'h': 'f32[3]', 'n': 'i64[]'}" in msg and "{'h': 'f32[3]', 'n': 'f32[]'}" in msg
    assert "leaf ['n'] differs in dtype" in msg
    with pytest.raises(CarryTypeError, match=r"leaf \[1\] differs in shape: f32\[3\] vs f32\[4\]"):
        fl.scan(lambda c, x: ((c[0], fl.zeros(4)), None), (fl.zeros(3), fl.zeros(3)), fl.ones(4))
    with pytest.raises(CarryTypeError, match="tree structures differ"):
        fl.scan(lambda c, x: ([c[0]], None), (fl.zeros(3),), fl.ones(4))
    with pytest.raises(TypeError, match="pair"):
        fl.scan(lambda c, x: c, 0.0, fl.ones(3))
    with pytest.raises(ValueError, match="different leading sizes"):
        fl.scan(lambda c, x: (c, x), 0.0, (fl.ones(3), fl.ones(4)))
    with pytest.raises(ValueError, match="length="):
        fl.scan(lambda c, x: (c, x), 0.0, None)


# ------------------------------------------------------------------------------------------------------------
# cond and switch


def cond_fn(x):
    return fl.cond(x.sum() > 0, lambda a: fl.sin(a) * a, lambda a: fl.cos(a) + 1.0, x).sum()


def cond_ref(x):
    return (fl.sin(x) * x).sum() if float(x.sum()) > 0 else (fl.cos(x) + 1.0).sum()


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_matches_branch_under_every_transform(sign):
    x = t64([0.3, -0.1, 0.7]) * sign
    t = t64([1.0, 0.5, -2.0])
    close(cond_fn(x), cond_ref(x))
    close(fl.jvp(cond_fn, (x,), (t,)), fl.jvp(cond_ref, (x,), (t,)))
    close(fl.grad(cond_fn)(x), fl.grad(cond_ref)(x))
    close(fl.hessian(cond_fn)(x), fl.hessian(cond_ref)(x))
    check_grads(cond_fn, (x,), order=2)


def test_cond_vmap_batched_predicate_runs_both_branches():
    xs = t64([[0.3, -0.1, 0.7], [-0.3, 0.1, -0.7], [1.0, 2.0, -0.5]])
    close(fl.vmap(cond_fn)(xs), fl.stack([cond_ref(x) for x in xs]))
    close(fl.vmap(fl.grad(cond_fn))(xs), fl.stack([fl.grad(cond_ref)(x) for x in xs]))
    # both branches run on every lane: a branch that is invalid on the other lanes does not leak into them
    x = t64([4.0, -1.0])
    with np.errstate(invalid="ignore"):  # sqrt and log of -1 are computed, then not selected
        out = fl.vmap(lambda v: fl.cond(v > 0, fl.sqrt, lambda v: -v, v))(x)
        g = fl.vmap(fl.grad(lambda v: fl.cond(v > 0, fl.log, lambda v: v * 3.0, v)))(x)
    close(out, t64([2.0, 1.0]))
    close(g, t64([0.25, 3.0]))
    # an unbatched predicate with batched operands stays a single branch
    jx = fl.make_jaxpr(fl.vmap(lambda v: fl.cond(fl.tensor(True), fl.sin, fl.cos, v)))(x)
    assert "cond" in str(jx) and "select" not in str(jx)


def test_cond_closure_and_weak_outputs():
    w = t64(2.0)

    def f(w, x):
        return fl.cond(x > 0, lambda v: v * w * w, lambda v: v - w, x)

    close(fl.grad(f)(w, t64(3.0)), t64(12.0))
    close(fl.grad(f)(w, t64(-3.0)), t64(-1.0))
    assert fl.cond(False, lambda x: 1, lambda x: x, fl.ones(())).dtype == fl.float32
    with pytest.raises(CarryTypeError) as e:
        fl.cond(True, lambda x: x, lambda x: x.astype(fl.int32), fl.ones(2))
    assert "false_fun: i32[2]" in str(e.value) and "true_fun:  f32[2]" in str(e.value)
    with pytest.raises(CarryTypeError, match="tree structures differ"):
        fl.cond(True, lambda x: x, lambda x: (x, x), fl.ones(2))
    with pytest.raises(ValueError, match="scalar"):
        fl.cond(fl.ones(2) > 0, lambda x: x, lambda x: x, fl.ones(2))


def switch_fn(i, x):
    return fl.switch(i, [lambda a: a * 2.0, fl.exp, lambda a: a**3], x).sum()


def switch_ref(i, x):
    k = min(max(int(i), 0), 2)
    return [lambda a: a * 2.0, fl.exp, lambda a: a**3][k](x).sum()


def test_switch_clamps_and_transforms():
    x = t64([0.3, -0.1, 0.7])
    for i in (-1, 0, 1, 2, 5):
        close(switch_fn(i, x), switch_ref(i, x))
        close(fl.grad(switch_fn, argnums=1)(i, x), fl.grad(switch_ref, argnums=1)(i, x))
    idx = fl.asarray([0, 1, 2, 7])
    xs = fl.stack([x, x * 2, x * 3, x])
    close(fl.vmap(switch_fn)(idx, xs), fl.stack([switch_ref(i, v) for i, v in zip(idx, xs)]))
    close(
        fl.vmap(fl.grad(switch_fn, argnums=1))(idx, xs),
        fl.stack([fl.grad(switch_ref, argnums=1)(i, v) for i, v in zip(idx, xs)]),
    )
    with pytest.raises(CarryTypeError, match="branch 2"):
        fl.switch(0, [lambda a: a, lambda a: a, lambda a: a[:1]], x)


# ------------------------------------------------------------------------------------------------------------
# while_loop and fori_loop


def grow(x, a):
    def body(c):
        v, k = c
        return v * a + fl.sin(v), k + 1

    return fl.while_loop(lambda c: c[0] < 50.0, body, (x, 0), max_steps=100)


def grow_ref(x, a):
    v, k = x, 0
    while float(v) < 50.0:
        v, k = v * a + fl.sin(v), k + 1
    return v, fl.asarray(k)


def test_while_matches_loop_under_every_transform():
    x, a = t64(1.3), t64(1.7)
    close(grow(x, a), grow_ref(x, a))
    t = (t64(1.0), t64(-0.5))
    close(fl.jvp(lambda x, a: grow(x, a)[0], (x, a), t), fl.jvp(lambda x, a: grow_ref(x, a)[0], (x, a), t))
    want = fl.grad(lambda x, a: grow_ref(x, a)[0], argnums=(0, 1))(x, a)
    close(fl.grad(lambda x, a: grow(x, a)[0], argnums=(0, 1))(x, a), want)


def test_while_vmap_masks_finished_lanes():
    xs, a = t64([1.3, 2.0, 10.0, 60.0]), t64(1.7)
    v, k = fl.vmap(grow, (0, None))(xs, a)
    refs = [grow_ref(x, a) for x in xs]
    close(v, fl.stack([r[0] for r in refs]))
    assert k.tolist() == [int(r[1]) for r in refs]
    assert len(set(k.tolist())) > 2  # lanes really stop at different steps
    g = fl.vmap(fl.grad(lambda x, a: grow(x, a)[0], argnums=(0, 1)), (0, None))(xs, a)
    gr = [fl.grad(lambda x, a: grow_ref(x, a)[0], argnums=(0, 1))(x, a) for x in xs]
    close(g, (fl.stack([r[0] for r in gr]), fl.stack([r[1] for r in gr])))
    # a batched bound makes the predicate batched while the initial carry is not
    lims = t64([2.0, 10.0, 0.5])
    out = fl.vmap(
        lambda lim: fl.while_loop(lambda c: c[0] < lim, lambda c: (c[0] * 1.5 + 0.1, c[1] + 1), (t64(1.0), 0))
    )(lims)
    assert out[1].tolist() == [2, 6, 0]


def test_while_reverse_mode_finite_differences_and_higher_order():
    def f(x, a):
        body = lambda c: (fl.sin(c[0]) * c[0] * a + c[0], c[1] + 1)  # noqa: E731
        return fl.while_loop(lambda c: c[1] < 6, body, (x, 0), max_steps=9)[0]

    x, a = t64([0.3, 0.5, -0.2]), t64(0.8)
    check_grads(f, (x, a), order=2)
    check_grads(lambda x, a: grow(x, a)[0], (t64(1.3), t64(1.7)), order=1)

    def f_ref(x, a):
        for _ in range(6):
            x = fl.sin(x) * x * a + x
        return x

    close(fl.hessian(lambda x: f(x, a).sum())(x), fl.hessian(lambda x: f_ref(x, a).sum())(x), 1e-9)


def test_while_max_steps_truncates_and_zero_steps():
    x = t64([0.3, 0.5])

    def f(x):
        return fl.while_loop(lambda c: c.sum() < 1e9, lambda c: c * fl.cos(c) + c * 1.3, x, max_steps=7)

    def f_ref(x):
        for _ in range(7):
            x = x * fl.cos(x) + x * 1.3
        return x

    close(f(x), f_ref(x))
    close(fl.jacrev(f)(x), fl.jacrev(f_ref)(x))
    g = fl.grad(lambda x: fl.while_loop(lambda c: c.sum() > 1e9, lambda c: c * 2.0, x, max_steps=9).sum())(x)
    close(g, fl.ones_like(x))


def test_while_without_max_steps():
    x = t64(1.3)

    def f(x):
        return fl.while_loop(lambda v: v < 50.0, lambda v: v * 1.5, x)

    k = 0
    while 1.3 * 1.5**k < 50.0:
        k += 1
    close(fl.jvp(f, (x,), (t64(1.0),)), (t64(1.3 * 1.5**k), t64(1.5**k)))
    y, f_jvp = fl.linearize(f, x)
    close(f_jvp(t64(2.0)), t64(2 * 1.5**k))
    with pytest.raises(WhileGradientError, match="max_steps"):
        fl.grad(f)(x)
    with pytest.raises(ValueError, match="max_steps"):
        fl.while_loop(lambda v: v < 1.0, lambda v: v, x, max_steps=0)


def _while_residual_bytes(n: int) -> int:
    def f(x):
        return fl.while_loop(
            lambda c: c[1] < n, lambda c: (fl.sin(c[0]) + c[0], c[1] + 1), (x, 0), max_steps=n
        )[0]

    _, lin, _ = linearize_flat(lambda x: ([f(x)], None), [fl.ones(256, dtype=f64)], [True])
    return sum(np.asarray(c).nbytes for c in lin.consts)


def _scan_residual_bytes(n: int) -> int:
    def f(x):
        return fl.fori_loop(0, n, lambda i, c: fl.sin(c) + c, x)

    _, lin, _ = linearize_flat(lambda x: ([f(x)], None), [fl.ones(256, dtype=f64)], [True])
    return sum(np.asarray(c).nbytes for c in lin.consts)


def test_checkpointed_while_memory_is_sublinear():
    small, big = _while_residual_bytes(64), _while_residual_bytes(1024)
    ratio = big / small
    # ~sqrt(16) = 4 for 16x the steps; a stored tape (scan) grows ~16x
    assert 3.0 < ratio < 5.0, (small, big)
    assert _scan_residual_bytes(1024) / _scan_residual_bytes(64) > 14.0
    assert big < _scan_residual_bytes(1024) / 16


def test_fori_loop_static_is_scan_dynamic_is_while():
    x = t64(RNG.normal(size=4))

    def body(i, c):
        return c * fl.cos(c) + i

    def ref(x, n):
        for i in range(n):
            x = body(fl.asarray(i), x)
        return x

    assert "scan" in str(fl.make_jaxpr(lambda x: fl.fori_loop(0, 5, body, x))(x))
    close(fl.fori_loop(0, 5, body, x), ref(x, 5))
    close(fl.grad(lambda x: fl.fori_loop(0, 5, body, x).sum())(x), fl.grad(lambda x: ref(x, 5).sum())(x))
    want = fl.grad(lambda x: ref(x, 5).sum())(x)

    def dyn(x, n):
        return fl.fori_loop(0, n, body, x, max_steps=10).sum()

    assert "while" in str(fl.make_jaxpr(dyn)(x, fl.asarray(5)))
    close(fl.grad(dyn)(x, fl.asarray(5)), want)
    ns = fl.asarray([0, 2, 5])
    close(fl.vmap(dyn, (None, 0))(x, ns), fl.stack([ref(x, int(n)).sum() for n in ns]))
    assert fl.fori_loop(0, 4, lambda i, c: c + i, fl.asarray(0)).tolist() == 6
    assert float(fl.fori_loop(3, 1, lambda i, c: c + 1.0, 0.0)) == 0.0


def test_while_errors():
    with pytest.raises(CarryTypeError) as e:
        fl.while_loop(lambda c: c < 3, lambda c: c.astype(fl.float64) + 1, fl.tensor(0.0))
    assert "differs in dtype: f32[] vs f64[]" in str(e.value)
    with pytest.raises(TypeError, match="bool scalar"):
        fl.while_loop(lambda c: c, lambda c: c + 1, fl.tensor(0.0))
    assert float(fl.while_loop(lambda c: c < 2.5, lambda c: c + 0.5, 0)) == 2.5


# ------------------------------------------------------------------------------------------------------------
# jit: compiled programs with loops inside, and transforms of them


def test_scan_under_jit():
    close(fl.jit(scan_fn)(XS), scan_ref(XS))
    close(fl.jit(fl.grad(scan_fn))(XS), fl.grad(scan_ref)(XS))
    close(fl.grad(fl.jit(scan_fn))(XS), fl.grad(scan_ref)(XS))
    close(fl.jit(fl.vmap(fl.grad(scan_fn)))(XB), fl.stack([fl.grad(scan_ref)(x) for x in XB]))


def test_cond_and_switch_under_jit():
    for x in (t64([0.3, -0.1, 0.7]), t64([-0.3, 0.1, -0.7])):
        close(fl.jit(cond_fn)(x), cond_ref(x))
        close(fl.jit(fl.grad(cond_fn))(x), fl.grad(cond_ref)(x))
        close(fl.grad(fl.jit(cond_fn))(x), fl.grad(cond_ref)(x))
    x = t64([0.3, -0.1, 0.7])
    for i in (-1, 1, 5):
        close(fl.jit(switch_fn)(fl.asarray(i), x), switch_ref(i, x))


def test_while_under_jit():
    x, a = t64(1.3), t64(1.7)
    want = fl.grad(lambda x, a: grow_ref(x, a)[0], argnums=(0, 1))(x, a)
    close(fl.jit(grow)(x, a), grow_ref(x, a))
    close(fl.jit(fl.grad(lambda x, a: grow(x, a)[0], argnums=(0, 1)))(x, a), want)
    # the jitted body is staged whole; the while transpose checkpoints it then
    close(fl.grad(fl.jit(lambda x, a: grow(x, a)[0]), argnums=(0, 1))(x, a), want)
    with pytest.raises(WhileGradientError, match="max_steps"):
        fl.grad(fl.jit(lambda v: fl.while_loop(lambda v: v < 50.0, lambda v: v * 1.5, v)))(x)
    xv = t64(RNG.normal(size=4))

    def dyn(x, n):
        return fl.fori_loop(0, n, lambda i, c: c * fl.cos(c) + i, x, max_steps=10).sum()

    close(fl.jit(fl.grad(dyn))(xv, fl.asarray(5)), fl.grad(dyn)(xv, fl.asarray(5)))


# ------------------------------------------------------------------------------------------------------------
# map and associative_scan


def test_map():
    x = t64(RNG.normal(size=7))
    close(fl.map(lambda v: fl.sin(v) * v, x), fl.sin(x) * x)
    for bs in (1, 3, 7, 10):
        close(fl.map(lambda v: (v, v * 2.0), x, batch_size=bs), (x, x * 2.0))
        g = fl.grad(lambda x, bs=bs: fl.map(lambda v: fl.sin(v) * v, x, batch_size=bs).sum())(x)
        close(g, fl.cos(x) * x + fl.sin(x))
    xs = t64(RNG.normal(size=(2, 7)))
    close(fl.vmap(lambda x: fl.map(fl.exp, x, batch_size=3))(xs), fl.exp(xs))


def _affine(a, b):
    # compose x -> a0 x + a1, then x -> b0 x + b1: associative, not commutative
    return (a[0] * b[0], b[0] * a[1] + b[1])


def _matmul2(a, b):
    return {"m": fl.matmul(a["m"], b["m"])}


def _sequential_scan(fn, elems, reverse=False, axis=0):
    """The definition: a Python loop over slices (``reverse`` walks from the end, earlier result on the left)."""
    leaves, tree = fl.tree.flatten(elems)
    n = leaves[0].shape[axis]
    order = range(n - 1, -1, -1) if reverse else range(n)
    outs = [None] * n
    acc = None
    for i in order:
        x = fl.tree.unflatten(tree, [fl.take(v, fl.asarray([i]), axis=axis).squeeze(axis) for v in leaves])
        acc = x if acc is None else fn(acc, x)
        outs[i] = acc
    return fl.tree.map(lambda *xs: fl.stack(xs, axis=axis), *outs)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_matches_the_sequential_definition(n, reverse):
    """Non-commutative fns on pytrees, both directions, eager and jitted: reverse is flip, scan, flip (as JAX)."""
    A, B = t64(RNG.normal(size=(n, 2))), t64(RNG.normal(size=(n, 2)))
    want = _sequential_scan(_affine, (A, B), reverse)
    close(fl.associative_scan(_affine, (A, B), reverse=reverse), want)
    close(fl.jit(lambda a, b: fl.associative_scan(_affine, (a, b), reverse=reverse))(A, B), want)
    flipped = fl.associative_scan(_affine, (fl.flip(A, axis=0), fl.flip(B, axis=0)))
    if reverse:
        close(fl.tree.map(lambda v: fl.flip(v, axis=0), flipped), want)
    M = {"m": t64(RNG.normal(size=(2, n, 2, 2)))}
    want = _sequential_scan(_matmul2, M, reverse, axis=1)
    close(fl.associative_scan(_matmul2, M, reverse=reverse, axis=1), want)
    close(fl.jit(lambda m: fl.associative_scan(_matmul2, m, reverse=reverse, axis=1))(M), want)
    if n > 1:
        g = fl.grad(lambda a: fl.associative_scan(_affine, (a, B), reverse=reverse)[1].sum())(A)
        close(g, fl.grad(lambda a: _sequential_scan(_affine, (a, B), reverse)[1].sum())(A))


def test_associative_scan():
    x = t64(RNG.normal(size=(3, 5)))
    close(fl.associative_scan(fl.add, x, axis=1), fl.cumulative_sum(x, axis=1))
    suffix_sums = fl.flip(fl.cumulative_sum(fl.flip(x, axis=1), axis=1), axis=1)
    close(fl.associative_scan(fl.add, x, axis=1, reverse=True), suffix_sums)
    close(fl.jacrev(lambda v: fl.associative_scan(fl.multiply, v))(x[0]), fl.jacrev(fl.cumprod)(x[0]))
    close(fl.vmap(lambda v: fl.associative_scan(fl.multiply, v))(x), fl.cumprod(x, axis=1))


# ------------------------------------------------------------------------------------------------------------
# jaxprs


def test_jaxprs_typecheck_and_print_nested():
    x = t64([0.3, 0.5])

    def w(x):
        return fl.while_loop(
            lambda c: c[1] < 4, lambda c: (fl.sin(c[0]) * c[0], c[1] + 1), (x, 0), max_steps=8
        )[0].sum()

    def s(x):
        return fl.scan(lambda c, xi: (fl.cond(xi > 0, fl.sin, fl.cos, c * xi), None), x[0], x)[0]

    for f in (w, s):
        for g in (f, fl.grad(f), fl.jacfwd(f), fl.hessian(f), fl.vmap(fl.grad(f))):
            arg = fl.stack([x, x]) if g.__name__.startswith("vmap") else x
            j = fl.make_jaxpr(g)(arg)
            fl.typecheck(j.jaxpr)
    text = str(fl.make_jaxpr(s)(x))
    assert "branches=" in text and "jaxpr=" in text and "{ lambda" in text.split("branches=")[1]
