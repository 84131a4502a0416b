"""funclib.numpy's objects and edge cases: ufunc methods, r_/c_/mgrid/ogrid, vectorize, the functional forms of
NumPy's in-place functions, static-size variants, and the errors for what immutable tensors cannot do."""

from __future__ import annotations

import numpy as np
import pytest

import funclib as fl
import funclib.numpy as fnp
from funclib.core import Tensor
from funclib.errors import DataDependentShapeError, ImmutableError

rng = np.random.default_rng(2)
A = rng.standard_normal((3, 4))
X = fl.asarray(A)


def same(got, want, rtol=1e-12):
    assert isinstance(got, Tensor)
    want = np.asarray(want)
    assert tuple(got.shape) == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=rtol)


# ---------------------------------------------------------------------------------------------------------------
# ufunc objects


def test_ufunc_attributes():
    assert isinstance(fnp.add, fnp.ufunc) and fnp.add.nin == 2 and fnp.add.nout == 1 and fnp.add.identity == 0
    assert fnp.divmod.nout == 2 and fnp.sin.nin == 1 and fnp.multiply.identity == 1 and fnp.maximum.identity is None
    assert repr(fnp.add) == "<ufunc 'add'>" and fnp.add.__name__ == "add" and "x1 + x2" in fnp.add.__doc__


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum", "logaddexp", "hypot", "fmax",
                                  "logical_and", "logical_or", "bitwise_xor", "subtract", "divide"])
def test_ufunc_reduce_accumulate_outer_match_numpy(name):
    ours, theirs = getattr(fnp, name), getattr(np, name)
    x = (A > 0) if name.startswith("logical") else (rng.integers(0, 9, (3, 4)) if name.startswith("bitwise")
                                                     else np.abs(A) + 0.5)
    same(ours.reduce(fl.asarray(x), 1), theirs.reduce(x, 1))
    same(ours.reduce(fl.asarray(x), axis=0, keepdims=True), theirs.reduce(x, axis=0, keepdims=True))
    same(ours.accumulate(fl.asarray(x), axis=1), theirs.accumulate(x, axis=1), rtol=1e-11)
    same(ours.outer(fl.asarray(x[0]), fl.asarray(x[1])), theirs.outer(x[0], x[1]))
    if theirs.identity is not None or name in ("maximum", "minimum"):
        init = 0.5 if name in ("maximum", "minimum") else theirs.identity
        mask = np.array([True, False, True, True])
        same(ours.reduce(fl.asarray(x), 1, initial=init, where=mask), theirs.reduce(x, 1, initial=init, where=mask))
    if name in ("add", "multiply", "maximum", "minimum", "logical_and", "bitwise_xor"):
        same(ours.reduce(fl.asarray(x), axis=None), theirs.reduce(x, axis=None))
        same(ours.reduceat(fl.asarray(x), [0, 2, 1, 3], axis=1), theirs.reduceat(x, [0, 2, 1, 3], axis=1))


def test_non_associative_reduce_folds_left_to_right():
    x = np.array([2.0, 3.0, 2.0, 1.5])
    # a sequential fold, as NumPy defines reduce (and as its accumulate computes)
    same(fnp.power.reduce(fl.asarray(x)), np.power.accumulate(x)[-1])
    same(fnp.arctan2.reduce(fl.asarray(x)), np.arctan2.accumulate(x)[-1])
    same(fnp.subtract.reduce(fl.asarray(x), initial=10.0), 10.0 - x.sum())
    with pytest.raises(ValueError, match="associative"):
        fnp.subtract.reduce(fl.asarray(A), axis=(0, 1))
    with pytest.raises(ValueError, match="no identity"):
        fnp.maximum.reduce(fl.asarray(np.zeros((0, 3))))


def test_ufunc_at_is_functional():
    idx = np.array([0, 0, 3, 1])
    got = fnp.add.at(fl.zeros(5), fl.asarray(idx), 1.0, inplace=False)
    want = np.zeros(5)
    np.add.at(want, idx, 1.0)
    same(got, want)
    same(fnp.subtract.at(fl.ones(3), [0, 0], 2.0, inplace=False), [-3.0, 1.0, 1.0])
    same(fnp.negative.at(fl.asarray([1.0, 2.0, 3.0]), [0, 2], inplace=False), [-1.0, 2.0, -3.0])
    same(fnp.multiply.at(fl.asarray([1.0, 2.0, 3.0]), [1, 2], 10.0, inplace=False), [1.0, 20.0, 30.0])
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.add.at(fl.zeros(3), [0], 1.0)
    with pytest.raises(ValueError, match="repeated indices"):
        fnp.multiply.at(fl.ones(3), [0, 0], 2.0, inplace=False)


def test_ufunc_keywords():
    a, b = np.array([1, 2, 3]), np.array([1.5, 2.5, 3.5])
    got = fnp.add(fl.asarray(a), fl.asarray(b), dtype=fnp.float32)
    assert got.dtype == np.float32 and np.allclose(np.asarray(got), np.add(a, b, dtype=np.float32))
    with pytest.raises(TypeError, match="cannot cast.*float64 to int64"):
        fnp.add(fl.asarray(b), 1, dtype=np.int64)
    same(fnp.add(fl.asarray(b), 1, dtype=np.int64, casting="unsafe"), np.add(b, 1, dtype=np.int64, casting="unsafe"))
    with pytest.raises(ValueError, match="where="):
        fnp.sin(X, where=X > 0)
    with pytest.raises(TypeError, match="out= is not supported"):
        fnp.sin(X, out=np.empty((3, 4)))
    with pytest.raises(ValueError, match="signature="):
        fnp.add(X, X, signature="dd->d")
    same(fnp.add(X, X, order="F", subok=False), A + A)


def test_frompyfunc():
    f = fnp.frompyfunc(lambda a, b: a * b + 1.0, 2, 1)
    assert isinstance(f, fnp.ufunc) and f.nin == 2
    same(f(X, 2.0), A * 2 + 1)
    same(f.outer(X[0], X[1]), np.multiply.outer(A[0], A[1]) + 1)
    g = fnp.frompyfunc(lambda a: (a + 1.0, a - 1.0), 1, 2)
    lo, hi = g(X)
    same(lo, A + 1)
    same(hi, A - 1)


# ---------------------------------------------------------------------------------------------------------------
# index helpers


@pytest.mark.parametrize("key", [
    (slice(0, 1, 5j), 3),
    ("0,2", [1, 2], [3, 4]),
    ("-1,3,0", [1, 2], [3, 4]),
    ("1,2,0", [1, 2], [3, 4]),
    (slice(2, 7, 2), 1.5, [7.0, 8.0]),
    (np.array([1, 2]), 3, np.array([4.0])),
])
def test_r_matches_numpy(key):
    conv = tuple(fl.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    same(fnp.r_[conv], np.r_[key])


def test_c_mgrid_ogrid_ix_s_match_numpy():
    same(fnp.c_[X[0], X[1]], np.c_[A[0], A[1]])
    same(fnp.c_[fl.ones((2, 2)), fl.asarray([5, 6])], np.c_[np.ones((2, 2)), [5, 6]])
    same(fnp.c_[fl.asarray([[1, 2, 3]]), 0, 0, fl.asarray([[4, 5, 6]])], np.c_[np.array([[1, 2, 3]]), 0, 0,
                                                                               np.array([[4, 5, 6]])])
    g = fnp.mgrid[0:2, 0:1:4j]
    assert g.dtype == fl.float32 and g.shape == (2, 2, 4)
    same(g, np.mgrid[0:2, 0:1:4j].astype(np.float32), rtol=1e-7)
    same(fnp.mgrid[1:7:2], np.mgrid[1:7:2])
    for ours, theirs in zip(fnp.ogrid[0:2, 3:6], np.ogrid[0:2, 3:6]):
        same(ours, theirs)
    for ours, theirs in zip(fnp.ix_([0, 2], [True, False, True, True]), np.ix_([0, 2], [True, False, True, True])):
        same(ours, theirs)
    assert fnp.s_[1:3, ::2] == np.s_[1:3, ::2] and fnp.index_exp[1:2] == np.index_exp[1:2]
    same(X[fnp.ix_([0, 2], [1, 3])], A[np.ix_([0, 2], [1, 3])])
    with pytest.raises(ValueError, match="first entry"):
        fnp.r_[1, "0,2"]


def test_r_traces():
    f = fl.jit(lambda v: fnp.r_[v, 0.0, v[::-1]])
    same(f(X[0]), np.r_[A[0], 0.0, A[0][::-1]])


# ---------------------------------------------------------------------------------------------------------------
# vectorize, apply_*


def test_vectorize_forms():
    f = fnp.vectorize(lambda a, b: a * b, excluded={1})
    same(f(X, 3.0), A * 3)
    g = fnp.vectorize(lambda m, v: (fnp.dot(m, v), fnp.sum(v)), signature="(m,n),(n)->(m),()")
    mats, vecs = rng.standard_normal((5, 2, 3)), rng.standard_normal((4, 1, 3))
    y, s = g(fl.asarray(mats), fl.asarray(vecs))
    assert y.shape == (4, 5, 2) and s.shape == (4, 5)
    same(y, np.stack([[mats[b] @ vecs[c, 0] for b in range(5)] for c in range(4)]))
    h = fnp.vectorize(otypes=[np.float32])(lambda a: a + 1)
    assert h(X).dtype == np.float32
    with pytest.raises(ValueError, match="core dimension"):
        fnp.vectorize(lambda a, b: a, signature="(n),(n)->()")(fl.ones(3), fl.ones(4))
    with pytest.raises(ValueError, match="gufunc signature"):
        fnp.vectorize(lambda a: a, signature="(n)->")


def test_apply_along_axis_matches_numpy():
    same(fnp.apply_along_axis(lambda v: fnp.stack([v.max(), v.min()]), 0, X),
         np.apply_along_axis(lambda v: np.stack([v.max(), v.min()]), 0, A))
    same(fnp.apply_along_axis(lambda v: fnp.outer(v, v), 1, X), np.apply_along_axis(lambda v: np.outer(v, v), 1, A))
    same(fnp.apply_over_axes(fnp.mean, X, (0, 1)), np.apply_over_axes(np.mean, A, (0, 1)))


# ---------------------------------------------------------------------------------------------------------------
# functional forms of in-place functions; static shapes


def test_in_place_functions_need_inplace_false():
    for call in (lambda: fnp.put(X, [0], 1.0), lambda: fnp.place(X, X > 0, [1.0]),
                 lambda: fnp.fill_diagonal(X, 1.0), lambda: fnp.put_along_axis(X, fl.asarray([[0]] * 3), 1.0, 1)):
        with pytest.raises(ValueError, match="inplace=False"):
            call()
    want = A.copy()
    np.put(want, [1, 5, 20], [9.0, 8.0], mode="wrap")
    same(fnp.put(X, [1, 5, 20], [9.0, 8.0], mode="wrap", inplace=False), want)
    want = A.copy()
    np.place(want, want > 0, [7.0, 6.0])
    same(fnp.place(X, X > 0, [7.0, 6.0], inplace=False), want)
    tall = np.zeros((7, 3))
    np.fill_diagonal(tall, [1.0, 2.0], wrap=True)
    same(fnp.fill_diagonal(fl.zeros((7, 3)), [1.0, 2.0], wrap=True, inplace=False), tall)
    cube = np.zeros((3, 3, 3))
    np.fill_diagonal(cube, 5.0)
    same(fnp.fill_diagonal(fl.zeros((3, 3, 3)), 5.0, inplace=False), cube)
    idx = np.array([[1], [0], [3]])
    want = A.copy()
    np.put_along_axis(want, idx, -1.0, 1)
    same(fnp.put_along_axis(X, fl.asarray(idx), -1.0, 1, inplace=False), want)
    with pytest.raises(ImmutableError, match="at\\["):
        X[0, 0] = 1.0


def test_static_size_variants_trace():
    x = np.array([[0, 3, 0], [5, 0, 7]])
    got = fl.jit(lambda v: fnp.nonzero(v, size=4, fill_value=-1))(fl.asarray(x))
    for g, w in zip(got, (np.array([0, 1, 1, -1]), np.array([1, 0, 2, -1]))):
        same(g, w)
    same(fl.jit(lambda v: fnp.argwhere(v, size=2))(fl.asarray(x)), np.argwhere(x)[:2])
    same(fl.jit(lambda v: fnp.flatnonzero(v, size=5, fill_value=9))(fl.asarray(x)), [1, 3, 5, 9, 9])
    same(fl.vmap(lambda v: fnp.bincount(v, length=4))(fl.asarray([[0, 1, 1], [3, 3, 2]])), [[1, 2, 0, 0],
                                                                                            [0, 0, 1, 2]])
    same(fnp.where(fl.asarray(x), size=1)[1], [1])


def test_lstsq_residuals_under_jit():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    b = np.array([1.0, 1.0, 3.0])
    x, res, rank, s = fl.jit(fnp.linalg.lstsq)(fl.asarray(a), fl.asarray(b))
    nx, nres, nrank, ns = np.linalg.lstsq(a, b)
    for got, want in ((x, nx), (res, nres), (s, ns)):
        same(got, want)
    assert int(rank) == nrank and rank.dtype == np.int32
    deficient = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    assert fnp.linalg.lstsq(fl.asarray(deficient), fl.asarray(b))[1].shape == (0,)
    traced = fl.jit(fnp.linalg.lstsq)(fl.asarray(deficient), fl.asarray(b))[1]
    assert traced.shape == (1,) and np.isnan(np.asarray(traced)).all()


def test_nanargmax_all_nan_slice():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    with pytest.raises(ValueError, match="All-NaN"):
        fnp.nanargmax(fl.asarray(x), axis=1)
    same(fl.jit(lambda v: fnp.nanargmax(v, axis=1))(fl.asarray(x)), [-1, 0])


def test_creation_from_python_objects():
    same(fnp.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=int), np.fromfunction(lambda i, j: i * 10 + j,
                                                                                        (2, 3), dtype=int))
    same(fnp.fromiter(iter([1.5, 2.5]), np.float64), [1.5, 2.5])
    same(fnp.fromstring("1, 2, 3", dtype=int, sep=","), [1, 2, 3])
    with pytest.raises(ValueError, match="frombuffer"):
        fnp.fromstring("abc", sep="")
    buf = np.arange(4, dtype=np.int16).tobytes()
    same(fnp.frombuffer(buf, dtype=np.int16, count=2, offset=2), [1, 2])
    for ours, theirs in zip(fnp.mask_indices(3, fnp.triu, 1), np.mask_indices(3, np.triu, 1)):
        same(ours, theirs)
    assert fnp.einsum_path("ij,jk,kl->il", fl.ones((2, 3)), fl.ones((3, 4)), fl.ones((4, 5)))[0] == np.einsum_path(
        "ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)), optimize="greedy")[0]


# ---------------------------------------------------------------------------------------------------------------
# errors name the function and the fix


@pytest.mark.parametrize("call", [
    lambda: fnp.sum(X, out=np.empty(())),
    lambda: fnp.cumsum(X, out=np.empty(12)),
    lambda: fnp.dot(X, X.T, out=np.empty((3, 3))),
    lambda: fnp.concatenate([X, X], out=np.empty((6, 4))),
    lambda: fnp.fft.fft(X, out=np.empty((3, 4), complex)),
    lambda: fnp.clip(X, 0, 1, out=np.empty((3, 4))),
    lambda: fnp.divmod(X, 2.0, out=(np.empty((3, 4)), None)),
])
def test_out_is_refused(call):
    with pytest.raises(TypeError, match="out= is not supported.*immutable"):
        call()


def test_unsupported_arguments_are_refused_clearly():
    with pytest.raises(ValueError, match="order="):
        fnp.sort(X, order="f0")
    with pytest.raises(TypeError, match="callable mode"):
        fnp.pad(X, 1, mode=lambda *a: None)
    with pytest.raises(ValueError, match="unsupported keyword arguments for mode 'edge'"):
        fnp.pad(X, 1, mode="edge", constant_values=3)
    with pytest.raises(ValueError, match="raw"):
        fnp.linalg.qr(X, mode="raw")
    with pytest.raises(ValueError, match="ndmax"):
        fnp.array([[1]], ndmax=1)
    with pytest.raises(TypeError, match="like="):
        fnp.zeros(3, like=np.empty(1))
    with pytest.raises(ValueError, match="split into 3 equal"):
        fnp.split(X, 3, axis=1)
    with pytest.raises(ValueError, match="only method='inverted_cdf' supports weights"):
        fnp.quantile(X, 0.5, weights=fl.ones((3, 4)))
    with pytest.raises(ValueError, match="quantiles must be in the range"):
        fnp.quantile(X, 1.5)
    with pytest.raises(ValueError, match="ddof and correction"):
        fnp.var(X, ddof=1, correction=1)
    with pytest.raises(ValueError, match="either both or neither"):
        fnp.where(X > 0, X)
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        fnp.linalg.det(X)


def test_data_dependent_error_names_function_and_fix():
    with pytest.raises(DataDependentShapeError, match=r"numpy\.unique.*outside the transform"):
        fl.jit(fnp.unique)(X)
    with pytest.raises(DataDependentShapeError, match="length="):
        fl.jit(fnp.bincount)(fl.asarray([1, 2]))
    with pytest.raises(DataDependentShapeError, match="strip_zeros=False"):
        fl.jit(fnp.roots)(fl.asarray([1.0, 2.0]))


def test_weighted_quantile_matches_numpy():
    x = rng.standard_normal((4, 6))
    w = rng.uniform(0, 2, (4, 6))
    w[0, :2] = 0
    q = [0.0, 0.3, 0.5, 1.0]
    same(fnp.quantile(fl.asarray(x), q, axis=1, method="inverted_cdf", weights=fl.asarray(w)),
         np.quantile(x, q, axis=1, method="inverted_cdf", weights=w))
    same(fnp.percentile(fl.asarray(x[0]), 40, method="inverted_cdf", weights=fl.asarray(w[1])),
         np.percentile(x[0], 40, method="inverted_cdf", weights=w[1]))


def test_unique_variants_match_numpy():
    x = np.array([2.0, np.nan, 1.0, 2.0, np.nan])
    for ours, theirs in zip(fnp.unique(fl.asarray(x), True, True, True, equal_nan=False),
                            np.unique(x, True, True, True, equal_nan=False)):
        same(ours, theirs)
    for ours, theirs in zip(fnp.unique_all(fl.asarray(x)), np.unique_all(x)):
        same(ours, theirs)
    same(fnp.unique_values(fl.asarray([3, 1, 3])), np.unique_values(np.array([3, 1, 3])))


def test_long_convolutions_go_through_the_fft():
    a, v = rng.standard_normal(3000), rng.standard_normal(700)  # 700 windows of 3699: past the direct limit
    for x, k in ((a, v), (a + 1j * a[::-1], v)):
        for mode in ("full", "same", "valid"):
            want = np.convolve(x, k, mode)
            got = np.asarray(fnp.convolve(fl.asarray(x), fl.asarray(k), mode))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())
            want = np.correlate(k, x, mode)
            got = np.asarray(fnp.correlate(fl.asarray(k), fl.asarray(x), mode))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_sort_keeps_signed_zeros_in_order():
    # the fast path for values alone must not reorder -0 and +0 (the sort is stable)
    x = np.array([0.0, -0.0, 2.0, -0.0, 0.0, -1.0])
    got = np.asarray(fnp.sort(fl.asarray(x)))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x[np.argsort(x, kind="stable")]))
    same(fnp.sort(fl.asarray(A), axis=0), np.sort(A, axis=0))


@pytest.mark.parametrize("module", ["funclib.numpy"] + [f"funclib.numpy.{m}" for m in (
    "_creation", "_dtypes", "_elementwise", "_functional", "_index_tricks", "_indexing", "_manipulation", "_pad",
    "_polynomial", "_printing", "_products", "_reductions", "_signal", "_sorting", "_statistics", "_ufunc",
    "linalg", "fft")])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    mod = importlib.import_module(module)
    result = doctest.testmod(mod, extraglobs={"fl": fl, "fnp": fnp, "np": np},
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0, result
