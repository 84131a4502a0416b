"""ONNX export: every exportable primitive of the op table through ONNX and onnxruntime, the models of funclib.nn,
control flow, dynamic sizes, and the errors for what cannot be exported.

Each export is checked with ``onnx.checker.check_model(full_check=True)`` and run by onnxruntime's CPU provider;
float32 results must match funclib's to rtol 1e-5 / atol 1e-6, integer and boolean ones exactly.
"""

from __future__ import annotations

import importlib.util
import pathlib

import funclib.nn as nn
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from op_table import ROWS, as_tensors, draw_case

import funclib as fl
from funclib import dtypes as D
from funclib import random as frandom
from funclib.core import PRIMITIVES

NOT_EXPORTABLE, ONNX_RULES, ExportError = fl.onnx.NOT_EXPORTABLE, fl.onnx.ONNX_RULES, fl.onnx.ExportError

ROOT = pathlib.Path(__file__).resolve().parents[1]
RTOL, ATOL = 1e-5, 1e-6
# calls are inlined before lowering: their bodies are exported, the calls themselves need no rule
INLINED = {"jit", "custom_jvp_call", "custom_vjp_call", "custom_lin", "checkpoint", "custom_linear_solve"}
# a collective's row applies it under a named vmap, which turns it into ordinary primitives: those rows export
EXPORTABLE = [r for r in ROWS if r.name in ONNX_RULES or r.name in INLINED or not r.staged]
NOT_EXPORTED = [r for r in ROWS if r.name in NOT_EXPORTABLE and r.staged]


def _session(model) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _run(model, feeds: dict) -> list[np.ndarray]:
    onnx.checker.check_model(model, full_check=True)
    return _session(model).run(None, feeds)


def _compare(got, want, where: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{where}: shape {got.shape}, funclib gives {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, funclib gives {want.dtype}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def _export_and_check(f, args, where: str, **kw):
    """Export ``f`` at ``args``, run it in onnxruntime, and compare every output with funclib's."""
    kw.setdefault("opset", fl.onnx.MIN_OPSET.get(getattr(f, "__name__", ""), 18))
    model = fl.onnx.export(f, tuple(args), None, **kw)
    feeds = {i.name: np.asarray(a) for i, a in zip(model.graph.input, fl.tree.leaves(tuple(args)))}
    want = fl.tree.leaves(f(*args))
    got = _run(model, feeds)
    assert len(got) == len(want), f"{where}: {len(got)} outputs, funclib gives {len(want)}"
    for g, w in zip(got, want):
        _compare(g, np.asarray(w), where)
    return model


def _row_dtype(row):
    for d in (D.float32, D.int32, D.int64, D.bool_):
        if d in row.dtypes:
            return d
    return row.dtypes[0]


# ---------------------------------------------------------------------------------------------------------------
# The registry


def test_every_primitive_is_exportable_or_says_why():
    missing = sorted(n for n in PRIMITIVES if n not in ONNX_RULES and n not in INLINED and n not in NOT_EXPORTABLE)
    assert not missing, (
        f"primitives with neither an ONNX lowering nor a reason in NOT_EXPORTABLE: {missing}; add @onnx_rule in "
        "transforms/onnx/_rules/ (the module for its kind), or record why it cannot be exported"
    )
    both = sorted(set(ONNX_RULES) & set(NOT_EXPORTABLE))
    assert not both, f"primitives both lowered and listed as not exportable: {both}"
    stale = sorted(set(ONNX_RULES) - set(PRIMITIVES))
    assert not stale, f"ONNX rules for primitives that do not exist: {stale}"


@pytest.mark.parametrize("row", EXPORTABLE, ids=[r.name for r in EXPORTABLE])
@settings(max_examples=4)
@given(data=st.data())
def test_primitive_exports(row, data):
    """The row's primitive, exported at a drawn configuration, gives funclib's result in onnxruntime."""
    dtype = _row_dtype(row)
    cfg, args = draw_case(data.draw, row, dtype)
    xs = as_tensors(args)

    def f(*a):
        return row.apply(cfg, *a)

    f.__name__ = row.name
    _export_and_check(f, xs, f"{row.name} at {np.dtype(dtype).name}, cfg={cfg}")


# ONNX Runtime's CPU provider has no float64 kernels for these operators: the exported graphs are valid ONNX (the
# checker passes) but need another runtime, or float32
_ORT_NO_FLOAT64 = {"tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "atan2"}
_OTHER_DTYPES = (D.float64, D.float16, D.int64, D.int8, D.uint16, D.uint32, D.uint64, D.bool_)


def _first_case(row, dtype):
    from hypothesis import Phase, find

    @st.composite
    def case(draw):
        return draw_case(draw, row, dtype)

    return find(case(), lambda _: True, settings=settings(database=None, phases=[Phase.generate]))


@pytest.mark.parametrize("row", EXPORTABLE, ids=[r.name for r in EXPORTABLE])
def test_primitive_exports_at_other_dtypes(row):
    """One case at each other dtype the row supports: narrow integers, uint64 and float16 compute in types ONNX
    Runtime has kernels for, with NumPy's results."""
    for dtype in [d for d in _OTHER_DTYPES if d in row.dtypes]:
        cfg, args = _first_case(row, dtype)
        xs = as_tensors(args)

        def f(*a, cfg=cfg):
            return row.apply(cfg, *a)

        where = f"{row.name} at {np.dtype(dtype).name}, cfg={cfg}"
        out_dtypes = {np.dtype(o.dtype) for o in fl.tree.leaves(f(*xs))}
        if out_dtypes & set(D.COMPLEX):
            with pytest.raises(ExportError, match="complex"):
                fl.onnx.export(f, tuple(xs), None)
            continue
        opset = fl.onnx.MIN_OPSET.get(row.name, 18)
        if dtype == D.float64 and row.name == "erf_inv":
            with pytest.raises(ExportError, match="export it in float32"):
                fl.onnx.export(f, tuple(xs), None)
            continue
        if dtype == D.float64 and row.name in _ORT_NO_FLOAT64:
            onnx.checker.check_model(fl.onnx.export(f, tuple(xs), None, opset=opset), full_check=True)
            continue
        model = fl.onnx.export(f, tuple(xs), None, opset=opset)
        got = _run(model, {i.name: np.asarray(a) for i, a in zip(model.graph.input, xs)})
        for g, w in zip(got, fl.tree.leaves(f(*xs))):
            w = np.asarray(w)
            if w.dtype.kind == "f":
                tol = 2e-3 if w.dtype == D.float16 else 1e-12
                assert g.dtype == w.dtype, where
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True, err_msg=where)
            else:
                _compare(g, w, where)


@pytest.mark.parametrize("row", NOT_EXPORTED, ids=[r.name for r in NOT_EXPORTED])
def test_non_exportable_primitive_names_itself(row):
    dtype = row.dtypes[0]
    for d in (D.float32, D.complex64, D.int64):
        if d in row.dtypes:
            dtype = d
            break

    cfg, args = _first_case(row, dtype)
    xs = as_tensors(args)
    with pytest.raises(ExportError) as info:
        fl.onnx.export(lambda *a: row.apply(cfg, *a), tuple(xs), None)
    msg = str(info.value)
    # complex operands are refused before their primitive is reached, naming the dtype
    assert f"'{row.name}'" in msg or "complex" in msg, msg


# ---------------------------------------------------------------------------------------------------------------
# Models


def _key(i=0):
    return frandom.key(i)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _check_module(model, x, dyn=None, other=None):
    """Export ``model`` at ``x``, compare in onnxruntime, and at another batch size when ``dyn`` is given."""
    proto = fl.onnx.export(model, (fl.asarray(x),), None, dynamic_axes=dyn)
    model.eval()
    name = proto.graph.input[0].name
    (got,) = _run(proto, {name: x})
    _compare(got, model(fl.asarray(x)).numpy(), type(model).__name__)
    if other is not None:
        (got,) = _session(proto).run(None, {name: other})
        _compare(got, model(fl.asarray(other)).numpy(), f"{type(model).__name__} at shape {other.shape}")
    return proto


def test_mlp_with_dynamic_batch():
    k1, k2 = frandom.split(_key(), 2)
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 32, key=k1), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 10, key=k2))
    mlp.train()
    fl.onnx.export(mlp, (fl.ones((2, 1, 8, 8)),), None)
    assert mlp.training, "export must restore the module's training mode"
    proto = _check_module(mlp, _rand(4, 1, 8, 8), [{0: "batch"}], _rand(9, 1, 8, 8, seed=1))
    names = {t.name for t in proto.graph.initializer}
    assert {"1.weight", "1.bias", "4.weight", "4.bias"} <= names, names
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def _digits_module():
    spec = importlib.util.spec_from_file_location("train_digits", ROOT / "examples" / "train_digits.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_digits_cnn_exports_as_conv_with_dynamic_batch():
    cnn = _digits_module().make_cnn(_key(1))
    # running statistics that are not the identity, so eval-mode batch norm is exercised
    for m in cnn.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean = fl.asarray(_rand(m.num_features, seed=2) * 0.1)
            m.running_var = fl.asarray(np.abs(_rand(m.num_features, seed=3)) + 0.5)
    proto = _check_module(cnn, _rand(3, 1, 8, 8), [{0: "batch"}], _rand(5, 1, 8, 8, seed=4))
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("Conv") == 2, ops


def test_lstm_with_dynamic_batch_and_time():
    lstm = nn.LSTM(3, 5, num_layers=2, batch_first=True, key=_key(2))
    x = _rand(2, 4, 3)

    def f(x):
        out, (h, c) = lstm(x)
        return out, h, c

    proto = fl.onnx.export(f, (fl.asarray(x),), None, dynamic_axes={"x": {0: "batch", 1: "time"}})
    onnx.checker.check_model(proto, full_check=True)
    for shape in ((2, 4, 3), (5, 7, 3)):
        xi = _rand(*shape, seed=5)
        got = _session(proto).run(None, {"x": xi})
        for g, w in zip(got, f(fl.asarray(xi))):
            _compare(g, w.numpy(), f"LSTM at {shape}")
    assert any(n.op_type == "Loop" for n in proto.graph.node)


def test_transformer_encoder_layer():
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.1, batch_first=True, key=_key(3))
    _check_module(layer, _rand(2, 5, 16), {"src": {0: "batch", 1: "seq"}}, _rand(3, 7, 16, seed=6))


def test_scan_and_while_loop_program():
    w = fl.asarray(_rand(4, 4) * 0.3)

    def f(x, n):
        def step(h, xt):
            h = fl.tanh(h @ w + xt)
            return h, h.sum(-1)

        h, ys = fl.scan(step, fl.zeros_like(x[0]), x)
        hr, ysr = fl.scan(step, h, x, reverse=True)

        def cond(c):
            return (c[0] < n) & (c[1].sum() < 100.0)

        def body(c):
            return c[0] + 1, c[1] * 1.5 + 0.1

        k, grown = fl.while_loop(cond, body, (fl.asarray(0), hr))
        total = fl.fori_loop(0, 3, lambda i, acc: acc + i * ys.mean(), 0.0)
        return ys, ysr, k, grown, total

    x = fl.asarray(_rand(6, 2, 4))
    _export_and_check(f, (x, fl.asarray(4)), "scan/while program")
    proto = fl.onnx.export(f, (x, fl.asarray(4)), None)
    got = _session(proto).run(None, {"x": np.asarray(x), "n": np.asarray(9)})
    for g, wv in zip(got, f(x, fl.asarray(9))):
        _compare(g, np.asarray(wv), "scan/while program with another trip count")


@pytest.mark.parametrize("opset", [18, 21])
def test_later_opsets(opset):
    lstm = nn.LSTM(3, 4, batch_first=True, key=_key(4))
    x = _rand(2, 5, 3)
    proto = fl.onnx.export(lambda x: lstm(x)[0], (fl.asarray(x),), None, opset=opset, dynamic_axes=[{0: "n"}])
    assert proto.opset_import[0].version == opset
    (got,) = _run(proto, {"x": x})
    _compare(got, lstm(fl.asarray(x))[0].numpy(), f"LSTM at opset {opset}")
    with pytest.raises(ValueError, match="opset 17 is too old"):
        fl.onnx.export(lambda x: x, (fl.asarray(x),), None, opset=17)


def test_cond_and_switch():
    def f(x, i):
        a = fl.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
        b = fl.switch(i, [lambda v: v + 1.0, lambda v: v * v, lambda v: fl.sin(v)], x)
        return a, b

    x = fl.asarray(_rand(3))
    proto = fl.onnx.export(f, (x, fl.asarray(1)), None)
    onnx.checker.check_model(proto, full_check=True)
    for i in (-1, 0, 1, 2, 5):
        for xv in (np.asarray(x), -np.abs(np.asarray(x))):
            got = _session(proto).run(None, {"x": xv, "i": np.asarray(i)})
            for g, w in zip(got, f(fl.asarray(xv), fl.asarray(i))):
                _compare(g, w.numpy(), f"cond/switch at i={i}")


# ---------------------------------------------------------------------------------------------------------------
# Errors


def test_unsupported_primitive_names_it_and_the_line():
    def f(x):
        return fl.linalg.cholesky(x @ x.T + 1.0)  # the line the error must name

    line = f.__code__.co_firstlineno + 1
    with pytest.raises(ExportError) as info:
        fl.onnx.export(f, (fl.eye(3),), None)
    msg = str(info.value)
    assert "'cholesky'" in msg and f"test_onnx.py:{line} in f" in msg and "no ONNX lowering" in msg, msg


@pytest.mark.parametrize("opset", [18, 26])
def test_signed_zeros_and_special_values(opset):
    """Functions whose zeros carry a sign keep it (onnxruntime's Where returns +0.0 for a selected -0.0); from
    opset 26 the sign bit is read with BitCast, so a NaN's sign is visible too."""
    x = np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, -2.0, 1e-45, -3.0, -0.25, 2.5], np.float32)
    y = np.array([-0.0, 0.0, -2.0, 2.0, 1.0, -np.inf, 1.0, 2.0, 0.0, -0.0, -np.inf, -0.5], np.float32)

    def f(x, y):
        return (
            fl.signbit(x),
            fl.copysign(y, x),
            fl.atan2(x, y),
            fl.trunc(x),
            fl.cbrt(x),
            fl.log1p(x),
            fl.expm1(x),
            fl.remainder(x, y),
            fl.floor_divide(x, y),
            fl.max(fl.stack([x, x - 1.0]), axis=0),  # a -0.0 maximum stays -0.0
        )

    xs, ys = fl.asarray(x), fl.asarray(y)
    got = _run(fl.onnx.export(f, (xs, ys), None, opset=opset), {"x": x, "y": y})
    with np.errstate(all="ignore"):
        want = f(xs, ys)
    for i, (g, w) in enumerate(zip(got, want)):
        w = w.numpy()
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=0, equal_nan=True, err_msg=f"output {i}")
        same = np.isnan(w) | (np.signbit(g) == np.signbit(w))
        assert same.all(), f"output {i}: signs differ at {np.flatnonzero(~same)}: got {g}, funclib gives {w}"
    if opset >= 26:
        nan_sign = np.array([np.nan, -np.nan], np.float32)
        (got,) = _run(fl.onnx.export(fl.signbit, (fl.asarray(nan_sign),), None, opset=26), {"x": nan_sign})
        np.testing.assert_array_equal(got, [False, True])


@pytest.mark.parametrize("opset", [18, 26])
def test_nextafter_needs_opset_26(opset):
    x = np.array([0.0, -0.0, 1.5, -1e-45, 1e-45, np.inf, np.nan, 2.0], np.float32)
    y = np.array([-0.0, 1.0, -2.0, 1.0, -1.0, 0.0, 1.0, 2.0], np.float32)
    xs, ys = fl.asarray(x), fl.asarray(y)
    if opset < 26:
        with pytest.raises(ExportError, match="'nextafter'.*needs opset 26"):
            fl.onnx.export(fl.nextafter, (xs, ys), None, opset=opset)
        return
    proto = fl.onnx.export(fl.nextafter, (xs, ys), None, opset=opset)
    (got,) = _run(proto, {proto.graph.input[0].name: x, proto.graph.input[1].name: y})
    want = fl.nextafter(xs, ys).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_erfinv_over_its_domain():
    x = np.concatenate(
        [np.linspace(-1, 1, 20001, dtype=np.float32), [-1.5, 1.5, np.nan, 1 - 6e-8, -0.0, 1e-30]]
    ).astype(np.float32)
    (got,) = _run(fl.onnx.export(fl.erfinv, (fl.asarray(x),), None), {"x": x})
    np.testing.assert_allclose(got, fl.erfinv(fl.asarray(x)).numpy(), rtol=RTOL, atol=0, equal_nan=True)


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_polygamma_over_the_real_line(n):
    x = np.concatenate([np.linspace(-6.3, 25, 1201), [1.4616321449683623, 0, -0.0, -1, -2, np.inf, -np.inf, np.nan]])
    for dtype, tol in ((np.float64, 1e-12), (np.float32, RTOL)):
        xs = fl.asarray(x.astype(dtype))
        proto = fl.onnx.export(lambda v: fl.polygamma(n, v), (xs,), None)
        (got,) = _run(proto, {proto.graph.input[0].name: np.asarray(xs)})
        with np.errstate(all="ignore"):
            want = fl.polygamma(n, xs).numpy()
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=f"n={n} {dtype.__name__}")


@pytest.mark.parametrize("name", ["scatter_max", "scatter_min", "scatter_mul", "scatter_add"])
def test_scatter_combinations_with_repeats_and_nan(name):
    # repeated indices combine every update, and a NaN anywhere in the combination gives NaN, as np.maximum.at
    x = np.array([[1.0, 2.0], [np.nan, 0.5], [3.0, -1.0], [-0.5, 2.0]], np.float32)
    idx = np.array([[0], [0], [1], [2], [3], [2]])
    upd = np.array([[np.nan, 1.0], [5.0, -2.0], [2.0, 2.0], [4.0, 0.0], [0.0, 9.0], [-7.0, 3.0]], np.float32)

    def f(x, idx, upd):
        return PRIMITIVES[name].bind(x, idx, upd, axes=(0,))

    proto = fl.onnx.export(f, (fl.asarray(x), fl.asarray(idx), fl.asarray(upd)), None)
    (got,) = _run(proto, {"x": x, "idx": idx, "upd": upd})
    with np.errstate(invalid="ignore"):
        _compare(got, f(fl.asarray(x), fl.asarray(idx), fl.asarray(upd)).numpy(), name)


def test_lgamma_at_special_values():
    x = np.array([0.0, -0.0, -1.0, -2.5, 0.5, 1.0, 2.0, 1e-30, -1e-30, 3.7, 1e10, -7.25, np.inf, -np.inf, np.nan])
    for dtype in (np.float64, np.float32):
        xs = fl.asarray(x.astype(dtype))
        (got,) = _run(fl.onnx.export(fl.lgamma, (xs,), None), {"x": np.asarray(xs)})
        want = fl.lgamma(xs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else RTOL, atol=1e-12, equal_nan=True)


def test_importing_funclib_does_not_import_onnx():
    import subprocess
    import sys

    code = "import funclib, sys; assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_onnx_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_onnx(name, *a, **k):
        if name == "onnx" or name.startswith("onnx."):
            raise ImportError("no onnx here")
        return real(name, *a, **k)

    import funclib.transforms.onnx._lower as lower

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    monkeypatch.setattr(lower.importlib, "import_module", lambda n: no_onnx(n))
    with pytest.raises(ImportError, match=r"pip install funclib\[onnx\]"):
        fl.onnx.export(lambda x: x + 1.0, (fl.ones(2),), None)


def _layer_cases():
    k = iter(frandom.split(_key(7), 40))
    img, seq, vec = (2, 4, 6, 6), (2, 4, 9), (2, 6)
    return [
        (
            "Conv2d_stride_dilation_groups",
            nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2, key=next(k)),
            img,
        ),
        ("Conv2d_same", nn.Conv2d(4, 3, (3, 2), padding="same", bias=False, key=next(k)), img),
        ("Conv1d", nn.Conv1d(4, 5, 3, stride=2, padding=1, key=next(k)), seq),
        ("ConvTranspose2d", nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1, key=next(k)), img),
        ("ConvTranspose1d", nn.ConvTranspose1d(4, 2, 2, stride=3, key=next(k)), seq),
        ("MaxPool2d_overlapping", nn.MaxPool2d(3, stride=2, padding=1), img),
        ("MaxPool1d", nn.MaxPool1d(2), seq),
        ("AvgPool2d", nn.AvgPool2d(2, stride=1, padding=1, count_include_pad=False), img),
        ("AvgPool1d", nn.AvgPool1d(3, stride=2), seq),
        ("AdaptiveAvgPool2d", nn.AdaptiveAvgPool2d((2, 3)), img),
        ("AdaptiveAvgPool1d", nn.AdaptiveAvgPool1d(4), seq),
        ("BatchNorm1d", nn.BatchNorm1d(6), vec),
        ("LayerNorm", nn.LayerNorm((4, 9)), seq),
        ("GroupNorm", nn.GroupNorm(2, 4), img),
        ("Embedding", nn.Embedding(10, 3, key=next(k)), None),
        ("Bilinear", None, None),
        ("GRU", nn.GRU(9, 5, bidirectional=True, key=next(k)), None),
        ("RNN_relu", nn.RNN(9, 3, nonlinearity="relu", num_layers=2, key=next(k)), None),
        ("LSTMCell", nn.LSTMCell(6, 4, key=next(k)), vec),
        ("MultiheadAttention", nn.MultiheadAttention(9, 3, key=next(k)), None),
        (
            "TransformerEncoder",
            nn.TransformerEncoder(
                nn.TransformerEncoderLayer(
                    8, 2, 16, dropout=0.0, activation="gelu", norm_first=True, batch_first=True, key=next(k)
                ),
                2,
            ),
            (2, 5, 8),
        ),
        (
            "activations",
            nn.Sequential(
                nn.ELU(),
                nn.SELU(),
                nn.CELU(0.5),
                nn.GELU(approximate="tanh"),
                nn.SiLU(),
                nn.Mish(),
                nn.Softplus(beta=2.0),
                nn.Softsign(),
                nn.Hardtanh(),
                nn.Hardsigmoid(),
                nn.Hardswish(),
                nn.LogSigmoid(),
                nn.LeakyReLU(0.1),
                nn.ReLU6(),
                nn.GELU(),
            ),
            vec,
        ),
        ("softmaxes", nn.Sequential(nn.Softmax(-1), nn.LogSoftmax(1), nn.Softmin(0), nn.GLU(1)), (2, 4, 6)),
    ]


_LAYERS = _layer_cases()


@pytest.mark.parametrize("case", _LAYERS, ids=[c[0] for c in _LAYERS])
def test_layer_exports_with_dynamic_batch(case):
    name, layer, shape = case
    if name == "Embedding":
        x, other = np.array([[1, 2, 9], [0, 4, 4]]), np.array([[3, 3, 1], [7, 8, 0], [2, 2, 2]])
        _check_module(layer, x, [{0: "batch"}], other)
    elif name == "Bilinear":
        bl = nn.Bilinear(3, 4, 2, key=_key(8))
        f = lambda a, b: bl(a, b)  # noqa: E731
        proto = fl.onnx.export(
            f, (fl.asarray(_rand(2, 3)), fl.asarray(_rand(2, 4))), None, dynamic_axes={"a": {0: "n"}, "b": {0: "n"}}
        )
        a, b = _rand(5, 3, seed=1), _rand(5, 4, seed=2)
        (got,) = _run(proto, {"a": a, "b": b})
        _compare(got, f(fl.asarray(a), fl.asarray(b)).numpy(), name)
    elif name in ("GRU", "RNN_relu"):
        f = lambda x: layer(x)[0]  # noqa: E731  (time-major: (T, N, C))
        proto = fl.onnx.export(f, (fl.asarray(_rand(3, 2, 9)),), None, dynamic_axes={"x": {0: "time", 1: "batch"}})
        other = _rand(4, 5, 9, seed=1)
        (got,) = _run(proto, {"x": other})
        _compare(got, f(fl.asarray(other)).numpy(), name)
    elif name == "MultiheadAttention":
        mask = fl.asarray(np.triu(np.full((4, 4), -np.inf, np.float32), 1))

        def f(q, kv, pad):
            out, w = layer(q, kv, kv, key_padding_mask=pad, attn_mask=mask)
            return out, w

        q, kv = _rand(4, 2, 9), _rand(4, 2, 9, seed=1)
        pad = np.array([[False, False, False, True], [False, False, False, False]])
        proto = fl.onnx.export(
            f,
            (fl.asarray(q), fl.asarray(kv), fl.asarray(pad)),
            None,
            dynamic_axes={"q": {1: "batch"}, "kv": {1: "batch"}, "pad": {0: "batch"}},
        )
        q3, kv3 = _rand(4, 3, 9, seed=2), _rand(4, 3, 9, seed=3)
        pad3 = np.array([[False, True, True, True], [False, False, False, False], [False, False, True, False]])
        got = _run(proto, {"q": q3, "kv": kv3, "pad": pad3})
        for g, w in zip(got, f(fl.asarray(q3), fl.asarray(kv3), fl.asarray(pad3))):
            _compare(g, w.numpy(), name)
    elif name == "LSTMCell":
        f = lambda x: layer(x)  # noqa: E731
        proto = fl.onnx.export(f, (fl.asarray(_rand(*shape)),), None, dynamic_axes={"x": {0: "batch"}})
        other = _rand(5, 6, seed=1)
        got = _run(proto, {"x": other})
        for g, w in zip(got, f(fl.asarray(other))):
            _compare(g, w.numpy(), name)
    else:
        if isinstance(layer, (nn.BatchNorm1d,)):
            layer.running_mean = fl.asarray(_rand(6, seed=3))
            layer.running_var = fl.asarray(np.abs(_rand(6, seed=4)) + 0.5)
        other_shape = (5,) + shape[1:]
        _check_module(layer, _rand(*shape), [{0: "batch"}], _rand(*other_shape, seed=1))


# ---------------------------------------------------------------------------------------------------------------
# Sizes derived from dynamic axes


def _check_dynamic(f, args, dynamic_axes, others):
    proto = fl.onnx.export(f, tuple(fl.asarray(a) for a in args), None, dynamic_axes=dynamic_axes)
    onnx.checker.check_model(proto, full_check=True)
    sess = _session(proto)
    for other in [args, *others]:
        got = sess.run(None, {i.name: np.asarray(a) for i, a in zip(proto.graph.input, other)})
        want = fl.tree.leaves(f(*[fl.asarray(a) for a in other]))
        for g, w in zip(got, want):
            _compare(g, np.asarray(w), f"at shapes {[np.shape(a) for a in other]}")
    return proto


def test_sizes_derived_from_a_dynamic_batch_are_computed_in_the_graph():
    w = fl.asarray(_rand(3, 4))

    def f(x):
        b, t, d = x.shape
        flat = x.reshape(b * t, d) @ w  # a product of two dynamic sizes
        y = flat.reshape(b, t * 4)  # and one with a static factor
        pos = fl.arange(t, dtype=fl.float32)  # an arange of a dynamic size
        z = fl.zeros((b, 1)) + y.mean(0)  # a constant of dynamic shape, a mean dividing by b
        tiled = fl.broadcast_to(x[:, :1, :], (b, t, d))  # a broadcast to computed sizes
        head = x[:-1]  # a slice bound that depends on b
        return z, pos * 2.0, tiled + x, head, fl.concat([x, x], axis=0).sum((1, 2)) / b

    x = _rand(2, 5, 3)
    _check_dynamic(f, [x], {"x": {0: "b", 1: "t"}}, [[_rand(4, 3, 3, seed=1)], [_rand(3, 7, 3, seed=2)]])


def test_causal_attention_with_a_dynamic_sequence_length():
    import funclib.nn.functional as F

    def f(q):
        # the causal mask is a NumPy triangle built at trace time, with the sequence length in its shape
        return F.scaled_dot_product_attention(q, q, q, is_causal=True)

    q = _rand(2, 3, 6, 8)
    _check_dynamic(f, [q], [{0: "b", 2: "t"}], [[_rand(1 + 2, 3, 9, 8, seed=1)], [_rand(4, 3, 2, 8, seed=2)]])


def test_a_dynamic_constant_without_a_pattern_is_refused():
    def f(x):
        noise = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
        return x + fl.asarray(noise)

    with pytest.raises(ExportError, match=r"constant of shape \(2, 3\).*neither filled"):
        fl.onnx.export(f, (fl.ones((2, 3)),), None, dynamic_axes={"x": [0]})


def test_scan_over_a_dynamic_axis():
    def f(xs):
        return fl.scan(lambda c, x: (c + x, c * x), fl.zeros_like(xs[0]), xs)

    _check_dynamic(f, [_rand(3, 2)], [{0: "n"}], [[_rand(6, 2, seed=1)]])


def test_a_shape_dependent_python_branch_is_refused():
    def f(x):
        return x * 2.0 if x.shape[0] < 3 else x.sum(0)

    with pytest.raises(ExportError, match="structure depends on that size"):
        fl.onnx.export(f, (fl.ones((2, 3)),), None, dynamic_axes={"x": [0]})


def test_a_size_used_non_polynomially_is_refused():
    def f(x):
        return x * (1.0 / x.shape[0] ** 0.5)

    with pytest.raises(ExportError, match="not a polynomial"):
        fl.onnx.export(f, (fl.ones((4, 3)),), None, dynamic_axes={"x": [0]})


def test_dynamic_axes_are_checked():
    x = fl.ones((4, 3))
    with pytest.raises(ValueError, match="not an input"):
        fl.onnx.export(lambda x: x + 1.0, (x,), None, dynamic_axes={"y": [0]})
    with pytest.raises(ValueError, match="size 2 or more"):
        fl.onnx.export(lambda x: x + 1.0, (fl.ones((1, 3)),), None, dynamic_axes={"x": [0]})
    with pytest.raises(ValueError, match="out of range"):
        fl.onnx.export(lambda x: x + 1.0, (x,), None, dynamic_axes={"x": [2]})
    with pytest.raises(ValueError, match="one size"):
        fl.onnx.export(
            lambda x, y: x + y.sum(), (x, fl.ones((3, 3))), None, dynamic_axes={"x": {0: "n"}, "y": {0: "n"}}
        )


def test_saved_file_loads_and_names_inputs(tmp_path):
    path = tmp_path / "f.onnx"

    def f(x, pair):
        return x * pair[0] + pair[1], x.sum()

    model = fl.onnx.export(f, (fl.ones(3), (fl.ones(3), fl.asarray(2.0))), path, output_names=["y", "total"])
    loaded = onnx.load(str(path))
    assert loaded == model
    assert [i.name for i in loaded.graph.input] == ["x", "pair[0]", "pair[1]"]
    assert [o.name for o in loaded.graph.output] == ["y", "total"]
    assert not [p for p in tmp_path.iterdir() if p.name != "f.onnx"], "no temporary file may be left behind"
