"""fl.quantization and the quantized layers: exact int8 products, quantize/dequantize, fake quantization, QAT."""

from __future__ import annotations

import copy
import os
import sys

import funclib.nn as nn
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
from funclib import quantization as Q
from funclib.errors import DTypeError, ShapeError
from funclib.testing import check_grads

# --- preferred_element_type: exact integer products ---------------------------------------------------------------


def _extremes(rng, shape):
    """int8 values crowded at the ends of the range, where int8 (and careless int16) accumulation overflows."""
    return rng.choice(np.array([-128, -127, 127, -1, 0, 1, 126], np.int8), size=shape, p=[.3, .1, .3, .1, .1, .05, .05])


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 512, 2), (512, 512, 512), (7, 1040, 5), (2, 3000, 3)])
def test_int8_matmul_is_exact(m, k, n):
    rng = np.random.default_rng(k)
    a, b = _extremes(rng, (m, k)), _extremes(rng, (k, n))
    want = a.astype(np.int64) @ b.astype(np.int64)
    got = fl.matmul(fl.asarray(a), fl.asarray(b), preferred_element_type=fl.int32)
    assert got.dtype == fl.int32
    np.testing.assert_array_equal(got.numpy(), want)
    # all -128: the largest product sum, k * 2**14
    ones = fl.full((m, k), -128, dtype=fl.int8)
    full = fl.matmul(ones, fl.full((k, n), -128, dtype=fl.int8), preferred_element_type=fl.int32)
    assert int(full[0, 0]) == k * 16384


@settings(max_examples=15)
@given(data=st.data())
def test_int8_dot_general_every_layout_vmap_and_jit(data):
    spec = data.draw(st.sampled_from(["ik,kj->ij", "bik,bkj->bij", "ki,kj->ij", "ik,jk->ij", "i,i->", "i,j->ij"]))
    ins, _ = spec.split("->")
    letters = sorted(set(ins.replace(",", "")))
    size = {c: data.draw(st.integers(1, 6)) for c in letters}
    a, b = (
        data.draw(hnp.arrays(np.int8, tuple(size[c] for c in t), elements=st.integers(-128, 127)))
        for t in ins.split(",")
    )
    want = np.einsum(spec, a.astype(np.int64), b.astype(np.int64))
    f = lambda x, y: fl.einsum(spec, x, y, preferred_element_type=fl.int32)  # noqa: E731
    fa, fb = fl.asarray(a), fl.asarray(b)
    np.testing.assert_array_equal(f(fa, fb).numpy(), want)
    np.testing.assert_array_equal(fl.jit(f)(fa, fb).numpy(), want)
    stacked = fl.vmap(f, in_axes=(0, None))(fl.stack([fa, -fa]), fb)
    np.testing.assert_array_equal(stacked.numpy(), np.stack([want, -want]))


def test_other_integer_products_and_default_wrapping():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (5, 300)).astype(np.uint8)
    b = rng.integers(0, 256, (300, 4)).astype(np.uint8)
    got = fl.matmul(fl.asarray(a), fl.asarray(b), preferred_element_type=fl.uint32)
    np.testing.assert_array_equal(got.numpy(), a.astype(np.uint64) @ b.astype(np.uint64))
    # without a preferred type the result keeps the operands' dtype and wraps, as NumPy's does
    np.testing.assert_array_equal(fl.matmul(fl.asarray(a), fl.asarray(b)).numpy(), a @ b)
    c = rng.integers(-2**31, 2**31, (3, 40)).astype(np.int32)
    d = rng.integers(-2**31, 2**31, (40, 2)).astype(np.int32)
    np.testing.assert_array_equal(fl.matmul(fl.asarray(c), fl.asarray(d)).numpy(), c @ d)
    i4 = fl.asarray(rng.integers(-8, 8, (4, 6)), dtype=fl.int4)
    want = i4.numpy().astype(np.int64) @ i4.numpy().astype(np.int64).T
    np.testing.assert_array_equal(fl.matmul(i4, i4.T, preferred_element_type=fl.int32).numpy(), want)
    assert fl.tensordot(fl.asarray(c), fl.asarray(d), axes=1, preferred_element_type=fl.int64).dtype == fl.int64


def test_preferred_element_type_errors_and_no_op():
    a = fl.ones((2, 2), dtype=fl.int8)
    with pytest.raises(DTypeError, match="preferred_element_type=float32.*int8"):
        fl.matmul(a, a, preferred_element_type=fl.float32)
    with pytest.raises(DTypeError, match="at least as wide"):
        fl.matmul(fl.ones((2, 2), dtype=fl.int32), fl.ones((2, 2), dtype=fl.int32), preferred_element_type=fl.int8)
    x = fl.ones((2, 2))
    jaxpr = str(fl.make_jaxpr(lambda x: fl.matmul(x, x, preferred_element_type=fl.float32))(x))
    assert "preferred_element_type" not in jaxpr  # the operands' own dtype: the plain product


@pytest.mark.parametrize("dtype", [fl.bfloat16, fl.float8_e4m3fn, fl.float16])
def test_narrow_float_products_accumulate_in_float32_with_derivatives(dtype):
    rng = np.random.default_rng(0)
    x = fl.asarray(rng.standard_normal((5, 7)), dtype=dtype)
    w = fl.asarray(rng.standard_normal((7, 3)), dtype=dtype)
    got = fl.matmul(x, w, preferred_element_type=fl.float32)
    assert got.dtype == fl.float32
    want = x.astype(fl.float32).numpy() @ w.astype(fl.float32).numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)

    def loss(x, w):
        return fl.sum(fl.matmul(x, w, preferred_element_type=fl.float32) ** 2)

    gx, gw = fl.grad(loss, argnums=(0, 1))(x, w)
    assert gx.dtype == dtype and gw.dtype == dtype
    wide_gx, wide_gw = fl.grad(loss, argnums=(0, 1))(x.astype(fl.float32), w.astype(fl.float32))
    np.testing.assert_array_equal(gx.numpy(), wide_gx.astype(dtype).numpy())  # one rounding, at the end
    np.testing.assert_array_equal(gw.numpy(), wide_gw.astype(dtype).numpy())
    t = fl.jvp(lambda x: fl.matmul(x, w, preferred_element_type=fl.float32), (x,), (x,))[1]
    assert t.dtype == fl.float32


# --- quantize / dequantize -----------------------------------------------------------------------------------------

GRANULARITIES = [{}, {"axis": 0}, {"axis": 1}, {"group_size": 4}, {"axis": 0, "group_size": 3}]


@pytest.mark.parametrize("dtype", [fl.int8, fl.uint8, fl.int4, fl.uint4], ids=lambda d: d.name)
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("kw", GRANULARITIES, ids=str)
def test_quantize_dequantize_error_is_half_a_step(dtype, symmetric, kw):
    rng = np.random.default_rng(1)
    x = fl.asarray(rng.standard_normal((6, 8)) * rng.uniform(0.1, 5, (6, 1)), dtype=fl.float32)
    q = Q.quantize(x, dtype, symmetric=symmetric, **kw)
    assert q.values.dtype == dtype and q.values.shape == x.shape
    qmin, qmax = Q.qrange(dtype)
    v = q.values.numpy().astype(np.int64)
    assert v.min() >= qmin and v.max() <= qmax
    if symmetric and qmin < 0:
        assert q.zero_point is None and v.min() >= -qmax  # restricted symmetric range
    err = np.abs(q.dequantize().numpy() - x.numpy())
    # every entry is within half a step of its own scale (the step: one quantum, dequantized)
    step = Q.dequantize(Q.Quantized(fl.ones(x.shape, dtype=dtype), q.scale, None, q.axis, q.group_size)).numpy()
    assert np.max(err / step) <= 0.5 + 1e-4
    if not symmetric:  # affine: zero is exact
        z = Q.quantize(fl.zeros((6, 8)), dtype, symmetric=False, **kw)
        assert float(fl.max(fl.abs(Q.dequantize(z)))) == 0.0


def test_scale_shapes_and_given_scales():
    x = fl.asarray(np.random.default_rng(2).standard_normal((4, 6, 8)), dtype=fl.float32)
    assert Q.quantize(x).scale.shape == ()
    assert Q.quantize(x, axis=1).scale.shape == (1, 6, 1)
    assert Q.quantize(x, fl.int4, group_size=4).scale.shape == (4, 6, 2)
    assert Q.quantize(x, fl.int4, axis=1, group_size=3).scale.shape == (4, 2, 8)
    q = Q.quantize(x, axis=1)
    again = Q.quantize(x, axis=1, scale=q.scale)
    np.testing.assert_array_equal(again.values.numpy(), q.values.numpy())
    g = Q.quantize(x, fl.int4, group_size=4, symmetric=False)
    again = Q.quantize(x, fl.int4, group_size=4, symmetric=False, scale=g.scale, zero_point=g.zero_point)
    np.testing.assert_array_equal(again.values.numpy(), g.values.numpy())
    # per-tensor int8 quantization is the textbook formula
    s = float(fl.max(fl.abs(x))) / 127
    want = np.clip(np.rint(x.numpy() / np.float32(s)), -128, 127)
    np.testing.assert_array_equal(Q.quantize(x).values.numpy(), want)


def test_quantize_is_traceable():
    x = fl.asarray(np.random.default_rng(3).standard_normal((3, 8)), dtype=fl.float32)
    eager = Q.quantize(x, fl.int8, axis=0)
    jitted = fl.jit(lambda x: Q.quantize(x, fl.int8, axis=0))(x)
    np.testing.assert_array_equal(jitted.values.numpy(), eager.values.numpy())
    np.testing.assert_array_equal(jitted.scale.numpy(), eager.scale.numpy())
    rows = fl.vmap(lambda r: Q.quantize(r, fl.int8).values)(x)
    np.testing.assert_array_equal(rows.numpy(), eager.values.numpy())  # per-row = per-channel along axis 0


def test_quantize_errors():
    x = fl.ones((4, 6))
    with pytest.raises(ShapeError, match="group_size=4 must .* divide"):
        Q.quantize(x, fl.int4, group_size=4)
    with pytest.raises(ValueError, match="float8 .* symmetric"):
        Q.quantize(x, fl.float8_e4m3fn, symmetric=False)
    with pytest.raises(DTypeError, match="real floating-point"):
        Q.quantize(fl.ones(3, dtype=fl.int32))
    with pytest.raises(DTypeError, match="not a quantized dtype"):
        Q.quantize(x, fl.float32)
    with pytest.raises(ShapeError, match="axis 2 is out of range"):
        Q.quantize(x, axis=2)


def test_float8_quantization_and_scaled_matmul_error():
    rng = np.random.default_rng(4)
    a, b = (fl.asarray(rng.standard_normal((256, 256)), dtype=fl.float32) for _ in range(2))
    qa, qb = Q.quantize(a, fl.float8_e4m3fn), Q.quantize(b, fl.float8_e4m3fn)
    assert qa.values.dtype == fl.float8_e4m3fn and float(fl.max(fl.abs(qa.values.astype(fl.float32)))) == 448.0
    got = Q.scaled_matmul(qa.values, qb.values, qa.scale, qb.scale).numpy()
    want = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert rel <= 0.04, rel
    # int8 per-token x per-channel through the same function
    qa8, qb8 = Q.quantize(a, fl.int8, axis=0), Q.quantize(b, fl.int8, axis=1)
    got8 = Q.scaled_matmul(qa8.values, qb8.values, qa8.scale, qb8.scale).numpy()
    assert np.linalg.norm(got8 - want) / np.linalg.norm(want) <= 0.02


def test_pack_unpack_int4():
    rng = np.random.default_rng(5)
    for d, lo, hi in ((fl.int4, -8, 8), (fl.uint4, 0, 16)):
        v = fl.asarray(rng.integers(lo, hi, (3, 10)), dtype=d)
        p = Q.pack_int4(v)
        assert p.dtype == fl.uint8 and p.shape == (3, 5)
        np.testing.assert_array_equal(Q.unpack_int4(p, d).numpy(), v.numpy())
    with pytest.raises(ShapeError, match="even length"):
        Q.pack_int4(fl.zeros(3, dtype=fl.int4))


# --- fake quantization -------------------------------------------------------------------------------------------


def test_fake_quantize_matches_pytorch_semantics():
    rng = np.random.default_rng(6)
    x = rng.standard_normal(200).astype(np.float32) * 3
    scale, zp, qmin, qmax = 0.05, 3, -20, 25
    r = np.rint(x / np.float32(scale)) + zp
    want = ((np.clip(r, qmin, qmax) - zp) * np.float32(scale)).astype(np.float32)
    got = Q.fake_quantize(fl.asarray(x), scale, zp, qmin, qmax)
    np.testing.assert_array_equal(got.numpy(), want)
    g = fl.grad(lambda t: fl.sum(Q.fake_quantize(t, scale, zp, qmin, qmax) * fl.arange(200.0)))(fl.asarray(x))
    np.testing.assert_array_equal(g.numpy(), np.where((r >= qmin) & (r <= qmax), np.arange(200.0), 0.0))
    # per channel: a broadcasting scale; the scale gets no gradient
    w = fl.asarray(rng.standard_normal((3, 4)), dtype=fl.float32)
    s = fl.asarray([[0.1], [0.2], [0.3]])
    gs = fl.grad(lambda s: fl.sum(Q.fake_quantize(w, s, 0, -8, 7)))(s)
    assert float(fl.max(fl.abs(gs))) == 0.0
    # the fake-quantized values are exactly the dequantized quantized ones
    q = Q.quantize(w, fl.int4, axis=0)
    np.testing.assert_array_equal(Q.fake_quantize(w, q.scale, 0, -8, 7).numpy(), q.dequantize().numpy())
    jitted = fl.jit(lambda w, s: Q.fake_quantize(w, s, 0, -8, 7))
    np.testing.assert_array_equal(jitted(w, q.scale).numpy(), q.dequantize().numpy())


def test_fake_quantize_straight_through_rule_passes_check_grads():
    # With steps far below the finite-difference step, fake_quantize is the clamp of the identity at the scale
    # finite differences see, and the straight-through derivative is that function's derivative: 1 inside the
    # range, 0 where the clamp cuts (first and second order, forward and reverse).
    def f(x):
        return Q.fake_quantize(x, 1e-10, 0, -10**10, 10**10)

    x = fl.asarray([-1.7, -0.4, 0.3, 0.9, 1.4, 2.5], dtype=fl.float64)
    check_grads(f, (x,), order=2, atol=1e-3, rtol=1e-3, eps=1e-4)
    np.testing.assert_array_equal(fl.grad(lambda x: fl.sum(f(x)))(x).numpy(), [0, 1, 1, 1, 0, 0])
    per_sample = fl.vmap(fl.grad(lambda x: Q.fake_quantize(x, 0.5, 0, -2, 2)))(fl.asarray([-3.0, -0.2, 0.7, 1.4]))
    np.testing.assert_array_equal(per_sample.numpy(), [0, 1, 1, 0])


# --- quantized layers --------------------------------------------------------------------------------------------


def _digits():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import train_digits as td

    return td


@pytest.fixture(scope="module")
def trained_mlp():
    td = _digits()
    data = td.load_data(seed=0)
    mlp = td.make_mlp(fl.random.key(0))
    mlp, hist = td.train(mlp, data, epochs=10, batch_size=64, lr=3e-3, weight_decay=1e-4, seed=0, log=False)
    return td, data, mlp


def _accuracy(td, model, data):
    model.eval()
    return float((td.make_predict()(model, fl.asarray(data[1])).numpy() == data[3]).mean())


def test_weight_only_int8_and_int4_mlp_on_digits(trained_mlp, tmp_path):
    td, data, mlp = trained_mlp
    base = _accuracy(td, mlp, data)
    assert base >= 0.95
    int8 = nn.quantize_(copy.deepcopy(mlp), fl.int8)
    assert isinstance(int8[1], nn.QuantizedLinear) and int8[1].weight.dtype == fl.int8
    assert abs(_accuracy(td, int8, data) - base) <= 0.005
    int4 = nn.quantize_(copy.deepcopy(mlp), fl.int4, group_size=32)
    assert int4[1].weight.dtype == fl.uint8 and int4[1].weight.shape == (256, 32)  # packed, 4 bits a weight
    assert abs(_accuracy(td, int4, data) - base) <= 0.02
    # the quantized layer computes with exactly the dequantized weight (up to the order of the float32 sums: the
    # matrix product may be funclib's own, whose rounding differs from BLAS's by ~1e-7 where outputs cancel to ~0;
    # the weight's 4-bit rounding is ~1e-2)
    x = fl.asarray(data[1][:5].reshape(5, -1))
    np.testing.assert_allclose(
        int4[1](x).numpy(),
        (x.numpy() @ int4[1].dequantized_weight().numpy().T + int4[1].bias.numpy()),
        rtol=1e-5,
        atol=1e-6,
    )
    # a quantized model saves and loads (int4 weights as packed bytes)
    fl.save(int4.state_dict(), tmp_path / "int4.safetensors")
    fresh = nn.quantize_(td.make_mlp(fl.random.key(9)), fl.int4, group_size=32)
    fresh.load_state_dict(fl.load(tmp_path / "int4.safetensors"))
    assert _accuracy(td, fresh, data) == _accuracy(td, int4, data)


def test_qat_int8_weights_and_activations_on_digits(trained_mlp):
    td, data, mlp = trained_mlp
    base = _accuracy(td, mlp, data)
    qat = nn.prepare_qat_(td.make_mlp(fl.random.key(0)), fl.int8, activation_dtype=fl.int8)
    assert isinstance(qat[1], nn.QATLinear) and isinstance(qat[1], nn.Linear)
    qat, _ = td.train(qat, data, epochs=10, batch_size=64, lr=3e-3, weight_decay=1e-4, seed=0, log=False)
    fake = _accuracy(td, qat, data)
    x = fl.asarray(data[1][:16].reshape(16, -1))
    qat.eval()
    fake_logits = qat(x).numpy()
    nn.quantize_(qat)
    assert qat[1].activation_dtype == fl.int8 and qat[1].weight.dtype == fl.int8
    real = _accuracy(td, qat, data)
    assert abs(real - base) <= 0.01 and abs(real - fake) <= 0.005
    # the integer model computes what training saw, up to float32 rounding of the int32 products
    np.testing.assert_allclose(qat(x).numpy(), fake_logits, rtol=1e-4, atol=1e-4)


def test_quantized_layer_errors_and_repr():
    with pytest.raises(ValueError, match="int8 activations need one weight scale per output channel"):
        nn.QuantizedLinear(8, 4, weight_dtype=fl.int4, group_size=4, activation_dtype=fl.int8)
    with pytest.raises(ShapeError, match="group_size=3 must divide in_features=8"):
        nn.QuantizedLinear(8, 4, weight_dtype=fl.int4, group_size=3)
    with pytest.raises(DTypeError, match="weight_dtype must be int8 or int4"):
        nn.QuantizedLinear(8, 4, weight_dtype=fl.uint8)
    q = nn.QuantizedLinear.from_float(nn.Linear(8, 4), fl.int8)
    with pytest.raises(ShapeError, match="last axis must have 8 entries"):
        q(fl.ones((2, 7)))
    assert "weight_dtype=int8" in repr(q)
    assert isinstance(nn.quantize_(nn.Linear(8, 4)), nn.QuantizedLinear)  # a bare layer comes back converted
