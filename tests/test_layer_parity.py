"""The layers PyTorch users reach for, checked against PyTorch with copied weights: outputs, input and parameter
gradients, and the state after a training step (running statistics), in training and evaluation mode.

Each case (tests/layer_cases.py) is compared with PyTorch's results recorded in tests/data/layer_reference.npz
(float32 precision; CI has no torch) and, where torch is installed, with PyTorch live in float64."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import funclib.nn as nn
import funclib.nn.functional as F
import funclib.nn.utils.rnn as rnn
import funclib.optim as optim
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layer_cases import CASES, cotangent, inputs, weights

import funclib as fl
import funclib.testing as T

try:
    import torch
except ImportError:  # the live comparison needs torch; the recorded one does not
    torch = None

FUNCLIB = SimpleNamespace(nn=nn, F=F, rnn=rnn, asarray=fl.asarray, concat=fl.concat, float64=fl.float64)
DATA = Path(__file__).parent / "data"


def _recorded() -> dict[str, dict[str, np.ndarray]]:
    z = np.load(DATA / "layer_reference.npz")
    values, out = z["values"], {}
    for name, at, shape in zip(z["names"], z["offsets"], z["shapes"]):
        shape = tuple(int(s) for s in str(shape).split(",") if s)
        case, key = str(name).split("/", 1)
        out.setdefault(case, {})[key] = values[at : at + int(np.prod(shape))].reshape(shape)
    return out


RECORDED = _recorded()


def funclib_results(case) -> dict[str, np.ndarray]:
    """What ``make_layer_reference.reference`` records for PyTorch, computed with funclib."""
    xs = [fl.asarray(x) for x in inputs(case)]

    def build():
        m = case.build(FUNCLIB).double()
        state = m.state_dict()
        new = weights(case, {k: (tuple(v.shape), v.dtype.kind == "f" and "num_batches" not in k) for k, v in
                             state.items()})
        m.load_state_dict({k: new.get(k, v) for k, v in state.items()})
        return m.train(case.train)

    module = None if case.build is None else build()
    out = case.forward(FUNCLIB, module, *xs)
    ct = fl.asarray(cotangent(case, tuple(out.shape)))
    res = {"out": np.asarray(out)}
    if module is not None:
        res.update({f"state/{k}": np.asarray(v) for k, v in module.named_buffers()})

    def loss(m, *xs):
        return fl.sum(case.forward(FUNCLIB, m, *xs) * ct)

    if module is None:
        grads = fl.grad(lambda *xs: loss(None, *xs), argnums=tuple(range(len(xs))))(*xs)
    else:
        fresh = build()
        gm, *grads = fl.grad(loss, argnums=tuple(range(len(xs) + 1)))(fresh, *xs)
        res.update({f"grad/{k}": np.asarray(v) for k, v in gm.named_parameters()})
    res.update({f"grad_x{i}": np.asarray(g) for i, g in enumerate(grads)})
    return res


def _compare(got, want, rtol, atol, case):
    assert set(got) == set(want), f"{case}: entries differ: {sorted(set(got) ^ set(want))}"
    for k in want:
        g = np.asarray(got[k], np.float64)
        w = np.asarray(want[k], np.float64)
        assert g.shape == w.shape, f"{case}/{k}: shape {g.shape}, PyTorch {w.shape}"
        scale = max(1.0, float(np.abs(w).max(initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=f"{case}/{k}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_recorded_pytorch(case):
    _compare(funclib_results(case), RECORDED[case.name], 2e-5, 2e-6, case.name)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_pytorch_live(case):
    import sys

    sys.path.insert(0, str(DATA))
    from make_layer_reference import reference

    _compare(funclib_results(case), reference(case), 1e-9, 1e-11, case.name)


def test_every_case_is_recorded():
    assert set(RECORDED) == {c.name for c in CASES}, "rerun tests/data/make_layer_reference.py"


# ---------------------------------------------------------------------------------------------------------------
# Transform laws on the new layers


@settings(deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=2),
    mode=st.sampled_from(["reflect", "replicate", "circular", "constant"]),
)
def test_pad_modes_are_linear_maps_whose_vjp_is_their_transpose(pairs, mode):
    widths = [w for pair in pairs for w in pair]
    x = fl.asarray(np.random.default_rng(len(widths)).standard_normal((2, 4, 5)))
    y, pullback = fl.vjp(lambda x: F.pad(x, tuple(widths), mode=mode), x)
    u = fl.asarray(np.random.default_rng(7).standard_normal(y.shape))
    (xt,) = pullback(u)
    np.testing.assert_allclose(float(fl.sum(y * u)), float(fl.sum(x * xt)), rtol=1e-12)
    np.testing.assert_allclose(F.pad(2 * x, tuple(widths), mode=mode), 2 * y)


@settings(deadline=None)
@given(
    size=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    mode=st.sampled_from(["nearest", "nearest-exact", "bilinear", "area"]),
    align=st.booleans(),
)
def test_interpolate_vjp_is_its_transpose_and_jit_agrees(size, mode, align):
    x = fl.asarray(np.random.default_rng(1).standard_normal((1, 2, 4, 5)))
    align_corners = align if mode == "bilinear" else None

    def f(x):
        return F.interpolate(x, size=size, mode=mode, align_corners=align_corners)

    y, pullback = fl.vjp(f, x)
    u = fl.asarray(np.random.default_rng(2).standard_normal(y.shape))
    np.testing.assert_allclose(float(fl.sum(y * u)), float(fl.sum(x * pullback(u)[0])), rtol=1e-12)
    np.testing.assert_allclose(fl.jit(f)(x), y, rtol=1e-12)


def test_new_layers_compose_with_jit_vmap_and_second_derivatives():
    conv = nn.Conv3d(2, 3, 3, padding=1, padding_mode="circular", key=fl.random.key(0)).double()
    x = fl.asarray(np.random.default_rng(0).standard_normal((2, 2, 3, 4, 3)))
    np.testing.assert_allclose(fl.jit(conv)(x), conv(x), rtol=1e-12)
    np.testing.assert_allclose(fl.vmap(conv)(x), conv(x), rtol=1e-12)  # unbatched examples, one per lane
    T.check_grads(lambda x: F.local_response_norm(x, 3, 0.5, 0.75, 1.0), (x[:, :, 0],), order=2)
    T.check_grads(lambda x: F.rms_norm(x, 3), (x[:, 0, 0],), order=2)
    T.check_grads(lambda x: F.instance_norm(x), (x[:, :, 0],), order=2)

    lstm = nn.LSTM(3, 4, bidirectional=True, key=fl.random.key(1)).double()
    seq = fl.asarray(np.random.default_rng(1).standard_normal((5, 3, 3)))

    def loss(model, x):
        out, _ = model(rnn.pack_padded_sequence(x, [5, 2, 4], enforce_sorted=False))
        return fl.sum(rnn.pad_packed_sequence(out)[0] ** 2)

    np.testing.assert_allclose(fl.jit(loss)(lstm, seq), loss(lstm, seq), rtol=1e-12)
    g_jit = fl.jit(fl.grad(loss, argnums=1))(lstm, seq)
    np.testing.assert_allclose(g_jit, fl.grad(loss, argnums=1)(lstm, seq), rtol=1e-10)
    # steps past a sequence's end change nothing
    assert float(fl.max(fl.abs(g_jit[2:, 1]))) == 0.0 and float(fl.max(fl.abs(g_jit[4:, 2]))) == 0.0


def test_packed_sequence_is_a_pytree_of_its_data():
    p = rnn.pack_sequence([fl.tensor([1.0, 2.0, 3.0]), fl.tensor([4.0])])
    leaves = fl.tree.leaves(p)
    assert len(leaves) == 1 and leaves[0] is p.data
    doubled = fl.tree.map(lambda d: d * 2, p)
    np.testing.assert_array_equal(doubled.data, [2.0, 8.0, 4.0, 6.0])
    np.testing.assert_array_equal(doubled.batch_sizes, [2, 1, 1])
    data, sizes, order, inverse = p
    assert order is None and inverse is None and sizes.dtype == fl.int64


def test_clip_grad_norm_on_a_gradient_pytree_matches_pytorch_numerics():
    rng = np.random.default_rng(3)
    grads = {"w": rng.standard_normal((3, 4)), "layers": [rng.standard_normal(5), None, rng.standard_normal((2, 2))]}
    flat = np.concatenate([grads["w"].ravel(), grads["layers"][0], grads["layers"][2].ravel()])
    for norm_type, max_norm in ((2.0, 1.0), (1.0, 2.5), (float("inf"), 0.5), (2.0, 100.0)):
        w, (a, _, b) = grads["w"], grads["layers"]
        tree = {"w": fl.asarray(w), "layers": [fl.asarray(a), None, fl.asarray(b)]}
        clipped, total = optim.clip_grad_norm_(tree, max_norm, norm_type)
        want = np.linalg.norm(flat, ord=norm_type)
        np.testing.assert_allclose(float(total), want, rtol=1e-12)
        scale = min(1.0, max_norm / (want + 1e-6))
        np.testing.assert_allclose(clipped["w"], grads["w"] * scale, rtol=1e-12)
        assert clipped["layers"][1] is None
        if torch is not None:
            ps = [torch.nn.Parameter(torch.tensor(g)) for g in (grads["w"], *grads["layers"][::2])]
            for p, g in zip(ps, (grads["w"], *grads["layers"][::2])):
                p.grad = torch.tensor(g)
            t_total = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
            np.testing.assert_allclose(float(total), float(t_total), rtol=1e-12)
            np.testing.assert_allclose(clipped["layers"][2], ps[2].grad.numpy(), rtol=1e-12)
