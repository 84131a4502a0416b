"""funclib in two minutes: tensors, transforms, jit, and then a real training run (``train_digits.py``).

Run with ``make demo``.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import funclib as fl


def section(title: str) -> None:
    print(f"\n== {title}")


def tour() -> None:
    section("immutable tensors and the Array API namespace")
    x = fl.tensor([0.5, 1.0, 2.0])
    print("x =", x, "| x.at[0].set(9.0) =", x.at[0].set(9.0), "| x unchanged:", x)

    section("composable transforms")

    def f(x):
        return (fl.sin(x) ** 2).sum()

    print("grad        ", fl.grad(f)(x))
    print("jvp         ", fl.jvp(f, (x,), (fl.ones(3),))[1])
    print("hessian diag", fl.diagonal(fl.hessian(f)(x)))
    print("vmap(grad)  ", fl.vmap(fl.grad(f))(fl.stack([x, 2 * x])))
    print(fl.make_jaxpr(f)(x))

    section("jit: fused numba kernels, cached on disk")

    def layer_norm(v):
        y = fl.gelu(v) * fl.sigmoid(v)
        m = y.mean(axis=-1, keepdims=True)
        return (y - m) / fl.sqrt(((y - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)

    big = fl.asarray(np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32))
    fast = fl.jit(layer_norm)
    t0 = time.perf_counter()
    fast(big)
    fast.wait_compiled()  # the first calls run the NumPy implementations while the kernels compile in the background
    compile_s = time.perf_counter() - t0
    t_eager = _time(lambda: layer_norm(big))
    t_jit = _time(lambda: fast(big))
    print(f"first call (trace + compile or cache load): {compile_s:.2f} s")
    print(f"eager {t_eager * 1e3:.2f} ms, jit {t_jit * 1e3:.2f} ms ({t_eager / t_jit:.1f}x)")


def _time(fn, n: int = 10) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def main() -> None:
    tour()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import train_digits

    section("training a CNN on scikit-learn's digits (examples/train_digits.py)")
    train_digits.main([])


if __name__ == "__main__":
    main()
