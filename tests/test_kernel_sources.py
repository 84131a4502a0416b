"""Generated kernel sources are pinned: they are the disk cache's keys, so a change that alters them makes every
user's first calls compile again. Representative programs cover every generator: fused loop nests (broadcast,
leading and trailing reductions, float16, float8, narrow integers, a long-row split), staged row kernels (softmax,
layer norm, loop fission over the row), a whole-loop scan and its gradient (nested loops, regions shared by
helper functions).

A change meant to alter the code (a faster kernel, a fix) updates ``PINNED``: ``python tests/test_kernel_sources.py``
prints the new table. The imports at the top of a kernel module are not part of the pin: they name the versions
of the libraries the kernels call (vmath, lowp), which change on purpose when those do.
"""

import hashlib

import funclib.nn.functional as F
import ml_dtypes
import numpy as np
import pytest

import funclib as fl


def _layer_norm(x, g, b):
    m = fl.mean(x, axis=-1, keepdims=True)
    v = fl.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) / fl.sqrt(v + 1e-5) * g + b


def _gelu_sigmoid_norm(x):
    y = F.gelu(x) * fl.sigmoid(x)
    m = fl.mean(y, axis=-1, keepdims=True)
    return (y - m) / fl.sqrt(fl.mean((y - m) ** 2, axis=-1, keepdims=True) + 1e-5)


def _rnn(h, xs, w, u):
    def body(h, x):
        h = fl.tanh(h @ w + x @ u)
        return h, fl.sum(h * h, axis=-1)

    return fl.scan(body, h, xs)


def _rnn_grad(h, xs, w, u):
    def loss(w, u):
        h_last, sums = _rnn(h, xs, w, u)
        return (h_last * h_last).sum() + sums.sum()

    return fl.grad(loss, argnums=(0, 1))(w, u)


def _zeros(shape, dtype="float32"):
    return fl.zeros(shape, dtype=getattr(fl, dtype))


PROGRAMS = {
    "broadcast_chain": (
        lambda x, a, b: fl.where(fl.tanh(x * a + b) > 0.1, fl.exp(x), fl.maximum(x, b)) + 2.0,
        lambda: (_zeros((64, 128)), _zeros((64, 1)), _zeros((1, 128))),
    ),
    "leading_sum_f64": (lambda x: fl.sum(fl.exp(x) * 2.0, axis=0), lambda: (_zeros((64, 128), "float64"),)),
    "softmax": (lambda x: fl.softmax(x, axis=-1), lambda: (_zeros((32, 512)),)),
    "layer_norm": (_layer_norm, lambda: (_zeros((64, 256)), _zeros((256,)), _zeros((256,)))),
    "staged_fission": (_gelu_sigmoid_norm, lambda: (_zeros((16, 1024)),)),
    "row_split": (
        lambda x, b: fl.erf(x * b) * fl.sigmoid(x) + fl.erf(x * 2.0),
        lambda: (_zeros((16, 1024)), _zeros((1, 1024))),
    ),
    "float16_row_sum": (lambda x: fl.sum(fl.exp(x) * x, axis=-1), lambda: (_zeros((8, 64), "float16"),)),
    "float8": (
        lambda x: x * x + x,
        lambda: (fl.asarray(np.zeros((8, 64), ml_dtypes.float8_e4m3fn)),),
    ),
    "int8_wrap": (lambda x: x + x * 3, lambda: (_zeros((8, 64), "int8"),)),
    "scan_rnn": (_rnn, lambda: (_zeros((8, 16)), _zeros((20, 8, 4)), _zeros((16, 16)), _zeros((4, 16)))),
    "scan_rnn_grad": (_rnn_grad, lambda: (_zeros((8, 16)), _zeros((20, 8, 4)), _zeros((16, 16)), _zeros((4, 16)))),
}


def _digest(src: str) -> str:
    body = "\n".join(line for line in src.splitlines() if not line.startswith(("import ", "from ")))
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _digests(name: str) -> list[str]:
    f, args = PROGRAMS[name]
    return [_digest(src) for src in fl.jit(f).lower(*args()).kernels]


PINNED = {
    'broadcast_chain': ['076f0b4b1ae3aa40'],
    'float16_row_sum': ['8cf0da9bfeffc194'],
    'float8': ['2c5c0b133681a9c5'],
    'int8_wrap': ['3b95faf91fe2dd18'],
    'layer_norm': ['c92897c437ce2fa7'],
    'leading_sum_f64': ['dda5bd2429929600'],
    'row_split': ['71c2022b087fbbb4'],
    'scan_rnn': ['ba09ab2c1045afd7'],
    'scan_rnn_grad': ['69c204750b9aed24'],
    'softmax': ['94390c543150937a'],
    'staged_fission': ['97e2a94e723efc11'],
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_kernel_sources_are_pinned(name):
    assert _digests(name) == PINNED[name], (
        f"the kernels generated for {name!r} changed: every cached kernel of this kind compiles again on its first "
        "call. If that is the intent, update PINNED (python tests/test_kernel_sources.py prints it)."
    )


if __name__ == "__main__":
    print("PINNED = {")
    for n in sorted(PROGRAMS):
        print(f"    {n!r}: {_digests(n)},")
    print("}")
