"""Eager per-op cost: ``x + y``, ``x * y`` and ``sin(x)`` on float32 vectors of 16 and 1e6 elements, and a float32
matrix product of the train step's first layer, ``(128, 784) @ (784, 256)``.

At 16 elements this is dispatch overhead (funclib's budget: a function call or two over NumPy); at 1e6 it is
kernel speed; the product is BLAS's speed, or that of funclib's AVX-512 product where that won its timing
(``kernels.gemm``). Peers: NumPy, and torch and jax (eager, ``block_until_ready``) when installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._harness import Case, allclose, optional

SIZES = ((16, 1000, 25), (1_000_000, 10, 15))  # (elements, calls per block, rounds)
OPS = ("add", "mul", "sin")


def _setup(op: str, n: int) -> dict[str, Callable[[], Any]]:
    import funclib as fl

    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    fx, fy = fl.asarray(x), fl.asarray(y)
    variants = {
        "add": {"funclib": lambda: fx + fy, "numpy": lambda: x + y},
        "mul": {"funclib": lambda: fx * fy, "numpy": lambda: x * y},
        "sin": {"funclib": lambda: fl.sin(fx), "numpy": lambda: np.sin(x)},
    }[op]
    torch = optional("torch")
    if torch is not None:
        tx, ty = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
        variants["torch"] = {
            "add": lambda: tx + ty,
            "mul": lambda: tx * ty,
            "sin": lambda: torch.sin(tx),
        }[op]
    jnp = optional("jax.numpy")
    if jnp is not None:
        jx, jy = jnp.asarray(x), jnp.asarray(y)
        variants["jax"] = {
            "add": lambda: (jx + jy).block_until_ready(),
            "mul": lambda: (jx * jy).block_until_ready(),
            "sin": lambda: jnp.sin(jx).block_until_ready(),
        }[op]
    return variants


def _matmul_setup() -> dict[str, Callable[[], Any]]:
    import funclib as fl

    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    w = rng.standard_normal((784, 256)).astype(np.float32)
    fx, fw = fl.asarray(x), fl.asarray(w)
    variants = {"funclib": lambda: fx @ fw, "numpy": lambda: x @ w}
    torch = optional("torch")
    if torch is not None:
        tx, tw = torch.from_numpy(x.copy()), torch.from_numpy(w.copy())
        variants["torch"] = lambda: tx @ tw
    jnp = optional("jax.numpy")
    if jnp is not None:
        jx, jw = jnp.asarray(x), jnp.asarray(w)
        variants["jax"] = lambda: (jx @ jw).block_until_ready()
    return variants


def cases() -> list[Case]:
    matmul = Case(
        "matmul f32[128,784]@[784,256]", setup=_matmul_setup, calls=20, rounds=15, check=allclose(rtol=1e-4, atol=1e-4)
    )
    return [matmul] + [
        Case(
            f"{op} f32[{n}]",
            setup=lambda op=op, n=n: _setup(op, n),
            calls=calls,
            rounds=rounds,
            check=allclose(rtol=2e-6, atol=1e-6),
        )
        for n, calls, rounds in SIZES
        for op in OPS
    ]
