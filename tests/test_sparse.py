"""fl.sparse: COO and CSR against dense references, gradients over the pattern, duplicates, transforms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
from funclib.errors import DTypeError, ShapeError
from funclib.sparse import COO, CSR
from funclib.testing import check_grads

FORMATS = [COO, CSR]


def _random_pattern(rng, m, k, nse, dup=True):
    """A COO pattern with repeated entries (when ``dup``) in random order."""
    rows = rng.integers(0, m, nse)
    cols = rng.integers(0, k, nse)
    if dup and nse >= 2:
        rows[1], cols[1] = rows[0], cols[0]
    return rows.astype(np.int64), cols.astype(np.int64)


def _dense(values, rows, cols, shape):
    a = np.zeros(shape, np.asarray(values).dtype)
    ok = (rows < shape[0]) & (cols < shape[1])
    np.add.at(a, (rows[ok], cols[ok]), np.asarray(values)[ok])
    return a


def _coo(rng, m=6, k=5, nse=9, dtype=np.float64):
    rows, cols = _random_pattern(rng, m, k, nse)
    v = rng.standard_normal(nse).astype(dtype)
    return COO(v, rows, cols, (m, k)), _dense(v, rows, cols, (m, k))


dense_matrices = hnp.arrays(
    np.float64,
    st.tuples(st.integers(1, 5), st.integers(1, 5)),
    elements=st.sampled_from([0.0, 0.0, 0.0, 1.5, -2.0, 0.25]),
)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda c: c.__name__)
@settings(max_examples=20)
@given(x=dense_matrices, extra=st.integers(0, 3))
def test_fromdense_todense_and_every_op_match_dense(fmt, x, extra):
    nnz = int(np.count_nonzero(x))
    a = fmt.fromdense(fl.asarray(x), nse=nnz + extra)  # padded past the nonzeros
    assert a.nse == nnz + extra and a.shape == x.shape
    np.testing.assert_array_equal(a.todense().numpy(), x)
    rng = np.random.default_rng(0)
    m, k = x.shape
    b = rng.standard_normal((k, 3))
    np.testing.assert_allclose((a @ fl.asarray(b)).numpy(), x @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose((a @ fl.asarray(b[:, 0])).numpy(), x @ b[:, 0], rtol=1e-12, atol=1e-12)
    d = rng.standard_normal((2, 4, m))
    np.testing.assert_allclose((fl.asarray(d) @ a).numpy(), d @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(a.T.todense().numpy(), x.T)
    np.testing.assert_allclose(a.sum(0).numpy(), x.sum(0), atol=1e-12)
    np.testing.assert_allclose(a.sum(1).numpy(), x.sum(1), atol=1e-12)
    np.testing.assert_allclose(float(a.sum()), x.sum(), atol=1e-12)
    w = rng.standard_normal((m, k))
    np.testing.assert_allclose((a * fl.asarray(w)).todense().numpy(), x * w, atol=1e-12)
    np.testing.assert_allclose((a * 3.0).todense().numpy(), 3 * x)
    np.testing.assert_array_equal(a.tocsr().todense().numpy(), x)
    np.testing.assert_array_equal(a.tocoo().todense().numpy(), x)


@pytest.mark.parametrize("fmt", ["coo", "csr"])
def test_duplicate_entries_add_up_in_every_operation(fmt):
    # two entries at (0, 1) and a padding entry: the matrix is [[0, 5], [1, 0]]
    v = fl.asarray([2.0, 3.0, 1.0, 7.0], dtype=fl.float64)
    coo = COO(v, [0, 0, 1, 2], [1, 1, 0, 2], (2, 2))
    a = coo if fmt == "coo" else coo.tocsr()
    x = np.array([[0.0, 5.0], [1.0, 0.0]])
    np.testing.assert_array_equal(a.todense().numpy(), x)
    np.testing.assert_array_equal((a @ fl.eye(2, dtype=fl.float64)).numpy(), x)
    np.testing.assert_array_equal((fl.eye(2, dtype=fl.float64) @ a).numpy(), x)
    np.testing.assert_array_equal(a.T.todense().numpy(), x.T)
    assert float(a.sum()) == 6.0
    np.testing.assert_array_equal(a.sum(0).numpy(), [1.0, 5.0])
    np.testing.assert_array_equal((a * fl.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=fl.float64)).todense().numpy(),
                                  [[0.0, 10.0], [3.0, 0.0]])
    # each duplicate gets the gradient of the position it adds to; padding gets none that matters
    g = fl.grad(lambda a: fl.sum((a @ fl.asarray([[1.0], [10.0]], dtype=fl.float64)) ** 2))(a)
    gd = fl.grad(lambda d: fl.sum((d @ fl.asarray([[1.0], [10.0]], dtype=fl.float64)) ** 2))(fl.asarray(x))
    coo_g = g if fmt == "coo" else g.tocoo()
    got = coo_g.values.numpy()
    assert got[0] == got[1] == gd.numpy()[0, 1]
    assert got[2] == gd.numpy()[1, 0]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda c: c.__name__)
def test_check_grads_of_sparse_dense_products(fmt):
    rng = np.random.default_rng(1)
    a, _ = _coo(rng)
    a = a if fmt is COO else a.tocsr()
    b = fl.asarray(rng.standard_normal((5, 3)))
    d = fl.asarray(rng.standard_normal((2, 6)))

    def right(values, b):
        return a._with_values(values) @ b

    def left(d, values):
        return d @ a._with_values(values)

    check_grads(right, (a.values, b), order=2)
    check_grads(left, (d, a.values), order=2)
    check_grads(lambda v, w: (a._with_values(v) * w).values, (a.values, fl.asarray(rng.standard_normal((6, 5)))))
    check_grads(lambda v: a._with_values(v).todense(), (a.values,))
    check_grads(lambda v: a._with_values(v).T.todense(), (a.values,))
    check_grads(lambda v: a._with_values(v).sum(1), (a.values,))


def test_gradient_is_over_the_pattern_and_never_dense():
    rng = np.random.default_rng(2)
    m, k, nse = 3000, 2500, 40
    rows, cols = _random_pattern(rng, m, k, nse)
    a = COO(rng.standard_normal(nse).astype(np.float32), rows, cols, (m, k))
    b = fl.asarray(rng.standard_normal((k, 4)).astype(np.float32))

    def loss(a, b):
        return fl.sum(fl.tanh(a @ b))

    ga, gb = fl.grad(loss, argnums=(0, 1))(a, b)
    assert isinstance(ga, COO) and ga.shape == (m, k)
    np.testing.assert_array_equal(ga.row.numpy(), rows)
    # the reference: the dense gradient, read at the pattern
    y = np.tanh(_dense(a.values.numpy(), rows, cols, (m, k)) @ b.numpy())
    ct = 1 - y**2
    np.testing.assert_allclose(ga.values.numpy(), (ct[rows] * b.numpy()[cols]).sum(1), rtol=1e-5, atol=1e-6)
    # no equation of the gradient computation holds anything of m * k elements
    jaxpr = fl.make_jaxpr(fl.grad(loss))(a, b).jaxpr
    sizes = [int(np.prod(v.aval.shape)) for e in jaxpr.eqns for v in e.outputs]
    assert max(sizes) < m * k // 100, max(sizes)
    assert "sddmm" in {e.prim.name for e in jaxpr.eqns}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda c: c.__name__)
def test_vmap_over_dense_operands_and_batches_of_values(fmt):
    rng = np.random.default_rng(3)
    a, x = _coo(rng, dtype=np.float32)
    a = a if fmt is COO else a.tocsr()
    bs = fl.asarray(rng.standard_normal((4, 5, 3)).astype(np.float32))
    got = fl.vmap(lambda b: a @ b)(bs)
    np.testing.assert_allclose(got.numpy(), np.einsum("mk,bkn->bmn", x, bs.numpy()), rtol=1e-5, atol=1e-5)
    got = fl.vmap(lambda b: b @ a, in_axes=1)(fl.asarray(rng.standard_normal((2, 4, 6)).astype(np.float32)))
    assert got.shape == (4, 2, 5)
    # a batch of values sharing the pattern: the matrix itself is the vmapped argument
    scales = fl.asarray(rng.standard_normal((3, 1)).astype(np.float32))
    batch = a._with_values(scales * a.values)
    got = fl.vmap(lambda a: a @ bs[0])(batch)
    want = np.stack([s * x @ bs[0].numpy() for s in scales.numpy()[:, 0]])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    both = fl.vmap(lambda a, b: (a @ b).sum())(batch, bs[:3])
    np.testing.assert_allclose(both.numpy(), [float((s * x @ b).sum()) for s, b in zip(scales.numpy()[:, 0],
                                                                                         bs[:3].numpy())], rtol=1e-4)
    per_example = fl.vmap(fl.grad(lambda a, b: fl.sum(a @ b)), in_axes=(None, 0))(a, bs)
    assert type(per_example) is type(a) and per_example.values.shape == (4, a.nse)


def test_batched_patterns_from_fromdense_under_vmap():
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((3, 4, 5)).astype(np.float32)
    xs[xs < 0.5] = 0
    b = fl.asarray(rng.standard_normal((5, 2)).astype(np.float32))
    for fmt in FORMATS:
        got = fl.vmap(lambda x, fmt=fmt: fmt.fromdense(x, nse=20) @ b)(fl.asarray(xs))
        np.testing.assert_allclose(got.numpy(), xs @ b.numpy(), rtol=1e-5, atol=1e-6)
        got = fl.vmap(lambda x, fmt=fmt: fmt.fromdense(x, nse=20).T.todense())(fl.asarray(xs))
        np.testing.assert_array_equal(got.numpy(), np.swapaxes(xs, 1, 2))


def test_jit_compiles_once_per_pattern():
    rng = np.random.default_rng(5)
    a, x = _coo(rng, dtype=np.float32)
    b = fl.asarray(rng.standard_normal((5, 2)).astype(np.float32))
    traces = []

    @fl.jit
    def f(a, b):
        traces.append(1)
        return a @ b

    f(a, b)
    f(a._with_values(a.values * 2), b)
    assert len(traces) == 1  # new values, same pattern: no retrace
    other = COO(a.values, a.row.numpy()[::-1].copy(), a.col.numpy(), a.shape)
    np.testing.assert_allclose(f(other, b).numpy(), other.todense().numpy() @ b.numpy(), rtol=1e-5, atol=1e-6)
    assert len(traces) == 2
    # fromdense inside jit needs a static nse
    g = fl.jit(lambda d: CSR.fromdense(d, nse=12) @ b)
    np.testing.assert_allclose(g(fl.asarray(x)).numpy(), x @ b.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="pass nse="):
        fl.jit(lambda d: COO.fromdense(d))(fl.asarray(x))


def test_errors_name_the_problem():
    with pytest.raises(IndexError, match=r"COO: row 7 is out of range \[0, 3\]"):
        COO([1.0], [7], [0], (3, 3))
    with pytest.raises(ShapeError, match="one entry per stored element"):
        COO([1.0, 2.0], [0], [0], (3, 3))
    with pytest.raises(ValueError, match="indptr must start at 0"):
        CSR([1.0], [0], [1, 1], (1, 1))
    a = COO.fromdense(fl.eye(3))
    with pytest.raises(ShapeError, match=r"first axis 3"):
        a @ fl.ones((4, 2))
    with pytest.raises(DTypeError, match="must share a dtype"):
        a @ fl.ones((3, 2), dtype=fl.float64)
    with pytest.raises(TypeError, match="sparse @ sparse is not supported"):
        a @ a
    with pytest.raises(ValueError, match="more than nse=1"):
        COO.fromdense(fl.eye(3), nse=1)
    with pytest.raises(ShapeError, match="fl.vmap"):
        a._with_values(fl.ones((2, 3))) @ fl.ones((3, 1))


def test_scipy_conversions():
    sp = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(6)
    m = sp.random(7, 9, density=0.3, format="csr", random_state=0, dtype=np.float64)
    a = fl.sparse.from_scipy(m)
    assert isinstance(a, CSR)
    np.testing.assert_array_equal(a.todense().numpy(), m.toarray())
    b = rng.standard_normal((9, 2))
    np.testing.assert_allclose((a @ fl.asarray(b)).numpy(), m @ b)
    np.testing.assert_array_equal(fl.sparse.to_scipy(a).toarray(), m.toarray())
    c = fl.sparse.from_scipy(m.tocoo())
    np.testing.assert_array_equal(fl.sparse.to_scipy(c).toarray(), m.toarray())
