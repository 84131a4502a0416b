"""The matrix product of the generated kernels: funclib's AVX-512 float32 product (``kernels/_gemm.c``) against a
float64 NumPy reference over the shapes that cross its blocking (row panels of 6, column panels of 64, k blocks of
up to 320, row blocks of 96, column blocks of 1024), every operand layout, threads, and the choice between it and
BLAS that is written into generated kernels."""

import json
import os
import subprocess
import sys
import threading

import numba
import numpy as np
import pytest
from funclib.kernels import gemm

import funclib as fl

needs_avx512 = pytest.mark.skipif(
    gemm._ext is None, reason="the AVX-512 product was not built, or this CPU does not run AVX-512"
)


@numba.njit
def _call(a, b, out):
    gemm.gemm_avx512(a, b, out)


def _direct(a, b, out):
    """The Python entry of the C product, which takes any element strides (the numba entry takes C- or F-ordered
    operands)."""
    gemm._ext.sgemm(a, b, out)


def _check(a, b, out=None, call=_call):
    if out is None:
        out = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)
    call(a, b, out)
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    tol = 4 * np.finfo(np.float32).eps * (a.shape[1] + 1) * scale
    np.testing.assert_array_less(np.abs(out - want), tol + 1e-30)
    return out


SHAPES = [(1, 1, 1), (5, 17, 3), (6, 64, 320), (7, 65, 321), (97, 130, 700), (13, 1030, 5), (200, 48, 1300)]


@needs_avx512
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_product_matches_float64(m, n, k, layout):
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((k, m) if layout[0] == "t" else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if layout[1] == "t" else (k, n), dtype=np.float32)
    _check(a.T if layout[0] == "t" else a, b.T if layout[1] == "t" else b)


@needs_avx512
def test_strided_operands_an_output_inside_a_larger_array_and_empty_sums():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 90), dtype=np.float32)[::2, ::3]
    b = rng.standard_normal((60, 70), dtype=np.float32)[::-2, 1::2]
    big = np.full((20, 50), 7.0, np.float32)
    _check(a, b, big[:, 5:40], call=_direct)
    assert (big[:, :5] == 7).all() and (big[:, 40:] == 7).all()  # nothing written outside the output
    out = np.full((3, 4), np.nan, np.float32)
    _direct(np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), out)
    assert (out == 0).all()


@needs_avx512
def test_special_values_propagate_as_in_blas():
    a = np.ones((8, 8), np.float32)
    b = np.ones((8, 40), np.float32)
    a[2, 3], b[5, 33] = np.inf, np.nan
    out = np.empty((8, 40), np.float32)
    _call(a, b, out)
    want = a @ b
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(out[np.isfinite(want)], want[np.isfinite(want)])


def test_float64_goes_to_blas():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((30, 20)), rng.standard_normal((20, 40))
    out = np.empty((30, 40))
    _call(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-13)


@needs_avx512
def test_threads_use_their_own_packing_buffers():
    rng = np.random.default_rng(3)
    pairs = [
        (rng.standard_normal((150, 400), dtype=np.float32), rng.standard_normal((400, 200), dtype=np.float32))
        for _ in range(4)
    ]
    errors = []

    def work(a, b):
        try:
            for _ in range(20):
                _check(a, b)
        except AssertionError as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=p) for p in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_choice(monkeypatch):
    assert gemm.choose("float64", 512, 512, 512) == "gemm"
    assert gemm.choose("float32", 1, 512, 512) == "gemm"  # a row vector: BLAS
    assert gemm.choose("float32", 512, 10, 512) == "gemm"  # one vector wide: BLAS
    monkeypatch.setenv("FUNCLIB_GEMM", "blas")
    assert gemm.choose("float32", 512, 512, 512) == "gemm"
    monkeypatch.setenv("FUNCLIB_GEMM", "avx512")
    assert gemm.choose("float32", 512, 512, 512) == ("gemm" if gemm._ext is None else "gemm_avx512")
    monkeypatch.setenv("FUNCLIB_GEMM", "fast")
    with pytest.raises(ValueError, match="FUNCLIB_GEMM='fast'.*'auto', 'blas' or 'avx512'"):
        gemm.choose("float32", 512, 512, 512)


def _mlp_grad(p, x):
    def loss(p):
        h = fl.relu(x @ p["W0"] + p["b0"])
        return fl.sum(fl.tanh(h @ p["W1"]))

    return fl.grad(loss)(p)


@needs_avx512
def test_jitted_program_under_either_product(monkeypatch):
    rng = np.random.default_rng(4)
    # values of at most WHOLE_PROGRAM_MAX_ELEMENTS, so that the program is one generated function
    p = {
        "W0": fl.asarray(rng.standard_normal((64, 64), dtype=np.float32) * 0.1),
        "b0": fl.asarray(np.zeros(64, np.float32)),
        "W1": fl.asarray(rng.standard_normal((64, 40), dtype=np.float32) * 0.1),
    }
    x = fl.asarray(rng.standard_normal((48, 64), dtype=np.float32))
    got = {}
    for mode in ("blas", "avx512"):
        monkeypatch.setenv("FUNCLIB_GEMM", mode)
        f = fl.jit(lambda p, x: _mlp_grad(p, x))  # a new function: a new program, generated under this choice
        low = f.lower(p, x)
        sources = "\n".join(low.kernels)
        assert ("gemm_avx512(" in sources) == (mode == "avx512"), mode
        got[mode] = f(p, x)
    for k in p:
        np.testing.assert_allclose(np.asarray(got["avx512"][k]), np.asarray(got["blas"][k]), rtol=2e-5, atol=1e-6)


_CACHED_SCRIPT = """
import json, numpy as np, funclib as fl
from funclib.kernels import diskcache
rng = np.random.default_rng(5)
w = fl.asarray(rng.standard_normal((64, 48), dtype=np.float32))
x = fl.asarray(rng.standard_normal((40, 64), dtype=np.float32))
f = fl.jit(lambda w, x: fl.tanh(x @ w) * 2.0 + 1.0)
out = np.asarray(f(w, x)).tolist()
stats = [k.stats for k in diskcache._loaded.values()]
print(json.dumps({"out": out, "avx512": "gemm_avx512(" in "".join(f.lower(w, x).kernels),
                  "hits": sum(sum(s.cache_hits.values()) for s in stats)}))
"""


@needs_avx512
def test_a_kernel_calling_the_product_loads_from_the_disk_cache(tmp_path):
    env = dict(os.environ, FUNCLIB_CACHE_DIR=str(tmp_path), FUNCLIB_GEMM="avx512", FUNCLIB_BACKGROUND_COMPILE="0")
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _CACHED_SCRIPT], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert runs[0]["avx512"] and runs[1]["avx512"]
    assert runs[1]["hits"] > 0  # the second process linked the cached machine code to the C product
    np.testing.assert_array_equal(runs[0]["out"], runs[1]["out"])
