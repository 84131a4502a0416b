"""Run on N ranks by tests/test_distributed.py: every collective over the process axis against the single-process
result (a named vmap over all ranks' data, and NumPy), eagerly and under jit, with a vmap axis beside it, derivatives
against finite differences, and the errors for ranks that disagree. Exits non-zero on the first failure."""

import ml_dtypes
import numpy as np

import funclib as fl
from funclib.distributed import RankMismatchError

D = fl.distributed
r, n = D.rank(), D.world_size()


def data(rank):
    g = np.random.default_rng(rank)
    return {"a": g.normal(size=(n, 3)), "b": g.normal(size=(2,)).astype(np.float32)}


ALL = [data(k) for k in range(n)]
MINE = fl.tree.map(fl.asarray, ALL[r])
STACKED = fl.tree.map(lambda *v: fl.asarray(np.stack(v)), *ALL)
CYCLE = [(k, (k + 1) % n) for k in range(n)]
PARTIAL = [(k, k + 1) for k in range(n - 1)]  # rank 0 receives nothing


def every_collective(t):
    return {
        "psum": fl.psum(t, "data"),
        "pmean": fl.pmean(t, "data"),
        "pmax": fl.pmax(t, "data"),
        "pmin": fl.pmin(t, "data"),
        "gather": fl.all_gather(t, "data"),
        "scatter": fl.psum_scatter(t["a"], "data"),
        "cycle": fl.ppermute(t, "data", CYCLE),
        "partial": fl.ppermute(t["b"], "data", PARTIAL),
        "index": fl.axis_index("data"),
        "size": fl.psum(1, "data"),
    }


def check(got, want, what, tol=1e-12):
    for (path, g), w in zip(fl.tree.flatten_with_path(got)[0], fl.tree.leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (what, path, g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol,
                                   err_msg=f"rank {r}: {what} {path}")


def mine(tree):
    """Rank r's row of a vmap result (the single-process simulation of the ranks)."""
    return fl.tree.map(lambda v: v[r], tree)


# --- every collective equals the single-process result -------------------------------------------------------
want = mine(fl.vmap(every_collective, axis_name="data")(STACKED))
a = np.stack([d["a"] for d in ALL])
check(want["psum"]["a"], a.sum(0), "vmap reference vs NumPy")
check(want["scatter"], a.sum(0)[r], "vmap reference vs NumPy")
check(D.spmd(every_collective)(MINE), want, "eager", 1e-6)
check(fl.jit(D.spmd(every_collective))(MINE), want, "jit(spmd)", 1e-6)
check(D.spmd(fl.jit(every_collective))(MINE), want, "spmd(jit)", 1e-6)
check(D.spmd(fl.jit(every_collective))(MINE), want, "spmd(jit), cached", 1e-6)

# --- a process axis and a vmap axis together -----------------------------------------------------------------


def both_axes(row):
    return {
        "psum": fl.psum(row, ("data", "i")),
        "psum_data": fl.psum(row, "data"),
        "gather": fl.all_gather(row, ("data", "i")),
        "index": fl.axis_index(("data", "i")),
        "max": fl.pmax(row, ("i", "data")),
    }


lanes = fl.vmap(both_axes, axis_name="i")
got = D.spmd(lanes)(MINE["a"])
want = mine(fl.vmap(lanes, axis_name="data")(STACKED["a"]))
check(got, want, "vmap inside spmd", 1e-10)
check(fl.jit(D.spmd(lanes))(MINE["a"]), want, "jit of vmap inside spmd", 1e-10)
assert got["index"].numpy().tolist() == [r * n + k for k in range(n)], got["index"]

# --- dtypes ----------------------------------------------------------------------------------------------------
ints = np.arange(6, dtype=np.int32).reshape(2, 3) * (r + 1)
for dt in (np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.complex128):
    x = fl.asarray((ints + (1j if dt is np.complex128 else 0)).astype(dt))
    s = D.spmd(lambda v: fl.psum(v, "data"))(x)
    assert s.dtype == x.dtype, (dt, s.dtype)
    total = sum((ints * 0 + ints // (r + 1) * (k + 1)) for k in range(n))
    np.testing.assert_allclose(np.asarray(s.numpy()).real.astype(np.float64), total, err_msg=str(dt))
    g = D.spmd(lambda v: fl.all_gather(v, "data"))(x)
    assert g.shape == (n, 2, 3) and g.dtype == x.dtype
flags = fl.asarray(np.array([r == 0, True, False]))
assert D.spmd(lambda v: fl.pmax(v, "data"))(flags).numpy().tolist() == [True, True, False]
assert D.spmd(lambda v: fl.pmin(v, "data"))(flags).numpy().tolist() == [n == 1, True, False]
nan = fl.asarray(np.array([np.nan if r == n - 1 else 1.0, float(r)]))
assert np.isnan(D.spmd(lambda v: fl.pmax(v, "data"))(nan).numpy()[0]), "pmax must propagate NaN from any rank"
assert D.spmd(lambda v: fl.pmin(v, "data"))(nan).numpy()[1] == 0.0

# --- derivatives: grad through the collectives against finite differences of the global function --------------


def local_loss(x):
    g = fl.all_gather(x, "data")
    s = fl.psum(x * x, "data")
    p = fl.ppermute(x, "data", CYCLE)
    rs = fl.psum_scatter(fl.reshape(fl.tile(x, (n,)), (n, -1)) * fl.arange(1.0, n + 1.0)[:, None], "data")
    mixed = fl.sum(fl.sin(g) * (r + 1.0)) + fl.sum(s * x) + fl.sum(p * x * x)
    return mixed + fl.sum(rs * rs) + fl.pmax(x, "data").sum()


x = fl.asarray(np.random.default_rng(100 + r).normal(size=(3,)))
dloss = D.spmd(fl.grad(local_loss))
g = dloss(x)
check(fl.jit(dloss)(x), g, "jit(grad)", 1e-10)
check(fl.grad(D.spmd(local_loss))(x), g, "grad(spmd)", 1e-10)
check(D.spmd(fl.jit(fl.grad(local_loss)))(x), g, "spmd(jit(grad))", 1e-10)
total = D.spmd(lambda v: fl.psum(local_loss(v), "data"))  # the global function
eps = 1e-6
fd = np.zeros(3)
for q in range(n):  # every rank takes part in every evaluation, perturbing only when it is rank q
    for j in range(3):
        e = np.zeros(3)
        if q == r:
            e[j] = eps
        hi = total(fl.asarray(x.numpy() + e)).numpy()
        lo = total(fl.asarray(x.numpy() - e)).numpy()
        if q == r:
            fd[j] = (hi - lo) / (2 * eps)
np.testing.assert_allclose(g.numpy(), fd, rtol=1e-6, atol=1e-6, err_msg=f"rank {r}: grad vs finite differences")
t = fl.asarray(np.random.default_rng(200 + r).normal(size=(3,)))
_, jv = D.spmd(lambda v, u: fl.jvp(local_loss, (v,), (u,)))(x, t)
jv_total = D.spmd(lambda v: fl.psum(v, "data"))(jv).numpy()
gt_total = D.spmd(lambda v: fl.psum(v, "data"))(fl.sum(g * t)).numpy()
np.testing.assert_allclose(jv_total, gt_total, rtol=1e-10, err_msg="sum of jvps != <grad, t> summed over ranks")

# --- ranks that disagree get an error naming the rank and what differs, on every rank ------------------------
if n > 1:
    try:
        D.spmd(lambda v: fl.psum(v, "data"))(fl.ones(2 + r))
        raise AssertionError("an eager psum of different shapes did not raise")
    except RankMismatchError as e:
        msg = str(e)
        assert "rank 1" in msg and "float32[3]" in msg and "float32[2]" in msg, msg

    def step(x, y):
        return fl.psum(x * 2.0, "data") + y

    try:
        fl.jit(D.spmd(step))(fl.ones((4, 3)), fl.ones(3 if r == 0 else 1))
        raise AssertionError("a jitted call traced with different shapes did not raise")
    except RankMismatchError as e:
        msg = str(e)
        assert "argument 'y'" in msg and "rank 1" in msg and "'step'" in msg, msg
        assert "argument 'x'" not in msg, msg

    def branchy(x):
        return fl.psum(x * 2.0 if r == 0 else x + 2.0, "data")

    try:
        D.spmd(fl.jit(branchy))(fl.ones(3))
        raise AssertionError("different programs did not raise")
    except RankMismatchError as e:
        assert "different sequence" in str(e) or "operation 0" in str(e), str(e)
    # the world is still usable after every rank raised at the same point
    assert D.spmd(lambda v: fl.psum(v, "data"))(fl.ones(2)).numpy().tolist() == [n, n]

# --- Allreduce outputs in reused memory: a result still referenced is never overwritten ---------------------------
total_of = [float(sum(q + k for q in range(n))) for k in range(3)]
big = [fl.asarray(np.full((64, 512), float(r + k), np.float32)) for k in range(3)]  # 128 KB: pooled
psum = D.spmd(lambda v: fl.psum(v, "data"))
jpsum = fl.jit(psum)
kept = [psum(big[0]), jpsum(big[1])]
row = psum(big[2]).numpy()[5]  # only a view of one row survives
tree = psum({"a": big[0], "b": big[2]})  # two arrays of one dtype: one flat buffer, outputs are views of it
for k in range(6):  # results dropped at once: their memory is handed out again
    psum(big[k % 3])
    jpsum(big[(k + 1) % 3])
assert float(kept[0].numpy().min()) == float(kept[0].numpy().max()) == total_of[0], kept[0]
assert float(kept[1].numpy().min()) == float(kept[1].numpy().max()) == total_of[1], kept[1]
assert row.tolist() == [total_of[2]] * 512, row
assert tree["a"].numpy().tolist() == [[total_of[0]] * 512] * 64 and float(tree["b"].numpy()[63, 511]) == total_of[2]
if n > 1:
    from funclib.distributed._comm import world

    held = world().pool.held_bytes
    for _ in range(4):
        psum(big[0])
        jpsum(big[1])
    assert world().pool.held_bytes == held, "the memory of dropped results must be reused"
half = D.spmd(lambda v: fl.psum(v, "data"))(fl.asarray(np.full((256, 256), r + 1.0, np.float16)))  # via float32
assert half.dtype == fl.float16 and half.numpy().min() == half.numpy().max() == n * (n + 1) / 2, half
cols = fl.transpose(fl.asarray(np.arange(64 * 512, dtype=np.float64).reshape(64, 512) * (r + 1)))  # not contiguous
np.testing.assert_array_equal(psum(cols).numpy(), np.arange(64 * 512.0).reshape(64, 512).T * (n * (n + 1) / 2))

# --- eager helpers -------------------------------------------------------------------------------------------
b = D.broadcast({"w": fl.asarray(np.full(3, float(r)))}, root=n - 1)
assert b["w"].numpy().tolist() == [n - 1.0] * 3
D.barrier()
shares = D.spmd(lambda v: fl.all_gather(v, "data"))(fl.asarray(D.DistributedSampler(11, seed=3).indices()))
covered = sorted(set(shares.numpy().reshape(-1).tolist()))
assert covered == list(range(11)) and shares.shape == (n, -(-11 // n)), shares

# --- the agreement rides in the data: one message per call once the ranks have seen the sequence ----------------
if n > 1:
    from funclib.distributed._comm import world

    class Counting:
        """The world's communicator, counting the MPI calls made through it."""

        def __init__(self, comm):
            self.comm, self.calls = comm, []

        def __getattr__(self, name):
            f = getattr(self.comm, name)

            def counted(*a, **k):
                self.calls.append(name)
                return f(*a, **k)

            return counted if callable(f) else f

    def calls(fn, times=3):
        w = world()
        real, w.comm = w.comm, Counting(w.comm)
        try:
            for _ in range(times):
                fn()
            return w.comm.calls
        finally:
            w.comm = real

    def expect_mismatch(fn, *needles):
        try:
            fn()
        except RankMismatchError as e:
            assert all(k in str(e) for k in needles), (needles, str(e))
        else:
            raise AssertionError(f"rank {r}: no RankMismatchError, expected one naming {needles}")

    psum = D.spmd(lambda v: fl.psum(v, "data"))
    a3, b5 = fl.ones(3), fl.asarray(np.arange(5, dtype=np.int32))
    tree3 = {"x": fl.ones((2, 2)), "y": fl.ones(3)}
    for _ in range(2):  # learn the sequence a3, b5, tree3
        psum(a3), psum(b5), psum(tree3)
    seen = calls(lambda: (psum(a3), psum(b5), psum(tree3)))
    assert seen == ["Allreduce"] * 9, seen
    assert psum(b5).numpy().tolist() == [n * k for k in range(5)]
    assert psum(tree3)["x"].numpy().tolist() == [[n, n], [n, n]]
    # every rank leaves the sequence together: the dummy, the explicit agreement, the data; then learned again
    c7 = fl.full((7,), 2.0)
    assert calls(lambda: psum(c7), 1) == ["Allreduce"] * 3
    assert psum(c7).numpy().tolist() == [2.0 * n] * 7 and calls(lambda: psum(c7), 2) == ["Allreduce"] * 2
    # int8 cannot carry the digest exactly: its agreement is a separate round, every call
    i8 = fl.ones(4, dtype=fl.int8)
    psum(i8)
    seen = calls(lambda: psum(i8))
    assert seen == ["Allreduce"] * 6 and psum(i8).numpy().tolist() == [n] * 4, (seen, psum(i8))
    psum(a3), psum(a3)

    # one rank leaves the learned sequence: every rank raises, naming it, and the world stays usable
    expect_mismatch(lambda: psum(fl.ones(3 if r != n - 1 else 4)), f"rank {n - 1}", "float32[3]", "float32[4]")
    psum(a3), psum(a3)
    expect_mismatch(lambda: psum(a3) if r != 1 else D.spmd(lambda v: fl.all_gather(v, "data"))(a3),
                    "rank 1 ran all_gather", "rank 0 ran psum")
    psum(a3), psum(a3)
    expect_mismatch(lambda: psum(a3) if r != 1 else psum(fl.ones(3, dtype=fl.float64)), "float64[3]")
    psum(a3), psum(a3)
    # the predicted Allreduce fits both calls (3 float32 elements): the digests in its header tell them apart
    expect_mismatch(lambda: psum(a3) if r != 1 else psum(fl.ones((1, 3))), "float32[1, 3]", "float32[3]")
    assert psum(a3).numpy().tolist() == [n] * 3

    # a jitted program whose first collective is a sum agrees inside that Allreduce
    def step2(x, y):
        return fl.psum(x * 2.0, "data") + y

    jstep = fl.jit(D.spmd(step2))
    x43 = fl.ones((4, 3))
    for _ in range(2):
        jstep(x43, a3)
    assert calls(lambda: jstep(x43, a3)) == ["Allreduce"] * 3
    assert jstep(x43, a3).numpy().tolist() == [[2.0 * n + 1] * 3] * 4
    # eager and jitted sums of one size, in any order: the prediction is the Allreduce, not the call
    jsum = fl.jit(psum)
    for f in (psum, jsum, jsum, psum, psum):  # each call's successor seen once
        f(x43)
    for order in ([psum, jsum], [jsum, psum], [jsum, jsum, psum, psum, jsum]):
        assert calls(lambda order=order: [f(x43) for f in order], 2) == ["Allreduce"] * (2 * len(order)), order
    expect_mismatch(lambda: jstep(x43, fl.ones(3 if r == 0 else 1)), "argument 'y'", "rank 1", "'step2'")
    jstep(x43, a3), jstep(x43, a3)
    expect_mismatch(lambda: jstep(x43, a3) if r == 0 else psum(x43 * 2.0), "rank 1 ran psum",
                    "rank 0 ran the jitted function 'step2'")
    assert jstep(x43, a3).numpy().tolist() == [[2.0 * n + 1] * 3] * 4

    # large sums: the digest goes in a 16-byte Iallreduce posted just before the data, which is summed from the
    # operand's own memory into the output (no copy next to a header); still one round trip per call
    from funclib.distributed._comm import BESIDE_BYTES

    class Recording(Counting):
        """Also keeps each call's arguments."""

        def __getattr__(self, name):
            f = getattr(self.comm, name)

            def counted(*a, **k):
                self.calls.append((name, a))
                return f(*a, **k)

            return counted if callable(f) else f

    def recorded(fn):
        w = world()
        real, w.comm = w.comm, Recording(w.comm)
        try:
            fn()
            return w.comm.calls
        finally:
            w.comm = real

    rows = BESIDE_BYTES // (4 * 512) + 1
    bigs = [fl.asarray(np.full((rows, 512), float(r + k), np.float32)) for k in range(2)]
    want = [float(sum(q + k for q in range(n))) for k in range(2)]
    jbig = fl.jit(D.spmd(lambda v: fl.psum(v * 1.0, "data")))  # the program's own operand: a kernel's output
    for _ in range(2):
        psum(bigs[0]), jbig(bigs[1]), psum(a3)
    for _ in range(2):
        got = recorded(lambda: (psum(bigs[0]), jbig(bigs[1]), psum(a3)))
        assert [c for c, _ in got] == ["Iallreduce", "Allreduce", "Iallreduce", "Allreduce", "Allreduce"], got
        send = got[1][1][0]
        assert np.shares_memory(send, bigs[0].numpy()), "the operand must be summed where it lies"
        assert got[3][1][0] is not world().MPI.IN_PLACE
    res = psum(bigs[0]), jbig(bigs[1])
    for k in range(2):
        assert float(res[k].numpy().min()) == float(res[k].numpy().max()) == want[k], (k, res[k])
        assert not np.shares_memory(res[k].numpy(), bigs[k].numpy())
    # every rank misses the prediction together (a dummy of the predicted size, then the explicit agreement)
    psum(a3)  # followed by psum(bigs[0]) so far
    quarter = fl.ones((rows, 128))
    got = recorded(lambda: psum(quarter))
    assert [(c, getattr(a[1], "size", None)) for c, a in got] == [
        ("Iallreduce", 2), ("Allreduce", rows * 512), ("Allreduce", 2), ("Allreduce", rows * 128)], got
    assert psum(quarter).numpy().tolist() == [[float(n)] * 128] * rows
    psum(bigs[0]), psum(bigs[0])
    # a rank whose call differs from the prediction, with the same element count or not, raises on every rank,
    # and the world stays usable
    expect_mismatch(lambda: psum(bigs[0]) if r != 1 else psum(fl.reshape(bigs[0], (512, rows))),
                    f"float32[{rows}, 512]", f"float32[512, {rows}]")
    psum(bigs[0]), psum(bigs[0])
    expect_mismatch(lambda: psum(bigs[0]) if r != n - 1 else psum(fl.ones((rows, 511))), f"rank {n - 1}",
                    f"float32[{rows}, 511]")
    psum(bigs[0]), psum(bigs[0])
    expect_mismatch(lambda: psum(bigs[0]) if r != 1 else psum(a3), "float32[3]")
    psum(bigs[0]), psum(bigs[0])
    expect_mismatch(lambda: jbig(bigs[1]) if r != 1 else psum(bigs[1] * 1.0), "rank 1 ran psum")
    # operands summed through a copy: not contiguous, widened (float16 in float32), several arrays at once
    cols = fl.transpose(bigs[0])
    half = fl.asarray(np.full((rows, 512), r + 1.0, np.float16))
    for _ in range(3):
        assert float(psum(cols).numpy().max()) == want[0] and psum(cols).shape == (512, rows)
        assert float(psum(half).numpy().min()) == n * (n + 1) / 2 and psum(half).dtype == fl.float16
        pair = psum({"x": bigs[0], "y": bigs[1]})
        assert float(pair["x"].numpy()[-1, -1]) == want[0] and float(pair["y"].numpy()[0, 0]) == want[1]
    del res, pair
    for _ in range(2):  # the sequence learned again (jbig was last followed by the miss above): no more dummies
        psum(bigs[0]), jbig(bigs[1])
    held = world().pool.held_bytes
    for _ in range(3):
        psum(bigs[0]), jbig(bigs[1])
    assert world().pool.held_bytes == held, "the memory of dropped results must be reused"
    assert psum(a3).numpy().tolist() == [n] * 3

print(f"rank {r}: collectives ok")
