"""Run on 1 (plain python) or N ranks by tests/test_distributed.py: data-parallel training against one process.

DDP gradients equal the full-batch gradient of one process (float64), eagerly, under jit, with several buckets and
with accumulation under no_sync; ZeRO-1 and FSDP train to the same parameters as plain DDP after 5 jitted steps
(and eager steps); with dropout, DDP and FSDP draw the masks one process draws for the whole batch, so training
steps equal one process's. Exits non-zero on the first failure."""

import funclib.nn as nn
import funclib.optim as optim
import numpy as np
from funclib.nn.module import named_grads

import funclib as fl

D = fl.distributed
r, n = D.rank(), D.world_size()
rng = np.random.default_rng(0)
X = rng.normal(size=(8 * n, 5))
Y = rng.normal(size=(8 * n, 1))


def make():
    fl.manual_seed(r)  # a different initialization on each rank: the wrappers must start from rank 0's
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 4), nn.Tanh(), nn.Linear(4, 1)).double()


def loss_fn(m, x, y):
    return ((m(x) - y) ** 2).mean()


def unwrapped(state):
    return {k.removeprefix("module."): v for k, v in state.items()}


def close(got: dict, want: dict, what, tol=1e-9):
    assert sorted(got) == sorted(want), (what, sorted(got), sorted(want))
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=tol, atol=tol, err_msg=f"rank {r}: {what} {k}")


# --- DDP gradients are the full-batch gradient -----------------------------------------------------------------
ddp = nn.parallel.DistributedDataParallel(make())
full = make()
full.load_state_dict(unwrapped(ddp.state_dict()))
mine = fl.asarray(X[r::n]), fl.asarray(Y[r::n])
_, want = nn.value_and_grad(full, loss_fn)(full, fl.asarray(X), fl.asarray(Y))
want = named_grads(want)
_, g = nn.value_and_grad(ddp, loss_fn)(ddp, *mine)
close(unwrapped(named_grads(g)), want, "DDP gradient", 1e-6)
close(unwrapped(named_grads(g)), want, "DDP gradient (tight)", 1e-12)
jgrad = fl.jit(lambda m, x, y: nn.value_and_grad(m, loss_fn)(m, x, y)[1])
close(unwrapped(named_grads(jgrad(ddp, *mine))), want, "jitted DDP gradient")

small = nn.parallel.DistributedDataParallel(make(), bucket_cap_mb=1 / 2**20)  # one byte: a bucket per tensor
jaxpr = fl.make_jaxpr(lambda m, x, y: nn.value_and_grad(m, loss_fn)(m, x, y)[1])(small, *mine)
assert str(jaxpr).count("= psum[") == (6 if n > 1 else 0), str(jaxpr)
close(unwrapped(named_grads(jgrad(small, *mine))), want, "DDP gradient with many buckets")

# accumulation: two micro-batches under no_sync, then one averaging of their sum
acc = None
with ddp.no_sync():
    assert not ddp.require_backward_grad_sync
    for half in (slice(0, 4), slice(4, 8)):
        _, gm = nn.value_and_grad(ddp, loss_fn)(ddp, mine[0][half], mine[1][half])
        acc = gm if acc is None else fl.tree.map(lambda a, b: a + b, acc, gm)
    local = jgrad(ddp, mine[0][:4], mine[1][:4])  # traced again for no_sync: a local gradient
assert ddp.require_backward_grad_sync
avg = ddp.reduce_gradients(fl.tree.map(lambda v: v / 2, acc))
close(unwrapped(named_grads(avg)), want, "no_sync accumulation + reduce_gradients")
_, own = nn.value_and_grad(full, loss_fn)(full, mine[0][:4], mine[1][:4])
close(unwrapped(named_grads(local)), named_grads(own), "jitted gradient under no_sync is the rank's own")


# --- ZeRO-1 and FSDP train like DDP ------------------------------------------------------------------------------
def train(kind, steps=5, jit=True):
    if kind == "fsdp":
        model = nn.parallel.FullyShardedDataParallel(make())
        opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    else:
        model = nn.parallel.DistributedDataParallel(make())
        if kind == "zero":
            opt = optim.ZeroRedundancyOptimizer(model, optim.AdamW, lr=1e-2, weight_decay=0.1)
        else:
            opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)

    def step(model, state, hyper, x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        model, state = opt.functional_update(model, grads, state, hyper)
        return model, state, loss

    step = fl.jit(step)
    if kind != "zero":
        opt.bind(model)
    state = opt.state
    for i in range(steps):
        rows = slice((i % 2) * 4 * n, (i % 2 + 1) * 4 * n)
        x, y = fl.asarray(X[rows][r::n]), fl.asarray(Y[rows][r::n])
        if jit:
            model, state, _ = step(model, state, opt.hyperparams(), x, y)
        else:
            _, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
            opt.update(model, grads)
    return model, opt


ddp_model, _ = train("ddp")
reference = unwrapped(ddp_model.state_dict())
zero_model, zero_opt = train("zero")
close(unwrapped(zero_model.state_dict()), reference, "ZeRO-1 after 5 steps")
fsdp_model, fsdp_opt = train("fsdp")
close(fsdp_model.full_state_dict(), reference, "FSDP after 5 steps")
# eager steps: against eager DDP (jitted kernels round sums differently, and 5 Adam steps amplify it)
eager = unwrapped(train("ddp", jit=False)[0].state_dict())
close(unwrapped(train("zero", jit=False)[0].state_dict()), eager, "ZeRO-1 after 5 eager steps")
close(train("fsdp", jit=False)[0].full_state_dict(), eager, "FSDP after 5 eager steps")

# sharded memory: each rank keeps 1/n of the optimizer state (and FSDP of the parameters)
numel = sum(v.size for v in reference.values())
zero_state = sum(v.size for s in zero_opt.state for v in s.values() if isinstance(v, fl.Tensor))
assert zero_state <= 2 * (numel // n + 3), (zero_state, numel)
assert sum(p.size for p in fsdp_model.parameters()) <= numel // n + 3

# --- SyncBatchNorm: the statistics of the global batch, so DDP equals one process with BatchNorm too --------------
def make_bn():
    fl.manual_seed(r)
    return nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 1)).double()


sync = nn.parallel.DistributedDataParallel(nn.parallel.SyncBatchNorm.convert_sync_batchnorm(make_bn()))
one = make_bn()
one.load_state_dict(unwrapped(sync.state_dict()))
_, want_bn = nn.value_and_grad(one, loss_fn)(one, fl.asarray(X), fl.asarray(Y))
_, got_bn = fl.jit(lambda m, x, y: nn.value_and_grad(m, loss_fn)(m, x, y))(sync, *mine)
close(unwrapped(named_grads(got_bn)), named_grads(want_bn), "SyncBatchNorm + DDP gradient")
_, got_bn = nn.value_and_grad(sync, loss_fn)(sync, *mine)
close(unwrapped(named_grads(got_bn)), named_grads(want_bn), "SyncBatchNorm + DDP gradient, eager")
stats = {k: v for k, v in unwrapped(sync.state_dict()).items() if "running" in k}
close(stats, {k: v for k, v in one.state_dict().items() if "running" in k}, "SyncBatchNorm running statistics")
# --- dropout: every rank draws its rows of the masks one process draws for the global batch ----------------------
def make_drop():
    fl.manual_seed(r)
    # masks of 16 (whole blocks per row), 5 (rows straddle blocks) and 1 (Dropout1d on (b, 5): one per row) numbers
    return nn.Sequential(nn.Linear(5, 16), nn.Dropout(0.3), nn.Tanh(), nn.Linear(16, 5), nn.Dropout(0.5),
                         nn.Dropout1d(0.2), nn.Linear(5, 1)).double()


KEY = fl.random.key(7)


@fl.jit
def drop_grad(m, x, y, key):
    with nn.rng(key):
        return nn.value_and_grad(m, loss_fn)(m, x, y)[1]


def drop_step_fn(opt):
    @fl.jit
    def step(m, state, hyper, x, y, key):
        with nn.rng(key):
            _, grads = nn.value_and_grad(m, loss_fn)(m, x, y)
        return opt.functional_update(m, grads, state, hyper)

    return step


one = make_drop()
one.load_state_dict(unwrapped(nn.parallel.DistributedDataParallel(make_drop()).state_dict()))  # rank 0's
with nn.rng(KEY):
    _, want = nn.value_and_grad(one, loss_fn)(one, fl.asarray(X), fl.asarray(Y))
want = named_grads(want)
for layout, rows in (("strided", slice(r, None, n)), ("contiguous", slice(8 * r, 8 * r + 8))):
    ddp = nn.parallel.DistributedDataParallel(make_drop(), batch_layout=layout)
    x, y = fl.asarray(X[rows]), fl.asarray(Y[rows])
    with nn.rng(KEY):
        _, g = nn.value_and_grad(ddp, loss_fn)(ddp, x, y)
    close(unwrapped(named_grads(g)), want, f"DDP gradient with dropout ({layout})")
    close(unwrapped(named_grads(drop_grad(ddp, x, y, KEY))), want, f"jitted DDP gradient with dropout ({layout})")
    with ddp.no_sync():  # this rank's own gradient, with the masks of its rows of the global batch
        local = unwrapped(named_grads(drop_grad(ddp, x, y, KEY)))
    close(ddp.reduce_gradients(local), want, f"no_sync gradient with dropout, averaged ({layout})")
if n > 1:  # with batch_layout=None each rank draws for its own batch: the same key repeats the masks
    own = nn.parallel.DistributedDataParallel(make_drop(), batch_layout=None)
    g = unwrapped(named_grads(drop_grad(own, fl.asarray(X[r::n]), fl.asarray(Y[r::n]), KEY)))
    assert any(not np.allclose(g[k].numpy(), want[k].numpy()) for k in want), "batch_layout=None drew global masks"

# five AdamW steps with dropout, jitted, on 2 or 4 ranks against one process on the whole batch
one, ddp = make_drop(), nn.parallel.DistributedDataParallel(make_drop())
one.load_state_dict(unwrapped(ddp.state_dict()))
opts = [optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1) for m in (one, ddp)]
for m, o in zip((one, ddp), opts):
    o.bind(m)
steps = [drop_step_fn(o) for o in opts]
states = [o.state for o in opts]
keys = fl.random.split(KEY, 5)
for i in range(5):
    half = slice((i % 2) * 4 * n, (i % 2 + 1) * 4 * n)
    one, states[0] = steps[0](one, states[0], opts[0].hyperparams(), fl.asarray(X[half]), fl.asarray(Y[half]), keys[i])
    ddp, states[1] = steps[1](ddp, states[1], opts[1].hyperparams(), fl.asarray(X[half][r::n]),
                              fl.asarray(Y[half][r::n]), keys[i])
close(unwrapped(ddp.state_dict()), one.state_dict(), "5 DDP steps with dropout against one process")


class Keyed(nn.Module):
    """A child run under a key split from the outer one, as each FSDP unit is."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        with nn.rng(nn.module.next_key()):
            return self.inner(x)


one = make_drop()
fsdp = nn.parallel.FullyShardedDataParallel(make_drop())
ref = nn.Sequential(*[Keyed(c) if isinstance(c, nn.Linear) else c for c in one])
ref.load_state_dict({k.replace(".", ".inner.", 1) if k.split(".")[0] in ("0", "3", "6") else k: v
                     for k, v in fsdp.full_state_dict().items()})
with nn.rng(KEY):
    _, want_ref = nn.value_and_grad(ref, loss_fn)(ref, fl.asarray(X), fl.asarray(Y))
flat = fl.asarray(np.concatenate([want_ref[i].inner.weight.numpy().ravel().tolist() + want_ref[i].inner.bias.numpy()
                                  .ravel().tolist() for i in (0, 3, 6)]))
for how, g in (("eager", None), ("jit", drop_grad(fsdp, fl.asarray(X[r::n]), fl.asarray(Y[r::n]), KEY))):
    if g is None:
        with nn.rng(KEY):
            _, g = nn.value_and_grad(fsdp, loss_fn)(fsdp, fl.asarray(X[r::n]), fl.asarray(Y[r::n]))
    shards = [g.module[i].flat_param for i in (0, 3, 6)]
    full = D.spmd(lambda s: fl.all_gather(s, "data"))(shards)
    sizes = [16 * 5 + 16, 5 * 16 + 5, 5 + 1]
    got = np.concatenate([np.asarray(f.numpy()).reshape(-1)[:k] for f, k in zip(full, sizes)])
    np.testing.assert_allclose(got, flat.numpy(), rtol=1e-9, atol=1e-9, err_msg=f"rank {r}: FSDP dropout ({how})")

print(f"rank {r}: training ok")
