"""funclib.numpy against NumPy: the cost of NumPy's signatures over funclib (dispatch on small arrays, with
``fl.*`` alongside) and of the functions built here from funclib operations (statistics, convolution, padding,
interpolation) on float64 arrays, eagerly and, where shapes are static, under ``fl.jit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._harness import Case, allclose


def _dispatch() -> dict[str, Callable[[], Any]]:
    import funclib as fl
    import funclib.numpy as fnp

    x = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    t = fl.asarray(x)
    return {"funclib": lambda: fnp.sin(t), "fl": lambda: fl.sin(t), "numpy": lambda: np.sin(x)}


def _reduction() -> dict[str, Callable[[], Any]]:
    import funclib as fl
    import funclib.numpy as fnp

    x = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    t = fl.asarray(x)
    return {"funclib": lambda: fnp.sum(t, 0), "fl": lambda: fl.sum(t, axis=0), "numpy": lambda: np.sum(x, 0)}


def _big(fn_fnp, fn_np, shape=(1000, 100), jit=True) -> Callable[[], dict[str, Callable[[], Any]]]:
    def setup():
        import funclib as fl

        x = np.random.default_rng(0).standard_normal(shape)
        t = fl.asarray(x)
        variants = {"funclib": lambda: fn_fnp(t), "numpy": lambda: fn_np(x)}
        if jit:
            jitted = fl.jit(fn_fnp)
            variants["funclib jit"] = lambda: jitted(t)
        return variants

    return setup


def cases() -> list[Case]:
    import funclib.numpy as fnp

    check = allclose(rtol=1e-9, atol=1e-9)
    return [
        Case("sin f32[16] (dispatch)", _dispatch, calls=2000, rounds=15, check=allclose(rtol=2e-6, atol=1e-6)),
        Case("sum f32[16], axis 0 (dispatch)", _reduction, calls=2000, rounds=15, check=allclose(rtol=2e-6,
                                                                                                 atol=1e-6)),
        Case("var ddof=1 f64[1000,100] axis 0", _big(lambda x: fnp.var(x, 0, ddof=1), lambda x: np.var(x, 0, ddof=1)),
             calls=20, rounds=11, check=check),
        Case("median f64[1000,100] axis 0", _big(lambda x: fnp.median(x, 0), lambda x: np.median(x, 0)),
             calls=10, rounds=11, check=check),
        Case("percentile [5,50,95] f64[1000,100] axis 0",
             _big(lambda x: fnp.percentile(x, [5, 50, 95], 0), lambda x: np.percentile(x, [5, 50, 95], 0)),
             calls=10, rounds=11, check=check),
        Case("convolve f64[10000] * f64[31]",
             _big(lambda x: fnp.convolve(x, x[:31]), lambda x: np.convolve(x, x[:31]), shape=(10000,)),
             calls=10, rounds=11, check=check),
        Case("pad reflect f64[512,512] by 16",
             _big(lambda x: fnp.pad(x, 16, mode="reflect"), lambda x: np.pad(x, 16, mode="reflect"),
                  shape=(512, 512)), calls=10, rounds=11, check=check),
        Case("interp 1e5 points on 1e3 knots",
             _big(lambda x: fnp.interp(x, fnp.linspace(-4.0, 4.0, 1000, dtype=fnp.float64),
                                       fnp.sin(fnp.linspace(-4.0, 4.0, 1000, dtype=fnp.float64))),
                  lambda x: np.interp(x, np.linspace(-4, 4, 1000), np.sin(np.linspace(-4, 4, 1000))),
                  shape=(100_000,), jit=False), calls=10, rounds=11, check=check),
    ]
