"""``fl.export``: saved compiled programs load without their source, give the same results, and compose with
grad, vmap and jit; a symbolic batch dimension; clear errors for what cannot be saved or loaded."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import funclib.nn as nn
import funclib.nn.functional as F
import funclib.optim as optim
import numpy as np
import pytest
from funclib.transforms.export import ExportError
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
from funclib import random as frandom
from funclib.testing import assert_allclose, assert_trees_allclose

ROOT = Path(__file__).resolve().parents[1]


def _digits_models():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from train_digits import make_cnn, make_mlp, make_train_step
    finally:
        sys.path.pop(0)
    return make_mlp, make_cnn, make_train_step


def _round_trip(exp, tmp_path, name="f.flx"):
    exp.save(tmp_path / name)
    return fl.export.load(tmp_path / name)


def _f(w, x):
    return fl.sum(fl.tanh(x @ w) ** 2, axis=-1) + fl.mean(x, axis=-1)


# ---------------------------------------------------------------------------------------------------------------
# Same results, and transforms of the loaded program


@settings(max_examples=10, deadline=None)
@given(
    w=hnp.arrays(np.float64, (3, 2), elements=st.floats(-2, 2)),
    x=hnp.arrays(np.float64, (4, 3), elements=st.floats(-2, 2)),
)
def test_loaded_program_matches_and_composes(tmp_path_factory, w, x):
    tmp = tmp_path_factory.mktemp("exp")
    w, x = fl.asarray(w), fl.asarray(x)
    f = fl.jit(_f)
    g = _round_trip(fl.export.export(f)(w, x), tmp)
    assert_allclose(g(w, x), f(w, x), rtol=0, atol=0)
    # derivatives are derived from the loaded primitives
    assert_trees_allclose(fl.grad(lambda w, x: fl.sum(g(w, x)), argnums=(0, 1))(w, x),
                          fl.grad(lambda w, x: fl.sum(_f(w, x)), argnums=(0, 1))(w, x), rtol=1e-12, atol=1e-12)
    assert_allclose(fl.jacfwd(g, argnums=1)(w, x), fl.jacfwd(_f, argnums=1)(w, x), rtol=1e-12, atol=1e-12)
    ws = fl.stack([w, 2 * w])
    assert_allclose(fl.vmap(g, in_axes=(0, None))(ws, x), fl.vmap(_f, in_axes=(0, None))(ws, x), rtol=1e-12)
    assert_allclose(fl.jit(lambda w, x: g(w, x) * 3)(w, x), _f(w, x) * 3, rtol=1e-12)


def test_plain_function_is_jitted_and_trees_round_trip(tmp_path):
    Pair = collections.namedtuple("Pair", "a b")

    def f(d, xs, scale=1.0):
        return {"sum": d["u"] + xs[0], "pair": Pair(d["v"] * scale, xs[1]), "none": None}, [xs[1]]

    args = ({"u": fl.ones(2), "v": fl.arange(3.0)}, (fl.ones(2), fl.zeros(1)))
    g = _round_trip(fl.export.export(f)(*args, scale=fl.asarray(2.0)), tmp_path)
    out = g(*args, scale=fl.asarray(2.0))
    want = f(*args, scale=2.0)
    assert out[0]["none"] is None and type(out[1]) is list
    assert type(out[0]["pair"]).__name__ == "Pair" and out[0]["pair"]._fields == ("a", "b")
    assert_trees_allclose(tuple(out[0]["pair"]), tuple(want[0]["pair"]))
    assert_allclose(out[0]["sum"], want[0]["sum"])
    with pytest.raises(TypeError, match="structure"):
        g(args[0], args[1])
    with pytest.raises(TypeError, match=r"argument leaf 0 is f32\[3\] but the program takes f32\[2\]"):
        g({"u": fl.ones(3), "v": fl.arange(3.0)}, args[1], scale=fl.asarray(2.0))


def test_static_arguments_are_fixed(tmp_path):
    f = fl.jit(lambda x, n: x * n, static_argnums=1)
    g = _round_trip(fl.export.export(f)(fl.ones(2), 3), tmp_path)
    assert_allclose(g(fl.ones(2)), fl.full((2,), 3.0))
    with pytest.raises(TypeError, match="Static arguments were fixed at export"):
        g(fl.ones(2), 3)


def test_control_flow_and_nested_constants(tmp_path):
    table = fl.asarray(np.linspace(0, 1, 4, dtype=np.float32))

    def f(x):
        def body(c, xi):
            return c * 0.5 + xi * table[1], c

        c, ys = fl.scan(body, fl.zeros(()), x)
        w = fl.while_loop(lambda v: v < 10.0, lambda v: v * 2.0 + table[3], c, max_steps=20)
        return fl.cond(w > 0, lambda: ys + table, lambda: ys - 1.0), w

    x = fl.asarray(np.arange(4, dtype=np.float32))
    g = _round_trip(fl.export.export(fl.jit(f))(x), tmp_path)
    assert_trees_allclose(g(x), f(x), rtol=1e-6)
    assert_allclose(fl.grad(lambda x: fl.sum(g(x)[0]))(x), fl.grad(lambda x: fl.sum(f(x)[0]))(x), rtol=1e-6)


def test_dtypes_of_constants_survive(tmp_path):
    consts = [fl.asarray(np.array([1 + 2j, 3j])), fl.asarray(np.array([1, 2], np.uint64)),
              fl.asarray(np.array([0.5, 2], np.float32)).astype(fl.bfloat16), fl.asarray(np.array([True, False]))]

    def f(x):
        return [x * c.astype(x.dtype) if c.dtype != fl.complex128 else fl.real(c) * x for c in consts]

    x = fl.ones(2, dtype=fl.float64)
    g = _round_trip(fl.export.export(f)(x), tmp_path)
    assert_trees_allclose(g(x), f(x), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# A symbolic batch dimension


def test_batch_axes_give_any_batch_size(tmp_path):
    make_mlp, make_cnn, _ = _digits_models()
    for make in (make_mlp, make_cnn):
        model = make(frandom.key(0))
        model.eval()
        fwd = fl.jit(lambda m, x: F.log_softmax(m(x), dim=1))
        x = fl.asarray(np.random.default_rng(0).random((16, 1, 8, 8), dtype=np.float32))
        exp = fl.export.export(fwd, batch_axes=(None, 0))(model, x)
        assert "f32[b,1,8,8]" in repr(exp) and "f32[b,10]" in repr(exp)
        g = _round_trip(exp, tmp_path)
        for n in (16, 1, 5, 33):
            xb = fl.asarray(np.random.default_rng(n).random((n, 1, 8, 8), dtype=np.float32))
            assert_allclose(g(model, xb), fwd(model, xb), rtol=1e-6, atol=1e-6)
        gm = fl.grad(lambda m, x, g=g: fl.sum(g(m, x)[:, 3]))(model, x[:7])
        want = fl.grad(lambda m, x, f=fwd: fl.sum(f(m, x)[:, 3]))(model, x[:7])
        assert_trees_allclose(gm, want, rtol=1e-5, atol=1e-6)


def test_batch_dependent_values_are_fitted_or_refused():
    def counts(x):  # the count a mean divides by, zeros of the batch shape, an iota: linear in the batch size
        return fl.mean(x, axis=0) + fl.sum(fl.zeros(x.shape) + 1.0) / x.shape[0] + fl.arange(x.shape[0]) @ x

    exp = fl.export.export(fl.jit(counts), batch_axes=0)(fl.ones((4, 3)))
    for n in (2, 9):
        x = fl.asarray(np.random.default_rng(n).random((n, 3), dtype=np.float32))
        assert_allclose(exp(x), counts(x), rtol=1e-6)

    with pytest.raises(ExportError, match="structure depends on the batch size"):
        fl.export.export(lambda x: fl.sin(x) if x.shape[0] % 2 else fl.cos(x), batch_axes=0)(fl.ones((4, 3)))
    with pytest.raises(ExportError, match="constant whose value depends on the batch size"):
        fl.export.export(lambda x: x + fl.asarray(np.arange(x.shape[0], dtype=np.float32)), batch_axes=0)(fl.ones(4))
    with pytest.raises(ExportError, match=r"not an integer linear in it \(e.g. the unbiased variance"):
        fl.export.export(lambda x: x * (x.shape[0] / (x.shape[0] - 1)), batch_axes=0)(fl.ones(4))
    with pytest.raises(ValueError, match="batch_axes has 2 entries"):
        fl.export.export(lambda x: x, batch_axes=(0, 0))(fl.ones(4))


# ---------------------------------------------------------------------------------------------------------------
# A fresh process without the defining source


def _run_fresh(tmp_path, script: str) -> None:
    code = textwrap.dedent(script)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_saved_train_step_runs_in_a_fresh_process(tmp_path):
    make_mlp, _, _ = _digits_models()
    model = make_mlp(frandom.key(0), dropout=0.0)
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    opt = optim.Adam(params, lr=1e-2)

    def step(params, state, hyper, x, y):
        def loss(ps):
            return F.cross_entropy(nn.functional_call(model, dict(zip(names, ps)), (x,)), y)

        value, grads = fl.value_and_grad(loss)(params)
        params, state = opt.apply(grads, params, state, hyper)
        return params, state, value

    rng = np.random.default_rng(0)
    x = fl.asarray(rng.random((32, 1, 8, 8), dtype=np.float32))
    y = fl.asarray(rng.integers(0, 10, 32))
    args = (params, opt.init(params), opt.hyperparams(), x, y)
    jstep = fl.jit(step)
    fl.export.export(jstep)(*args).save(tmp_path / "step.flx")
    fl.save(args, tmp_path / "args.safetensors")
    outs, a = [], args
    for _ in range(3):
        p, s, loss = jstep(*a)
        outs.append((p, loss))
        a = (p, s, *a[2:])
    fl.save(outs, tmp_path / "want.safetensors")
    _run_fresh(tmp_path, """
        import sys
        import numpy as np
        import funclib as fl
        step = fl.export.load("step.flx")
        args = fl.load("args.safetensors")
        want = fl.load("want.safetensors")
        a = tuple(args)
        for p_want, loss_want in want:
            p, s, loss = step(*a)
            assert float(loss) == float(loss_want), (float(loss), float(loss_want))
            for u, v in zip(p, p_want):
                np.testing.assert_array_equal(u.numpy(), v.numpy())
            a = (p, s, *a[2:])
        assert not any("train_digits" in m or "test_export" in m for m in sys.modules)
    """)


def test_saved_forward_runs_and_differentiates_in_a_fresh_process(tmp_path):
    _, make_cnn, _ = _digits_models()
    model = make_cnn(frandom.key(3))
    model.eval()
    fwd = fl.jit(lambda x: model(x))
    x = fl.asarray(np.random.default_rng(1).random((6, 1, 8, 8), dtype=np.float32))
    fl.export.export(fwd, batch_axes=0)(x).save(tmp_path / "fwd.flx")
    x2 = x[:4] * 0.5
    fl.save({"x": x, "x2": x2, "y": fwd(x), "y2": fwd(x2),
             "gx": fl.grad(lambda x: fl.sum(fl.tanh(fwd(x))))(x)}, tmp_path / "io.safetensors")
    _run_fresh(tmp_path, """
        import numpy as np
        import funclib as fl
        f = fl.export.load("fwd.flx")
        io = fl.load("io.safetensors")
        np.testing.assert_allclose(f(io["x"]).numpy(), io["y"].numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(f(io["x2"]).numpy(), io["y2"].numpy(), rtol=1e-6, atol=1e-6)
        g = fl.grad(lambda x: fl.sum(fl.tanh(f(x))))(io["x"])
        np.testing.assert_allclose(g.numpy(), io["gx"].numpy(), rtol=1e-5, atol=1e-7)
        jg = fl.jit(fl.vmap(fl.grad(lambda x: fl.sum(f(x[None])))))(io["x"])
        assert jg.shape == io["x"].shape
    """)


def test_module_arguments_and_results_round_trip(tmp_path):
    make_mlp, _, make_train_step = _digits_models()
    model = make_mlp(frandom.key(0))
    opt = optim.AdamW(model.named_parameters(), lr=1e-3)
    step = make_train_step(opt)
    rng = np.random.default_rng(0)
    args = (model, opt.state, opt.hyperparams(), fl.asarray(rng.random((8, 1, 8, 8), dtype=np.float32)),
            fl.asarray(rng.integers(0, 10, 8)), frandom.key(1))
    g = _round_trip(fl.export.export(step)(*args), tmp_path)
    got, want = g(*args), step(*args)
    assert type(got[0]) is type(model)
    assert_trees_allclose(got, want, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# What cannot be saved or loaded


def test_custom_rule_is_named():
    @fl.custom_jvp
    def f(x):
        return fl.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        return fl.sin(primals[0]), fl.cos(primals[0]) * tangents[0]

    with pytest.raises(ExportError, match="'custom_jvp_call' whose parameter 'fun' holds a Python function"):
        fl.export.export(f)(fl.ones(2))


def test_result_class_without_a_matching_argument_is_refused():
    with pytest.raises(ExportError, match="returns a funclib.nn.layers.Linear"):
        fl.export.export(lambda x: nn.Linear(2, 2, key=frandom.key(0)))(fl.ones(2))


def _edit(path: Path, edit) -> None:
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    program = json.loads(header["__metadata__"]["funclib.export"])
    edit(program)
    header["__metadata__"]["funclib.export"] = json.dumps(program)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n :])


def test_load_errors(tmp_path):
    p = tmp_path / "f.flx"
    fl.export.export(_f)(fl.ones((3, 2)), fl.ones((4, 3))).save(p)
    _edit(p, lambda prog: prog.update(version=99))
    with pytest.raises(ExportError, match="format version 99, newer than this funclib reads"):
        fl.export.load(p)

    fl.export.export(_f)(fl.ones((3, 2)), fl.ones((4, 3))).save(p)
    _edit(p, lambda prog: prog["jaxpr"]["eqns"][0].__setitem__(0, "frobnicate"))
    with pytest.raises(ExportError, match="primitive 'frobnicate', which this version of funclib does not have"):
        fl.export.load(p)

    fl.export.export(_f)(fl.ones((3, 2)), fl.ones((4, 3))).save(p)
    _edit(p, lambda prog: prog["jaxpr"]["vars"][0].__setitem__(1, [7, 7]))
    with pytest.raises(ExportError, match="does not typecheck"):
        fl.export.load(p)

    fl.save({"w": fl.ones(2)}, tmp_path / "plain.safetensors")
    with pytest.raises(ExportError, match="not a funclib export"):
        fl.export.load(tmp_path / "plain.safetensors")
    (tmp_path / "junk.flx").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{junk")
    with pytest.raises(ExportError, match="not an export file"):
        fl.export.load(tmp_path / "junk.flx")


# primitives whose parameters hold Python objects (functions, check sites, rematerialization policies)
_PYTHON_PARAMS = {
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_lin",
    "debug_callback",
    "pure_callback",
    "check",
    "checkify",
    "checkpoint",
}


def test_every_primitive_round_trips_through_the_file_format():
    """Every row of the op table: its jaxpr, encoded as saved and decoded, evaluates to the same values."""
    from funclib.transforms.export._codec import Decoder, Encoder, normal
    from hypothesis import Phase, find
    from op_table import ROWS, as_tensors, draw_case, main_dtype

    for row in ROWS:

        @st.composite
        def case(draw, row=row):
            return draw_case(draw, row, main_dtype(row))

        cfg, args = find(case(), lambda _: True, settings=settings(database=None, phases=[Phase.generate]))
        xs = as_tensors(args)
        closed = fl.make_jaxpr(lambda *a, row=row, cfg=cfg: row.apply(cfg, *a))(*xs)
        enc = Encoder(row.name)
        if row.name in _PYTHON_PARAMS:
            with pytest.raises(ExportError, match="has an equation '.*' whose parameter"):
                enc.jaxpr(closed.jaxpr)
            continue
        saved = normal(enc.jaxpr(closed.jaxpr))
        back = Decoder(lambda k, enc=enc: enc.pool[k], None, row.name).jaxpr(saved)
        fl.typecheck(back)
        assert [e.prim.name for e in back.eqns] == [e.prim.name for e in closed.jaxpr.eqns]
        got = fl.eval_jaxpr(back, closed.consts, *xs)
        want = fl.eval_jaxpr(closed.jaxpr, closed.consts, *xs)
        assert_trees_allclose(list(got), list(want), rtol=0, atol=0, err_msg=row.name)
