"""float32 math in jitted kernels: each ``funclib.kernels.vmath`` function over 1e6 elements.

The funclib row is the function in a numba loop writing a preallocated output, the form fused kernels run it in
(``fl.jit`` of a lone primitive calls NumPy instead). Peers: NumPy's float32 ufunc writing the same output (SIMD
loops for exp, log, tanh, sin, cos; ``logistic`` as ``1 / (1 + exp(-x))`` in four passes, ``erf`` has none) and
``jax.jit`` (which allocates its result). Inputs are ``3 * N(0, 1)``, positive (``|x| + 0.01``) for the logarithms.
Each run also checks the funclib result against float64 within the 2 ulp contract.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._harness import Case, optional

N = 1_000_000
NAMES = ("exp", "expm1", "log", "log1p", "tanh", "logistic", "erf", "sin", "cos")


def _np_logistic(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1
    return np.reciprocal(out, out=out)


_NUMPY = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "logistic": _np_logistic,
    "sin": np.sin,
    "cos": np.cos,
}
_REF = {
    "exp": math.exp,
    "expm1": math.expm1,
    "log": math.log,
    "log1p": math.log1p,
    "tanh": math.tanh,
    "logistic": lambda v: 1.0 / (1.0 + math.exp(-v)),
    "erf": math.erf,
    "sin": math.sin,
    "cos": math.cos,
}


def _loop(f):
    import numba

    @numba.njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = f(x[i])
        return out

    return loop


def _within_contract(name: str, x: np.ndarray) -> Callable[[dict[str, Any]], None]:
    def check(outputs: dict[str, Any]) -> None:
        got = np.asarray(outputs["funclib"])[:20_000].astype(np.float64)
        ref = np.array([_REF[name](float(v)) for v in x[:20_000]])
        ulp = np.ldexp(1.0, np.frexp(ref)[1] - 24)  # ulp of the float32 binade holding ref (all normal here)
        worst = float(np.max(np.abs(got - ref) / ulp))
        if worst > 2.0:
            raise AssertionError(f"vmath {name}: {worst:.2f} ulp from float64, past the 2 ulp contract")

    return check


def _setup(name: str) -> dict[str, Callable[[], Any]]:
    from funclib.kernels import vmath

    x = (3 * np.random.default_rng(0).standard_normal(N)).astype(np.float32)
    if name in ("log", "log1p"):
        x = np.abs(x) + np.float32(0.01)
    out = np.empty_like(x)
    loop = _loop(vmath.FUNCS[name])
    variants: dict[str, Callable[[], Any]] = {"funclib": lambda: loop(x, out)}
    if name in _NUMPY:
        out_np = np.empty_like(x)
        variants["numpy"] = lambda: _NUMPY[name](x, out=out_np)
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp
        import jax.scipy.special

        fj = {"logistic": jax.nn.sigmoid, "erf": jax.scipy.special.erf}.get(name) or getattr(jnp, name)
        jf, jx = jax.jit(fj), jnp.asarray(x)
        variants["jax"] = lambda: jf(jx).block_until_ready()
    return variants


def cases() -> list[Case]:
    x = (3 * np.random.default_rng(0).standard_normal(N)).astype(np.float32)
    checks = {n: _within_contract(n, np.abs(x) + np.float32(0.01) if n in ("log", "log1p") else x) for n in NAMES}
    return [Case(f"vmath {n} f32[1e6]", lambda n=n: _setup(n), calls=20, rounds=15, check=checks[n]) for n in NAMES]
