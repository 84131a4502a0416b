"""Op-table rows for the factorizations, triangular solves and the FFT (funclib/primitives/linalg.py, fft.py).

``tests/op_table.py`` appends ``ROWS`` to its table. Inputs are structured so that every check is
meaningful: positive-definite matrices for ``cholesky``, diagonally dominant triangles for
``triangular_solve`` and ``qr``, ``P^T L U`` with unambiguous pivots for ``lu``, and separated eigenvalues and
singular values for ``eigh`` and ``svd``, whose vectors the finite-difference references align (sign, or
phase) with those at the base point.
Entries a primitive does not read (the other triangle, a complex diagonal's imaginary part) hold unrelated
values, so the checks also show that they are ignored.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from hypothesis import strategies as st
from op_table import FC, C, Dom, Row, bind, tolerance, values

from funclib import dtypes as D
from funclib.testing import assert_allclose

ROWS: list[Row] = []

BATCH = st.lists(st.integers(1, 2), max_size=1).map(tuple)
SIDE = st.integers(1, 3)


def _wide(dtype) -> np.dtype:
    return np.dtype(np.complex128 if np.dtype(dtype) in C else np.float64)


def _entries(draw, dtype, shape, bound: float) -> np.ndarray:
    """float64/complex128 values with every part in [-bound, bound]."""
    return values(draw, _wide(dtype), shape, Dom(real=((-bound, bound),), imag=((-bound, bound),)))


def _ct(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _hermitian_from_lower(x):
    """The Hermitian matrix that LAPACK reads from the lower triangle of ``x`` (a diagonal's real part)."""
    low = np.tril(x, -1)
    return low + _ct(low) + np.real(np.diagonal(x, 0, -2, -1))[..., None] * np.eye(x.shape[-1])


def _junk_above(draw, dtype, a):
    """``a``'s lower triangle with unrelated values above it (and in a complex diagonal's imaginary part)."""
    n = a.shape[-1]
    junk = _entries(draw, dtype, a.shape, 2.0)
    out = np.tril(a) + np.triu(junk, 1)
    if np.dtype(dtype) in C:
        out = out + 1j * np.imag(junk) * np.eye(n)
    return out


def _orthonormal(m, k, complex_, seed):
    """A fixed m x k matrix with orthonormal columns, generic (no zero entries, no structure)."""
    r = np.random.default_rng(seed)
    g = r.standard_normal((m, k)) + (1j * r.standard_normal((m, k)) if complex_ else 0)
    return np.linalg.qr(g)[0]


def _align(v, v0):
    """``v`` with each column's sign (phase) chosen so that ``v0[:, j]^H v[:, j]`` is real and positive, and
    the factors applied (one row)."""
    d = np.sum(np.conj(v0) * v, axis=-2, keepdims=True)
    return v * (np.conj(d) / np.abs(d)), np.conj(d) / np.abs(d)


def _row(name, apply, config, sample, ref, dtypes, **kw):
    ROWS.append(Row(name, apply, config, sample, ref, tuple(dtypes), **kw))


# ------------------------------------------------------------------------------------------------------------
# cholesky: A A^H + n I


def _cholesky_sample(draw, cfg, dtype, smooth):
    n, batch = cfg["n"], cfg["batch"]
    m = _entries(draw, dtype, batch + (n, n), 1.0)
    return [_junk_above(draw, dtype, m @ _ct(m) + n * np.eye(n)).astype(dtype)]


_row(
    "cholesky",
    lambda cfg, x: bind("cholesky", x),
    lambda dtype: st.fixed_dictionaries({"n": SIDE, "batch": BATCH}),
    _cholesky_sample,
    lambda cfg, x: np.linalg.cholesky(_hermitian_from_lower(x)),
    FC,
    tol=4.0,
)


# ------------------------------------------------------------------------------------------------------------
# triangular_solve: every side / triangle / transpose / conjugate / unit-diagonal variant


def _tri_cfg(dtype):
    flags = {f: st.booleans() for f in ("left_side", "lower", "transpose_a", "conjugate_a", "unit_diagonal")}
    return st.fixed_dictionaries({"n": SIDE, "k": SIDE, "batch": BATCH, **flags})


def _tri_params(cfg):
    return {f: cfg[f] for f in ("left_side", "lower", "transpose_a", "conjugate_a", "unit_diagonal")}


def _tri_sample(draw, cfg, dtype, smooth):
    n, k, batch = cfg["n"], cfg["k"], cfg["batch"]
    # the diagonal lies in [2, 4]: well conditioned; the other triangle holds values the solve must ignore
    a = _entries(draw, dtype, batch + (n, n), 1.0) + 3 * np.eye(n)
    b = _entries(draw, dtype, batch + ((n, k) if cfg["left_side"] else (k, n)), 2.0)
    return [a.astype(dtype), b.astype(dtype)]


def _tri_ref(cfg, a, b):
    t = np.tril(a) if cfg["lower"] else np.triu(a)
    if cfg["unit_diagonal"]:
        t = t - np.diagonal(t, 0, -2, -1)[..., None] * np.eye(a.shape[-1]) + np.eye(a.shape[-1])
    if cfg["conjugate_a"]:
        t = np.conj(t)
    if cfg["transpose_a"]:
        t = np.swapaxes(t, -1, -2)
    if cfg["left_side"]:
        return np.linalg.solve(t, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


_row(
    "triangular_solve",
    lambda cfg, a, b: bind("triangular_solve", a, b, **_tri_params(cfg)),
    _tri_cfg,
    _tri_sample,
    _tri_ref,
    FC,
    linear=((1,),),
    tol=8.0,
)


# ------------------------------------------------------------------------------------------------------------
# lu: rows of L U scattered by a random permutation, with |L| <= 1/2 below the diagonal and |diag U| >= 1,
# so partial pivoting picks the same rows, by a wide margin, at every precision and under finite differences


def _mn_cfg(dtype, **extra):
    return st.fixed_dictionaries({"m": SIDE, "n": SIDE, "batch": BATCH, **extra})


def _lu_sample(draw, cfg, dtype, smooth):
    m, n, batch = cfg["m"], cfg["n"], cfg["batch"]
    k = min(m, n)
    # complex pivots are chosen by |re| + |im| <= sqrt(2) |z|: keep |L| <= 1/2 in modulus
    low = np.tril(_entries(draw, dtype, batch + (m, k), 0.35 if np.dtype(dtype) in C else 0.5), -1)
    low = low + np.eye(m, k)
    diag = values(draw, np.float64, batch + (k,), Dom(real=((-2.0, -1.0), (1.0, 2.0))))
    up = np.triu(_entries(draw, dtype, batch + (k, n), 2.0), 1) + diag[..., :, None] * np.eye(k, n)
    lu = low @ up
    a = np.empty_like(lu)
    for b in np.ndindex(*batch):
        perm = np.asarray(draw(st.permutations(range(m))))
        a[b][perm] = lu[b]
    return [a.astype(dtype)]


def _lu_ref(cfg, x):
    m = x.shape[-2]
    lu = np.empty_like(x)
    piv = np.empty(x.shape[:-2] + (min(x.shape[-2:]),), np.int32)
    perm = np.empty(x.shape[:-2] + (m,), np.int32)
    for b in np.ndindex(*x.shape[:-2]):
        lu[b], piv[b] = sla.lu_factor(x[b], check_finite=True)
        p = list(range(m))
        for i, j in enumerate(piv[b]):
            p[i], p[j] = p[j], p[i]
        perm[b] = p
    return [lu, piv, perm]


_row("lu", lambda cfg, x: bind("lu", x), _mn_cfg, _lu_sample, _lu_ref, FC, tol=8.0)


# ------------------------------------------------------------------------------------------------------------
# qr: a fixed diagonally dominant matrix with no zero entry, plus a drawn perturbation too small to cancel any
# entry. LAPACK's Householder sign choice jumps where a column below the diagonal is exactly zero ([[3], [0]]
# gives R = 3, its neighbours R = -3), and for complex inputs also where the last pivot turns real; the
# finite-difference reference gives diag(R) the phases it has at the base point (the jvp keeps them).
# mode='complete' with m > n has no derivative (see qr_p.no_rule): complete mode is drawn only for m <= n.


@st.composite
def _qr_cfg(draw, dtype):
    cfg = draw(_mn_cfg(dtype))
    cfg["full_matrices"] = draw(st.booleans()) if cfg["m"] <= cfg["n"] else False
    return cfg


def _qr_base(m, n, complex_):
    """3 on the diagonal, magnitudes in [0.3, 0.5] off it, fixed signs (phases)."""
    r = np.random.default_rng(1000 + 10 * m + n)
    off = r.uniform(0.3, 0.5, (m, n)) * (np.exp(2j * np.pi * r.uniform(size=(m, n))) if complex_ else
                                         r.choice([-1.0, 1.0], (m, n)))
    return np.where(np.eye(m, n, dtype=bool), 3.0, off)


def _qr_sample(draw, cfg, dtype, smooth):
    m, n, batch = cfg["m"], cfg["n"], cfg["batch"]
    cplx = np.dtype(dtype) in C
    drawn = _entries(draw, dtype, batch + (m, n), 0.17 if cplx else 0.25)
    return [(_qr_base(m, n, cplx) + drawn).astype(dtype)]


def _qr_np(cfg, x):
    return list(np.linalg.qr(np.asarray(x), mode="complete" if cfg["full_matrices"] else "reduced"))


def _phase(z):
    return np.where(z == 0, 1.0, z / np.where(z == 0, 1.0, np.abs(z)))


def _qr_fd_ref(cfg, xs):
    r0 = _qr_np(cfg, xs[0])[1]
    ph0 = _phase(np.diagonal(r0, 0, -2, -1))

    def qr_aligned(x):
        q, r = _qr_np(cfg, x)
        d = _phase(np.diagonal(r, 0, -2, -1)) * np.conj(ph0)
        return [q * d[..., None, :], np.conj(d)[..., :, None] * r]

    return qr_aligned


_row(
    "qr",
    lambda cfg, x: bind("qr", x, full_matrices=cfg["full_matrices"]),
    _qr_cfg,
    _qr_sample,
    _qr_np,
    FC,
    tol=8.0,
    fd_ref=_qr_fd_ref,
)


# ------------------------------------------------------------------------------------------------------------
# eigh: Q0 diag(0, 3, 6) Q0^H for a fixed generic unitary Q0, plus a drawn Hermitian perturbation of norm
# <= 0.9, so eigenvalues stay >= 1.2 apart. Eigenvectors are defined up to sign (phase): the eager check and
# the finite-difference reference align them with a reference's (the base point's) before comparing.


def _eigh_sample(draw, cfg, dtype, smooth):
    n, batch = cfg["n"], cfg["batch"]
    q0 = _orthonormal(n, n, np.dtype(dtype) in C, seed=n)
    s = _entries(draw, dtype, batch + (n, n), 0.2 if np.dtype(dtype) in C else 0.3)
    h = q0 @ np.diag(3.0 * np.arange(n)) @ _ct(q0) + 0.5 * (s + _ct(s))
    return [_junk_above(draw, dtype, h).astype(dtype)]


def _eigh_check(cfg, args, out):
    x = args[0]
    w, v = (np.asarray(o) for o in out)
    rw, rv = np.linalg.eigh(_hermitian_from_lower(x.astype(_wide(x.dtype))))
    rtol, atol = tolerance(x.dtype, 8.0)
    assert_allclose(w, rw, rtol=rtol, atol=atol, err_msg="eigh eigenvalues")
    assert_allclose(_align(v.astype(rv.dtype), rv)[0], rv, rtol=rtol, atol=atol, err_msg="eigh eigenvectors")


def _eigh_fd_ref(cfg, xs):
    v0 = np.linalg.eigh(np.asarray(xs[0]))[1]

    def eigh_aligned(x):
        w, v = np.linalg.eigh(np.asarray(x))
        return [w, _align(v, v0)[0]]

    return eigh_aligned


_row(
    "eigh",
    lambda cfg, x: bind("eigh", x),
    lambda dtype: st.fixed_dictionaries({"n": SIDE, "batch": BATCH}),
    _eigh_sample,
    None,
    FC,
    check=_eigh_check,
    fd_ref=_eigh_fd_ref,
)


# ------------------------------------------------------------------------------------------------------------
# eig: P0 B P0^-1 for a fixed non-normal P0 and B with well separated eigenvalues (for real dtypes a complex
# pair 1 +- 2i, then 5, so real inputs exercise complex outputs), plus a drawn perturbation of entries <= 0.12.
# Eigenvalues are compared as multisets and eigenvectors through A v = v w and their unit norm; the
# finite-difference reference keeps LAPACK's normalization (largest component real) with the base point's
# choice of component and sign, and matches eigenvalues to the base point's order.


def _eig_base(n, complex_):
    r = np.random.default_rng(77 + n)
    p0 = _orthonormal(n, n, complex_, seed=200 + n) @ (np.eye(n) + 0.3 * np.triu(r.uniform(0.5, 1.0, (n, n)), 1))
    if complex_:
        b = np.diag(np.array([1 + 2j, -2 - 1j, 4 + 0.5j])[:n])
    elif n == 1:
        b = np.array([[2.0]])
    else:
        b = np.zeros((n, n))
        b[:2, :2] = [[1.0, -2.0], [2.0, 1.0]]
        if n > 2:
            b[2, 2] = 5.0
    return p0 @ b @ np.linalg.inv(p0)


def _eig_sample(draw, cfg, dtype, smooth):
    n, batch = cfg["n"], cfg["batch"]
    cplx = np.dtype(dtype) in C
    return [(_eig_base(n, cplx) + _entries(draw, dtype, batch + (n, n), 0.08 if cplx else 0.12)).astype(dtype)]


def _eig_check(cfg, args, out):
    x = args[0].astype(_wide(args[0].dtype))
    w, v = (np.asarray(o).astype(np.complex128) for o in out)
    rtol, atol = tolerance(args[0].dtype, 40.0)
    rw = np.linalg.eig(x)[0].astype(np.complex128)
    key = lambda z: np.lexsort((np.round(z.imag, 3), np.round(z.real, 3)), axis=-1)  # noqa: E731
    assert_allclose(np.take_along_axis(w, key(w), -1), np.take_along_axis(rw, key(rw), -1), rtol=rtol, atol=atol,
                    err_msg="eig eigenvalues")
    assert_allclose(x @ v, v * w[..., None, :], rtol=rtol, atol=atol * 10, err_msg="eig: a @ v == v * w")
    assert_allclose(np.linalg.norm(v, axis=-2), np.ones(w.shape), rtol=rtol, atol=atol, err_msg="eig: unit vectors")


def _eig_fd_ref(cfg, xs):
    w0, v0 = np.linalg.eig(np.asarray(xs[0]))
    k = np.argmax(np.abs(v0), axis=-2)[..., None, :]
    sign0 = np.sign(np.take_along_axis(v0, k, -2).real)

    def eig_aligned(x):
        w, v = np.linalg.eig(np.asarray(x))
        w, v = w.astype(np.complex128), v.astype(np.complex128)
        order = np.argmin(np.abs(w[..., None, :] - w0[..., :, None]), axis=-1)
        w = np.take_along_axis(w, order, -1)
        v = np.take_along_axis(v, order[..., None, :], -1)
        vk = np.take_along_axis(v, k, -2)
        return [w, v * (np.conj(vk) / np.abs(vk)) * sign0]

    return eig_aligned


_row(
    "eig",
    lambda cfg, x: bind("eig", x),
    lambda dtype: st.fixed_dictionaries({"n": SIDE, "batch": BATCH}),
    _eig_sample,
    None,
    FC,
    check=_eig_check,
    fd_ref=_eig_fd_ref,
    grad_tol=(1e-5, 1e-5),
)


# ------------------------------------------------------------------------------------------------------------
# svd: U0 diag(7, 4, 1.5) V0^H for fixed generic U0, V0, plus a drawn perturbation of norm <= 0.9: singular
# values stay >= 0.6 from zero and >= 0.7 apart. Each (u_i, v_i) pair is defined up to a common sign (phase);
# the references align v_i with a reference's and apply the same factor to u_i. Full matrices are drawn only
# where they have a derivative (square inputs, or singular values alone; see svd_p.no_rule).


@st.composite
def _svd_cfg(draw, dtype):
    cfg = draw(_mn_cfg(dtype, compute_uv=st.booleans()))
    square_or_s = cfg["m"] == cfg["n"] or not cfg["compute_uv"]
    cfg["full_matrices"] = draw(st.booleans()) if square_or_s else False
    return cfg


def _svd_params(cfg):
    return {"full_matrices": cfg["full_matrices"], "compute_uv": cfg["compute_uv"]}


def _svd_sample(draw, cfg, dtype, smooth):
    m, n, batch = cfg["m"], cfg["n"], cfg["batch"]
    k = min(m, n)
    cplx = np.dtype(dtype) in C
    u0, v0 = _orthonormal(m, k, cplx, seed=10 * m + n), _orthonormal(n, k, cplx, seed=100 + 10 * m + n)
    s = _entries(draw, dtype, batch + (m, n), 0.2 if cplx else 0.3)
    return [(u0 @ np.diag(np.array([7.0, 4.0, 1.5])[:k]) @ _ct(v0) + s).astype(dtype)]


def _svd_align(u, vh, v_ref):
    """``(u, vh)`` with each pair's common sign (phase) chosen so that ``v_ref[:, j]^H v[:, j] > 0``."""
    v, f = _align(_ct(vh), v_ref)
    return u * f, _ct(v)


def _svd_check(cfg, args, out):
    x = args[0].astype(_wide(args[0].dtype))
    rtol, atol = tolerance(args[0].dtype, 8.0)
    out = [np.asarray(o) for o in out]
    if not cfg["compute_uv"]:
        want = np.linalg.svd(x, compute_uv=False)
        assert_allclose(out[0], want, rtol=rtol, atol=atol, err_msg="svd values")
        return
    ru, rs, rvh = np.linalg.svd(x, full_matrices=cfg["full_matrices"])
    u, s, vh = out
    assert_allclose(s, rs, rtol=rtol, atol=atol, err_msg="svd values")
    u, vh = _svd_align(u.astype(ru.dtype), vh.astype(ru.dtype), _ct(rvh))
    assert_allclose(u, ru, rtol=rtol, atol=atol, err_msg="svd left vectors")
    assert_allclose(vh, rvh, rtol=rtol, atol=atol, err_msg="svd right vectors")


def _svd_fd_ref(cfg, xs):
    if not cfg["compute_uv"]:
        return lambda x: [np.linalg.svd(np.asarray(x), compute_uv=False)]
    v0 = _ct(np.linalg.svd(np.asarray(xs[0]), full_matrices=cfg["full_matrices"])[2])

    def svd_aligned(x):
        u, s, vh = np.linalg.svd(np.asarray(x), full_matrices=cfg["full_matrices"])
        u, vh = _svd_align(u, vh, v0)
        return [u, s, vh]

    return svd_aligned


_row(
    "svd",
    lambda cfg, x: bind("svd", x, **_svd_params(cfg)),
    _svd_cfg,
    _svd_sample,
    None,
    FC,
    check=_svd_check,
    fd_ref=_svd_fd_ref,
)


# ------------------------------------------------------------------------------------------------------------
# fft: a real dtype draws any of the four transforms (rfft reads it; fft, ifft and irfft read the complex
# dtype of the same precision), so the float64 derivative and transpose checks cover all four; a complex
# dtype draws the three complex-input ones.

_FFT_IN = {"fft": "c", "ifft": "c", "rfft": "r", "irfft": "c"}


@st.composite
def _fft_cfg(draw, dtype):
    kinds = ("fft", "ifft", "rfft", "irfft") if np.dtype(dtype) not in C else ("fft", "ifft", "irfft")
    kind = draw(st.sampled_from(kinds))
    lengths = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    lead = draw(st.lists(st.integers(1, 2), max_size=1).map(tuple))
    shape = lead + lengths
    if kind == "irfft":
        shape = shape[:-1] + (lengths[-1] // 2 + 1,)
    return {"fft_type": kind, "fft_lengths": lengths, "shape": shape}


def _fft_sample(draw, cfg, dtype, smooth):
    d = np.dtype(dtype)
    in_dtype = D.complex_dtype(d) if _FFT_IN[cfg["fft_type"]] == "c" else d
    return [values(draw, in_dtype, cfg["shape"])]


def _fft_ref(cfg, x):
    axes = tuple(range(-len(cfg["fft_lengths"]), 0))
    kind = cfg["fft_type"]
    if kind == "irfft":
        return np.fft.irfftn(x, s=cfg["fft_lengths"], axes=axes)
    return {"fft": np.fft.fftn, "ifft": np.fft.ifftn, "rfft": np.fft.rfftn}[kind](x, axes=axes)


_row(
    "fft",
    lambda cfg, x: bind("fft", x, fft_type=cfg["fft_type"], fft_lengths=cfg["fft_lengths"]),
    _fft_cfg,
    _fft_sample,
    _fft_ref,
    (D.float32, D.float64, D.complex64, D.complex128),
    linear="all",
    tol=10.0,
)
