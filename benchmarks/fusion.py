"""jit fusion: ``y = gelu(x) * sigmoid(x)`` then normalization over the last axis, float32 (1024, 1024).

Two forms of the same computation: the library's ``gelu`` (erf) and ``sigmoid`` (one fused logistic), and gelu's
tanh approximation times ``1 / (1 + exp(-x))`` written out by hand, which goes through ``tanh``, ``exp`` and a
division as a user's code would. Variants: ``fl.jit`` (the funclib row), funclib eager, NumPy, ``jax.jit`` and
``torch.compile`` when installed.
"""

from __future__ import annotations

import math

import numpy as np

from benchmarks._harness import Case, allclose, optional

_C = math.sqrt(2.0 / math.pi)


def _np_erf(x):
    from funclib.kernels.special import erf

    return erf(x)


def _np_layernorm(y):
    m = y.mean(axis=-1, keepdims=True)
    v = ((y - m) ** 2).mean(axis=-1, keepdims=True)
    return (y - m) / np.sqrt(v + np.float32(1e-5))


def _numpy_erf(x):
    g = 0.5 * x * (1.0 + _np_erf(x / np.float32(math.sqrt(2.0))))
    return _np_layernorm(g * (1.0 / (1.0 + np.exp(-x))))


def _numpy_tanh(x):
    g = np.float32(0.5) * x * (1 + np.tanh(np.float32(_C) * (x + np.float32(0.044715) * x**3)))
    return _np_layernorm(g * (1 / (1 + np.exp(-x))))


def _layernorm(lib, sqrt, y, keep):
    m = lib.mean(y, axis=-1, **{keep: True})
    v = lib.mean((y - m) * (y - m), axis=-1, **{keep: True})
    return (y - m) / sqrt(v + 1e-5)


def _gelu_erf(lib, v):
    return lib.nn.gelu(v, approximate=False) * lib.nn.sigmoid(v)


def _gelu_tanh(lib, v):
    return 0.5 * v * (1 + lib.tanh(_C * (v + 0.044715 * v**3))) * (1 / (1 + lib.exp(-v)))


def _setup(form):
    import funclib as fl

    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    fx = fl.asarray(x)

    if form == "erf":

        def f(v):
            return _layernorm(fl, fl.sqrt, fl.gelu(v) * fl.sigmoid(v), "keepdims")

    else:

        def f(v):
            return _layernorm(fl, fl.sqrt, _gelu_tanh(fl, v), "keepdims")

    jf = fl.jit(f)
    variants = {
        "funclib": lambda: jf(fx),
        "numpy": (lambda: _numpy_erf(x)) if form == "erf" else (lambda: _numpy_tanh(x)),
        "funclib eager": lambda: f(fx),
    }
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        def jfun(v):
            y = _gelu_erf(jax, v) if form == "erf" else _gelu_tanh(jnp, v)
            return _layernorm(jnp, jnp.sqrt, y, "keepdims")

        jj = jax.jit(jfun)
        jx = jnp.asarray(x)
        variants["jax"] = lambda: jj(jx).block_until_ready()
    torch = optional("torch")
    if torch is not None:
        tx = torch.from_numpy(x)

        def tfun(v):
            if form == "erf":
                y = torch.nn.functional.gelu(v) * torch.sigmoid(v)
            else:
                y = _gelu_tanh(torch, v)
            return _layernorm(torch, torch.sqrt, y, "keepdim")

        try:
            tc = torch.compile(tfun)
            tc(tx)
            variants["torch"] = lambda: tc(tx)
        except Exception:  # noqa: BLE001 - torch.compile needs a working C++ toolchain
            variants["torch"] = lambda: tfun(tx)
    return variants


def cases() -> list[Case]:
    check = allclose(rtol=1e-3, atol=1e-4)
    return [
        Case("fusion gelu*sigmoid+layernorm f32[1024,1024]", lambda: _setup("erf"), calls=5, rounds=15, check=check),
        Case(
            "fusion tanh-gelu*1/(1+exp(-x))+layernorm, by hand, f32[1024,1024]",
            lambda: _setup("tanh"),
            calls=5,
            rounds=15,
            check=check,
        ),
    ]
