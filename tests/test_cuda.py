"""CUDA devices: every primitive on a CUDA device against the CPU, transfers, errors, and the generated kernels'
PTX.

Without a GPU these run in numba's CUDA simulator (``tests/conftest.py`` turns it on before numba is imported; it
runs each GPU thread as a Python thread, so shapes stay tiny). The simulator cannot show what the hardware
compiler makes of a kernel, so every kind of generated kernel is also compiled to sm_90 PTX (numba-cuda's NVVM, no
GPU needed) and float32 kernels are checked for float64 instructions.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from op_table import ROWS, as_tensors, draw_case, tolerance

import funclib as fl
import funclib.numpy as fnp
from funclib import dtypes as D
from funclib.core import DeviceTensor
from funclib.errors import CudaUnavailableError, DeviceMismatchError, HostTransferError, UnsupportedOnDeviceError

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="pip install funclib[cuda]"),
    # the simulator runs kernels on NumPy scalars, which warn where uint32 arithmetic wraps and inf - inf is NaN
    # (on purpose: Threefry, sin/cos of inf)
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]
SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
needs_device = pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is not None and len(fl.devices()) < 2, reason="no CUDA device visible"
)

# dtypes the device kernels compute in
DEVICE_DTYPES = frozenset(
    [D.bool_, D.int8, D.int16, D.int32, D.int64, D.uint8, D.uint16, D.uint32, D.uint64, D.float32, D.float64,
     D.complex64, D.complex128]
)

# primitives without a device implementation yet (none today): each would raise UnsupportedOnDeviceError naming
# it (a listed one that runs fails the test, so the list only shrinks)
UNSUPPORTED: set[str] = set()
# primitives without operands run where creation functions put them (``device=``; see test_creation_on_device)
NO_OPERANDS = {"iota", "axis_index"}


# the dtype each row is checked at: the first of these it supports
PREFERRED = [D.float32, D.float64, D.int32, D.int64, D.uint32, D.int8, D.uint8, D.int16, D.uint16, D.uint64, D.bool_]


def _device_case(row, data):
    """A drawn case of ``row`` at a dtype the device computes in (None: the row has no such dtype)."""
    for dtype in PREFERRED:
        if dtype in row.dtypes:
            return dtype, draw_case(data.draw, row, dtype)
    return None, None


def _to_cpu(x):
    return x.to_device("cpu") if isinstance(x, fl.Tensor) else x


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
@settings(max_examples=1, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_primitive_on_the_device_matches_the_cpu(row, data):
    dtype, case = _device_case(row, data)
    if case is None:
        pytest.skip(f"{row.name} has no dtype the device computes in")
    cfg, args = case
    if row.name in NO_OPERANDS:
        pytest.skip("no operands: placed by device= on the creation functions")
    xs = as_tensors(args)
    want = fl.tree.leaves(row.apply(cfg, *xs))
    on_device = [x.to_device("cuda") for x in xs]
    if row.name in UNSUPPORTED:
        with pytest.raises(UnsupportedOnDeviceError, match=f"'{row.name}'"):
            row.apply(cfg, *on_device)
        return
    if any(np.dtype(w.dtype) not in DEVICE_DTYPES for w in want):
        # a result dtype the kernels do not compute in (a cast to float16, say): refused, naming the primitive
        with pytest.raises(UnsupportedOnDeviceError, match=f"'{row.name}'"):
            row.apply(cfg, *on_device)
        return
    got = fl.tree.leaves(row.apply(cfg, *on_device))
    assert len(got) == len(want)
    if row.check is not None:  # results defined up to a choice (eigenvector signs): the row's own check
        assert all(isinstance(g, DeviceTensor) for g in got), row.name
        row.check(cfg, args, [g.cpu() for g in got])
        return
    rtol, atol = tolerance(dtype, 4 * row.tol)
    for g, w in zip(got, want):
        assert isinstance(g, DeviceTensor) and g.device == "cuda:0", f"{row.name}: result on {g.device}"
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_allclose(g.to_device("cpu").numpy(), w.numpy(), rtol=rtol, atol=atol, err_msg=row.name)


def test_transfers_round_trip_every_dtype_and_stay_put_until_asked():
    for d in [D.bool_, D.int8, D.uint16, D.int32, D.int64, D.uint64, D.float16, D.bfloat16, D.float32, D.float64,
              D.complex64]:
        a = (np.arange(6).reshape(2, 3) % 3).astype(d)
        x = fl.asarray(a)
        g = x.to_device("cuda:0")
        assert isinstance(g, DeviceTensor) and g.device == "cuda:0" and g.dtype == x.dtype and g.shape == (2, 3)
        assert g.to_device("cuda") is g and x.to_device("cpu") is x
        back = g.to_device("cpu")
        assert type(back) is fl.Tensor and back.device == "cpu"
        np.testing.assert_array_equal(back.numpy(), a)
    g = fl.arange(6.0).reshape(2, 3).cuda()
    assert g.cpu().device == "cpu" and g.to("cpu").device == "cpu" and g.to(fl.float64).device == "cuda:0"
    assert g.to("cuda", fl.float64).dtype == fl.float64
    assert float(g.sum()) == 15.0 and g.sum().item() == 15.0 and g.tolist()[1] == [3, 4, 5]
    assert "device='cuda:0'" in repr(g)
    assert fl.devices()[:2] == ["cpu", "cuda:0"] == fl.__array_namespace_info__().devices()[:2]


def test_creation_on_device():
    for x in (fl.zeros((2, 3), device="cuda"), fl.ones(3, device="cuda:0"), fl.full((2,), 7, device="cuda"),
              fl.arange(5, device="cuda"), fl.linspace(0, 1, 4, device="cuda"), fl.eye(3, device="cuda"),
              fl.asarray([1.0, 2.0], device="cuda"), fl.tensor([1, 2], device="cuda"), fl.empty(2, device="cuda")):
        assert x.device == "cuda:0", x
    g = fl.ones((2, 2), device="cuda")
    for like in (fl.zeros_like(g), fl.ones_like(g), fl.full_like(g, 3.0), fl.empty_like(g), fl.astype(g, fl.int32)):
        assert like.device == "cuda:0"  # the Array API's rule: *_like follow their argument
    assert fl.zeros_like(g, device="cpu").device == "cpu"
    np.testing.assert_array_equal(fl.arange(5, device="cuda").to_device("cpu").numpy(), np.arange(5))


def test_mixed_devices_raise_naming_both_and_the_fix():
    g, c = fl.ones((2, 3), device="cuda"), fl.ones((2, 3))
    for f in (lambda: g + c, lambda: c * g, lambda: fl.concat([c, g]), lambda: g @ c.T):
        with pytest.raises(DeviceMismatchError, match=r"cuda:0.*cpu|cpu.*cuda:0") as e:
            f()
        assert "to_device('cuda:0')" in str(e.value)
    # Python numbers and 0-d CPU values are arguments, not arrays: they join any device
    assert (g * 2 + fl.asarray(1.0)).device == "cuda:0"


def test_nothing_reaches_the_host_unasked():
    g = fl.ones((2, 3), device="cuda")
    for f in (lambda: np.asarray(g), lambda: g.numpy(), lambda: np.add(g._value, 1)):
        with pytest.raises(HostTransferError, match=r"to_device\('cpu'\)"):
            f()
    with pytest.raises((BufferError, RuntimeError), match="device"):  # NumPy reads host memory only
        np.from_dlpack(g)


def test_device_names_and_missing_devices_are_explained(monkeypatch):
    x = fl.ones(2)
    with pytest.raises(ValueError, match="'cpu', 'cuda' or 'cuda:N'"):
        x.to_device("tpu")
    with pytest.raises(CudaUnavailableError, match="'cuda:5' does not exist"):
        x.to_device("cuda:5")
    from funclib.kernels import cuda_backend

    monkeypatch.setattr(cuda_backend.runtime(), "device_count", lambda: 0)
    with pytest.raises(CudaUnavailableError, match="no CUDA device is visible"):
        x.to_device("cuda")


def test_without_the_extra_the_error_names_the_install(monkeypatch):
    import sys

    from funclib.kernels import cuda_backend

    monkeypatch.setattr(cuda_backend, "_runtime", None)
    monkeypatch.setitem(sys.modules, "numba.cuda", None)  # as if numba-cuda were not installed
    with pytest.raises(CudaUnavailableError, match=r"pip install funclib\[cuda\]"):
        fl.ones(2).to_device("cuda")


def test_scatters_fold_repeated_indices_in_order_and_refuse_bad_ones():
    x = np.array([[1.0, 2.0], [3.0, np.nan], [5.0, 6.0]], np.float32)
    idx = np.array([2, 0, 2, -1], np.int64)
    upd = np.array([[7.0, -1.0], [0.5, 4.0], [8.0, 9.0], [-2.0, 1.0]], np.float32)
    g = fl.asarray(x).cuda()
    for op in ("set", "multiply", "max", "min", "add"):
        want = getattr(fl.asarray(x).at[idx], op)(fl.asarray(upd))
        got = getattr(g.at[fl.asarray(idx).cuda()], op)(fl.asarray(upd).cuda())
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy(), err_msg=op)
    with pytest.raises(IndexError, match="scatter_max: index out of bounds"):
        g.at[fl.asarray([3]).cuda()].max(fl.ones((1, 2), device="cuda"))
    ids = fl.asarray([1, 1, 0, 5]).cuda()  # 5 is dropped
    data = fl.asarray(upd).cuda()
    for f in (fl.segment_sum, fl.segment_max, fl.segment_min):
        got = f(data, ids, num_segments=3).cpu().numpy()
        want = f(fl.asarray(upd), fl.asarray([1, 1, 0, 5]), num_segments=3).numpy()
        np.testing.assert_array_equal(got, want)


def test_unsupported_primitive_is_named():
    with pytest.raises(UnsupportedOnDeviceError, match="'eig' on the device takes float32.*got float16.*cuda:0"):
        fnp.linalg.eig(fl.ones((2, 2), dtype=fl.float16, device="cuda"))
    with pytest.raises(UnsupportedOnDeviceError, match="'svd' on the device takes float32.*got int32"):
        fl.core.PRIMITIVES["svd"].bind(fl.zeros((2, 2), dtype=fl.int32, device="cuda"), full_matrices=False,
                                       compute_uv=True)


def test_float32_sin_cos_are_accurate_over_the_whole_range():
    rng = np.random.default_rng(0)
    v = np.concatenate([
        np.array([0, -0.0, 1, -2.5, np.pi, 1.5707964, 127.9, 128.0, 1e10, 3e38, -2e20], np.float32),
        rng.uniform(-128, 128, 24).astype(np.float32), rng.uniform(-1e6, 1e6, 24).astype(np.float32),
        (10.0 ** rng.uniform(5, 38, 24)).astype(np.float32),
    ])
    g = fl.asarray(v).to_device("cuda")
    for f, ref in ((fl.sin, np.sin), (fl.cos, np.cos)):
        got = f(g).to_device("cpu").numpy()
        want = ref(v.astype(np.float64))
        ulps = np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32))
        assert ulps.max() <= 2, (f.__name__, v[np.argmax(ulps)], ulps.max())
    assert np.isnan(fl.sin(fl.asarray([np.inf, np.nan]).cuda()).cpu().numpy()).all()


def test_transforms_on_device_match_the_cpu():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    xs = rng.normal(size=(5, 4)).astype(np.float32)

    def f(w, x):
        return fl.sum(fl.tanh(x @ w) ** 2) + fl.max(fl.exp(-w))

    for transform in (fl.grad(f), fl.jit(f), fl.jit(fl.grad(f)), fl.vmap(fl.grad(f), in_axes=(None, 0))):
        cpu = transform(fl.asarray(w), fl.asarray(xs))
        dev = transform(fl.asarray(w).cuda(), fl.asarray(xs).cuda())
        assert dev.device == "cuda:0"
        np.testing.assert_allclose(dev.cpu().numpy(), cpu.numpy(), rtol=2e-5, atol=2e-6)


def test_jit_of_a_function_closing_over_host_arrays_runs_on_device_operands():
    table = np.arange(6.0).reshape(2, 3)  # captured: a constant of the jitted program, made on the host
    f = fl.jit(lambda x: (x @ fl.asarray(table)).sum() + fl.linalg.slogdet(x)[1])
    x = fl.asarray([[4.0, 1.0], [1.0, 3.0]])
    got = f(x.cuda())
    assert got.device == "cuda:0"
    np.testing.assert_allclose(got.cpu().numpy(), f(x).numpy(), rtol=1e-12)


def test_gradients_through_the_factorizations_stay_on_the_device():
    # the rules' masks and identities follow the primal's device, also where they act on tangents
    rng = np.random.default_rng(8)
    s = rng.normal(size=(3, 3))
    a = fl.asarray(s @ s.T + 3 * np.eye(3))
    fns = {
        "slogdet": lambda a: fl.linalg.slogdet(a)[1],
        "cholesky": lambda a: fl.sum(fl.linalg.cholesky(a) ** 2),
        "eigh": lambda a: fl.sum(fl.linalg.eigh(a)[0] ** 2),
        "qr": lambda a: fl.sum(fl.linalg.qr(a)[1] ** 2),
        "svd": lambda a: fl.sum(fl.linalg.svdvals(a)),
        "solve_triangular": lambda a: fl.sum(fl.linalg.solve(a, fl.ones_like(a))),
    }
    for name, f in fns.items():
        g = fl.grad(f)(a.cuda())
        assert g.device == "cuda:0", name
        np.testing.assert_allclose(g.cpu().numpy(), fl.grad(f)(a).numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


def test_gradient_of_a_jitted_factorization_runs_on_the_device():
    # the transpose of a jit call is a derived jaxpr: its constants (the rule's masks) move to the device, and an
    # index helper traced into it (iota) runs there
    rng = np.random.default_rng(9)
    s = rng.normal(size=(3, 3))
    a = fl.asarray(s @ s.T + 3 * np.eye(3))

    def f(a):
        return fl.sum(fl.linalg.cholesky(a) ** 2)

    g = fl.grad(fl.jit(f))(a.cuda())
    assert g.device == "cuda:0"
    np.testing.assert_allclose(g.cpu().numpy(), fl.grad(f)(a).numpy(), rtol=1e-9, atol=1e-12)


def test_a_few_training_steps_of_an_mlp_match_the_cpu(tmp_path):
    import funclib.nn as nn
    import funclib.nn.functional as F
    import funclib.optim as optim

    rng = np.random.default_rng(0)
    x = fl.asarray(rng.normal(size=(6, 8)).astype(np.float32))
    y = fl.asarray(rng.integers(0, 4, 6))

    def run(device):
        model = nn.Sequential(nn.Linear(8, 8, key=fl.random.key(1)), nn.ReLU(), nn.Linear(8, 4, key=fl.random.key(2)))
        model.to(device)
        opt = optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(2):
            loss, grads = nn.value_and_grad(model, lambda m, a, b: F.cross_entropy(m(a), b))(
                model, x.to_device(device), y.to_device(device))
            opt.update(model, grads)
            losses.append(float(loss))
        return losses, model

    (lc, mc), (lg, mg) = run("cpu"), run("cuda")
    assert mg[0].weight.device == "cuda:0"
    np.testing.assert_allclose(lg, lc, rtol=1e-5)
    np.testing.assert_allclose(mg[2].weight.cpu().numpy(), mc[2].weight.numpy(), rtol=1e-4, atol=1e-6)
    fl.save(mg.state_dict(), tmp_path / "m.safetensors")  # saving is the transfer to the host
    loaded = fl.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(loaded["2.weight"].numpy(), mg[2].weight.cpu().numpy())


def test_every_kernel_kind_compiles_to_sm90_ptx_without_float64_in_float32_kernels():
    # a separate process: PTX needs numba-cuda's compiler, which the simulator (on in this process) replaces
    import subprocess
    import sys

    code = (
        "from funclib.kernels import cuda_ops, cuda_prims\n"
        "from numba import cuda\n"
        "cat = cuda_prims.kernel_catalog()\n"
        "ptx = cuda_prims.compile_catalog((9, 0))\n"
        "assert set(ptx) == {c[0] for c in cat}\n"
        "assert {'eig:float32', 'eig:complex64'} <= set(ptx)  # real and complex inputs, float32 kernels\n"
        "assert all('.target sm_90' in p for p in ptx.values())\n"
        "bad = [c[0] for c in cat if c[3] and '.f64' in ptx[c[0]]]\n"
        "assert not bad, bad\n"
        "assert any('.f64' in ptx[c[0]] for c in cat if not c[3])  # the check sees float64 where it is meant\n"
        # a float literal in a float32 kernel leaks float64: the check catches it
        "leak = cuda_ops.strided_source(1, ['flat'], '({0} * 0.1)')\n"
        "ns = {}; exec(leak, ns)\n"
        "p, _ = cuda.compile_ptx(ns['kernel'], 'void(float32[::1], float32[::1], int64, int64)', cc=(9, 0))\n"
        "assert '.f64' in p\n"
        "print(len(ptx))\n"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) >= 50


def test_sort_is_stable_with_nan_last_and_differentiable():
    v = np.array([[3, np.nan, -0.0, 1, 0.0, 1, -np.inf, np.nan, 2], [5, 4, 3, 2, 1, 0, -1, -2, -3]], np.float32)
    x, g = fl.asarray(v), fl.asarray(v).cuda()
    for axis in (0, 1):
        np.testing.assert_array_equal(fl.sort(g, axis=axis).cpu().numpy(), fl.sort(x, axis=axis).numpy())
        np.testing.assert_array_equal(fl.argsort(g, axis=axis).cpu().numpy(), fl.argsort(x, axis=axis).numpy())
    # -0 before +0 as they came: the sort is stable
    np.testing.assert_array_equal(np.signbit(fl.sort(g, axis=1).cpu().numpy()), np.signbit(fl.sort(x, axis=1).numpy()))
    grad = fl.grad(lambda x: (fl.sort(x, axis=1)[:, :3] ** 2).sum())
    np.testing.assert_allclose(grad(g[1:]).cpu().numpy(), grad(x[1:]).numpy())


def _assert_largest_component_real(v, eps):
    """Each column's component of largest modulus is real and positive (of components tied to rounding, one)."""
    m = np.abs(v) ** 2
    top = m >= m.max(axis=-2, keepdims=True) - 8 * eps
    assert ((top & (v.imag == 0) & (v.real > 0)).any(axis=-2)).all()


def _check_eig_on_device(a, w, v):
    """``eig``'s outputs against LAPACK's: eigenvalues as a multiset, ``a v = v w``, unit columns whose
    largest component is real and positive, and for real ``a``, real vectors for real eigenvalues and conjugate
    pairs adjacent (positive imaginary part first) as exact conjugates."""
    c = np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128
    assert w.dtype == c and v.dtype == c and w.shape == a.shape[:-1] and v.shape == a.shape
    eps = np.finfo(c).eps
    a64, w, v = a.astype(np.complex128), w.astype(np.complex128), v.astype(np.complex128)
    scale = np.abs(a64).max(axis=(-2, -1), keepdims=True) + 1
    want = np.linalg.eig(a64)[0]
    for b in np.ndindex(a.shape[:-2]):  # as multisets: each eigenvalue matched to its nearest unused one
        left = list(want[b])
        for x in w[b]:
            j = int(np.argmin(np.abs(np.array(left) - x)))
            assert abs(left.pop(j) - x) <= 1e3 * eps * scale[b].item(), (w[b], want[b])
    np.testing.assert_allclose(a64 @ v - v * w[..., None, :], 0, atol=50 * eps * scale.max(initial=1))
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, rtol=20 * eps)
    _assert_largest_component_real(v, eps)
    if a.dtype.kind == "f":
        for b in np.ndindex(a.shape[:-2]):
            i = 0
            while i < a.shape[-1]:
                if w[b][i].imag == 0:
                    assert (v[b][:, i].imag == 0).all()
                    i += 1
                else:
                    assert w[b][i].imag > 0 and w[b][i + 1] == np.conj(w[b][i]), w[b]
                    np.testing.assert_array_equal(v[b][:, i + 1], np.conj(v[b][:, i]))
                    i += 2


def test_eig_on_the_device_matches_lapack():
    rng = np.random.default_rng(17)
    rot = np.array([[1.0, -2.0, 0.5], [2.0, 1.0, 0.0], [0.0, 0.3, 5.0]])  # eigenvalues near 1 +- 2i and 5
    cases = [
        rng.normal(size=(3, 4, 4)),  # a batch, real, with complex pairs
        rot.astype(np.float32),
        (rng.normal(size=(2, 3, 3)) + 1j * rng.normal(size=(2, 3, 3))).astype(np.complex64),
        rng.normal(size=(5, 5)) + 1j * rng.normal(size=(5, 5)),
        np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.0, 2.0]]),  # one Jordan block: defective
        np.eye(3, dtype=np.float32), np.zeros((2, 2)), np.array([[3.0]]), np.zeros((0, 2, 2)),
    ]
    for a in cases:
        w, v = fnp.linalg.eig(fl.asarray(a).cuda())
        assert w.device == v.device == "cuda:0"
        _check_eig_on_device(a, w.cpu().numpy(), v.cpu().numpy())
    # LAPACK's order where the deflations agree: complex inputs here, and triangular matrices, which balancing
    # permutes (a lower triangular one comes out in reverse)
    for a in (cases[2], cases[3], np.triu(rng.normal(size=(4, 4))), np.tril(rng.normal(size=(4, 4)))):
        np.testing.assert_allclose(fnp.linalg.eigvals(fl.asarray(a).cuda()).cpu().numpy(), np.linalg.eigvals(a),
                                   rtol=1e-5, atol=1e-5)
    # a badly scaled matrix: balancing keeps the eigenvalues accurate to the matrix's balanced scale
    d = np.diag([1e-6, 1.0, 1e6])
    a = d @ rng.normal(size=(3, 3)) @ np.linalg.inv(d)
    np.testing.assert_allclose(np.sort_complex(fnp.linalg.eigvals(fl.asarray(a).cuda()).cpu().numpy()),
                               np.sort_complex(np.linalg.eigvals(a)), rtol=1e-12)


@st.composite
def _eig_inputs(draw):
    n = draw(st.integers(1, 4))
    batch = draw(st.sampled_from([(), (2,)]))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.complex64, np.complex128]))
    # small integers make zeros, repeated and defective eigenvalues and reducible matrices; floats the rest, of
    # magnitudes within a few powers of two: with entries far apart (1 and 1e-40, say) balancing makes the
    # backward error small in the balanced norm only, and LAPACK's residual is then O(1) too
    magnitude = st.floats(0.125, 3.0, width=32)
    entry = st.one_of(st.sampled_from([0.0, 0.0, 1.0, -1.0, 2.0]), magnitude, magnitude.map(lambda x: -x))
    size = int(np.prod(batch + (n, n)))
    a = np.array(draw(st.lists(entry, min_size=size, max_size=size)), np.float64).reshape(batch + (n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * np.array(draw(st.lists(entry, min_size=size, max_size=size))).reshape(a.shape)
    return a.astype(dtype)


@settings(suppress_health_check=list(HealthCheck))
@given(a=_eig_inputs())
def test_eig_on_the_device_is_backward_stable_and_normalized_as_lapack(a):
    w, v = (o.cpu().numpy() for o in fnp.linalg.eig(fl.asarray(a).cuda()))
    eps = np.finfo(w.dtype).eps
    scale = np.abs(a).max(initial=0) + 1
    assert np.isfinite(w).all() and np.isfinite(v).all()
    a64, w64, v64 = a.astype(np.complex128), w.astype(np.complex128), v.astype(np.complex128)
    np.testing.assert_allclose(a64 @ v64 - v64 * w64[..., None, :], 0, atol=100 * eps * scale)
    np.testing.assert_allclose(np.linalg.norm(v64, axis=-2), 1, rtol=20 * eps)
    _assert_largest_component_real(v64, eps)
    # the eigenvalues of a defective matrix move by eps^(1/n): as multisets, to that accuracy
    n = a.shape[-1]
    want = np.linalg.eigvals(a64)
    for b in np.ndindex(a.shape[:-2]):
        left = list(want[b])
        for x in w64[b]:
            j = int(np.argmin(np.abs(np.array(left) - x)))
            assert abs(left.pop(j) - x) <= 10 * eps ** (1 / n) * scale, (a[b], w[b], want[b])
    if a.dtype.kind == "f":
        assert (np.sort_complex(w.ravel()) == np.sort_complex(np.conj(w).ravel())).all()


def test_eig_of_defective_matrices_is_finite_and_accurate_where_it_can_be():
    # (x - 1)^4's companion matrix: the eigenvalue 1 splits by eps^(1/4) as on the CPU, into conjugate pairs
    comp = np.zeros((4, 4))
    comp[1:, :3] = np.eye(3)
    comp[:, 3] = [-1.0, 4.0, -6.0, 4.0]
    for a in (comp, comp.astype(np.float32), np.array([[1.0, 1.0], [0.0, 1.0]]) + 0j, np.ones((3, 3))):
        w, v = (o.cpu().numpy() for o in fnp.linalg.eig(fl.asarray(a).cuda()))
        assert np.isfinite(w).all() and np.isfinite(v).all(), a
        eps = np.finfo(w.dtype).eps
        np.testing.assert_allclose(a @ v - v * w[..., None, :], 0, atol=50 * eps * (np.abs(a).max() + 1))
        np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, rtol=20 * eps)
        if a is comp:
            np.testing.assert_allclose(w, 1, atol=1e-3)


def test_eig_failures_raise_as_on_the_cpu(monkeypatch):
    from funclib.kernels import cuda_eig

    bad = fl.asarray([[1.0, np.nan], [0.0, 2.0]])
    with pytest.raises(np.linalg.LinAlgError):
        fnp.linalg.eig(bad)
    with pytest.raises(np.linalg.LinAlgError, match="eig: .*NaN or inf"):
        fnp.linalg.eig(bad.cuda())
    monkeypatch.setattr(cuda_eig, "ITERATIONS", 0)  # no QR step allowed: a matrix that needs one fails
    with pytest.raises(np.linalg.LinAlgError, match="eig: the QR iteration did not converge"):
        fnp.linalg.eig(fl.asarray([[0.0, 1.0], [1.0, 0.0]]).cuda())
    w, _ = fnp.linalg.eig(fl.asarray([[1.0, 2.0], [0.0, 3.0]]).cuda())  # triangular: no step needed
    np.testing.assert_array_equal(w.cpu().numpy(), [1, 3])


def test_eig_on_the_device_under_jit_and_vmap():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(2, 3, 3)).astype(np.float32)

    def f(x):
        return fl.sum(fl.abs(fnp.linalg.eigvals(x)), axis=-1)

    want = np.abs(np.linalg.eigvals(a)).sum(-1)
    for t in (fl.jit(f), fl.vmap(f), fl.jit(fl.vmap(f))):
        got = t(fl.asarray(a).cuda())
        assert got.device == "cuda:0"
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5)


def test_gradient_of_eig_on_the_device_matches_the_cpu():
    a = fl.asarray(np.array([[1.0, -2.0, 0.5], [2.0, 1.0, 0.0], [0.0, 0.3, 5.0]]))

    def f(x):
        return fl.sum(fl.real(fnp.linalg.eigvals(x)) ** 2)

    g = fl.grad(f)(a.cuda())
    assert g.device == "cuda:0"
    np.testing.assert_allclose(g.cpu().numpy(), fl.grad(f)(a).numpy(), rtol=1e-9, atol=1e-12)


def test_random_bits_are_bit_identical_to_the_cpu():
    k = fl.random.key(7)
    g = k.cuda()
    pairs = [
        (fl.random.split(k, 3), fl.random.split(g, 3)),
        (fl.random.bits(k, (5,)), fl.random.bits(g, (5,))),
        (fl.random.uniform(k, (3, 3)), fl.random.uniform(g, (3, 3))),
        (fl.random.uniform(k, (4,), dtype=fl.float64), fl.random.uniform(g, (4,), dtype=fl.float64)),
    ]
    for cpu, dev in pairs:
        assert dev.device == "cuda:0"
        np.testing.assert_array_equal(dev.cpu().numpy(), cpu.numpy())


def test_rejection_samplers_take_the_cpus_stream_and_branches():
    k = fl.random.split(fl.random.key(11), 2)
    g = k.cuda()
    alpha = fl.asarray([[0.3, 1.0, 2.5, 40.0], [0.0, np.nan, 7.0, 1e-3]])
    lam = fl.asarray([[0.5, 3.0, 25.0, 400.0], [0.0, -1.0, 1.5, 12.0]])
    lo, hi = fl.asarray([[-1.0, 2.0, -40.0, 0.5]] * 2), fl.asarray([[1.0, 3.0, -39.0, 0.6]] * 2)
    bind = lambda name, *a, **kw: fl.core.PRIMITIVES[name].bind(*a, **kw)  # noqa: E731
    for name, args, kw in (("random_gamma", (alpha,), {}), ("random_poisson", (lam,), {"dtype": fl.int32}),
                           ("random_truncated_normal", (lo, hi), {})):
        want = bind(name, k, *args, **kw).numpy()
        got = bind(name, g, *[a.cuda() for a in args], **kw)
        assert got.device == "cuda:0" and got.dtype == want.dtype, name
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, err_msg=name)
    z = bind("random_gamma", k, alpha)
    np.testing.assert_allclose(bind("random_gamma_grad", alpha.cuda(), z.cuda()).cpu().numpy(),
                               bind("random_gamma_grad", alpha, z).numpy(), rtol=1e-12)
    np.testing.assert_allclose(fl.polygamma(3, alpha.cuda()[0]).cpu().numpy(), fl.polygamma(3, alpha[0]).numpy(),
                               rtol=1e-12)


def _pointer(x) -> int:
    return x.__cuda_array_interface__["data"][0] if hasattr(x, "__cuda_array_interface__") else \
        x.__array_interface__["data"][0]  # numba's simulated device arrays: host memory


def test_foreign_cuda_arrays_are_shared_not_copied():
    from numba import cuda

    src = cuda.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    for t in (fl.asarray(src), fl.from_dlpack(_Capsules(src))):
        assert isinstance(t, DeviceTensor) and t.device == "cuda:0" and t.shape == (2, 3) and t.dtype == fl.float32
        assert _pointer(t) == _pointer(src)
        src[0, 1] = 42.0  # a write through the producer is seen: one buffer
        np.testing.assert_array_equal((t * 1).cpu().numpy()[0], [0, 42, 2])
        src[0, 1] = 1.0
    snap = fl.asarray(src, copy=True)
    assert _pointer(snap) != _pointer(src)
    np.testing.assert_array_equal(fl.asarray(src, dtype=fl.float64).cpu().numpy(), src.copy_to_host())
    strided = cuda.to_device(np.zeros((4, 4), np.float32))[:, ::2]
    with pytest.raises(BufferError, match=r"asarray: .*C-contiguous.*\(4, 2\)"):
        fl.asarray(strided)


class _Capsules:
    """A DLPack producer of CUDA memory, as PyTorch's and CuPy's tensors are: capsules made by funclib's exporter."""

    def __init__(self, src):
        self.t = fl.asarray(src)
        self.taken = 0

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()

    def __dlpack__(self, **kw):
        self.taken += 1
        return self.t.__dlpack__(**kw)


def test_dlpack_export_shares_device_memory_and_round_trips():
    import gc

    from funclib.kernels import dlpack

    g = fl.arange(6.0, dtype=fl.float32).reshape(2, 3).cuda()
    assert g.__dlpack_device__() == (2, 0)
    cap = g.__dlpack__()
    info, release = dlpack.from_capsule(cap, (2, 0))
    assert info["data"][0] == _pointer(g) and info["shape"] == (2, 3) and info["typestr"] == "<f4"
    live = len(dlpack._live)
    release()  # the consumer's deleter frees funclib's hold on the buffer
    assert len(dlpack._live) == live - 1
    unconsumed = g.__dlpack__()
    assert len(dlpack._live) == live
    del unconsumed
    gc.collect()
    dlpack.sweep()
    assert len(dlpack._live) == live - 1  # a capsule dropped unconsumed frees its hold
    back = fl.from_dlpack(g)
    assert back is g
    copied = fl.from_dlpack(g, copy=True)
    assert _pointer(copied) != _pointer(g)
    np.testing.assert_array_equal(copied.cpu().numpy(), g.cpu().numpy())
    producer = _Capsules(cuda_array(np.arange(4, dtype=np.int32)))
    t = fl.from_dlpack(producer)
    assert producer.taken == 1 and _pointer(t) == _pointer(producer.t) and t.dtype == fl.int32
    with pytest.raises(BufferError, match=r"to_device\('cpu'\)"):
        g.__dlpack__(dl_device=(1, 0))
    assert g.__cuda_array_interface__["version"] == 3 and g.__cuda_array_interface__["shape"] == (2, 3)


def cuda_array(a):
    from numba import cuda

    return cuda.to_device(a)


def test_sparse_products_and_triangular_solves_match_the_cpu_in_every_variant():
    from funclib.core import PRIMITIVES

    rng = np.random.default_rng(3)
    vals = fl.asarray(rng.normal(size=5).astype(np.float32))
    rows, cols = fl.asarray([0, 2, 2, 1, 9]), fl.asarray([1, 0, 3, 3, 0])  # the last entry is padding
    indptr = fl.asarray([0, 1, 1, 3, 5])
    dense = fl.asarray(rng.normal(size=(4, 2)).astype(np.float32))
    spmm, sddmm = PRIMITIVES["spmm"], PRIMITIVES["sddmm"]
    for layout, idx0 in (("coo", rows), ("csr", indptr)):
        for transpose in (False, True):
            args = (vals, idx0, cols, dense)
            want = spmm.bind(*args, shape=(4, 4), layout=layout, transpose=transpose)
            got = spmm.bind(*[a.cuda() for a in args], shape=(4, 4), layout=layout, transpose=transpose)
            np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
        x, y = fl.asarray(rng.normal(size=(4, 3)).astype(np.float32)), fl.asarray(rng.normal(size=(4, 3)).astype(
            np.float32))
        want = sddmm.bind(x, y, idx0, cols, shape=(4, 4), layout=layout)
        got = sddmm.bind(x.cuda(), y.cuda(), idx0.cuda(), cols.cuda(), shape=(4, 4), layout=layout)
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    a = fl.asarray(rng.normal(size=(2, 3, 3)) + 4 * np.eye(3))
    b = fl.asarray(rng.normal(size=(2, 3, 2)))
    for left, lower, trans, unit in [(L, lo, t, u) for L in (True, False) for lo in (True, False)
                                     for t in (False, True) for u in (False, True)]:
        bb = b if left else fl.matrix_transpose(b)
        kw = dict(left_side=left, lower=lower, transpose_a=trans, conjugate_a=False, unit_diagonal=unit)
        want = PRIMITIVES["triangular_solve"].bind(a, bb, **kw)
        got = PRIMITIVES["triangular_solve"].bind(a.cuda(), bb.cuda(), **kw)
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-10, atol=1e-12, err_msg=str(kw))
    with pytest.raises(np.linalg.LinAlgError, match="cholesky: .*not positive definite"):
        fl.linalg.cholesky(-fl.eye(3, device="cuda"))


def check_svd(a, full, atol):
    """The device SVD of ``a`` against LAPACK's singular values, with orthonormal factors reproducing ``a``."""
    u, sv, vh = (o.cpu().numpy() for o in fl.linalg.svd(fl.asarray(a).cuda(), full_matrices=full))
    cu, cs, cvh = np.linalg.svd(a, full_matrices=full)
    assert (u.shape, sv.shape, vh.shape) == (cu.shape, cs.shape, cvh.shape)
    assert (u.dtype, sv.dtype, vh.dtype) == (cu.dtype, cs.dtype, cvh.dtype)
    np.testing.assert_allclose(sv, cs, atol=atol)
    k = sv.shape[-1]
    np.testing.assert_allclose((u[..., :k] * sv[..., None, :]) @ vh[..., :k, :], a, atol=atol)
    for f in (u, np.conj(np.swapaxes(vh, -1, -2))):
        eye = np.eye(f.shape[-1])
        np.testing.assert_allclose(np.conj(np.swapaxes(f, -1, -2)) @ f, np.broadcast_to(eye, f.shape[:-2] +
                                   eye.shape), atol=atol)
    np.testing.assert_allclose(fl.linalg.svdvals(fl.asarray(a).cuda()).cpu().numpy(), cs, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_svd_of_rank_deficient_and_zero_matrices_is_orthonormal_and_exact(dtype):
    rng = np.random.default_rng(11)

    def normal(*shape):
        return rng.normal(size=shape) + (1j * rng.normal(size=shape) if np.dtype(dtype).kind == "c" else 0)

    low = normal(4, 1) @ normal(1, 3)
    two = normal(3, 2) @ normal(2, 5)
    dup = normal(4, 3)
    dup[:, 2] = dup[:, 0]  # exactly dependent columns
    atol = 1e-5 if np.finfo(dtype).bits == 32 else 1e-12
    for a in (np.zeros((3, 3)), np.zeros((2, 4)), low, two, dup, np.stack([low, np.zeros((4, 3))]), normal(3, 2)):
        for full in (False, True):
            check_svd(a.astype(dtype), full, atol * max(1.0, np.abs(a).max()))


def test_factorizations_match_lapack_in_every_shape():
    rng = np.random.default_rng(5)
    for shape in ((3, 3), (2, 4, 3), (3, 4)):
        a = rng.normal(size=shape)
        g = fl.asarray(a).cuda()
        for full in (False, True):
            (q, r), (cq, cr) = fl.linalg.qr(g, mode="complete" if full else "reduced"), np.linalg.qr(
                a, mode="complete" if full else "reduced")
            np.testing.assert_allclose(q.cpu().numpy(), cq, atol=1e-12)  # LAPACK's signs, not just any QR
            np.testing.assert_allclose(r.cpu().numpy(), cr, atol=1e-12)
        lu, piv, perm = (o.cpu().numpy() for o in fl.tree.leaves(fl.core.PRIMITIVES["lu"].bind(g)))
        clu, cpiv, cperm = (o.numpy() for o in fl.tree.leaves(fl.core.PRIMITIVES["lu"].bind(fl.asarray(a))))
        np.testing.assert_allclose(lu, clu, atol=1e-12)
        np.testing.assert_array_equal(piv, cpiv)
        np.testing.assert_array_equal(perm, cperm)
    s = rng.normal(size=(2, 4, 4))
    h = s + np.swapaxes(s, -1, -2) + np.diag([0.0, 3, 6, 9])
    for shape in ((4, 3), (3, 5), (2, 3, 3)):
        a = rng.normal(size=shape)
        for full in (False, True):
            u, sv, vh = fl.linalg.svd(fl.asarray(a).cuda(), full_matrices=full)
            u, sv, vh = u.cpu().numpy(), sv.cpu().numpy(), vh.cpu().numpy()
            cu, cs, cvh = np.linalg.svd(a, full_matrices=full)
            assert (u.shape, sv.shape, vh.shape) == (cu.shape, cs.shape, cvh.shape)
            np.testing.assert_allclose(sv, cs, atol=1e-12)
            k = sv.shape[-1]
            np.testing.assert_allclose((u[..., :k] * sv[..., None, :]) @ vh[..., :k, :], a, atol=1e-12)
            eye = np.eye(u.shape[-1])
            np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(eye, u.shape[:-2] + eye.shape),
                                       atol=1e-12)
    w, v = fl.linalg.eigh(fl.asarray(h).cuda())
    cw = np.linalg.eigvalsh(h)
    np.testing.assert_allclose(w.cpu().numpy(), cw, atol=1e-12)
    v = v.cpu().numpy()
    np.testing.assert_allclose(h @ v, v * w.cpu().numpy()[..., None, :], atol=1e-11)


def test_traced_values_report_their_device():
    # a function that makes a constant where its argument lives works under every transform
    x = fl.asarray(np.arange(9.0).reshape(3, 3)).cuda()
    seen = []

    def f(x):
        seen.append(x.device)
        return fl.sum(x @ fl.eye(3, device=x.device) * x)

    want = fl.grad(f)(x.cpu()).numpy()
    seen.clear()
    for t in (fl.grad(f), fl.jit(fl.grad(f)), fl.grad(fl.jit(f))):
        np.testing.assert_allclose(t(x).cpu().numpy(), want)
    rows = fl.vmap(lambda r: fl.sum(r * fl.ones(3, device=r.device)))(x)
    np.testing.assert_allclose(rows.cpu().numpy(), [3.0, 12.0, 21.0])
    assert seen and set(seen) == {"cuda:0"}
