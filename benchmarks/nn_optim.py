"""The nn + optim facade against PyTorch eager: an MLP 784-256-256-10 training step (``nn.Sequential`` +
``optim.Adam``, batch 128) eager and jitted, and a ``Conv2d(16, 32, 3)`` forward plus backward on a
``(64, 16, 28, 28)`` batch, jitted. NumPy variants are the same computations written by hand.

Run with ``python -m benchmarks nn_optim``.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, optional
from benchmarks.train_step import _numpy_step

LR = 1e-3


def _mlp_data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((128, 784)).astype(np.float32), rng.integers(0, 10, 128)


def _numpy_mlp():
    rng = np.random.default_rng(1)
    p = {}
    for i, (a, b) in enumerate(zip((784, 256, 256), (256, 256, 10))):
        p[f"W{i}"] = (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
        p[f"b{i}"] = np.zeros(b, np.float32)
    zeros = {k: np.zeros_like(v) for k, v in p.items()}
    return [p, zeros, {k: np.zeros_like(v) for k, v in p.items()}, 0]


def _torch_mlp(x, y):
    torch = optional("torch")
    if torch is None:
        return None
    tnn = torch.nn
    torch.manual_seed(0)
    model = tnn.Sequential(
        tnn.Linear(784, 256), tnn.ReLU(), tnn.Linear(256, 256), tnn.ReLU(), tnn.Linear(256, 10)
    )
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def run():
        opt.zero_grad()
        loss = tnn.functional.cross_entropy(model(tx), ty)
        loss.backward()
        opt.step()
        return loss

    return run


def _mlp_setup(jit: bool):
    def setup():
        import funclib.nn as nn
        import funclib.nn.functional as F
        import funclib.optim as optim

        import funclib as fl
        from funclib import random as frandom

        frandom.manual_seed(0)
        x, y = _mlp_data()
        model = nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
        )
        opt = optim.Adam(model.parameters(), lr=LR)
        fx, fy = fl.asarray(x), fl.asarray(y)

        def loss_fn(m, x, y):
            return F.cross_entropy(m(x), y)

        if jit:
            opt.bind(model)

            @fl.jit
            def step(m, state, hyper, x, y):
                loss, grads = nn.value_and_grad(m, loss_fn)(m, x, y)
                m, state = opt.functional_update(m, grads, state, hyper)
                return m, state, loss

            box = {"m": model, "s": opt.state}

            def run_fl():
                box["m"], box["s"], loss = step(box["m"], box["s"], opt.hyperparams(), fx, fy)
                return loss
        else:
            loss_and_grad = nn.value_and_grad(model, loss_fn)

            def run_fl():
                loss, grads = loss_and_grad(model, fx, fy)
                opt.update(model, grads)
                return loss

        np_state = _numpy_mlp()

        def run_np():
            np_state[:] = _numpy_step(*np_state, x, y)

        variants = {"funclib": run_fl, "numpy": run_np}
        t = _torch_mlp(x, y)
        if t is not None:
            variants["torch"] = t
        return variants

    return setup


def _conv_setup():
    import funclib.nn as nn

    import funclib as fl

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 16, 28, 28)).astype(np.float32)
    ct = rng.standard_normal((64, 32, 26, 26)).astype(np.float32)
    conv = nn.Conv2d(16, 32, 3)
    w, b = conv.weight.numpy(), conv.bias.numpy()
    fx, fct = fl.asarray(x), fl.asarray(ct)

    @fl.jit
    def fwd_bwd(m, x, ct):
        y, vjp = fl.vjp(lambda m, x: m(x), m, x)
        gm, gx = vjp(ct)
        return y, gm.weight, gm.bias, gx

    def run_fl():
        return fwd_bwd(conv, fx, fct)

    def run_np():
        # im2col by strides, one GEMM each way, col2im by strided adds
        cols = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # (N, C, 26, 26, 3, 3)
        cols = np.ascontiguousarray(cols.transpose(0, 2, 3, 1, 4, 5)).reshape(64 * 676, 144)
        w2 = w.reshape(32, 144)
        y = (cols @ w2.T + b).reshape(64, 26, 26, 32).transpose(0, 3, 1, 2)
        ct2 = ct.transpose(0, 2, 3, 1).reshape(64 * 676, 32)
        gw = (ct2.T @ cols).reshape(32, 16, 3, 3)
        gb = ct2.sum(0)
        dcols = (ct2 @ w2).reshape(64, 26, 26, 16, 3, 3)
        gx = np.zeros_like(x)
        for i in range(3):
            for j in range(3):
                gx[:, :, i : i + 26, j : j + 26] += dcols[..., i, j].transpose(0, 3, 1, 2)
        return y, gw, gb, gx

    variants = {"funclib": run_fl, "numpy": run_np}
    torch = optional("torch")
    if torch is not None:
        tconv = torch.nn.Conv2d(16, 32, 3)
        tconv.weight.data = torch.from_numpy(w.copy())
        tconv.bias.data = torch.from_numpy(b.copy())
        tx = torch.from_numpy(x).requires_grad_(True)
        tct = torch.from_numpy(ct)

        def run_torch():
            tx.grad = None
            tconv.zero_grad()
            y = tconv(tx)
            y.backward(tct)
            return y

        variants["torch"] = run_torch
    return variants


def cases() -> list[Case]:
    return [
        Case("nn+optim.Adam MLP 784-256-256-10 b128, eager", _mlp_setup(jit=False), calls=5, rounds=12),
        Case("nn+optim.Adam MLP 784-256-256-10 b128, jit", _mlp_setup(jit=True), calls=5, rounds=12),
        Case("Conv2d(16,32,3) fwd+bwd (64,16,28,28), jit", _conv_setup, calls=2, rounds=8),
    ]
