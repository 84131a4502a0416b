"""Segment reductions and ragged batches: references, derivatives, transforms, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
from funclib.errors import DTypeError, ShapeError
from funclib.testing import check_grads

OPS = {"sum": fl.segment_sum, "max": fl.segment_max, "min": fl.segment_min, "mean": fl.segment_mean}


def _reference(kind, data, ids, num):
    out = []
    for s in range(num):
        rows = data[ids == s]
        if kind == "sum":
            out.append(rows.sum(0))
        elif kind == "mean":
            out.append(rows.mean(0) if len(rows) else np.zeros(data.shape[1:]))
        elif len(rows):
            out.append(rows.max(0) if kind == "max" else rows.min(0))
        else:
            out.append(np.full(data.shape[1:], -np.inf if kind == "max" else np.inf))
    return np.asarray(out, np.float64).reshape((num,) + data.shape[1:])


@pytest.mark.parametrize("kind", sorted(OPS))
@settings(max_examples=20)
@given(data=st.data())
def test_segment_ops_match_numpy(kind, data):
    n = data.draw(st.integers(0, 8))
    num = data.draw(st.integers(0, 4))
    x = data.draw(hnp.arrays(np.float64, (n, 2), elements=st.floats(-5, 5)))
    ids = np.asarray(data.draw(st.lists(st.integers(-2, num + 1), min_size=n, max_size=n)), np.int64)
    got = OPS[kind](fl.asarray(x), fl.asarray(ids), num)
    np.testing.assert_allclose(got.numpy(), _reference(kind, x, ids, num), rtol=1e-12, atol=1e-12)
    jitted = fl.jit(lambda x, i: OPS[kind](x, i, num))(fl.asarray(x), fl.asarray(ids))
    np.testing.assert_allclose(jitted.numpy(), got.numpy(), rtol=1e-12, atol=1e-12)


def test_integer_data_empty_segments_and_default_num_segments():
    x = fl.asarray([3, -1, 7, 2], dtype=fl.int32)
    ids = fl.asarray([0, 0, 2, 2])
    np.testing.assert_array_equal(fl.segment_sum(x, ids).numpy(), [2, 0, 9])
    np.testing.assert_array_equal(fl.segment_max(x, ids).numpy(), [3, np.iinfo(np.int32).min, 7])
    np.testing.assert_array_equal(fl.segment_min(x, ids).numpy(), [-1, np.iinfo(np.int32).max, 2])
    np.testing.assert_allclose(fl.segment_mean(x, ids).numpy(), [1.0, 0.0, 4.5])
    assert fl.segment_mean(x, ids).dtype == fl.float32
    # NaN propagates, as in fl.max
    assert np.isnan(fl.segment_max(fl.asarray([1.0, np.nan]), fl.asarray([0, 0])).numpy()[0])


@pytest.mark.parametrize("kind", sorted(OPS))
def test_check_grads_of_segment_ops(kind):
    rng = np.random.default_rng(0)
    x = fl.asarray(rng.permutation(24).reshape(8, 3) * 0.37 - 4.0, dtype=fl.float64)  # distinct: no ties
    ids = fl.asarray([0, 2, 2, 0, 1, 2, 5, -1])  # 5 and -1 are dropped; segment 3 is empty for sum/mean
    num = 3 if kind in ("max", "min") else 4
    check_grads(lambda x: OPS[kind](x, ids, num), (x,), order=2)


def test_segment_max_splits_the_gradient_among_ties():
    x = fl.asarray([2.0, 2.0, 1.0, 5.0])
    g = fl.grad(lambda x: fl.sum(fl.segment_max(x, fl.asarray([0, 0, 0, 1]), 2)))(x)
    np.testing.assert_array_equal(g.numpy(), [0.5, 0.5, 0.0, 1.0])


@pytest.mark.parametrize("kind", sorted(OPS))
def test_segment_ops_under_vmap(kind):
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((3, 6, 2))
    ids = rng.integers(-1, 4, (3, 6))
    f = lambda x, i: OPS[kind](x, i, 4)  # noqa: E731
    got = fl.vmap(f)(fl.asarray(xs), fl.asarray(ids))  # per-lane segmentations
    want = np.stack([_reference(kind, x, i, 4) for x, i in zip(xs, ids)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    got = fl.vmap(f, in_axes=(1, None))(fl.asarray(np.swapaxes(xs, 0, 1)), fl.asarray(ids[0]))  # shared ids
    want = np.stack([_reference(kind, x, ids[0], 4) for x in xs])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_segment_errors():
    with pytest.raises(ValueError, match="num_segments is required when segment_ids are traced"):
        fl.jit(lambda x, i: fl.segment_sum(x, i))(fl.ones(3), fl.asarray([0, 1, 1]))
    with pytest.raises(ShapeError, match=r"segment_ids must be integers of shape \(3,\)"):
        fl.segment_sum(fl.ones(3), fl.asarray([0, 1]), 2)
    with pytest.raises(DTypeError, match="segment_ids must be integers"):
        fl.segment_sum(fl.ones(3), fl.ones(3), 2)


# --- ragged batches ------------------------------------------------------------------------------------------------


@settings(max_examples=20)
@given(lengths=st.lists(st.integers(0, 5), min_size=1, max_size=5), extra=st.integers(0, 2))
def test_pad_unpad_round_trip(lengths, extra):
    n = sum(lengths)
    values = np.arange(n * 2, dtype=np.float32).reshape(n, 2) + 1
    lens = fl.asarray(lengths)
    max_len = max(lengths) + extra
    padded, mask = fl.ragged.pad(fl.asarray(values), lens, max_len, fill=-1.0)
    assert padded.shape == (len(lengths), max_len, 2) and mask.shape == (len(lengths), max_len)
    start = 0
    for b, length in enumerate(lengths):
        np.testing.assert_array_equal(padded.numpy()[b, :length], values[start : start + length])
        assert np.all(padded.numpy()[b, length:] == -1.0)
        np.testing.assert_array_equal(mask.numpy()[b], np.arange(max_len) < length)
        start += length
    np.testing.assert_array_equal(fl.ragged.unpad(padded, lens).numpy(), values)
    np.testing.assert_array_equal(fl.ragged.segment_ids(lens).numpy(), np.repeat(np.arange(len(lengths)), lengths))


def test_ragged_under_jit_and_vmap_with_traced_lengths():
    values = fl.asarray(np.arange(14.0).reshape(7, 2))
    f = fl.jit(lambda v, L: fl.ragged.unpad(fl.ragged.pad(v, L, 5)[0], L, 7))
    for lengths in ([3, 0, 4], [1, 5, 1], [2, 2, 3]):  # one trace for all: the lengths are data
        np.testing.assert_array_equal(f(values, fl.asarray(lengths)).numpy(), values.numpy())
    lens = fl.asarray([[3, 0, 4], [1, 5, 1]])
    ids = fl.vmap(lambda L: fl.ragged.segment_ids(L, 7))(lens)
    np.testing.assert_array_equal(ids.numpy(), [[0, 0, 0, 2, 2, 2, 2], [0, 1, 1, 1, 1, 1, 2]])
    masks = fl.vmap(lambda L: fl.ragged.mask(L, 5))(lens)
    np.testing.assert_array_equal(masks.numpy()[1, 1], [True] * 5)


def test_ragged_gradients_and_pooling():
    rng = np.random.default_rng(2)
    lengths = fl.asarray([3, 1, 4])
    v = fl.asarray(rng.standard_normal((8, 2)))
    check_grads(lambda v: fl.ragged.pad(v, lengths, 5)[0], (v,), order=1)
    check_grads(lambda p: fl.ragged.unpad(p, lengths, 8), (fl.asarray(rng.standard_normal((3, 4, 2))),), order=1)
    # mean pooling per sequence, flat (segment_mean) and padded (masked mean), agree
    flat = fl.segment_mean(v, fl.ragged.segment_ids(lengths), 3)
    p, m = fl.ragged.pad(v, lengths)
    masked = fl.sum(p * m[..., None], axis=1) / fl.sum(m, axis=1, keepdims=True)
    np.testing.assert_allclose(flat.numpy(), masked.numpy(), rtol=1e-12)


def test_ragged_errors():
    with pytest.raises(ValueError, match="max_len is required when the lengths are traced"):
        fl.jit(lambda v, L: fl.ragged.pad(v, L)[0])(fl.ones(3), fl.asarray([1, 2]))
    with pytest.raises(DTypeError, match="lengths must be a 1-D integer tensor"):
        fl.ragged.pad(fl.ones(3), fl.ones(2))
    with pytest.raises(ValueError, match="non-negative"):
        fl.ragged.mask(fl.asarray([1, -1]))
    with pytest.raises(ShapeError, match="exceeds the padded length"):
        fl.ragged.unpad(fl.ones((2, 2)), fl.asarray([3, 1]))


def test_scatter_add_along_axis_0_matches_numpy_and_still_rejects_bad_indices():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 3))
    idx = rng.integers(0, 6, (4, 5))  # repeated rows, a 2-D batch of indices
    upd = rng.standard_normal((4, 5, 3))
    want = x.copy()
    np.add.at(want, idx, upd)
    got = fl.asarray(x).at[fl.asarray(idx)].add(fl.asarray(upd))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)
    # the gradient of a row gather is this scatter
    g = fl.grad(lambda x: fl.sum(x[fl.asarray(idx)] * fl.asarray(upd)))(fl.asarray(x))
    np.testing.assert_allclose(g.numpy(), want - x, rtol=1e-12, atol=1e-14)
    from funclib.primitives.indexing import scatter_add

    with pytest.raises(IndexError, match="out of bounds"):
        scatter_add(fl.asarray(x), fl.asarray([[7]]), fl.ones((1, 3), dtype=fl.float64), (0,))


def test_low_precision_segments_keep_their_dtype_and_identities():
    ids = fl.asarray([0, 0])
    m = fl.segment_max(fl.asarray([3, -2], dtype=fl.int4), ids, 2)
    assert m.dtype == fl.int4 and m.numpy().astype(int).tolist() == [3, -8]
    assert fl.segment_min(fl.asarray([3, 14], dtype=fl.uint4), ids, 2).numpy().astype(int).tolist() == [3, 15]
    s = fl.segment_sum(fl.asarray([300.0, 300.0], dtype=fl.float8_e4m3fn), ids, 1)
    assert float(s[0]) == 448.0  # accumulated in float32, saturated on the way back
