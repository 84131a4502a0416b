"""funclib.optim: every optimizer against an independent NumPy implementation of its published update (50 steps,
float64, 1e-6 relative), against torch.optim when torch is installed, the model facade (groups, frozen and tied
parameters), the pure jittable API, checkpoints, clipping, schedulers and bad inputs."""

from __future__ import annotations

import inspect
import math

import funclib.nn as nn
import funclib.optim as optim
import numpy as np
import pytest
from funclib.optim import lr_scheduler as S

import funclib as fl
from funclib import random as R

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

SHAPES = [(3, 4), (5,)]
STEPS = 50


def problem(seed=0):
    rng = np.random.default_rng(seed)
    p0 = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(STEPS)]
    return p0, grads


# ---------------------------------------------------------------------------------------------------------------
# NumPy references, written from the algorithms as published in the papers / PyTorch documentation


def ref_sgd(p, gs, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    b = None
    for g in gs:
        g = -g if maximize else g
        g = g + weight_decay * p
        if momentum:
            b = g.copy() if b is None else momentum * b + (1 - dampening) * g
            g = g + momentum * b if nesterov else b
        p = p - lr * g
    return p


def ref_adam(p, gs, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False):
    """Adam (Kingma & Ba, Algorithm 1) with L2 or decoupled (AdamW) weight decay and the AMSGrad maximum."""
    b1, b2 = betas
    m, v, vmax = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(gs, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        mhat = m / (1 - b1**t)
        vhat = (vmax if amsgrad else v) / (1 - b2**t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p


def ref_adamax(p, gs, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    b1, b2 = betas
    m, u = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(gs, 1):
        g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g) + eps)
        p = p - lr / (1 - b1**t) * m / u
    return p


def ref_nadam(p, gs, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3, decoupled=False):
    b1, b2 = betas
    m, v, mu_prod = np.zeros_like(p), np.zeros_like(p), 1.0
    for t, g in enumerate(gs, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_prod = mu_prod * mu
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vhat = v / (1 - b2**t)
        p = p - lr * (1 - mu) / (1 - mu_prod) * g / (np.sqrt(vhat) + eps)
        p = p - lr * mu_next / (1 - mu_prod * mu_next) * m / (np.sqrt(vhat) + eps)
    return p


def ref_radam(p, gs, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False):
    b1, b2 = betas
    m, v = np.zeros_like(p), np.zeros_like(p)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(gs, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1**t)
        rho = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho > 5:
            ell = math.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
            r = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
            p = p - lr * mhat * ell * r
        else:
            p = p - lr * mhat
    return p


def ref_rmsprop(p, gs, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    a, gavg, b = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for g in gs:
        g = g + weight_decay * p
        a = alpha * a + (1 - alpha) * g * g
        if centered:
            gavg = alpha * gavg + (1 - alpha) * g
            denom = np.sqrt(a - gavg**2) + eps
        else:
            denom = np.sqrt(a) + eps
        if momentum:
            b = momentum * b + g / denom
            p = p - lr * b
        else:
            p = p - lr * g / denom
    return p


def ref_adagrad(p, gs, lr, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    s = np.full_like(p, initial_accumulator_value)
    for t, g in enumerate(gs, 1):
        g = g + weight_decay * p
        s = s + g * g
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s) + eps)
    return p


def ref_adadelta(p, gs, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
    a, u = np.zeros_like(p), np.zeros_like(p)
    for g in gs:
        g = g + weight_decay * p
        a = rho * a + (1 - rho) * g * g
        delta = np.sqrt(u + eps) / np.sqrt(a + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta
    return p


def ref_lion(p, gs, lr, betas=(0.9, 0.99), weight_decay=0.0):
    b1, b2 = betas
    m = np.zeros_like(p)
    for g in gs:
        c = b1 * m + (1 - b1) * g
        p = p * (1 - lr * weight_decay) - lr * np.sign(c)
        m = b2 * m + (1 - b2) * g
    return p


CASES = [
    ("SGD", dict(lr=0.1), ref_sgd),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01), ref_sgd),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True), ref_sgd),
    ("Adam", dict(lr=0.01, weight_decay=0.1), ref_adam),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), amsgrad=True), ref_adam),
    ("AdamW", dict(lr=0.01, weight_decay=0.05), lambda p, g, **k: ref_adam(p, g, decoupled=True, **k)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1), ref_adamax),
    ("NAdam", dict(lr=0.01, weight_decay=0.1), ref_nadam),
    (
        "NAdam",
        dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
        lambda p, g, decoupled_weight_decay, **k: ref_nadam(p, g, decoupled=True, **k),
    ),
    ("RAdam", dict(lr=0.01, weight_decay=0.1), ref_radam),
    (
        "RAdam",
        dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
        lambda p, g, decoupled_weight_decay, **k: ref_radam(p, g, decoupled=True, **k),
    ),
    ("RMSprop", dict(lr=0.01, weight_decay=0.1), ref_rmsprop),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True), ref_rmsprop),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1), ref_adagrad),
    ("Adadelta", dict(lr=1.0, rho=0.95, weight_decay=0.1), ref_adadelta),
    ("Lion", dict(lr=0.01, weight_decay=0.1), ref_lion),
]


def _ids(c):
    return f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items())}"


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_optimizers_match_published_updates(case):
    name, kw, ref = case
    p0, grads = problem()
    opt = getattr(optim, name)([fl.asarray(p) for p in p0], **kw)
    params = None
    for g in grads:
        params = opt.step([fl.asarray(a) for a in g])
    for i, p in enumerate(p0):
        want = ref(p, [g[i] for g in grads], **kw)
        np.testing.assert_allclose(params[i].numpy(), want, rtol=1e-6, atol=1e-9)


@needs_torch
@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "Lion"], ids=[_ids(c) for c in CASES if c[0] != "Lion"])
def test_optimizers_match_torch(case):
    name, kw, _ = case
    p0, grads = problem(1)
    tp = [torch.tensor(p, requires_grad=True) for p in p0]
    topt = getattr(torch.optim, name)(tp, **kw)
    opt = getattr(optim, name)([fl.asarray(p) for p in p0], **kw)
    for g in grads:
        for t, a in zip(tp, g):
            t.grad = torch.tensor(a)
        topt.step()
        params = opt.step([fl.asarray(a) for a in g])
    for t, p in zip(tp, params):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-12)


def test_float32_tracks_float64():
    p0, grads = problem(2)
    outs = []
    for dt in (fl.float32, fl.float64):
        opt = optim.Adam([fl.asarray(p).astype(dt) for p in p0], lr=1e-2)
        for g in grads:
            params = opt.step([fl.asarray(a).astype(dt) for a in g])
        assert params[0].dtype == dt
        outs.append(params[0].numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)


def test_lbfgs_converges_and_matches_reference():
    def rosen(x):
        return fl.sum((1 - x[:-1]) ** 2) + fl.sum(100 * (x[1:] - x[:-1] ** 2) ** 2)

    vg = fl.value_and_grad(lambda ps: rosen(ps[0]))
    for ls in (None, "strong_wolfe"):
        opt = optim.LBFGS(
            [fl.asarray(np.array([-1.2, 1.0, 0.5]))], lr=1, max_iter=50, history_size=10, line_search_fn=ls
        )
        losses = [float(opt.step(vg)) for _ in range(10)]
        assert losses[-1] < losses[0] * 1e-3
    x = opt.param_groups[0]["params"][0].numpy()
    np.testing.assert_allclose(x, np.ones(3), atol=1e-4)
    if torch is not None:

        def trosen(x):
            return ((1 - x[:-1]) ** 2).sum() + (100 * (x[1:] - x[:-1] ** 2) ** 2).sum()

        for ls in (None, "strong_wolfe"):
            tx = torch.tensor([-1.2, 1.0, 0.5], dtype=torch.float64, requires_grad=True)
            topt = torch.optim.LBFGS([tx], lr=1, max_iter=20, history_size=10, line_search_fn=ls)
            opt = optim.LBFGS(
                [fl.asarray(np.array([-1.2, 1.0, 0.5]))],
                lr=1,
                max_iter=20,
                history_size=10,
                line_search_fn=ls,
            )

            def closure(topt=topt, tx=tx):
                topt.zero_grad()
                loss = trosen(tx)
                loss.backward()
                return loss

            # one step of 20 iterations: L-BFGS on Rosenbrock amplifies rounding differences chaotically later on
            topt.step(closure)
            opt.step(vg)
            np.testing.assert_allclose(opt.param_groups[0]["params"][0].numpy(), tx.detach().numpy(), rtol=1e-6)


def test_lbfgs_on_a_model():
    model = nn.Linear(3, 1, dtype=fl.float64, key=R.key(0))
    x = fl.asarray(np.random.default_rng(0).standard_normal((20, 3)))
    y = x @ fl.asarray(np.array([[1.0], [-2.0], [0.5]])) + 0.3
    opt = optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    loss_and_grad = nn.value_and_grad(model, lambda m: ((m(x) - y) ** 2).mean())
    for _ in range(3):
        opt.update(model, lambda: loss_and_grad(model))
    np.testing.assert_allclose(model.weight.numpy(), [[1.0, -2.0, 0.5]], atol=1e-4)


# ---------------------------------------------------------------------------------------------------------------
# The model facade


def _mlp():
    return nn.Sequential(nn.Linear(3, 4, key=R.key(0)), nn.ReLU(), nn.Linear(4, 2, key=R.key(1)))


def test_update_model_matches_pure_apply_and_groups():
    model = _mlp()
    x = fl.asarray(np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32))
    lg = nn.value_and_grad(model, lambda: (model(x) ** 2).mean())
    opt = optim.Adam([{"params": model[0].parameters(), "lr": 1e-1}, {"params": model[2].parameters()}], lr=1e-2)
    assert opt.param_groups[0]["lr"] == 1e-1 and opt.param_groups[1]["lr"] == 1e-2
    params = list(model.parameters())
    state = opt.init(params)
    for _ in range(3):
        loss, grads = lg()
        flat = [grads[0].weight, grads[0].bias, grads[2].weight, grads[2].bias]
        params, state = opt.apply(flat, params, state)
        opt.update(model, grads)
    for a, b in zip(params, model.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert opt.state[0]["step"] == 3


def test_frozen_and_missing_gradients_are_skipped():
    model = _mlp()
    opt = optim.AdamW(model.parameters(), lr=1e-1, weight_decay=0.5)
    model[0].freeze()
    w0 = model[0].weight
    x = fl.ones((2, 3))
    loss, grads = nn.value_and_grad(model, lambda: model(x).sum())()
    opt.update(model, grads)
    assert model[0].weight is w0 and opt.state[0]["step"] == 0  # no decay either, as for grad=None in PyTorch
    assert opt.state[2]["step"] == 1
    w2 = model[2].weight
    opt.update(model, {"2.bias": fl.ones(2)})  # a dict with only some gradients
    assert model[2].weight is w2 and opt.state[3]["step"] == 2


def test_tied_parameters_get_summed_gradients():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False, key=R.key(0))
            self.b = nn.Linear(2, 2, bias=False, key=R.key(1))
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    m = Tied()
    w = m.a.weight.numpy()
    opt = optim.SGD(m.parameters(), lr=0.1)
    x = fl.asarray(np.array([[1.0, 2.0]], np.float32))
    g = fl.grad(lambda mm: mm(x).sum())(m)
    opt.update(m, g)
    assert m.a.weight is m.b.weight
    want = w - 0.1 * (g.a.weight.numpy() + g.b.weight.numpy())
    np.testing.assert_allclose(m.a.weight.numpy(), want, rtol=1e-6)


def test_functional_update_is_pure_and_jittable():
    model = _mlp()
    opt = optim.Adam(model.named_parameters(), lr=1e-2)
    x = fl.asarray(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))

    def step(m, state, hyper):
        loss, grads = nn.value_and_grad(m, lambda mm: (mm(x) ** 2).mean())(m)
        return opt.functional_update(m, grads, state, hyper)

    m1, s1 = step(model, opt.state, opt.hyperparams())
    assert m1 is not model and opt.state[0]["step"] == 0 and s1[0]["step"] == 1
    if hasattr(fl, "jit"):
        jstep = fl.jit(step)
        m2, s2 = jstep(model, opt.state, opt.hyperparams())
        for a, b in zip(m1.parameters(), m2.parameters()):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
        opt.param_groups[0]["lr"] = 5e-3  # a new rate is an argument, not a retrace
        jstep(m2, s2, opt.hyperparams())
        assert jstep.num_traces <= 2


def test_state_dict_round_trip_through_files(tmp_path):
    p0, grads = problem(3)
    a = optim.Adam([fl.asarray(p) for p in p0], lr=1e-2, amsgrad=True)
    for g in grads[:10]:
        a.step([fl.asarray(x) for x in g])
    fl.save(a.state_dict(), tmp_path / "opt.safetensors")
    b = optim.Adam([fl.asarray(p) for p in a.param_groups[0]["params"]], lr=0.5, amsgrad=True)
    b.load_state_dict(fl.load(tmp_path / "opt.safetensors"))
    assert b.param_groups[0]["lr"] == 1e-2 and b.state[0]["step"] == 10
    for g in grads[10:20]:
        pa = a.step([fl.asarray(x) for x in g])
        pb = b.step([fl.asarray(x) for x in g])
    np.testing.assert_allclose(pa[0].numpy(), pb[0].numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="parameter groups"):
        b.load_state_dict({"state": {}, "param_groups": []})


# ---------------------------------------------------------------------------------------------------------------
# Clipping


def test_clip_grad_norm_and_value():
    rng = np.random.default_rng(4)
    g = {"a": rng.standard_normal((3, 2)), "b": rng.standard_normal(4), "c": None}
    tree = {k: None if v is None else fl.asarray(v) for k, v in g.items()}
    total = math.sqrt(sum((v**2).sum() for v in g.values() if v is not None))
    clipped, norm = optim.clip_grad_norm_(tree, 1.0)
    np.testing.assert_allclose(float(norm), total, rtol=1e-12)
    scale = min(1.0, 1.0 / (total + 1e-6))
    np.testing.assert_allclose(clipped["a"].numpy(), g["a"] * scale, rtol=1e-12)
    assert clipped["c"] is None
    _, inf_norm = optim.clip_grad_norm_(tree, 1.0, norm_type=math.inf)
    np.testing.assert_allclose(float(inf_norm), max(np.abs(g["a"]).max(), np.abs(g["b"]).max()))
    big, _ = optim.clip_grad_norm_(tree, 100.0)
    np.testing.assert_allclose(big["b"].numpy(), g["b"])
    cv = optim.clip_grad_value_(tree, 0.5)
    np.testing.assert_allclose(cv["b"].numpy(), np.clip(g["b"], -0.5, 0.5))
    with pytest.raises(RuntimeError, match="non-finite"):
        optim.clip_grad_norm_({"a": fl.asarray(np.array([np.inf]))}, 1.0, error_if_nonfinite=True)


# ---------------------------------------------------------------------------------------------------------------
# Schedulers


def _lrs(make, n=25, metrics=None):
    opt = optim.SGD([fl.zeros(1)], lr=0.1, momentum=0.9)
    s = make(opt)
    out = [opt.param_groups[0]["lr"]]
    for i in range(n):
        s.step() if metrics is None else s.step(metrics[i])
        out.append(opt.param_groups[0]["lr"])
    return out


def test_schedulers_closed_forms():
    np.testing.assert_allclose(_lrs(lambda o: S.StepLR(o, 7, 0.5)), [0.1 * 0.5 ** (t // 7) for t in range(26)])
    np.testing.assert_allclose(
        _lrs(lambda o: S.MultiStepLR(o, [3, 10, 10], 0.1)),
        [0.1 * 0.1 ** ((t >= 3) + 2 * (t >= 10)) for t in range(26)],
    )
    np.testing.assert_allclose(_lrs(lambda o: S.ExponentialLR(o, 0.9)), [0.1 * 0.9**t for t in range(26)])
    np.testing.assert_allclose(
        _lrs(lambda o: S.CosineAnnealingLR(o, 10, 0.01)),
        [0.01 + 0.09 * (1 + math.cos(math.pi * t / 10)) / 2 for t in range(26)],
        atol=1e-12,
    )
    np.testing.assert_allclose(
        _lrs(lambda o: S.LinearLR(o, 0.25, 1.0, 8)), [0.1 * (0.25 + 0.75 * min(t, 8) / 8) for t in range(26)]
    )
    np.testing.assert_allclose(_lrs(lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e))), [0.1 / (1 + t) for t in range(26)])

    def sgdr(t, t0=3, mult=2):
        ti = t0
        while t >= ti:
            t -= ti
            ti *= mult
        return 0.1 * (1 + math.cos(math.pi * t / ti)) / 2

    np.testing.assert_allclose(
        _lrs(lambda o: S.CosineAnnealingWarmRestarts(o, 3, 2)), [sgdr(t) for t in range(26)], atol=1e-12
    )
    seq = _lrs(lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.1, 1.0, 5), S.ExponentialLR(o, 0.5)], [5]))
    np.testing.assert_allclose(seq[:6], [0.1 * (0.1 + 0.9 * t / 5) for t in range(6)])
    np.testing.assert_allclose(seq[5:9], [0.1 * 0.5**t for t in range(4)])
    plateau = _lrs(
        lambda o: S.ReduceLROnPlateau(o, patience=2, factor=0.5), n=10, metrics=[5, 4, 4, 4, 4, 4, 4, 3, 3, 3]
    )
    assert plateau == [0.1] * 5 + [0.05] * 6  # reduced after the third epoch without improvement


def test_one_cycle_drives_lr_and_momentum():
    opt = optim.SGD([fl.zeros(1)], lr=0.1, momentum=0.9)
    s = S.OneCycleLR(opt, max_lr=1.0, total_steps=20, pct_start=0.25)
    lrs, moms = [opt.param_groups[0]["lr"]], [opt.param_groups[0]["momentum"]]
    for _ in range(19):
        s.step()
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
    up = 0.25 * 20 - 1
    want = [
        1 / 25 + (1 - 1 / 25) * (1 - math.cos(math.pi * t / up)) / 2
        if t <= up
        else 1 / 25 / 1e4 + (1 - 1 / 25 / 1e4) * (1 + math.cos(math.pi * (t - up) / (19 - up))) / 2
        for t in range(20)
    ]
    np.testing.assert_allclose(lrs, want, rtol=1e-12)
    assert moms[0] == 0.95 and abs(moms[int(up)] - 0.85) < 1e-12
    adam = optim.Adam([fl.zeros(1)])
    S.OneCycleLR(adam, 0.1, total_steps=10)
    assert adam.param_groups[0]["betas"][0] == 0.95


@needs_torch
def test_schedulers_match_torch():
    def run(lib, make, n=30):
        p = torch.zeros(1, requires_grad=True) if lib is torch.optim else fl.zeros(1)
        opt = lib.SGD([p], lr=0.1, momentum=0.9)
        s = make(lib.lr_scheduler, opt)
        out = []
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            if lib is torch.optim:
                opt.step()
            s.step()
        return out

    makers = [
        lambda m, o: m.CosineAnnealingLR(o, 7, 0.001),
        lambda m, o: m.OneCycleLR(o, 0.5, total_steps=31, three_phase=True, anneal_strategy="linear"),
        lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, 0.5, 4), m.PolynomialLR(o, 10, 2.0)], [6]),
        lambda m, o: m.CosineAnnealingWarmRestarts(o, 4, 2, 0.01),
    ]
    for make in makers:
        np.testing.assert_allclose(run(optim, make), run(torch.optim, make), rtol=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# Bad inputs


def test_bad_inputs():
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([])
    with pytest.raises(ValueError, match="learning rate"):
        optim.Adam([fl.zeros(1)], lr=-1.0)
    with pytest.raises(ValueError, match="beta"):
        optim.Adam([fl.zeros(1)], betas=(1.5, 0.9))
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([fl.zeros(1)], lr=0.1, nesterov=True)
    opt = optim.SGD([fl.zeros(2), fl.zeros(3)], lr=0.1)
    with pytest.raises(ValueError, match="2 parameters"):
        opt.step([fl.zeros(2)])
    with pytest.raises(ValueError, match="shape"):
        opt.step([fl.zeros(3), fl.zeros(3)])
    with pytest.raises(TypeError, match="fl.grad"):
        opt.step()
    with pytest.raises(ValueError, match="more than once"):
        p = fl.zeros(2)
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="not a parameter of the given"):
        optim.SGD([fl.zeros(2)], lr=0.1).update(_mlp(), {})


@pytest.mark.parametrize(
    "name,kw", [("Adam", dict(lr=1e-2, amsgrad=True)), ("NAdam", dict(weight_decay=0.1)), ("RAdam", {})]
)
def test_pure_apply_jits_once_and_matches_eager(name, kw):
    rng = np.random.default_rng(5)
    p0 = [fl.asarray(rng.standard_normal(s).astype(np.float32)) for s in SHAPES]
    grads = [[fl.asarray(rng.standard_normal(s).astype(np.float32)) for s in SHAPES] for _ in range(8)]
    opt = getattr(optim, name)(list(p0), **kw)
    japply = fl.jit(opt.apply)
    pe, se, pj, sj = list(p0), opt.init(p0), list(p0), opt.init(p0)
    for i, g in enumerate(grads):
        opt.param_groups[0]["lr"] = 1e-2 / (1 + i)  # a schedule: an argument of the jitted update, no retrace
        pe, se = opt.apply(g, pe, se)
        pj, sj = japply(g, pj, sj, opt.hyperparams())
    assert japply.num_traces == 1
    for a, b in zip(pe, pj):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_jitted_apply_with_python_hyperparameters_matches_eager_in_float64(case):
    """Python-float hyperparameters are weakly typed under jit, so float64 parameters get them at full precision
    (they were rounded to float32: a jitted float64 Adam drifted from eager by 1e-10 in 4 steps, RMSprop 3e-7)."""
    name, kw, _ = case
    p0, grads = problem()
    params = [fl.asarray(p) for p in p0]
    assert params[0].dtype == fl.float64
    opt = getattr(optim, name)(list(params), **kw)
    japply = fl.jit(opt.apply)
    pe, se, pj, sj = list(params), opt.init(params), list(params), opt.init(params)
    for g in grads[:8]:
        g = [fl.asarray(a) for a in g]
        pe, se = opt.apply(g, pe, se)
        pj, sj = japply(g, pj, sj, opt.hyperparams())
    for a, b in zip(pe, pj):  # a few ulps: RAdam's rectification subtracts nearly equal terms
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-14, atol=1e-15)
    assert japply.num_traces == 1  # the step count stays a Python int, as it is eagerly


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_fused_steps_are_bitwise_the_eager_rule(case, dtype):
    # fused=True runs the rule of every leaf as one compiled call, fused=False leaf by leaf with eager operations:
    # the coefficients enter the compiled call rounded as an eager operation rounds them, so the bits agree
    name, kw, _ = case
    rng = np.random.default_rng(3)
    shapes = [(3, 4), (5,), (), (64, 80)]  # a 0-d leaf and one large enough to matter
    p0 = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(6)]
    runs = []
    for fused in (True, False):
        opt = getattr(optim, name)([fl.asarray(p).astype(dtype) for p in p0], **kw, fused=fused)
        for g in grads:
            params = opt.step([fl.asarray(a).astype(dtype) for a in g])
        if fused:
            assert opt._fused.num_traces == 1  # one trace for all steps: the coefficients are arguments
        else:
            assert "_fused" not in opt.__dict__
        runs.append((params, opt.state))
    (pa, sa), (pb, sb) = runs
    for a, b in zip(pa, pb):
        assert type(a) is fl.Tensor and a.dtype == b.dtype == dtype and a.shape == b.shape
        assert a.numpy().tobytes() == b.numpy().tobytes()
    for x, y in zip(sa, sb):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(y[k], fl.Tensor):
                assert type(x[k]) is fl.Tensor and x[k].dtype == y[k].dtype and x[k].shape == y[k].shape
                assert x[k].numpy().tobytes() == y[k].numpy().tobytes(), k
            else:
                assert type(x[k]) is type(y[k]) and x[k] == y[k]


def test_default_fuses_large_concrete_steps_only():
    small = optim.Adam([fl.zeros((10, 10))], lr=0.1)
    small.step([fl.ones((10, 10))])
    assert "_fused" not in small.__dict__  # a compiled call costs more than 100 elements' eager operations
    large = optim.Adam([fl.zeros((300, 300)), fl.zeros(3)], lr=0.1)
    for _ in range(2):
        params = large.step([fl.ones((300, 300)), fl.ones(3)])
    assert large._fused.num_traces == 1
    np.testing.assert_allclose(params[0].numpy(), -0.2, rtol=1e-6)
    # under a transform the rule is staged into the caller's program instead
    opt = optim.Adam([fl.zeros((300, 300))], lr=0.1)
    fl.jit(opt.apply)([fl.ones((300, 300))], [fl.zeros((300, 300))], opt.state)
    assert "_fused" not in opt.__dict__


def test_tensor_hyperparameters_and_traced_steps_run_the_one_rule():
    seen = []

    class Spy(optim.Adam):
        def update_one(self, g, p, s, c, cfg):
            seen.append(type(p))
            return super().update_one(g, p, s, c, cfg)

    p0, grads = problem(4)
    Spy([fl.asarray(p) for p in p0], lr=1e-2, fused=False).step([fl.asarray(a) for a in grads[0]])
    assert seen == [fl.Tensor, fl.Tensor]
    # tensor hyperparameters: the same rule, eager or fused, the same bits
    outs = []
    for fused in (False, True):
        seen.clear()
        opt = Spy([fl.asarray(p) for p in p0], lr=fl.asarray(1e-2, dtype=fl.float64), fused=fused)
        for g in grads[:3]:
            params = opt.step([fl.asarray(a) for a in g])
        outs.append([p.numpy().tobytes() for p in params])
        assert all(issubclass(t, fl.Tensor) for t in seen) and (fused or seen == [fl.Tensor] * 6)
    assert outs[0] == outs[1]
    want = ref_adam(p0[0], [g[0] for g in grads[:3]], lr=1e-2)
    np.testing.assert_allclose(params[0].numpy(), want, rtol=1e-6)
    # traced steps (jit) run the rule on tracers
    seen.clear()
    opt = Spy([fl.asarray(p) for p in p0], lr=1e-2)
    fl.jit(lambda g, p, s: opt.apply(g, p, s))([fl.asarray(a) for a in grads[0]], opt._flat_params(), opt.state)
    assert seen and all(issubclass(t, fl.Tensor) and t is not fl.Tensor for t in seen)


def test_constructors_come_from_the_defaults_tables():
    sig = inspect.signature(optim.AdamW)
    assert list(sig.parameters)[:7] == ["params", "lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"]
    assert sig.parameters["weight_decay"].default == 1e-2
    assert sig.parameters["maximize"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["fused"].default is None
    opt = optim.AdamW([fl.zeros(2)], 0.1, (0.8, 0.9))
    assert opt.defaults["betas"] == (0.8, 0.9) and opt.defaults["weight_decay"] == 1e-2
    with pytest.raises(TypeError, match=r"AdamW\(params, lr=.*maximize=False, fused=None\): got an unexpected"):
        optim.AdamW([fl.zeros(2)], momentum=0.9)
    with pytest.raises(TypeError, match="fused must be True, False or None"):
        optim.SGD([fl.zeros(2)], fused="yes")


# ---------------------------------------------------------------------------------------------------------------
# step vs update for every way of building an optimizer: a model is trained by update, or step says so


_FROM_MODEL = {
    "model": lambda m: m,
    "named_parameters()": lambda m: m.named_parameters(),
    "named groups": lambda m: [{"params": m[0].named_parameters(), "lr": 0.05}, {"params": m[2].named_parameters()}],
    "module groups": lambda m: [{"params": m[0]}, {"params": m[2], "lr": 0.05}],
}
_FROM_TENSORS = {
    "parameters()": lambda m: m.parameters(),
    "list(parameters())": lambda m: list(m.parameters()),
    "groups of parameters()": lambda m: [{"params": m[0].parameters(), "lr": 0.05}, {"params": m[2].parameters()}],
    "dict(named_parameters())": lambda m: dict(m.named_parameters()),
}


def _loss_and_grads(model, x):
    return nn.value_and_grad(model, lambda m: (m(x) ** 2).mean())(model)


@pytest.mark.parametrize("form", sorted(_FROM_MODEL) + sorted(_FROM_TENSORS))
@pytest.mark.parametrize("opt_cls", [optim.SGD, optim.Adam])
def test_every_construction_form_trains_the_model_through_update_or_refuses_step(form, opt_cls):
    x = fl.asarray(np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32))
    build = {**_FROM_MODEL, **_FROM_TENSORS}[form]
    model = _mlp()
    opt = opt_cls(build(model), lr=0.1)
    assert opt.num_params == 4
    before = [p.numpy().copy() for p in model.parameters()]
    loss0, grads = _loss_and_grads(model, x)
    # model-shaped gradients never go through step silently: the model would not change
    with pytest.raises(TypeError, match=r"optimizer\.update\(model, "):
        opt.step(grads)
    if form in _FROM_MODEL:
        with pytest.raises(TypeError, match=r"built from a model.*optimizer\.update\(model, "):
            opt.step([g for g in grads.parameters()])
    assert all(np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters()))
    assert all(s["step"] == 0 for s in opt.state)
    for _ in range(3):
        loss, grads = _loss_and_grads(model, x)
        opt.update(model, grads)
    assert all(not np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters()))
    assert float(_loss_and_grads(model, x)[0]) < float(loss0)


def test_step_on_tensors_returns_what_the_optimizer_was_built_from():
    w, b = fl.ones(3), fl.zeros(2)
    opt = optim.SGD({"w": w, "inner": {"b": b}}, lr=0.5)
    out = opt.step({"w": fl.ones(3), "inner": {"b": fl.ones(2)}})
    np.testing.assert_array_equal(out["w"].numpy(), [0.5] * 3)
    np.testing.assert_array_equal(out["inner"]["b"].numpy(), [-0.5] * 2)
    with pytest.raises(ValueError, match="structure of the parameters"):
        opt.step([fl.ones(3), fl.ones(2)])
    opt = optim.SGD([w, b], lr=0.5)
    out = opt.step([fl.ones(3), None])
    assert isinstance(out, list) and out[1] is b
    with pytest.raises(TypeError, match="by name"):
        opt.step({"0": fl.ones(3)})
    with pytest.raises(TypeError, match="expected tensors as parameters, got list"):
        optim.SGD([[w, b]], lr=0.1)  # a nested list is not silently stacked into one parameter


def test_lbfgs_step_refuses_a_model_and_update_trains_it():
    model = nn.Linear(2, 1, key=R.key(0))
    x = fl.ones((4, 2))
    opt = optim.LBFGS(model.named_parameters())
    with pytest.raises(TypeError, match=r"optimizer\.update\(model, lambda"):
        opt.step(lambda ps: (0.0, ps))
    loss_fn = lambda m: ((m(x) - 1.0) ** 2).mean()  # noqa: E731
    opt.update(model, lambda: nn.value_and_grad(model, loss_fn)(model))
    assert float(loss_fn(model)) < 1e-6


def test_group_names_relative_to_a_submodule_update_the_right_tensors():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(fl.ones((2, 2)))
            self.sub = nn.Linear(2, 2, key=R.key(0))

        def forward(self, x):
            return self.sub(x @ self.weight)

    model = Net()
    # "weight" inside the first group names model.sub.weight, not model.weight
    opt = optim.SGD([{"params": model.sub.named_parameters()}, {"params": [model.weight], "lr": 0.0}], lr=0.1)
    top, sub = model.weight.numpy().copy(), model.sub.weight.numpy().copy()
    _, grads = nn.value_and_grad(model, lambda m: m(fl.ones((3, 2))).sum())(model)
    opt.update(model, grads)
    np.testing.assert_array_equal(model.weight.numpy(), top)  # lr 0
    np.testing.assert_allclose(model.sub.weight.numpy(), sub - 0.1 * grads.sub.weight.numpy(), rtol=1e-6)
    # names stay the link after the model's tensors are replaced (a loaded checkpoint)
    model.load_state_dict({k: v * 0.0 for k, v in model.state_dict().items()})
    _, grads = nn.value_and_grad(model, lambda m: m(fl.ones((3, 2))).sum())(model)
    opt.update(model, grads)
    np.testing.assert_allclose(model.sub.bias.numpy(), -0.1 * grads.sub.bias.numpy(), rtol=1e-6)


def test_a_custom_optimizer_needs_only_its_rule():
    class SignSGD(optim.Optimizer):
        def __init__(self, params, lr=0.1):  # PyTorch's way: a constructor of its own and the defaults dict
            super().__init__(params, dict(lr=lr))

        def update_one(self, g, p, s, c, cfg):
            return p - fl.sign(g) * c["lr"], s

    g = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)
    outs = []
    for fused in (True, False):
        opt = SignSGD([fl.zeros((300, 300))], lr=0.5)
        opt.fused = fused
        outs.append(opt.step([fl.asarray(g)])[0].numpy())
    np.testing.assert_array_equal(outs[0], -0.5 * np.sign(g))
    np.testing.assert_array_equal(outs[0], outs[1])
