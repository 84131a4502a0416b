"""GPU measurements: ``python -m benchmarks gpu`` on a machine with a CUDA GPU and ``pip install funclib[cuda]``.

Each case prints per-call medians (every call ends with a device synchronize, so the time is the work's, not the
launch queue's) and the ratio of funclib to its peers:

- ``chain f32[2**26]``: a five-op elementwise chain ``tanh(x * a + b) * c - x``, jitted (one fused kernel),
  against a device-to-device copy of the same array. Both read and write ``n`` floats once, so ``funclib/copy``
  at most 1 / 0.7 means at least 70% of the copy's bandwidth (printed as GB/s below the table).
- ``matmul f32[8192x8192]``: a jitted ``a @ b`` (and the eager one) against cuBLAS called directly on the same
  buffers (and PyTorch when installed with CUDA).
- ``launch f32[1]``: a jitted one-op step on one element, synchronized: the fixed cost per jitted call.
- ``mlp step 784-256-256-10, batch 1024``: a jitted SGD training step on the GPU against the same step jitted on
  one CPU core (and PyTorch on the same GPU when installed with CUDA).

It refuses to run without a GPU (in numba's simulator the numbers would mean nothing), except with ``--tiny``:
``python -m benchmarks.gpu --tiny`` runs every case once at toy sizes, checking results against the CPU, which
works in the simulator (``NUMBA_ENABLE_CUDASIM=1``) and is what the test suite runs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks._harness import Case, allclose, format_table, optional, run_case

# the sizes measured, and the toy sizes ``--tiny`` runs (the simulator runs each GPU thread in Python)
FULL = {"chain": 1 << 26, "matmul": 8192, "mlp": (784, 256, 10, 1024)}
TINY = {"chain": 256, "matmul": 16, "mlp": (16, 8, 4, 8)}


def _runtime(tiny: bool = False):
    from funclib.kernels import cuda_backend

    try:
        rt = cuda_backend.require_device(0)
    except cuda_backend.CudaUnavailableError as e:
        raise SystemExit(f"benchmarks/gpu.py measures a CUDA GPU and none can be used here: {e}") from None
    if rt.simulated and not tiny:
        raise SystemExit(
            "benchmarks/gpu.py: NUMBA_ENABLE_CUDASIM=1 runs CUDA in numba's simulator on the CPU, where timings mean "
            "nothing; unset it on a machine with a GPU (or run the --tiny smoke test)"
        )
    return rt


def _synced(rt, f):
    def call():
        out = f()
        rt.synchronize()
        return out

    return call


def _host(x):
    from funclib.kernels import cuda_backend

    if type(x) is cuda_backend.CudaArray:  # a raw buffer (the cuBLAS variant's)
        return cuda_backend.runtime().to_host(x)
    return np.asarray(x.to_device("cpu")) if hasattr(x, "to_device") else np.asarray(x)


def _chain(fl):
    def f(x):
        return fl.tanh(x * 1.5 + 0.25) * 0.5 - x

    return f


def _chain_setup(sizes, tiny):
    import funclib as fl

    rt = _runtime(tiny)
    n = sizes["chain"]
    host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x = fl.asarray(host).to_device("cuda")
    f = fl.jit(_chain(fl))
    dst = rt.empty((n,), np.float32)

    def copy():
        dst.handle.copy_to_device(x._value.handle)
        return dst

    variants = {"funclib": _synced(rt, lambda: f(x)), "copy": _synced(rt, copy)}
    if tiny:
        variants["cpu"] = lambda: _chain(np)(host)
    return variants


def _matmul_setup(sizes, tiny):
    import funclib as fl

    rt = _runtime(tiny)
    n = sizes["matmul"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ga, gb = fl.asarray(a).to_device("cuda"), fl.asarray(b).to_device("cuda")
    out = rt.empty((1, n, n), np.float32)
    a3, b3 = ga._value.reshape((1, n, n)), gb._value.reshape((1, n, n))
    mm = fl.jit(lambda a, b: a @ b)
    variants = {
        "funclib": _synced(rt, lambda: mm(ga, gb)),
        "funclib eager": _synced(rt, lambda: ga @ gb),
        "cuBLAS": _synced(rt, lambda: (rt.gemm(a3, b3, out, False, False), out.reshape((n, n)))[1]),
    }
    torch = None if tiny else optional("torch")
    if torch is not None and torch.cuda.is_available():
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        variants["torch"] = lambda: (ta @ tb, torch.cuda.synchronize())[0]
    return variants


def _launch_setup(sizes, tiny):
    import funclib as fl

    rt = _runtime(tiny)
    x = fl.ones(1, device="cuda")
    f = fl.jit(lambda x: x + 1.0)
    return {"funclib": _synced(rt, lambda: f(x))}


def _mlp(fl, nn, d_in, hidden, d_out):
    model = nn.Sequential(
        nn.Linear(d_in, hidden, key=fl.random.key(1)), nn.ReLU(), nn.Linear(hidden, hidden, key=fl.random.key(2)),
        nn.ReLU(), nn.Linear(hidden, d_out, key=fl.random.key(3)),
    )

    def step(model, x, y):
        import funclib.nn.functional as F

        loss, grads = nn.value_and_grad(model, lambda m, a, b: F.cross_entropy(m(a), b))(model, x, y)
        return fl.tree.map(lambda p, g: p - 0.01 * g, model, grads), loss

    return model, fl.jit(step)


def _mlp_setup(sizes, tiny):
    import funclib.nn as nn

    import funclib as fl

    rt = _runtime(tiny)
    d_in, hidden, d_out, batch = sizes["mlp"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, d_in)).astype(np.float32)
    y = rng.integers(0, d_out, batch)
    model, step = _mlp(fl, nn, d_in, hidden, d_out)
    gpu_model, gpu_step = _mlp(fl, nn, d_in, hidden, d_out)  # the same weights (the same keys), moved
    gpu_model.to("cuda")
    cpu_x, cpu_y = fl.asarray(x), fl.asarray(y)
    gx, gy = cpu_x.to_device("cuda"), cpu_y.to_device("cuda")
    variants = {
        "funclib": _synced(rt, lambda: gpu_step(gpu_model, gx, gy)[1]),
        "funclib cpu (1 core)": lambda: step(model, cpu_x, cpu_y)[1],
    }
    torch = None if tiny else optional("torch")
    if torch is not None and torch.cuda.is_available():
        tm = torch.nn.Sequential(
            torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, d_out),
        ).cuda()
        opt = torch.optim.SGD(tm.parameters(), lr=0.01)
        tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()

        def torch_step():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(tm(tx), ty)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            return loss

        variants["torch"] = torch_step
    return variants


def _close(reference: str, rtol: float, atol: float, skip: tuple[str, ...] = ()):
    check = allclose(rtol=rtol, atol=atol, reference=reference)

    def run(outs):
        check({k: _host(v) for k, v in outs.items() if k not in skip})

    return run


def cases(tiny: bool = False) -> list[Case]:
    _runtime(tiny)  # before any case: a clear refusal instead of a traceback per case
    sizes = TINY if tiny else FULL
    n, m = sizes["chain"], sizes["matmul"]
    d_in, hidden, d_out, batch = sizes["mlp"]
    few = {"calls": 1, "rounds": 1} if tiny else None

    def setup(f):
        return lambda: f(sizes, tiny)

    return [
        Case(f"chain f32[{n}] vs device copy", setup(_chain_setup), **(few or {"calls": 5, "rounds": 11}),
             check=_close("cpu", 1e-5, 1e-6, skip=("copy",)) if tiny else None),
        Case(f"matmul f32[{m}x{m}] vs cuBLAS", setup(_matmul_setup), **(few or {"calls": 3, "rounds": 7}),
             check=_close("cuBLAS", 1e-3, 1e-2)),
        Case("launch: jitted step on f32[1]", setup(_launch_setup), **(few or {"calls": 200, "rounds": 11})),
        Case(f"mlp step {d_in}-{hidden}-{hidden}-{d_out} b{batch} (GPU vs one CPU core)", setup(_mlp_setup),
             **(few or {"calls": 5, "rounds": 7}),
             check=_close("funclib cpu (1 core)", 1e-4, 1e-5, skip=("torch",))),
    ]


def bandwidth(results, n: int) -> list[str]:
    """The chain's and the copy's bandwidth: each reads and writes ``n`` float32 once."""
    lines = []
    for res in results:
        if res.name.startswith("chain"):
            for v in ("funclib", "copy"):
                lines.append(f"{res.name}: {v} {2 * 4 * n / res.median(v) / 1e9:.1f} GB/s")
            lines.append(f"{res.name}: funclib reaches {res.median('copy') / res.median('funclib'):.0%} of the copy")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="every case once at toy sizes (the simulator's smoke test)")
    args = ap.parse_args(argv)
    results = [run_case(c) for c in cases(args.tiny)]
    print(format_table("== gpu" + (" (tiny: not a measurement)" if args.tiny else ""), results))
    for line in bandwidth(results, (TINY if args.tiny else FULL)["chain"]):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
