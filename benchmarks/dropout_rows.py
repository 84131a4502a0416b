"""Dropout on one rank of a data-parallel job: the cost of drawing this rank's rows of the global batch's masks.

Under ``DistributedDataParallel`` each rank draws, for its local batch of ``b`` rows, rows ``r, r + N, ...`` of
the masks one process draws for the ``N * b`` rows of the global batch (``random._uniform01_rows``: each row from
its own Threefry counters). Variants, on a float32 activation of ``b x 4096``, eagerly and under ``jit``:

- ``funclib``: ``F.dropout`` inside the global-rows context of rank 1 of N (what a DDP rank runs);
- ``local draw``: ``F.dropout`` of the local batch alone (each rank its own masks: no agreement with one process);
- ``global draw, sliced``: the whole ``N * b`` draw, then this rank's rows (the same numbers as ``funclib``).

Run with ``python -m benchmarks dropout_rows``.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, to_numpy

B, WIDTH, P = 64, 4096, 0.1


def _setup(ranks: int, jit: bool):
    import funclib.nn as nn
    import funclib.nn.functional as F
    from funclib.nn.module import _global_batch_rows

    import funclib as fl
    from funclib import random as R

    rank = 1
    x = fl.asarray(np.random.default_rng(0).normal(size=(B, WIDTH)).astype(np.float32))
    rows = np.arange(B) * ranks + rank

    def mine(x, key):
        with nn.rng(key), _global_batch_rows(lambda n: fl.arange(n, dtype=fl.int64) * ranks + rank):
            return F.dropout(x, P)

    def local(x, key):
        with nn.rng(key):
            return F.dropout(x, P)

    def sliced(x, key):
        with nn.rng(key):
            keep = F.dropout(fl.ones((ranks * B, WIDTH)), P)
        return x * keep[fl.asarray(rows)]

    wrap = fl.jit if jit else (lambda f: f)
    key = R.key(0)
    return {
        name: (lambda f=wrap(f): f(x, key).numpy())
        for name, f in (("funclib", mine), ("local draw", local), ("global draw, sliced", sliced))
    }


def _same_numbers(outputs) -> None:
    np.testing.assert_allclose(to_numpy(outputs["funclib"]), to_numpy(outputs["global draw, sliced"]), rtol=1e-6)


def cases() -> list[Case]:
    return [
        Case(f"dropout rows, rank 1 of {n}, f32[{B},{WIDTH}]{' jit' if jit else ''}",
             setup=lambda n=n, jit=jit: _setup(n, jit), calls=10, rounds=15, check=_same_numbers)
        for n in (2, 8)
        for jit in (False, True)
    ]
