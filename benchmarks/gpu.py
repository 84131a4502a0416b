"""GPU measurements: ``python -m benchmarks gpu`` on a machine with a CUDA GPU and ``pip install funclib[cuda]``.

Each case prints per-call medians (every call ends with a device synchronize, so the time is the work's, not the
launch queue's) and the ratio of funclib to its peers:

- ``chain f32[2**26]``: a five-op elementwise chain ``tanh(x * a + b) * c - x`` (jitted) against a device-to-device
  copy of the same array. Bandwidth = bytes read and written / time; the chain moves as many bytes as the copy
  once fused, so ``funclib/copy`` below 1 / 0.7 means at least 70% of the copy's bandwidth.
- ``matmul f32[8192x8192]``: ``a @ b`` against cuBLAS called directly on the same buffers (and PyTorch).
- ``launch f32[1]``: a jitted one-op step on one element: the fixed cost per jitted call.
- ``mlp step 784-256-256-10, batch 1024``: a jitted SGD training step on the GPU against the same step jitted on
  one CPU core (and PyTorch on the GPU when installed).

It refuses to run without a GPU (in numba's simulator the numbers would mean nothing).
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, allclose, optional


def _runtime():
    from funclib.kernels import cuda_backend

    try:
        rt = cuda_backend.require_device(0)
    except cuda_backend.CudaUnavailableError as e:
        raise SystemExit(f"benchmarks/gpu.py measures a CUDA GPU and none can be used here: {e}") from None
    if rt.simulated:
        raise SystemExit(
            "benchmarks/gpu.py: NUMBA_ENABLE_CUDASIM=1 runs CUDA in numba's simulator on the CPU, where timings mean "
            "nothing; unset it on a machine with a GPU"
        )
    return rt


def _synced(rt, f):
    def call():
        out = f()
        rt.synchronize()
        return out

    return call


def _host(x):
    return np.asarray(x.to_device("cpu")) if hasattr(x, "to_device") else np.asarray(x)


def _chain(fl):
    def f(x):
        return fl.tanh(x * 1.5 + 0.25) * 0.5 - x

    return f


def _chain_setup():
    import funclib as fl

    rt = _runtime()
    n = 1 << 26
    x = fl.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32)).to_device("cuda")
    f = fl.jit(_chain(fl))
    dst = rt.empty((n,), np.float32)

    def copy():
        dst.handle.copy_to_device(x._value.handle)
        return dst

    return {"funclib": _synced(rt, lambda: f(x)), "copy": _synced(rt, copy)}


def _matmul_setup():
    import funclib as fl

    rt = _runtime()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8192, 8192)).astype(np.float32)
    b = rng.standard_normal((8192, 8192)).astype(np.float32)
    ga, gb = fl.asarray(a).to_device("cuda"), fl.asarray(b).to_device("cuda")
    out = rt.empty((1, 8192, 8192), np.float32)
    a3, b3 = ga._value.reshape((1, 8192, 8192)), gb._value.reshape((1, 8192, 8192))
    variants = {
        "funclib": _synced(rt, lambda: ga @ gb),
        "cuBLAS": _synced(rt, lambda: (rt.gemm(a3, b3, out, False, False), out)[1]),
    }
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        variants["torch"] = lambda: (ta @ tb, torch.cuda.synchronize())[0]
    return variants


def _launch_setup():
    import funclib as fl

    rt = _runtime()
    x = fl.ones(1, device="cuda")
    f = fl.jit(lambda x: x + 1.0)
    return {"funclib": _synced(rt, lambda: f(x))}


def _mlp(fl, nn):
    model = nn.Sequential(
        nn.Linear(784, 256, key=fl.random.key(1)), nn.ReLU(), nn.Linear(256, 256, key=fl.random.key(2)), nn.ReLU(),
        nn.Linear(256, 10, key=fl.random.key(3)),
    )

    def step(model, x, y):
        import funclib.nn.functional as F

        loss, grads = nn.value_and_grad(model, lambda m, a, b: F.cross_entropy(m(a), b))(model, x, y)
        return fl.tree.map(lambda p, g: p - 0.01 * g, model, grads), loss

    return model, fl.jit(step)


def _mlp_setup():
    import funclib.nn as nn

    import funclib as fl

    rt = _runtime()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 784)).astype(np.float32)
    y = rng.integers(0, 10, 1024)
    model, step = _mlp(fl, nn)
    gpu_model, _ = _mlp(fl, nn)  # the same weights (the same keys), moved
    gpu_model.to("cuda")
    cpu_x, cpu_y = fl.asarray(x), fl.asarray(y)
    gx, gy = cpu_x.to_device("cuda"), cpu_y.to_device("cuda")
    variants = {
        "funclib": _synced(rt, lambda: step(gpu_model, gx, gy)[1]),
        "funclib cpu (1 core)": lambda: step(model, cpu_x, cpu_y)[1],
    }
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        tm = torch.nn.Sequential(
            torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 10),
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


def cases():
    _runtime()  # before any case: a clear refusal instead of a traceback per case
    close = allclose(rtol=1e-3, atol=1e-2, reference="cuBLAS")
    return [
        Case("chain f32[2**26] vs device copy", _chain_setup, calls=5, rounds=11),
        Case("matmul f32[8192x8192] vs cuBLAS", _matmul_setup, calls=3, rounds=7,
             check=lambda outs: close({k: _host(v) for k, v in outs.items()})),
        Case("launch: jitted step on f32[1]", _launch_setup, calls=200, rounds=11),
        Case("mlp step 784-256-256-10 b1024 (GPU vs one CPU core)", _mlp_setup, calls=5, rounds=7),
    ]
