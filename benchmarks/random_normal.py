"""Random numbers: 1e7 float32 standard normals (and uniforms) from a key, against NumPy's ``default_rng``.

``fl.random.normal`` runs one fused kernel from key to floats (Threefry-2x32 and Box-Muller with branch-free
float32 log/sin/cos). The target is at most 1.5x NumPy's ``standard_normal(dtype=float32)`` (a ziggurat) on one
thread. The small case measures the per-call overhead. Peers: torch (``randn``) and jax (``random.normal``)
when installed. Run with ``python -m benchmarks random_normal``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._harness import Case, optional, to_numpy

SIZES = ((10_000_000, 1, 15), (16, 1000, 25))  # (elements, calls per block, rounds)


def _moments_check(kind: str) -> Callable[[dict[str, Any]], None]:
    """Every variant gives float32 samples with the distribution's mean and variance (5 standard errors)."""
    mean, var = {"normal": (0.0, 1.0), "uniform": (0.5, 1 / 12)}[kind]

    def check(outputs: dict[str, Any]) -> None:
        for variant, out in outputs.items():
            x = to_numpy(out)
            assert x.dtype == np.float32, f"{variant}: dtype {x.dtype}"
            if x.size < 1000:
                continue
            x = x.astype(np.float64)
            se = np.sqrt(var / x.size)
            assert abs(x.mean() - mean) < 5 * se, f"{variant}: mean {x.mean()}"
            assert abs(x.var() / var - 1) < 5 * np.sqrt(2 / x.size) * 1.5, f"{variant}: variance {x.var()}"

    return check


def _setup(kind: str, n: int) -> dict[str, Callable[[], Any]]:
    from funclib import random as R

    key = R.key(0)
    rng = np.random.default_rng(0)
    if kind == "normal":
        variants = {
            "funclib": lambda: R.normal(key, (n,)),
            "numpy": lambda: rng.standard_normal(n, dtype=np.float32),
        }
    else:
        variants = {
            "funclib": lambda: R.uniform(key, (n,)),
            "numpy": lambda: rng.random(n, dtype=np.float32),
        }
    torch = optional("torch")
    if torch is not None:
        gen = torch.Generator().manual_seed(0)
        tdraw = torch.randn if kind == "normal" else torch.rand
        variants["torch"] = lambda: tdraw(n, generator=gen, dtype=torch.float32)
    jax = optional("jax")
    if jax is not None:
        jkey = jax.random.key(0)
        jdraw = jax.random.normal if kind == "normal" else jax.random.uniform
        variants["jax"] = lambda: jdraw(jkey, (n,), dtype="float32").block_until_ready()
    return variants


def cases() -> list[Case]:
    return [
        Case(
            f"{kind} f32[{n}]",
            setup=lambda kind=kind, n=n: _setup(kind, n),
            calls=calls,
            rounds=rounds,
            check=_moments_check(kind),
        )
        for n, calls, rounds in SIZES
        for kind in ("normal", "uniform")
    ]
