"""Train an MLP and a small CNN on scikit-learn's bundled digits with funclib.nn and funclib.optim.

The training step is one ``fl.jit``-compiled function of ``(model, optimizer state, hyperparameters, batch,
key)``: the model is a pytree, the forward runs under ``nn.value_and_grad``, BatchNorm's running statistics and
the AdamW update come back as outputs, and the cosine schedule's learning rate is an argument (no retrace).
``--dp`` trains the MLP with DP-SGD instead: per-sample gradients from ``fl.vmap(fl.grad(...))``, each clipped to
L2 norm ``--clip``, summed, and noised with ``N(0, (sigma * clip)^2)``.

    python examples/train_digits.py                 # MLP and CNN
    python examples/train_digits.py --model cnn --epochs 20
    python examples/train_digits.py --dp --sigma 1.0 --clip 1.0
"""

from __future__ import annotations

import argparse
import os
import time

# a shared machine: one BLAS thread is faster than two that contend (set before NumPy loads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import funclib.nn as nn  # noqa: E402
import funclib.nn.functional as F  # noqa: E402
import funclib.optim as optim  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import funclib as fl  # noqa: E402
from funclib import random as frandom  # noqa: E402


def load_data(seed: int = 0):
    """Digits scaled to [0, 1] as ``(N, 1, 8, 8)`` float32, split 80/20 (stratified)."""
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def make_mlp(key, dropout: float = 0.2) -> nn.Module:
    k1, k2, k3 = frandom.split(key, 3)
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 256, key=k1),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(256, 128, key=k2),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(128, 10, key=k3),
    )


def make_cnn(key) -> nn.Module:
    k1, k2, k3 = frandom.split(key, 3)
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, key=k1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 32 x 4 x 4
        nn.Conv2d(32, 64, 3, padding=1, key=k2),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 64 x 2 x 2
        nn.Flatten(),
        nn.Dropout(0.3),
        nn.Linear(256, 10, key=k3),
    )


def loss_fn(model, x, y):
    return F.cross_entropy(model(x), y)


def make_train_step(opt: optim.Optimizer, jit: bool = True):
    """``step(model, state, hyper, x, y, key) -> (model, state, loss)``, pure, compiled once."""

    def step(model, state, hyper, x, y, key):
        with nn.rng(key):
            loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        model, state = opt.functional_update(model, grads, state, hyper)
        return model, state, loss

    return fl.jit(step) if jit else step


def make_dp_step(opt: optim.Optimizer, clip: float, sigma: float, jit: bool = True):
    """DP-SGD: per-sample gradients (``vmap`` of ``grad``), per-sample clipping, Gaussian noise, average."""

    def per_sample_loss(model, x, y):
        return F.cross_entropy(model(x[None]), y[None])

    def step(model, state, hyper, x, y, key):
        losses, grads = fl.vmap(fl.value_and_grad(per_sample_loss), in_axes=(None, 0, 0))(
            model, x, y
        )  # (B, ...)
        leaves, treedef = fl.tree.flatten(grads)
        sq = sum(fl.sum(fl.reshape(g * g, (g.shape[0], -1)), axis=1) for g in leaves)
        scale = fl.minimum(1.0, clip / (fl.sqrt(sq) + 1e-6))  # (B,)
        keys = frandom.split(key, len(leaves))
        noisy = []
        for i, g in enumerate(leaves):
            clipped = fl.sum(g * fl.reshape(scale, (-1,) + (1,) * (g.ndim - 1)), axis=0)
            noise = frandom.normal(keys[i], tuple(clipped.shape), clipped.dtype) * (sigma * clip)
            noisy.append((clipped + noise) / x.shape[0])
        model, state = opt.functional_update(model, fl.tree.unflatten(treedef, noisy), state, hyper)
        return model, state, fl.mean(losses)

    return fl.jit(step) if jit else step


def make_predict(jit: bool = True):
    def predict(model, x):
        return fl.argmax(model(x), axis=1)

    return fl.jit(predict) if jit else predict


def accuracy(predict, model, x, y) -> float:
    model.eval()
    pred = predict(model, fl.asarray(x)).numpy()
    model.train()
    return float((pred == y).mean())


def train(
    model,
    data,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    seed: int,
    dp: dict | None = None,
    jit: bool = True,
    desc: str = "",
    log=None,
):
    """Train ``model`` with AdamW and a per-batch cosine schedule; returns ``(model, history)``."""
    x_train, x_test, y_train, y_test = data
    opt = optim.AdamW(model.named_parameters(), lr=lr, weight_decay=weight_decay)
    steps_per_epoch = len(x_train) // batch_size
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * steps_per_epoch)
    step = make_dp_step(opt, jit=jit, **dp) if dp else make_train_step(opt, jit=jit)
    predict = make_predict(jit)
    rng = np.random.default_rng(seed)
    key = frandom.key(seed)
    state = opt.state
    history = {"loss": [], "test_acc": [], "lr": []}
    bar = tqdm(range(epochs), desc=desc, disable=log is not None and not log)
    for _epoch in bar:
        perm = rng.permutation(len(x_train))
        losses = []
        for b in range(steps_per_epoch):  # full batches only: one shape, one compiled step
            idx = perm[b * batch_size : (b + 1) * batch_size]
            key, sub = frandom.split(key)
            model, state, loss = step(
                model, state, opt.hyperparams(), fl.asarray(x_train[idx]), fl.asarray(y_train[idx]), sub
            )
            losses.append(float(loss))
            history["lr"].append(opt.param_groups[0]["lr"])
            sched.step()
        history["loss"].append(float(np.mean(losses)))
        history["test_acc"].append(accuracy(predict, model, x_test, y_test))
        bar.set_postfix(loss=f"{history['loss'][-1]:.4f}", test_acc=f"{history['test_acc'][-1]:.4f}")
    opt.state = state
    return model, history


def main(argv=None) -> dict:
    # BLAS may already be loaded (by a caller that imported NumPy first): cap its threads at run time too
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=int(os.environ.get("OPENBLAS_NUM_THREADS", "1")), user_api="blas"):
        return _main(argv)


def _main(argv) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    p.add_argument(
        "--epochs", type=int, default=None, help="default: 30 for the MLP, 12 for the CNN, 20 for DP"
    )
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-jit", action="store_true", help="run the training step eagerly")
    p.add_argument("--dp", action="store_true", help="train the MLP with DP-SGD")
    p.add_argument("--clip", type=float, default=1.0, help="DP-SGD per-sample gradient norm bound")
    p.add_argument("--sigma", type=float, default=0.8, help="DP-SGD noise multiplier")
    args = p.parse_args(argv)

    data = load_data(args.seed)
    frandom.manual_seed(args.seed)
    key_mlp, key_cnn = frandom.split(frandom.key(args.seed))
    results = {}
    common = dict(
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        seed=args.seed,
        jit=not args.no_jit,
    )
    print(f"digits: {len(data[0])} train / {len(data[1])} test images, 8x8, 10 classes")
    if args.dp:
        model = make_mlp(key_mlp, dropout=0.0)
        t = time.perf_counter()
        model, hist = train(
            model,
            data,
            epochs=args.epochs or 20,
            dp=dict(clip=args.clip, sigma=args.sigma),
            desc="MLP DP-SGD",
            **common,
        )
        results["mlp_dp"] = (hist["test_acc"][-1], time.perf_counter() - t)
        print(
            f"MLP with DP-SGD (clip {args.clip}, sigma {args.sigma}): test accuracy {results['mlp_dp'][0]:.4f} "
            f"in {results['mlp_dp'][1]:.1f} s"
        )
        return results
    if args.model in ("mlp", "both"):
        t = time.perf_counter()
        model, hist = train(make_mlp(key_mlp), data, epochs=args.epochs or 30, desc="MLP", **common)
        results["mlp"] = (hist["test_acc"][-1], time.perf_counter() - t)
        print(f"MLP: test accuracy {results['mlp'][0]:.4f} in {results['mlp'][1]:.1f} s")
    if args.model in ("cnn", "both"):
        t = time.perf_counter()
        model, hist = train(make_cnn(key_cnn), data, epochs=args.epochs or 12, desc="CNN", **common)
        results["cnn"] = (hist["test_acc"][-1], time.perf_counter() - t)
        print(f"CNN: test accuracy {results['cnn'][0]:.4f} in {results['cnn'][1]:.1f} s")
    return results


if __name__ == "__main__":
    main()
