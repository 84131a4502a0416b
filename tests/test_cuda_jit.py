"""jit on CUDA devices: the jit plan lowered through the CUDA emitter (``kernels/cuda_emit.py``) against the CPU.

Without a GPU the programs run in numba's CUDA simulator (shapes stay tiny); every kernel kind the emitter
generates is also compiled to sm_90 PTX in a subprocess (simulator off) and float32 kernels are checked for
float64 instructions.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funclib as fl
from funclib.errors import UnsupportedOnDeviceError

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="pip install funclib[cuda]"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _programs():
    """Representative jitted programs, one per kernel kind the emitter generates, and their float32 arguments."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 8)).astype(np.float32)
    b = rng.normal(size=(8,)).astype(np.float32)
    w = rng.normal(size=(8, 3)).astype(np.float32)

    def layer_norm(x, b):
        m = fl.mean(x, axis=-1, keepdims=True)
        v = fl.mean((x - m) ** 2, axis=-1, keepdims=True)
        return (x - m) / fl.sqrt(v + 1e-5) * b

    def mlp_grad(w, x):
        def loss(w):
            return -fl.mean(fl.log_softmax(fl.maximum(x @ w, 0.0), axis=-1)[:, 0])

        return fl.grad(loss)(w)

    return {
        "chain": (lambda x, b: fl.tanh(x * 1.5 + 0.25) * 0.5 - x, (x, b)),
        "broadcast": (lambda x, b: fl.exp(x) * b + fl.sin(b) * 2.0, (x, b)),
        "math": (lambda x, b: fl.erf(x) + fl.sigmoid(x) * fl.log1p(x * x) + fl.sqrt(fl.abs(b)), (x, b)),
        "select": (lambda x, b: fl.where(x > b, x * 2.0, -x), (x, b)),
        "row_sum": (lambda x, b: fl.sum(fl.exp(x) * b, axis=1), (x, b)),
        "column_sum": (lambda x, b: fl.sum(fl.exp(x) * b, axis=0), (x, b)),
        "full_sum": (lambda x, b: fl.sum(x * b), (x, b)),
        "row_max": (lambda x, b: fl.max(x * b, axis=1), (x, b)),
        "column_min": (lambda x, b: fl.min(x + b, axis=0), (x, b)),
        "softmax": (lambda x, b: fl.softmax(x * b, axis=-1), (x, b)),
        "log_softmax": (lambda x, b: fl.log_softmax(x, axis=-1) + b, (x, b)),
        "layer_norm": (layer_norm, (x, b)),
        "matmul": (lambda x, w: fl.tanh(x @ w + 1.0), (x, w)),
        "mlp_grad": (mlp_grad, (w, x)),
    }


PROGRAMS = _programs()


def _close(dev, cpu, rtol=2e-5, atol=2e-6):
    assert dev.device == "cuda:0"
    np.testing.assert_allclose(dev.cpu().numpy(), cpu.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jitted_programs_run_lowered_on_the_device_and_match_the_cpu(name):
    f, args = PROGRAMS[name]
    jf = fl.jit(f)
    cpu = jf(*map(fl.asarray, args))
    dev_args = [fl.asarray(a).cuda() for a in args]
    _close(jf(*dev_args), cpu)
    lowered = jf.lower(*dev_args)
    labels = lowered.program.describe()
    assert all("cuda.grid(1)" in k or "cuda.blockIdx.x" in k for k in lowered.kernels)
    if name not in ("matmul", "mlp_grad"):
        assert "fused[" in labels, labels
    if name in ("softmax", "log_softmax", "layer_norm"):
        assert len(lowered.kernels) == 1, labels  # one staged kernel reads each row once


def test_a_new_batch_size_reuses_the_kernels_and_the_source_is_cached_on_disk(tmp_path, monkeypatch):
    from funclib.kernels import diskcache

    monkeypatch.setenv("FUNCLIB_CACHE_DIR", str(tmp_path / "cache"))
    f = fl.jit(lambda x: fl.softmax(x * 3.0, axis=-1))
    x3 = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    x5 = np.arange(20, dtype=np.float32).reshape(5, 4) / 7
    _close(f(fl.asarray(x3).cuda()), f(fl.asarray(x3)))
    _close(f(fl.asarray(x5).cuda()), f(fl.asarray(x5)))
    srcs = [f.lower(fl.asarray(x).cuda()).kernels[0] for x in (x3, x5)]
    assert srcs[0] == srcs[1]  # sizes are run-time arguments
    d = tmp_path / "cache"
    files = sorted(p.name for p in d.iterdir() if p.name.startswith("cu_"))
    assert files == [f"cu_{diskcache.kernel_key(srcs[0])}.py"]
    assert (d / files[0]).read_text() == srcs[0]
    assert (d / files[0]).stat().st_mode & 0o077 == 0


@settings(max_examples=6, deadline=None)
@given(
    rows=st.integers(1, 5),
    cols=st.integers(1, 9),
    pattern=st.sampled_from(["full", "row", "col", "scalar"]),
    op=st.sampled_from(["chain", "sum", "max", "softmax"]),
)
def test_broadcast_patterns_and_reductions_match_the_cpu(rows, cols, pattern, op):
    rng = np.random.default_rng(rows * 10 + cols)
    x = rng.normal(size=(rows, cols)).astype(np.float32)
    shape = {"full": (rows, cols), "row": (rows, 1), "col": (cols,), "scalar": ()}[pattern]
    y = rng.normal(size=shape).astype(np.float32)
    f = {
        "chain": lambda x, y: fl.exp(-x * x) * y - fl.tanh(y),
        "sum": lambda x, y: fl.sum(fl.abs(x) + y, axis=-1),
        "max": lambda x, y: fl.max(x * y, axis=0),
        "softmax": lambda x, y: fl.softmax(x + y, axis=-1),
    }[op]
    jf = fl.jit(f)
    _close(jf(fl.asarray(x).cuda(), fl.asarray(y).cuda()), jf(fl.asarray(x), fl.asarray(y)))


def test_integer_and_boolean_programs_match_the_cpu():
    i = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    f = fl.jit(lambda i: (fl.where(i > 1, i * 7, -i) + fl.abs(i - 3), fl.sum(i * i, axis=1), i > 2))
    for d, c in zip(f(fl.asarray(i).cuda()), f(fl.asarray(i))):
        assert d.dtype == c.dtype
        np.testing.assert_array_equal(d.cpu().numpy(), c.numpy())


def test_a_few_jitted_training_steps_of_a_digits_mlp_match_the_cpu():
    import funclib.nn as nn
    import funclib.nn.functional as F
    import funclib.optim as optim
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images[:16].reshape(16, 64) / 16.0).astype(np.float32)
    y = digits.target[:16].astype(np.int64)

    def train(device):
        model = nn.Sequential(nn.Linear(64, 8, key=fl.random.key(1)), nn.ReLU(), nn.Linear(8, 10, key=fl.random.key(2)))
        model.to(device)
        opt = optim.SGD(model.named_parameters(), lr=0.1, momentum=0.9)

        @fl.jit
        def step(model, state, hyper, x, y):
            loss, grads = nn.value_and_grad(model, lambda m, a, b: F.cross_entropy(m(a), b))(model, x, y)
            model, state = opt.functional_update(model, grads, state, hyper)
            return model, state, loss

        state, losses = opt.state, []
        xd, yd = fl.asarray(x).to_device(device), fl.asarray(y).to_device(device)
        for _ in range(3):
            model, state, loss = step(model, state, opt.hyperparams(), xd, yd)
            losses.append(float(loss))
        return model, losses

    (mc, lc), (mg, lg) = train("cpu"), train("cuda")
    assert lg[-1] < lg[0]
    np.testing.assert_allclose(lg, lc, rtol=1e-5)
    for a, b in zip(fl.tree.leaves(mc), fl.tree.leaves(mg)):
        _close(b, a, rtol=1e-4, atol=1e-6)


def test_a_jitted_loop_runs_on_the_device_one_equation_at_a_time():
    x = np.arange(1.0, 5.0, dtype=np.float32)
    f = fl.jit(lambda x: fl.scan(lambda c, a: (c * 0.5 + fl.sin(a), c), 0.0 * x[0], x))
    (cd, ysd), (cc, ysc) = f(fl.asarray(x).cuda()), f(fl.asarray(x))
    assert cd.device != "cpu" and ysd.device != "cpu"
    _close(cd, cc)
    _close(ysd, ysc)


def test_what_the_device_program_cannot_run_is_named():
    h = fl.asarray(np.ones(4, np.float16)).cuda()
    with pytest.raises(UnsupportedOnDeviceError, match="float16"):
        fl.jit(lambda h: fl.exp(h) * 2)(h)


def test_every_emitter_kernel_kind_compiles_to_sm90_ptx_without_float64_in_float32_kernels():
    # a separate process: PTX needs numba-cuda's compiler, which the simulator (on in this process) replaces
    code = f"""
import sys, types
import numpy as np
sys.path.insert(0, {os.path.join(ROOT, 'tests')!r})
import funclib as fl
from funclib.kernels import cuda_emit, cuda_ops
from funclib.transforms.lowering import body_program
from test_cuda_jit import PROGRAMS

class Catalog(cuda_emit.CudaEmitter):
    # the emitter's kernels, recorded instead of run: no device, no simulator
    def __init__(self):
        super().__init__(types.SimpleNamespace(simulated=False), 0, lambda *a: None)
        self.made = []
    def fused_kernel(self, spec, cols):
        k = super().fused_kernel(spec, cols); self.made.append(k); return k
    def staged_kernel(self, spec, cols):
        k = super().staged_kernel(spec, cols); self.made.append(k); return k
    asarray = staticmethod(np.asarray)

cases = []
for name, (f, args) in sorted(PROGRAMS.items()):
    for dtype in (np.float32, np.float64):
        em = Catalog()
        body_program(fl.jit(f).trace(*[fl.asarray(a.astype(dtype)) for a in args]), emitter=em)
        assert em.made, name
        for i, k in enumerate(em.made):
            cases.append((f"{{name}}:{{np.dtype(dtype).name}}:{{i}}", k.source, list(k.argtypes),
                          dtype == np.float32))
ptx = cuda_ops.compile_catalog((9, 0), cases)
assert all(".target sm_90" in p for p in ptx.values())
bad = [c[0] for c in cases if c[3] and ".f64" in ptx[c[0]]]
assert not bad, bad
assert all(".f64" in ptx[c[0]] for c in cases if not c[3])  # the check sees float64 where it is meant
kinds = {{c[0].split(":")[0] for c in cases}}
print(len(cases), sorted(kinds))
"""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout.split()[0]) >= len(PROGRAMS) * 2


def test_the_gpu_benchmark_runs_tiny_in_the_simulator():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    r = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--tiny"], env=env, capture_output=True, text=True,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    for case in ("chain", "matmul", "launch", "mlp"):
        assert case in r.stdout, r.stdout


def test_scatter_add_never_writes_into_its_operand():
    # the gradient of a gather scatters into a zeros constant of the program: run twice, it must not accumulate
    idx = fl.asarray(np.array([0, 2, 2, 3]))
    f = fl.jit(fl.grad(lambda w, i: fl.sum(fl.take(w, i) ** 2)))
    w = np.arange(5, dtype=np.float32)
    cpu = f(fl.asarray(w), idx)
    wd, idd = fl.asarray(w).cuda(), idx.cuda()
    for _ in range(3):
        _close(f(wd, idd), cpu)
    np.testing.assert_array_equal(wd.cpu().numpy(), w)


def test_compiled_cuda_kernels_are_kept_in_the_private_cache_and_a_bad_file_is_a_miss(tmp_path):
    # numba-cuda's compiler is real only with the simulator off; no GPU is needed for the cache's own logic
    code = """
import os, types
from funclib.kernels import cuda_backend, diskcache
from numba.cuda import dispatcher

class Ctx:
    def codegen(self):
        return types.SimpleNamespace(magic_tuple=lambda: ((13, 0), (9, 0)))

class Kernel:
    def _reduce_states(self):
        return {"name": "kernel", "ptx": "// code"}

cuda_backend._target = Ctx
dispatcher._Kernel._rebuild = classmethod(lambda cls, **states: states)
cache = cuda_backend.CudaKernelCache("cu_abc.kernel", "abc")
cache.save_overload("(float32[::1], int64)", Kernel())
d = diskcache.private_dir()
[name] = [f for f in os.listdir(d) if f.endswith(".cubin")]
path = os.path.join(d, name)
assert os.stat(path).st_mode & 0o077 == 0
assert cache.load_overload("(float32[::1], int64)", Ctx()) == {"name": "kernel", "ptx": "// code"}
assert cache.load_overload("(float64[::1], int64)", Ctx()) is None  # another signature
assert cuda_backend.CudaKernelCache("cu_abd.kernel", "abd").load_overload("(float32[::1], int64)", Ctx()) is None
with open(path, "r+b") as f:
    f.seek(40)
    f.write(b"garbage")
assert cache.load_overload("(float32[::1], int64)", Ctx()) is None  # corrupt: a miss, compiled again
print("ok")
"""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "FUNCLIB_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_repeated_calls_take_the_device_fast_path_keyed_by_device():
    from funclib.errors import DeviceMismatchError

    f = fl.jit(lambda x, y: fl.exp(x) * y)
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    want = f(fl.asarray(x), fl.asarray(x))
    xd = fl.asarray(x).cuda()
    for _ in range(3):
        _close(f(xd, xd), want)
    assert any(len(k[0][0]) == 3 for k in f._fast)  # (shape, dtype, device) per argument
    assert f.num_traces == 2  # one trace per device: traced code may make its constants on ``x.device``
    np.testing.assert_allclose(f(fl.asarray(x), fl.asarray(x)).numpy(), want.numpy())
    with pytest.raises(DeviceMismatchError, match="cuda:0"):
        f(xd, fl.asarray(x))
