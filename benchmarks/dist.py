"""funclib.distributed on 2 local ranks (mpiexec on the loopback): collective throughput, data-parallel scaling and
the memory of sharded parameters. ``python -m benchmarks dist`` launches the ranks and prints rank 0's report.

1. Allreduce of float32 buffers of 4 MB and 64 MB: funclib (``spmd(psum)`` eagerly and under ``jit``: one round
   trip carrying the ranks' agreement, at these sizes a 16-byte Iallreduce posted just before an Allreduce from the
   operand into pooled memory, a new tensor per call) against raw mpi4py ``Allreduce`` into one preallocated output
   (the bound: its caller cannot keep a result past the next call), in ``np.empty`` memory (whose 2 MB pages are
   left to chance) and in memory like funclib's pool (aligned to and advised for 2 MB pages, which alone takes a
   third off a 4 MB Allreduce), and into a new output per call (what returning a result the caller may keep costs
   without a pool). Each result is dropped before the next call, as a training loop drops its averaged gradients.
   Every operand lies in 2 MB pages (the send buffer's pages change the time too, and ``np.empty`` leaves them to
   chance). Variants interleaved, each round in a new random order, each with buffers of its own (funclib's eager
   and jitted calls share the pooled output, as the steps of a loop do); medians, and the fastest round of each variant:
   on a loaded machine a rank descheduled inside a call stalls its peer for a time slice (milliseconds), so the fastest
   round is the cost when neither rank was. Raw mpi4py running funclib's protocols separates their cost from
   funclib's own: the digest beside the data (the Iallreduce, then the Allreduce into 2 MB-page memory, as funclib
   does), the digest in the data (the data copied beside a 28-element header, one Allreduce in place: funclib's
   form below 512 KB), and a separate 16-byte agreement before the data (what a second synchronization per call
   costs). Then the per-call cost at 8 floats, where only latency and overhead remain.
2. A compute-bound train step (an MLP, float32, batch 1024 per rank, SGD), rounds interleaved: both ranks running
   the DDP step (twice the samples per step) against rank 0 alone running the same step unwrapped (the other rank
   idles at a barrier). Throughput in samples per second.
3. Peak memory per rank (tracemalloc: NumPy's allocations) of building a model with large parameters (8 layers of
   1024 x 1024 float32, 32 MB) and its Adam state, then two jitted training steps: FullyShardedDataParallel
   against DistributedDataParallel.

The machine is shared: the load average is reported with the numbers.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np

RESULT = "dist.json"


def _interleaved(comm, variants: dict, rounds: int, best: dict | None = None) -> dict:
    """Median seconds per call of each variant, each round in a new random order (the same on every rank), ranks
    aligned by a barrier before every call; the first round is a warm-up. ``best`` receives each variant's fastest
    round. A fixed cyclic order would always run a variant right after the same neighbour, whose 4-64 MB of
    buffers leave the caches cold for it alone."""
    times = {k: [] for k in variants}
    names = list(variants)
    order = np.random.default_rng(0)
    for _ in range(rounds + 1):
        for k in order.permutation(names):
            comm.Barrier()
            t0 = time.perf_counter()
            variants[k]()
            times[k].append(time.perf_counter() - t0)
    if best is not None:
        best.update({k: min(v[1:]) for k, v in times.items()})
    return {k: statistics.median(v[1:]) for k, v in times.items()}


def _allreduce(report):
    import funclib as fl
    from funclib.distributed._comm import world
    from funclib.distributed._pool import _allocate

    w = world()
    comm, MPI = w.comm, w.MPI
    eager = fl.distributed.spmd(lambda v: fl.psum(v, "data"))
    jitted = fl.jit(eager)
    raw, raw_new = "raw mpi4py, reused output", "raw mpi4py, new output"
    raw_huge = "raw mpi4py, reused output in 2 MB pages"
    small, small_out = np.zeros(2, np.int64), np.zeros(2, np.int64)

    def agreed(a, out):  # a separate agreement: 16 bytes, then the data
        comm.Allreduce(small, small_out, op=MPI.MAX)
        comm.Allreduce(a, out, op=MPI.SUM)

    def headed(a, buf):  # funclib's protocol for small sums without funclib: the data and the header in one Allreduce
        buf[: a.size] = a
        buf[a.size :] = 1.0
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

    def beside(a, out):  # funclib's protocol for large sums without funclib: the header's Iallreduce, then the data
        req = comm.Iallreduce(small, small_out, op=MPI.MAX)
        comm.Allreduce(a, out, op=MPI.SUM)
        req.Wait()

    for mb in (4, 64):
        a = np.random.default_rng(w.rank).random((mb << 20) // 4, np.float32)
        # at 4 MB every variant has buffers of its own: one whose operand or output another variant touched just
        # before would find it in the cache (32 MB of L3) and be timed faster than it is; 64 MB fit no cache
        def huge(nbytes=a.nbytes):
            return _allocate(nbytes).view(np.float32)

        src = huge()  # every operand in 2 MB pages: a send buffer's pages count too
        src[...] = a

        def own(src=src, mb=mb):
            if mb == 64:
                return src
            b = huge()
            b[...] = src
            return b

        t_eager, t_jit = fl.from_numpy(own()), fl.from_numpy(own())
        variants = {
            raw: lambda a=own(), out=np.empty_like(a): comm.Allreduce(a, out, op=MPI.SUM),
            raw_huge: lambda a=own(), out=huge(): comm.Allreduce(a, out, op=MPI.SUM),
            raw_new: lambda a=own(): comm.Allreduce(a, np.empty_like(a), op=MPI.SUM),
            "raw mpi4py, agreement first": lambda a=own(), out=huge(): agreed(a, out),
            "raw mpi4py, header beside the data": lambda a=own(), out=huge(): beside(a, out),
            "raw mpi4py, header in the data": lambda a=own(), buf=np.empty(a.size + 28, a.dtype): headed(a, buf),
            "funclib eager": lambda t=t_eager: eager(t),
            "funclib jit": lambda t=t_jit: jitted(t),
        }
        t = t_eager
        ref = np.empty_like(a)
        comm.Allreduce(src, ref, op=MPI.SUM)
        np.testing.assert_array_equal(eager(t).numpy(), ref)
        np.testing.assert_array_equal(jitted(t_jit).numpy(), ref)
        best: dict = {}
        med = _interleaved(comm, variants, 200 if mb == 4 else 30, best)
        row = {k: {"median_ms": 1e3 * v, "GB_per_s": (mb / 1024) / v, "best_ms": 1e3 * best[k]} for k, v in med.items()}
        protocols = [k for k in variants if k.startswith("raw mpi4py, ") and k not in (raw, raw_new, raw_huge)]
        for k in ["funclib eager", "funclib jit", *protocols]:
            row[k]["fraction_of_raw"] = med[raw] / med[k]
            row[k]["fraction_of_raw_2mb_pages"] = med[raw_huge] / med[k]
            row[k]["fraction_of_raw_new_output"] = med[raw_new] / med[k]
            row[k]["best_fraction_of_raw"] = best[raw] / best[k]
        report[f"allreduce {mb} MB"] = row
    a = np.ones(8, np.float32)
    t, out = fl.asarray(a), np.empty_like(a)
    med = _interleaved(comm, {
        "raw mpi4py": lambda: comm.Allreduce(a, out, op=MPI.SUM),
        "funclib eager": lambda: eager(t),
        "funclib jit": lambda: jitted(t),
    }, 300)
    report["allreduce 32 bytes us"] = {k: 1e6 * v for k, v in med.items()}
    # a separate agreement round trip (16 bytes), alone: ranks already in step; funclib pays it only for calls the
    # ranks cannot predict
    med = _interleaved(comm, {"agree": lambda: comm.Allreduce(small, small_out, op=MPI.MAX)}, 300)
    report["agreement round trip ms"] = 1e3 * med["agree"]


def _mlp(key_seed=0, width=1024, depth=3):
    import funclib.nn as nn

    from funclib import random as frandom

    keys = frandom.split(frandom.key(key_seed), depth + 1)
    layers = [nn.Linear(256, width, key=keys[0]), nn.ReLU()]
    for i in range(1, depth):
        layers += [nn.Linear(width, width, key=keys[i]), nn.ReLU()]
    layers.append(nn.Linear(width, 10, key=keys[depth]))
    return nn.Sequential(*layers)


def _scaling(report):
    import funclib.nn as nn
    import funclib.nn.functional as F
    import funclib.optim as optim

    import funclib as fl
    from funclib.distributed._comm import world

    w = world()
    batch = 1024
    rng = np.random.default_rng(w.rank)
    x = fl.asarray(rng.normal(size=(batch, 256)).astype(np.float32))
    y = fl.asarray(rng.integers(0, 10, size=batch))

    def make_step(model):
        opt = optim.SGD(model.parameters(), lr=1e-3)
        opt.bind(model)

        @fl.jit
        def step(model, state, hyper, x, y):
            loss, grads = nn.value_and_grad(model, lambda m, a, b: F.cross_entropy(m(a), b))(model, x, y)
            model, state = opt.functional_update(model, grads, state, hyper)
            return model, state, loss

        return step, opt

    ddp = nn.parallel.DistributedDataParallel(_mlp())
    single = _mlp()
    ddp_step, ddp_opt = make_step(ddp)
    one_step, one_opt = make_step(single)
    st = {"ddp": [ddp, ddp_opt.state], "one": [single, one_opt.state]}

    def run_ddp():
        m, s, loss = ddp_step(st["ddp"][0], st["ddp"][1], ddp_opt.hyperparams(), x, y)
        st["ddp"] = [m, s]
        loss.numpy()

    def run_one():
        if w.rank == 0:
            m, s, loss = one_step(st["one"][0], st["one"][1], one_opt.hyperparams(), x, y)
            st["one"] = [m, s]
            loss.numpy()

    # steady state: compiled programs, not the eager runs that stand in while kernels compile in the background
    for fn in (run_ddp, run_one):
        fn()
    for fn in (ddp_step, one_step):
        fn.wait_compiled()
    times = {"2 ranks (DDP)": [], "1 rank": []}
    for r in range(12):
        order = [("2 ranks (DDP)", run_ddp), ("1 rank", run_one)]
        for name, fn in order if r % 2 == 0 else order[::-1]:
            w.comm.Barrier()
            t0 = time.perf_counter()
            fn()
            w.comm.Barrier()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v[2:]) for k, v in times.items()}
    thr = {"2 ranks (DDP)": 2 * batch / med["2 ranks (DDP)"], "1 rank": batch / med["1 rank"]}
    report["train step"] = {
        "model": "MLP 256-1024-1024-1024-10 float32, batch 1024 per rank, SGD",
        **{k: {"median_ms": 1e3 * med[k], "samples_per_s": thr[k]} for k in med},
        "speedup": thr["2 ranks (DDP)"] / thr["1 rank"],
    }


def _memory(report):
    import funclib.nn as nn
    import funclib.optim as optim

    import funclib as fl
    from funclib.distributed._comm import world

    w = world()
    rng = np.random.default_rng(w.rank)
    x = fl.asarray(rng.normal(size=(64, 1024)).astype(np.float32))
    peaks = {}
    for kind in ("DistributedDataParallel", "FullyShardedDataParallel"):
        import gc

        gc.collect()
        tracemalloc.start()
        layers = []
        for i in range(8):
            layers += [nn.Linear(1024, 1024, key=fl.random.key(i)), nn.Tanh()]
        model = getattr(nn.parallel, kind)(nn.Sequential(*layers))
        opt = optim.Adam(model.parameters(), lr=1e-4)
        opt.bind(model)

        @fl.jit
        def step(model, state, hyper, x, opt=opt):
            loss, grads = nn.value_and_grad(model, lambda m, a: (m(a) ** 2).mean())(model, x)
            model, state = opt.functional_update(model, grads, state, hyper)
            return model, state, loss

        state = opt.state
        for _ in range(2):
            model, state, loss = step(model, state, opt.hyperparams(), x)
        loss.numpy()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        peaks[kind] = peak / 2**20
        del model, state, opt, step, layers
    report["memory per rank"] = {
        "model": "8 x Linear(1024, 1024) float32 (32 MB of parameters), Adam, two jitted steps, batch 64",
        **{k: {"peak_MB": v} for k, v in peaks.items()},
        "fsdp_over_ddp": peaks["FullyShardedDataParallel"] / peaks["DistributedDataParallel"],
    }


def worker(out_path: str) -> None:
    from funclib.distributed._comm import world

    w = world()
    report = {"ranks": w.size, "load_average_before": list(os.getloadavg())}
    _allreduce(report)
    _scaling(report)
    _memory(report)
    report["load_average_after"] = list(os.getloadavg())
    if w.rank == 0:
        with open(out_path, "w") as f:
            json.dump(report, f, indent=1)


def main() -> None:
    from benchmarks._harness import RESULTS_DIR
    from funclib.distributed.launch import command, environment

    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / RESULT
    cmd = command(2, ["-m", "benchmarks.dist", str(out)])
    subprocess.run(cmd, env=environment(), check=True, timeout=1800)
    report = json.loads(out.read_text())
    print(f"2 ranks on {os.cpu_count()} cores; load average before {report['load_average_before']}, after "
          f"{report['load_average_after']}")
    for mb in (4, 64):
        row = report[f"allreduce {mb} MB"]
        print(f"Allreduce {mb:2d} MB: " + "  ".join(
            f"{k} {v['median_ms']:.2f} ms ({v['GB_per_s']:.2f} GB/s"
            + (f", {100 * v['fraction_of_raw']:.0f}% of raw, {100 * v['fraction_of_raw_2mb_pages']:.0f}% of raw in "
               f"2 MB pages, {100 * v['fraction_of_raw_new_output']:.0f}% of raw with a new output)"
               if "fraction_of_raw" in v else ")")
            for k, v in row.items()))
        print("  fastest rounds: " + "  ".join(
            f"{k} {v['best_ms']:.2f} ms" + (f" ({100 * v['best_fraction_of_raw']:.0f}% of raw)"
                                            if "best_fraction_of_raw" in v else "")
            for k, v in row.items()))
    print(f"a separate agreement, ranks in step (a 16-byte Allreduce; funclib's for calls the ranks cannot predict): "
          f"{report['agreement round trip ms']:.3f} ms")
    print("Allreduce of 8 floats (latency and overhead): " + "  ".join(
        f"{k} {v:.1f} us" for k, v in report["allreduce 32 bytes us"].items()))
    ts = report["train step"]
    print(f"train step ({ts['model']}): 1 rank {ts['1 rank']['samples_per_s']:.0f} samples/s, 2 ranks "
          f"{ts['2 ranks (DDP)']['samples_per_s']:.0f} samples/s: {ts['speedup']:.2f}x")
    mem = report["memory per rank"]
    print(f"memory per rank ({mem['model']}): DDP {mem['DistributedDataParallel']['peak_MB']:.1f} MB, FSDP "
          f"{mem['FullyShardedDataParallel']['peak_MB']:.1f} MB: {mem['fsdp_over_ddp']:.2f}x")


if __name__ == "__main__":
    worker(sys.argv[1])
