"""Complex numbers on a CUDA device: every registry row with a complex dtype, run on the (simulated) device against
the CPU, and ``fft`` in all its variants against NumPy.

A row in ``UNSUPPORTED_COMPLEX`` must raise ``UnsupportedOnDeviceError`` naming its primitive (one that starts
running fails the test, so the list only shrinks)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from op_table import ROWS, as_tensors, draw_case, tolerance

import funclib as fl
from funclib import dtypes as D
from funclib.core import DeviceTensor
from funclib.errors import UnsupportedOnDeviceError

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="pip install funclib[cuda]"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]

UNSUPPORTED_COMPLEX = {
    # complex transcendental functions: no device kernel yet
    "exp2", "log", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "sqrt", "pow", "safe_mul", "safe_div",
    # kernels written for real numbers: atomics and folding scatters, col2im, the factorizations
    "scatter_add", "scatter", "scatter_mul", "conv_patches_transpose", "cholesky", "triangular_solve", "lu", "qr",
    "eigh", "eig", "svd", "fft",
}
# call primitives whose rows' bodies compute sin or cos: the error names the inner primitive
BODY_UNSUPPORTED = {"custom_jvp_call", "custom_vjp_call", "custom_lin", "cond", "scan", "debug_callback", "check",
                    "checkify", "checkpoint"}
COMPLEX_ROWS = [r for r in ROWS if D.complex64 in r.dtypes]


@pytest.mark.parametrize("row", COMPLEX_ROWS, ids=[r.name for r in COMPLEX_ROWS])
@settings(max_examples=1, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_complex_rows_on_the_device_match_the_cpu(row, data):
    cfg, args = draw_case(data.draw, row, D.complex64)
    xs = as_tensors(args)
    want = fl.tree.leaves(row.apply(cfg, *xs))
    on_device = [x.to_device("cuda") for x in xs]
    if row.name in UNSUPPORTED_COMPLEX | BODY_UNSUPPORTED:
        named = "'(sin|cos)'" if row.name in BODY_UNSUPPORTED else f"'{row.name}'"
        with pytest.raises(UnsupportedOnDeviceError, match=named):
            row.apply(cfg, *on_device)
        return
    got = fl.tree.leaves(row.apply(cfg, *on_device))
    assert len(got) == len(want)
    if row.check is not None:
        row.check(cfg, args, [g.cpu() for g in got])
        return
    rtol, atol = tolerance(D.complex64, 4 * row.tol)
    for g, w in zip(got, want):
        assert isinstance(g, DeviceTensor) and g.device == "cuda:0", f"{row.name}: result on {g.device}"
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_allclose(g.to_device("cpu").numpy(), w.numpy(), rtol=rtol, atol=atol, err_msg=row.name)
