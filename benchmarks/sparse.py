"""Sparse products and segment sums, float32, one thread.

- ``sparse @ dense``: a 4096 x 4096 matrix at 1 % density (167,772 entries) times a (4096, 64) dense matrix, as
  ``fl.sparse.CSR`` and ``fl.sparse.COO``, against the dense product on BLAS (funclib's ``@`` and NumPy's) and
  ``scipy.sparse`` when installed.
- ``grad wrt values``: the gradient of ``sum(A @ B)`` with respect to the stored values (a sampled dense-dense
  product) against the dense gradient ``ones @ B.T``.
- ``segment_sum``: 1M rows of 16 features into 10k segments against NumPy's ``np.add.at``.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, allclose, optional


def _matrix():
    rng = np.random.default_rng(0)
    m = k = 4096
    nse = int(m * k * 0.01)
    rows, cols = rng.integers(0, m, nse), rng.integers(0, k, nse)
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    values = rng.standard_normal(nse).astype(np.float32)
    dense = np.zeros((m, k), np.float32)
    np.add.at(dense, (rows, cols), values)
    b = rng.standard_normal((k, 64)).astype(np.float32)
    return rows, cols, values, dense, b


def _spmm_setup():
    import funclib as fl

    rows, cols, values, dense, b = _matrix()
    coo = fl.sparse.COO(values, rows, cols, dense.shape)
    csr = coo.tocsr()
    fb, fd = fl.asarray(b), fl.asarray(dense)
    variants = {
        "funclib": lambda: csr @ fb,
        "numpy": lambda: dense @ b,
        "funclib COO": lambda: coo @ fb,
        "funclib dense": lambda: fd @ fb,
    }
    sp = optional("scipy.sparse")
    if sp is not None:
        m = sp.csr_matrix(dense)
        variants["scipy"] = lambda: m @ b
    return variants


def _grad_setup():
    import funclib as fl

    rows, cols, values, dense, b = _matrix()
    csr = fl.sparse.COO(values, rows, cols, dense.shape).tocsr()
    fb = fl.asarray(b)
    g = fl.jit(fl.grad(lambda a: fl.sum(a @ fb)))
    ones = np.ones((dense.shape[0], b.shape[1]), np.float32)
    return {"funclib": lambda: g(csr).values, "numpy": lambda: ones @ b.T}


def _segment_setup():
    import funclib as fl

    rng = np.random.default_rng(1)
    data = rng.standard_normal((1_000_000, 16)).astype(np.float32)
    ids = rng.integers(0, 10_000, 1_000_000)
    fdata, fids = fl.asarray(data), fl.asarray(ids)

    def numpy_add_at():
        out = np.zeros((10_000, 16), np.float32)
        np.add.at(out, ids, data)
        return out

    return {"funclib": lambda: fl.segment_sum(fdata, fids, 10_000), "numpy": numpy_add_at}


def cases():
    return [
        Case("sparse @ dense 4096^2 1% x 64", _spmm_setup, calls=5, rounds=9, check=allclose(rtol=1e-3, atol=1e-3)),
        Case("grad wrt values of sum(A @ B)", _grad_setup, calls=3, rounds=7),
        Case("segment_sum 1M x 16 -> 10k", _segment_setup, calls=1, rounds=5, check=allclose(rtol=1e-3, atol=1e-3)),
    ]
