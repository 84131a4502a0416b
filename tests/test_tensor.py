"""The Tensor object: immutability and ``.at`` updates, attributes, NumPy-style indexing, conversions,
operators (in-place ones rebind), repr, and the buffer-ownership rules of ``asarray``/``numpy()``."""

from __future__ import annotations

import copy
import operator
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
from funclib.errors import DataDependentShapeError, ImmutableError


def _np(x):
    return np.asarray(x)


# --- immutability and .at -----------------------------------------------------------------------------------


def test_setitem_raises_type_error_naming_the_fix():
    x = fl.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match=r"x\.at\[idx\]\.set\(v\)") as info:
        x[0] = 1
    assert isinstance(info.value, ImmutableError)
    assert x.tolist() == [1.0, 2.0]


def test_at_set_returns_a_new_tensor_and_leaves_the_old_one():
    x = fl.zeros((3, 4))
    y = x.at[1, 2:].set(5.0)
    assert _np(x).sum() == 0
    expected = np.zeros((3, 4), np.float32)
    expected[1, 2:] = 5.0
    np.testing.assert_array_equal(_np(y), expected)
    assert y.dtype == fl.float32


def test_at_updates():
    x = fl.asarray([1.0, 2.0, 3.0, 4.0])
    idx = fl.asarray([0, 2])
    np.testing.assert_array_equal(_np(x.at[idx].add(10.0)), [11, 2, 13, 4])
    np.testing.assert_array_equal(_np(x.at[idx].multiply(2.0)), [2, 2, 6, 4])
    np.testing.assert_array_equal(_np(x.at[idx].divide(2.0)), [0.5, 2, 1.5, 4])
    np.testing.assert_array_equal(_np(x.at[idx].min(fl.asarray([0.0, 9.0]))), [0, 2, 3, 4])
    np.testing.assert_array_equal(_np(x.at[idx].max(fl.asarray([0.0, 9.0]))), [1, 2, 9, 4])
    np.testing.assert_array_equal(_np(x.at[1:3].get()), [2, 3])
    np.testing.assert_array_equal(_np(x.at[-1].set(0.0)), [1, 2, 3, 0])


def test_at_add_accumulates_repeated_indices_and_set_writes_once():
    x = fl.zeros(3)
    np.testing.assert_array_equal(_np(x.at[fl.asarray([0, 0, 2])].add(1.0)), [2, 0, 1])
    assert _np(x.at[fl.asarray([1, 1])].set(7.0))[1] == 7


def test_at_with_boolean_mask_and_broadcast_values():
    x = fl.arange(6).reshape(2, 3)
    y = x.at[x > 2].set(0)
    np.testing.assert_array_equal(_np(y), [[0, 1, 2], [0, 0, 0]])
    z = x.at[:, 1].set(fl.asarray([7, 8]))
    np.testing.assert_array_equal(_np(z), [[0, 7, 2], [3, 8, 5]])
    with pytest.raises(fl.errors.ShapeError, match="does not broadcast"):
        x.at[0].set(fl.asarray([1, 2]))


@pytest.mark.parametrize(
    "key",
    [(1, slice(None), 2), (slice(None), 0), (Ellipsis, np.array([3, 0])), (np.array([1, 0]), 1, slice(1, 3))],
)
def test_at_set_matches_numpy_assignment(key):
    want = _BASE.copy()
    want[key] = -1.0
    fkey = tuple(fl.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    np.testing.assert_array_equal(_np(fl.asarray(_BASE).at[fkey].set(-1.0)), want)


def test_at_is_differentiable():
    g = fl.grad(lambda x: (x.at[0].multiply(3.0) ** 2).sum())(fl.asarray([1.0, 2.0]))
    np.testing.assert_allclose(_np(g), [18.0, 4.0])


@pytest.mark.parametrize(
    ("method", "ufunc", "base"),
    [("max", np.maximum, 0.0), ("min", np.minimum, 0.0), ("multiply", np.multiply, 1.0), ("add", np.add, 0.0)],
)
def test_at_combines_every_repeated_index_like_ufunc_at(method, ufunc, base):
    """Each update to a repeated index takes part (np.maximum.at semantics), eagerly and under jit and vmap."""
    first = {"max": 5.0, "min": -5.0, "multiply": 5.0, "add": 5.0}[method]
    x, idx, u = fl.full((1,), base), fl.asarray([0, 0]), fl.asarray([first, 2.0 if method == "multiply" else 1.0])
    want = np.full(1, base, np.float32)
    ufunc.at(want, [0, 0], u.numpy())
    np.testing.assert_array_equal(_np(getattr(x.at[idx], method)(u)), want)
    np.testing.assert_array_equal(_np(fl.jit(lambda x, u: getattr(x.at[idx], method)(u))(x, u)), want)
    rng = np.random.default_rng(0)
    xs, us = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 6, 5))
    rows = rng.integers(0, 4, size=6)
    rows[:2] = 1  # at least one repeat
    for k in range(3):
        want = xs[k].copy()
        ufunc.at(want, (rows,), us[k])
        got = getattr(fl.asarray(xs[k]).at[fl.asarray(rows)], method)(fl.asarray(us[k]))
        np.testing.assert_allclose(_np(got), want, rtol=1e-14)
    got = fl.vmap(lambda x, u: getattr(x.at[fl.asarray(rows), :], method)(u))(fl.asarray(xs), fl.asarray(us))
    want = xs.copy()
    for k in range(3):
        ufunc.at(want[k], (rows,), us[k])
    np.testing.assert_allclose(_np(got), want, rtol=1e-14)


def test_at_divide_and_power_apply_every_repeated_index_in_turn():
    idx = fl.asarray([0, 0, 2])
    x = fl.asarray([8.0, 3.0, 2.0])
    np.testing.assert_allclose(_np(x.at[idx].divide(fl.asarray([2.0, 4.0, 2.0]))), [1.0, 3.0, 1.0])
    np.testing.assert_allclose(_np(x.at[idx].power(fl.asarray([2.0, 0.5, 3.0]))), [8.0, 3.0, 8.0])
    np.testing.assert_allclose(_np(fl.jit(lambda x: x.at[idx].divide(2.0))(x)), [2.0, 3.0, 1.0])
    # as in JAX, dividing an integer tensor gives floats
    np.testing.assert_allclose(_np(fl.ones(2, dtype=fl.int32).at[0].divide(2)), [0.5, 1.0])


def test_at_repeated_index_updates_have_exact_derivatives():
    from funclib.testing import check_grads

    idx = fl.asarray([0, 2, 0, 0])
    x = fl.asarray([0.7, -1.3, 0.4])
    # products with no zero, one zero and two zeros among an element's updates
    for u in ([1.5, -0.5, 2.0, 0.8], [1.5, -0.5, 0.0, 0.8], [0.0, -0.5, 0.0, 0.8]):
        check_grads(lambda x, u: x.at[idx].multiply(u), (x, fl.asarray(u)), order=2)
        check_grads(lambda x, u: x.at[idx].divide(u), (x, fl.asarray(u) + 3.0), order=2)
    for m in ("max", "min"):
        check_grads(lambda x, u, m=m: getattr(x.at[idx], m)(u), (x, fl.asarray([1.1, -2.0, -0.2, 0.3])), order=2)
    # ties share the derivative equally (as max and reduce_max do): x[0] and two updates equal 1
    grad = fl.grad(lambda x, u: x.at[idx].max(u).sum(), argnums=(0, 1))
    for g in (grad, fl.jit(grad)):
        gx, gu = g(fl.ones(3), fl.asarray([1.0, 0.0, 1.0, 0.5]))
        np.testing.assert_allclose(_np(gx), [1 / 3, 1, 1], rtol=1e-6)
        np.testing.assert_allclose(_np(gu), [1 / 3, 0, 1 / 3, 0], rtol=1e-6)


# --- attributes ---------------------------------------------------------------------------------------------


def test_attributes():
    x = fl.ones((2, 3, 4), dtype=fl.int32)
    assert x.dtype == fl.int32
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tuple)
    assert x.ndim == 3 and x.size == 24 and len(x) == 2
    assert x.device == "cpu" == fl.__array_namespace_info__().default_device()
    assert x.mT.shape == (2, 4, 3)
    np.testing.assert_array_equal(_np(x.mT), np.swapaxes(_np(x), -1, -2))
    m = fl.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(_np(m.T), _np(m).T)
    with pytest.raises(ValueError, match="2-D"):
        _ = x.T
    with pytest.raises(fl.errors.ShapeError):
        _ = fl.ones(3).mT
    assert fl.zeros(()).size == 1 and fl.zeros((0, 5)).size == 0


def test_array_namespace_and_device_methods():
    x = fl.ones(2)
    assert x.__array_namespace__() is fl
    assert x.__array_namespace__(api_version="2023.12") is fl
    with pytest.raises(ValueError, match="2023.12"):
        x.__array_namespace__(api_version="1999.01")
    assert x.to_device("cpu") is x
    assert x.to_device(x.device, stream=None) is x
    with pytest.raises(ValueError, match="cpu"):
        x.to_device("cuda:0")


# --- indexing -----------------------------------------------------------------------------------------------

_BASE = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)

_KEYS = [
    0,
    -1,
    (1, 2),
    (1, -1, -2),
    slice(None),
    slice(1, None),
    (slice(None), slice(None, None, 2)),
    (slice(None), slice(None, None, -1)),
    (Ellipsis, slice(3, 0, -2)),
    (slice(None, None, -2), 1, slice(1, 3)),
    Ellipsis,
    (Ellipsis, 0),
    (0, Ellipsis, 1),
    None,
    (None, 1),
    (1, None, Ellipsis, None),
    (slice(0, 0),),
    (slice(10, 20),),
    (),
    np.array([1, 0, 1]),
    (slice(None), np.array([2, 0])),
    (np.array([0, 1]), np.array([1, 2])),
    (np.array([[0], [1]]), slice(None), np.array([0, 3])),
    (0, np.array([0, 2]), slice(1, 3)),
    (Ellipsis, np.array([-1, 0])),
    _BASE > 10,
    (_BASE[:, :, 0] > 5,),
    (slice(None), _BASE[0] > 3),
    (slice(None), _BASE[0, :, 0] > 1, 2),
    np.True_,
    (Ellipsis, np.False_),
]


@pytest.mark.parametrize("key", _KEYS, ids=[str(i) for i in range(len(_KEYS))])
def test_getitem_matches_numpy(key):
    x = fl.asarray(_BASE)
    fkey = (
        tuple(fl.asarray(k) if isinstance(k, np.ndarray | np.bool_) else k for k in key)
        if isinstance(key, tuple)
        else (fl.asarray(key) if isinstance(key, np.ndarray | np.bool_) else key)
    )
    got = x[fkey]
    want = _BASE[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(_np(got), want)


@given(st.data())
def test_basic_indexing_matches_numpy(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    key = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    got = fl.asarray(a)[key]
    assert got.shape == a[key].shape
    np.testing.assert_array_equal(_np(got), a[key])


@given(st.data())
def test_integer_array_indexing_matches_numpy(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    key = data.draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(min_dims=0, max_dims=2)))
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    got = fl.asarray(a)[tuple(fl.asarray(k) for k in key)]
    np.testing.assert_array_equal(_np(got), a[key])


def test_getitem_with_python_lists_and_0d_tensors():
    x = fl.asarray(_BASE)
    np.testing.assert_array_equal(_np(x[[1, 0]]), _BASE[[1, 0]])
    np.testing.assert_array_equal(_np(x[fl.asarray(1)]), _BASE[1])
    np.testing.assert_array_equal(_np(x[fl.asarray(True)]), _BASE[None])
    assert x[1, 2, 3].shape == () and float(x[1, 2, 3]) == 23.0


def test_getitem_errors():
    x = fl.asarray(_BASE)
    with pytest.raises(IndexError, match="out of bounds"):
        x[2]
    with pytest.raises(IndexError, match="out of bounds"):
        x[fl.asarray([0, 5])]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(IndexError, match="integer or boolean"):
        x[fl.asarray([0.0])]


def test_boolean_mask_under_a_transform_needs_concrete_values():
    with pytest.raises(DataDependentShapeError, match="fl.where"):
        fl.vmap(lambda r: r[r > 0])(fl.ones((2, 3)))
    # under grad the mask's values are known, so it works and differentiates
    g = fl.grad(lambda v: (v[v > 1.5] ** 2).sum())(fl.asarray([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(_np(g), [0.0, 4.0, 6.0])


def test_integer_array_indexing_traces_and_differentiates():
    idx = fl.asarray([2, 0, 2])
    g = fl.grad(lambda v: v[idx].sum())(fl.asarray([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(_np(g), [1.0, 0.0, 2.0])
    out = fl.vmap(lambda r: r[idx])(fl.asarray(_BASE[0]))
    np.testing.assert_array_equal(_np(out), _BASE[0][:, [2, 0, 2]])


# --- conversions --------------------------------------------------------------------------------------------


def test_scalar_conversions():
    assert bool(fl.asarray(True)) is True and bool(fl.asarray([0.0])) is False
    assert float(fl.asarray(2.5)) == 2.5 and type(float(fl.asarray(2))) is float
    assert int(fl.asarray(7.9)) == 7 and type(int(fl.asarray(3))) is int
    assert complex(fl.asarray(1 + 2j)) == 1 + 2j
    assert operator.index(fl.asarray(4)) == 4
    assert [10, 20, 30][fl.asarray(1)] == 20
    with pytest.raises(TypeError, match="integer"):
        operator.index(fl.asarray(1.0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(fl.ones(2))
    with pytest.raises(TypeError, match="one-element"):
        float(fl.ones(2))
    for convert in (float, int):
        with pytest.raises(TypeError, match="complex"):
            convert(fl.asarray(1 + 2j))
    assert fl.asarray(3.5).item() == 3.5 and type(fl.asarray(3).item()) is int
    with pytest.raises(ValueError, match="one element"):
        fl.ones(2).item()


def test_len_iter_tolist():
    x = fl.asarray([[1, 2], [3, 4]])
    assert len(x) == 2
    rows = list(x)
    assert len(rows) == 2 and all(isinstance(r, fl.Tensor) for r in rows)
    assert rows[1].tolist() == [3, 4]
    assert x.tolist() == [[1, 2], [3, 4]] and fl.asarray(2.0).tolist() == 2.0
    with pytest.raises(TypeError, match="0-d"):
        len(fl.asarray(1))
    with pytest.raises(TypeError, match="0-d"):
        iter(fl.asarray(1))


def test_numpy_exports_are_read_only_views():
    x = fl.asarray([1.0, 2.0])
    for arr in (x.numpy(), np.asarray(x), np.from_dlpack(x)):
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0] = 5
        np.testing.assert_array_equal(arr, [1.0, 2.0])
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    c = np.array(x, copy=True)
    c[0] = 9
    assert x.tolist() == [1.0, 2.0]


def test_asarray_copies_a_writable_source():
    src = np.array([1.0, 2.0, 3.0])
    x = fl.asarray(src)
    src[0] = 100.0
    assert x.tolist() == [1.0, 2.0, 3.0]
    ro = np.array([1, 2])
    ro.flags.writeable = False
    y = fl.asarray(ro, copy=False)
    np.testing.assert_array_equal(_np(y), [1, 2])
    with pytest.raises(ValueError, match="writable"):
        fl.asarray(np.array([1.0]), copy=False)


def test_dlpack_round_trip():
    x = fl.arange(6, dtype=fl.int32).reshape(2, 3)
    assert x.__dlpack_device__() == (1, 0)
    y = fl.from_dlpack(x)
    assert y.dtype == fl.int32 and y.tolist() == x.tolist()
    src = np.arange(3.0)
    z = fl.from_dlpack(src)  # shared, as every DLPack consumer does: later writes to the source show
    src[0] = 7.0
    assert z.tolist() == [7.0, 1.0, 2.0] and not z.numpy().flags.writeable
    assert fl.from_dlpack(src, copy=True).tolist() == [7.0, 1.0, 2.0]
    snapshot = fl.from_dlpack(src, copy=True)
    src[0] = 8.0
    assert snapshot.tolist() == [7.0, 1.0, 2.0]
    assert fl.from_dlpack(x, copy=False).tolist() == x.tolist()
    capsule = x.__dlpack__(max_version=(1, 0))
    assert type(capsule).__name__ == "PyCapsule"


def test_astype():
    x = fl.asarray([1.7, -1.7, 0.0])
    assert x.astype(fl.int32).tolist() == [1, -1, 0]
    assert fl.astype(x, fl.bool).tolist() == [True, True, False]
    assert fl.astype(x, "float64").dtype == fl.float64
    assert fl.astype(x, fl.float32) is x  # immutable: no copy needed
    assert fl.astype(x, fl.complex64, copy=True, device="cpu").dtype == fl.complex64
    with pytest.raises(fl.errors.DTypeError, match="imaginary"):
        fl.astype(fl.asarray([1j]), fl.float32)


def test_repr():
    assert repr(fl.asarray([1.0, 2.0])) == "Tensor([1., 2.], dtype=float32)"
    assert repr(fl.asarray(3)) == "Tensor(3, dtype=int64)"
    assert repr(fl.asarray([True])) == "Tensor([ True], dtype=bool)"
    assert str(fl.asarray([[1, 2], [3, 4]], dtype=fl.int8)) == "Tensor([[1, 2],\n        [3, 4]], dtype=int8)"


def test_hash_copy_pickle():
    x = fl.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)
    assert copy.copy(x) is x and copy.deepcopy(x) is x
    y = pickle.loads(pickle.dumps(x))
    assert y.tolist() == [1.0, 2.0] and y.dtype == fl.float32


# --- operators ----------------------------------------------------------------------------------------------

_INPLACE = [
    ("+=", operator.iadd, operator.add),
    ("-=", operator.isub, operator.sub),
    ("*=", operator.imul, operator.mul),
    ("/=", operator.itruediv, operator.truediv),
    ("//=", operator.ifloordiv, operator.floordiv),
    ("%=", operator.imod, operator.mod),
    ("**=", operator.ipow, operator.pow),
]


@pytest.mark.parametrize(("sym", "iop", "op"), _INPLACE, ids=[s for s, _, _ in _INPLACE])
def test_inplace_operators_rebind_to_a_new_tensor(sym, iop, op):
    x = fl.asarray([1.0, 2.0, 3.0])
    alias = x
    y = iop(x, 2.0)
    assert y is not alias
    assert alias.tolist() == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(_np(y), _np(op(alias, 2.0)))
    assert not hasattr(fl.Tensor, "__i" + op.__name__.strip("_") + "__")


def test_inplace_statement_rebinds_the_name():
    x = fl.asarray([1, 2])
    before = x
    x += 1
    x <<= 1
    x |= 1
    assert x.tolist() == [5, 7] and before.tolist() == [1, 2]
    m = fl.eye(2)
    m @= fl.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert m.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_inplace_with_promotion_or_broadcasting_rebinds_to_the_wider_result():
    x = fl.ones(2, dtype=fl.int8)
    x += fl.ones(2, dtype=fl.int16)
    assert x.dtype == fl.int16
    y = fl.ones(3)
    y *= fl.ones((2, 3))
    assert y.shape == (2, 3)


def test_operators_match_functions_and_reflect():
    a, b = fl.asarray([6, -7, 8]), fl.asarray([4, 2, -3])
    pairs = [
        (operator.add, fl.add), (operator.sub, fl.subtract), (operator.mul, fl.multiply),
        (operator.floordiv, fl.floor_divide), (operator.mod, fl.remainder), (operator.pow, fl.pow),
        (operator.and_, fl.bitwise_and), (operator.or_, fl.bitwise_or), (operator.xor, fl.bitwise_xor),
        (operator.lt, fl.less), (operator.le, fl.less_equal), (operator.gt, fl.greater),
        (operator.ge, fl.greater_equal), (operator.eq, fl.equal), (operator.ne, fl.not_equal),
    ]  # fmt: skip
    for op, fn in pairs:
        bb = fl.abs(b) if fn is fl.pow else b
        np.testing.assert_array_equal(_np(op(a, bb)), _np(fn(a, bb)), err_msg=str(op))
        np.testing.assert_array_equal(_np(op(3, bb)), _np(fn(fl.asarray(3), bb)), err_msg=str(op))
    np.testing.assert_array_equal(_np(a << 1), [12, -14, 16])
    np.testing.assert_array_equal(_np(64 >> fl.asarray([1, 2])), [32, 16])
    np.testing.assert_array_equal(_np(-a), [-6, 7, -8])
    np.testing.assert_array_equal(_np(+a), _np(a))
    np.testing.assert_array_equal(_np(~a), ~_np(a))
    np.testing.assert_array_equal(_np(abs(b)), [4, 2, 3])
    assert (1.0 / fl.asarray([2.0])).tolist() == [0.5]
    assert (fl.ones((2, 3)) @ fl.ones(3)).tolist() == [3.0, 3.0]
    assert (fl.ones(3) @ fl.ones((3, 2))).tolist() == [3.0, 3.0]


# --- bit-exact fast paths of elementwise/shape kernels ------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "bfloat16", "complex64", "complex128", "int8", "int64", "bool"]
)
def test_where_is_bit_exact_against_numpy(dtype):
    # large operands take a branch-free bit blend; it must reproduce np.where bit for bit (NaN payloads, -0.0)
    rng = np.random.default_rng(0)
    dt = fl.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    special = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5]) if dtype.startswith(("float", "bf")) else None
    shapes = [((700,), (700,), (700,)), ((3, 700), (700,), ()), ((3, 1), (1, 700), (3, 700)), ((600, 2), (), ())]
    for ps, xs, ys in shapes:
        p = rng.random(ps) > 0.5
        x = (rng.standard_normal(xs) * 50).astype(dt)
        y = (rng.standard_normal(ys) * 50).astype(dt)
        if special is not None and x.size >= special.size:
            x.reshape(-1)[: special.size] = special.astype(dt)
        for yv in (y, np.zeros((), dt), np.asarray(-0.0).astype(dt) if special is not None else y):
            got = fl.where(fl.asarray(p), fl.asarray(x), fl.asarray(yv)).numpy()
            want = np.where(p, x, yv)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()


def test_broadcast_views_are_read_only_and_exact():
    base = fl.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    # contiguous and strided operands (a transposed view, a column slice)
    for t in (base, fl.matrix_transpose(base), base[:, 1:2], base[1]):
        x = t.numpy()
        shape = (2,) + tuple(x.shape)
        got = fl.broadcast_to(t, shape).numpy()
        assert np.array_equal(got, np.broadcast_to(x, shape))
        assert not got.flags.writeable
    assert not fl.matrix_transpose(base).numpy().flags.c_contiguous


def test_dot_general_accepts_list_dimension_numbers():
    x, y = fl.asarray(np.arange(6.0).reshape(2, 3)), fl.asarray(np.arange(12.0).reshape(3, 4))
    from funclib.primitives.dot import dot_general

    got = dot_general(x, y, [[[1], [0]], [[], []]])
    assert np.array_equal(got.numpy(), x.numpy() @ y.numpy())
    g = fl.grad(lambda a: fl.sum(dot_general(a, y, [[[1], [0]], [[], []]])))(x)
    assert np.array_equal(g.numpy(), np.broadcast_to(y.numpy().sum(1), (2, 3)))


def test_constructor_refuses_a_traced_value_naming_asarray():
    def f(x):
        with pytest.raises(TypeError, match="fl.asarray"):
            fl.Tensor(x)
        with pytest.raises(TypeError, match="fl.asarray"):
            fl.Tensor([x, x])
        return x.sum()

    fl.grad(f)(fl.ones(2))


def test_sequences_of_traced_values_are_stacked_wherever_values_are_converted():
    # fl.asarray stacks them, and so does every elementwise function taking a nested list
    x = fl.tensor([0.5, 2.0])
    g = fl.grad(lambda v: fl.sin([v[0], v[1]]).sum() + fl.asarray([[v[0], 1.0], [2, v[1]]], dtype=fl.float64).sum())
    assert np.allclose(g(x).numpy(), np.cos([0.5, 2.0]) + 1.0)
    assert np.allclose(fl.jit(lambda v: fl.add([v[0], v[1]], 1.0))(x).numpy(), [1.5, 3.0])
    with pytest.raises(TypeError, match="sin: expected a tensor .*stack: all tensors must have one shape"):
        fl.jit(lambda v: fl.sin([v, fl.ones(3)]))(x)
