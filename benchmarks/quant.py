"""Quantized matrix products at 512^3.

- ``int8 matmul -> int32``: ``fl.matmul(a, b, preferred_element_type=fl.int32)`` on int8 operands (the exact product,
  on the numba kernel) against NumPy's ``int32 @ int32`` (NumPy has no integer BLAS; its ``int8 @ int8`` wraps in
  int8, so int32 operands are the honest NumPy baseline) and, for scale, float32 BLAS.
- ``scaled float8 matmul``: ``fl.quantization.scaled_matmul`` on float8_e4m3fn operands with per-tensor scales
  against float32 BLAS of the same (dequantized) operands.
- ``weight-only int4 Linear``: ``nn.QuantizedLinear`` (int4, groups of 64) on a (64, 512) batch against the float32
  ``nn.Linear`` it was made from.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, allclose


def _int8_setup():
    import funclib as fl

    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (512, 512)).astype(np.int8)
    b = rng.integers(-128, 128, (512, 512)).astype(np.int8)
    fa, fb = fl.asarray(a), fl.asarray(b)
    a32, b32 = a.astype(np.int32), b.astype(np.int32)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    return {
        "funclib": lambda: fl.matmul(fa, fb, preferred_element_type=fl.int32),
        "numpy": lambda: a32 @ b32,
        "numpy float32 BLAS": lambda: af @ bf,
    }


def _fp8_setup():
    import funclib as fl

    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((512, 512)).astype(np.float32) for _ in range(2))
    qx = fl.quantization.quantize(fl.asarray(x), fl.float8_e4m3fn)
    qy = fl.quantization.quantize(fl.asarray(y), fl.float8_e4m3fn)
    dx, dy = qx.dequantize().numpy(), qy.dequantize().numpy()
    return {
        "funclib": lambda: fl.quantization.scaled_matmul(qx.values, qy.values, qx.scale, qy.scale),
        "numpy": lambda: dx @ dy,
    }


def _int4_linear_setup():
    import funclib.nn as nn

    import funclib as fl

    lin = nn.Linear(512, 512, key=fl.random.key(0))
    q = nn.QuantizedLinear.from_float(lin, fl.int4, group_size=64)
    x = fl.asarray(np.random.default_rng(2).standard_normal((64, 512)).astype(np.float32))
    w, b = q.dequantized_weight().numpy(), q.bias.numpy()
    xn = x.numpy()
    return {"funclib": lambda: q(x), "numpy": lambda: xn @ w.T + b, "funclib float Linear": lambda: lin(x)}


def cases():
    return [
        Case("int8 matmul -> int32 512^3", _int8_setup, calls=1, rounds=7, check=allclose(reference="numpy")),
        Case("scaled float8 matmul 512^3", _fp8_setup, calls=3, rounds=9, check=allclose(rtol=1e-5, atol=1e-3)),
        Case("weight-only int4 Linear (64x512 @ 512x512)", _int4_linear_setup, calls=10, rounds=9),
    ]
