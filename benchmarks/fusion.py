"""jit fusion: ``y = gelu(x) * sigmoid(x)`` then normalization over the last axis, float32 (1024, 1024).

Variants: ``fl.jit`` (the funclib row), funclib eager, NumPy, ``jax.jit`` and ``torch.compile`` when installed.
"""

from __future__ import annotations

import math

import numpy as np

from benchmarks._harness import Case, allclose, optional


def _numpy(x):
    from math import erf  # noqa: F401  (documentation: exact gelu uses erf)

    g = 0.5 * x * (1.0 + _np_erf(x / np.float32(math.sqrt(2.0))))
    y = g * (1.0 / (1.0 + np.exp(-x)))
    m = y.mean(axis=-1, keepdims=True)
    v = ((y - m) ** 2).mean(axis=-1, keepdims=True)
    return (y - m) / np.sqrt(v + np.float32(1e-5))


def _np_erf(x):
    from funclib.kernels.special import erf

    return erf(x)


def _f(fl):
    def f(x):
        y = fl.gelu(x) * fl.sigmoid(x)
        m = fl.mean(y, axis=-1, keepdims=True)
        v = fl.mean((y - m) * (y - m), axis=-1, keepdims=True)
        return (y - m) / fl.sqrt(v + 1e-5)

    return f


def _setup(which):
    import funclib as fl

    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    fx = fl.asarray(x)
    f = _f(fl)
    jf = fl.jit(f)
    variants = {"funclib": (lambda: jf(fx)) if which == "jit" else (lambda: f(fx)), "numpy": lambda: _numpy(x)}
    if which == "jit":
        variants["funclib eager"] = lambda: f(fx)
        jax = optional("jax")
        if jax is not None:
            import jax.numpy as jnp

            def jfun(v):
                y = jax.nn.gelu(v, approximate=False) * jax.nn.sigmoid(v)
                m = y.mean(-1, keepdims=True)
                var = ((y - m) ** 2).mean(-1, keepdims=True)
                return (y - m) / jnp.sqrt(var + 1e-5)

            jj = jax.jit(jfun)
            jx = jnp.asarray(x)
            variants["jax"] = lambda: jj(jx).block_until_ready()
        torch = optional("torch")
        if torch is not None:
            tx = torch.from_numpy(x)

            def tfun(v):
                y = torch.nn.functional.gelu(v) * torch.sigmoid(v)
                m = y.mean(-1, keepdim=True)
                var = ((y - m) ** 2).mean(-1, keepdim=True)
                return (y - m) / torch.sqrt(var + 1e-5)

            try:
                tc = torch.compile(tfun)
                tc(tx)
                variants["torch"] = lambda: tc(tx)
            except Exception:  # noqa: BLE001 - torch.compile needs a working C++ toolchain
                variants["torch"] = lambda: tfun(tx)
    return variants


def cases() -> list[Case]:
    return [
        Case(
            "fusion gelu*sigmoid+layernorm f32[1024,1024]",
            lambda: _setup("jit"),
            calls=5,
            rounds=15,
            check=allclose(rtol=1e-3, atol=1e-4),
        )
    ]
