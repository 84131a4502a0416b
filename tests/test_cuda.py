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
from funclib import dtypes as D
from funclib.core import DeviceTensor
from funclib.errors import DeviceMismatchError, UnsupportedOnDeviceError

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="pip install funclib[cuda]"),
]
SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
needs_device = pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is not None and len(fl.devices()) < 2, reason="no CUDA device visible"
)

# dtypes the device kernels compute in
DEVICE_DTYPES = frozenset(
    [D.bool_, D.int8, D.int16, D.int32, D.int64, D.uint8, D.uint16, D.uint32, D.uint64, D.float32, D.float64]
)

# primitives without a device implementation yet: each raises UnsupportedOnDeviceError naming it (a listed one
# that runs fails the test, so the list only shrinks)
UNSUPPORTED = {
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "conj", "cosh", "erf_inv", "imag", "lgamma",
    "polygamma", "real", "signbit", "sinh", "tan", "atan2", "complex", "copysign", "floor_divide", "nextafter",
    "rem", "shift_left", "shift_right",
    "argmax", "argmin", "cumsum", "gather", "scatter", "scatter_add", "scatter_max", "scatter_min", "scatter_mul",
    "dynamic_slice", "dynamic_update_slice", "sort", "segment_max", "segment_min", "segment_sum", "sddmm", "spmm",
    "conv_patches", "conv_patches_transpose", "fft", "cholesky", "eig", "eigh", "lu", "qr", "svd",
    "triangular_solve", "random_bits", "random_gamma", "random_gamma_grad", "random_normal", "random_poisson",
    "random_standard", "random_truncated_normal", "random_uniform", "threefry2x32",
    "debug_callback", "pure_callback", "cond", "scan", "while", "check", "checkify", "custom_linear_solve",
}
# rows that stop at another primitive: the one their error names
STOPS_AT = {"ppermute": "gather"}
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
    if row.name in UNSUPPORTED or row.name in STOPS_AT:
        named = STOPS_AT.get(row.name, row.name)
        with pytest.raises((UnsupportedOnDeviceError, DeviceMismatchError), match=f"'{named}'"):
            row.apply(cfg, *on_device)
        return
    if any(np.dtype(w.dtype) not in DEVICE_DTYPES for w in want):
        # a result dtype the kernels do not compute in (a cast to float16, say): refused, naming the primitive
        with pytest.raises(UnsupportedOnDeviceError, match=f"'{row.name}'"):
            row.apply(cfg, *on_device)
        return
    got = fl.tree.leaves(row.apply(cfg, *on_device))
    assert len(got) == len(want)
    rtol, atol = tolerance(dtype, 4 * row.tol)
    for g, w in zip(got, want):
        assert isinstance(g, DeviceTensor) and g.device == "cuda:0", f"{row.name}: result on {g.device}"
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_allclose(g.to_device("cpu").numpy(), w.numpy(), rtol=rtol, atol=atol, err_msg=row.name)
