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
import numpy as np
import pytest
from layer_cases import CASES, cotangent, inputs, weights

import funclib as fl

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
