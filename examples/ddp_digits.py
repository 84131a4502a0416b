"""Train the digits CNN of ``train_digits.py`` data-parallel: the same script on one process or on N ranks.

Each rank trains on its own share of every global batch (``DistributedSampler``); ``DistributedDataParallel``
starts every rank from rank 0's parameters and averages the gradients in the backward pass, so N ranks take the
same optimizer steps as one process with the whole batch: ``SyncBatchNorm`` normalizes with the statistics of
the global batch, and dropout draws, from the key every rank shares, this rank's rows of the masks one process
draws for the whole batch. The ranks then differ from one process only by the rounding of sums taken in another
order. The step is one ``fl.jit`` function, unchanged from one process.

    python examples/ddp_digits.py                                         # one process
    python -m funclib.distributed.launch -n 2 examples/ddp_digits.py      # two local ranks
    srun -n 8 python examples/ddp_digits.py                               # a cluster's MPI (or mpirun -n 8)

Needs ``pip install funclib[dist,examples]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import funclib.nn as nn  # noqa: E402
import funclib.optim as optim  # noqa: E402
from train_digits import load_data, loss_fn, make_cnn, make_predict  # noqa: E402

import funclib as fl  # noqa: E402
from funclib import random as frandom  # noqa: E402

D = fl.distributed


def main(argv=None) -> float:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64, help="the global batch, split over the ranks")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    rank, world = D.rank(), D.world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must be a multiple of the {world} ranks")
    local_batch = args.batch_size // world
    x_train, x_test, y_train, y_test = load_data(args.seed)

    frandom.manual_seed(args.seed)
    cnn = make_cnn(frandom.split(frandom.key(args.seed))[1])
    # batch statistics over the global batch, so N ranks compute what one process does
    model = nn.parallel.DistributedDataParallel(nn.parallel.SyncBatchNorm.convert_sync_batchnorm(cnn))
    opt = optim.AdamW(model.named_parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sampler = D.DistributedSampler(len(x_train), shuffle=True, seed=args.seed, drop_last=True)
    steps_per_epoch = len(sampler) // local_batch
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * steps_per_epoch)
    mean_over_ranks = D.spmd(lambda v: fl.pmean(v, "data"))

    @fl.jit
    def step(model, state, hyper, x, y, key):
        with nn.rng(key):
            loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)  # grads: averaged over the ranks
        model, state = opt.functional_update(model, grads, state, hyper)
        return model, state, loss

    predict = make_predict()
    key = frandom.key(args.seed)  # the same on every rank: each draws its rows of the global batch's masks
    state = opt.state
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = sampler.indices()
        losses = []
        for b in range(steps_per_epoch):
            idx = order[b * local_batch : (b + 1) * local_batch]
            key, sub = frandom.split(key)
            model, state, loss = step(
                model, state, opt.hyperparams(), fl.asarray(x_train[idx]), fl.asarray(y_train[idx]), sub
            )
            losses.append(loss)
            sched.step()
        epoch_loss = float(mean_over_ranks(fl.mean(fl.stack(losses))))
        model.eval()
        acc = float((predict(model.module, fl.asarray(x_test)).numpy() == y_test).mean())
        model.train()
        if rank == 0:
            print(f"epoch {epoch + 1:2d}: loss {epoch_loss:.4f}  test accuracy {acc:.4f}", flush=True)
    opt.state = state
    if rank == 0:
        print(f"{world} rank(s), global batch {args.batch_size}: test accuracy {acc:.4f} after {args.epochs} epochs "
              f"in {time.perf_counter() - start:.1f} s")
    return acc


if __name__ == "__main__":
    main()
