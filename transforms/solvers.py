"""Iterative linear solvers, ``fl.linalg.cg`` and ``fl.linalg.bicgstab``, in the style of SciPy's (and JAX's)
``sparse.linalg``: ``A`` is a matrix or a linear function on pytrees, the iterations are a ``while_loop``, and
the solution is differentiated through ``custom_linear_solve``: ``dx = A^-1 (db - dA x)``, solved with the same
method, instead of through the iterations (which reverse mode could not unroll without storing every step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_int, check_number
from funclib.core import Tensor
from funclib.ops.creation import zeros
from funclib.ops.elementwise import conj, real
from funclib.ops.elementwise import maximum as _maximum
from funclib.ops.manipulation import reshape
from funclib.ops.reductions import sum as _sum
from funclib.ops.searching import where

from ._api_util import as_tensor_leaf
from .control_flow import while_loop
from .implicit import custom_linear_solve


def _tmap(f, *trees):
    return tree_util.map(f, *trees)


def _vdot(u, v):
    """``sum(conj(u) * v)`` over every leaf of two pytrees."""
    parts = [_sum(reshape(conj(a) * b, (-1,))) for a, b in zip(tree_util.leaves(u), tree_util.leaves(v))]
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def _norm2(u):
    return real(_vdot(u, u))


def _as_operator(A, name: str, what: str) -> Callable:
    if isinstance(A, Tensor) or isinstance(A, np.ndarray):
        A = as_tensor_leaf(A, name)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"{name}: {what} must be a square matrix or a function, got shape {tuple(A.shape)}")
        return lambda x: A @ x
    if not callable(A):
        raise TypeError(f"{name}: {what} must be a matrix (2-D tensor) or a linear function, got {type(A).__name__}")
    return A


def _prepare(name, A, b, x0, tol, atol, maxiter, M):
    b_leaves, b_tree = tree_util.flatten(b)
    b_leaves = [as_tensor_leaf(x, f"{name} (b)") for x in b_leaves]
    if not b_leaves:
        raise ValueError(f"{name}: b has no arrays")
    for x in b_leaves:
        if x.dtype not in dtypes.INEXACT:
            raise TypeError(f"{name}: b must be floating-point or complex, got {x.dtype.name}")
    b = tree_util.unflatten(b_tree, b_leaves)
    if x0 is None:
        # not b * 0: the solver closes over x0, which must not depend on b (custom_linear_solve is linear in b)
        x0 = _tmap(lambda v: zeros(v.shape, dtype=v.dtype), b)
    else:
        x_leaves, x_tree = tree_util.flatten(x0)
        x_leaves = [as_tensor_leaf(x, f"{name} (x0)") for x in x_leaves]
        if x_tree != b_tree or any(
            tuple(u.shape) != tuple(v.shape) or u.dtype != v.dtype for u, v in zip(x_leaves, b_leaves)
        ):
            raise ValueError(f"{name}: x0 must have the structure, shapes and dtypes of b")
        x0 = tree_util.unflatten(x_tree, x_leaves)
    tol = check_number(tol, name, "tol", min=0.0)
    atol = check_number(atol, name, "atol", min=0.0)
    size = sum(int(np.prod(x.shape, dtype=np.int64)) for x in b_leaves)
    maxiter = 10 * size if maxiter is None else check_int(maxiter, name, "maxiter", min=0)
    A = _as_operator(A, name, "A")
    M = (lambda x: x) if M is None else _as_operator(M, name, "M")
    return A, b, x0, tol, atol, maxiter, M, all(x.dtype not in dtypes.COMPLEX for x in b_leaves)


def _threshold(b, tol, atol):
    """The squared residual norm to reach: ``max(tol * |b|, atol) ** 2`` (SciPy's criterion)."""
    bn = _norm2(b)
    return _maximum(bn * (tol * tol), atol * atol)


def _cg_iterations(A, b, x0, tol, atol, maxiter, M):
    r0 = _tmap(lambda u, v: u - v, b, A(x0))
    z0 = M(r0)
    rz0 = _vdot(r0, z0)
    goal = _threshold(b, tol, atol)

    def cond(s):
        _, r, _, _, k = s
        return (_norm2(r) > goal) & (k < maxiter)

    def body(s):
        x, r, p, rz, k = s
        ap = A(p)
        alpha = rz / _vdot(p, ap)
        x = _tmap(lambda u, v: u + alpha * v, x, p)
        r = _tmap(lambda u, v: u - alpha * v, r, ap)
        z = M(r)
        rz_new = _vdot(r, z)
        beta = rz_new / rz
        p = _tmap(lambda u, v: u + beta * v, z, p)
        return x, r, p, rz_new, k + 1

    return while_loop(cond, body, (x0, r0, z0, rz0, np.int64(0)))[0]


def cg(
    A: Any,
    b: Any,
    x0: Any = None,
    *,
    tol: float = 1e-5,
    atol: float = 0.0,
    maxiter: int | None = None,
    M: Any = None,
) -> tuple[Any, None]:
    """Solve ``A x = b`` for a symmetric (Hermitian) positive-definite ``A`` by conjugate gradients.

    Args:
      A: a square matrix or a linear function of a pytree like ``b`` (it may close over differentiated values).
      b: the right-hand side, a pytree of tensors.
      x0: the starting point (zeros by default).
      tol, atol: stop when ``|b - A x| <= max(tol * |b|, atol)``.
      maxiter: at most this many iterations (10 times the size of ``b`` by default).
      M: a preconditioner approximating ``A^-1``, as a matrix or a function.

    Returns:
      ``(x, None)``, as ``jax.scipy.sparse.linalg.cg`` (the second item stands for SciPy's convergence info).
      ``x`` is differentiated through the solution (``dx = A^-1 (db - dA x)``, solved by CG), not the iterations.

    >>> A = fl.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=fl.float64)
    >>> x, _ = fl.linalg.cg(A, fl.tensor([1.0, 2.0], dtype=fl.float64))
    >>> x
    Tensor([0.09090909, 0.63636364], dtype=float64)
    >>> fl.grad(lambda b: fl.linalg.cg(A, b)[0].sum())(fl.tensor([1.0, 2.0], dtype=fl.float64))
    Tensor([0.18181818, 0.27272727], dtype=float64)
    """
    A, b, x0, tol, atol, maxiter, M, real_b = _prepare("cg", A, b, x0, tol, atol, maxiter, M)

    def solve(op, rhs):
        return _cg_iterations(op, rhs, x0, tol, atol, maxiter, M)

    # a real positive-definite operator is symmetric; a complex Hermitian one solves its transpose the same way
    x = custom_linear_solve(A, b, solve, transpose_solve=solve, symmetric=real_b)
    return x, None


def _bicgstab_iterations(A, b, x0, tol, atol, maxiter, M):
    r0 = _tmap(lambda u, v: u - v, b, A(x0))
    goal = _threshold(b, tol, atol)
    one = _vdot(r0, r0) * 0 + 1
    zero_like = _tmap(lambda v: zeros(v.shape, dtype=v.dtype), r0)

    def cond(s):
        _, r, *_, k = s
        # k < 0 marks a breakdown (a zero denominator): the iterate is returned as it stands
        return (_norm2(r) > goal) & (k < maxiter) & (k >= 0)

    def body(s):
        x, r, rhat, rho, alpha, omega, p, v, k = s
        rho_new = _vdot(rhat, r)
        beta = (rho_new / rho) * (alpha / omega)
        p = _tmap(lambda r_, p_, v_: r_ + beta * (p_ - omega * v_), r, p, v)
        phat = M(p)
        v = A(phat)
        alpha = rho_new / _vdot(rhat, v)
        s_ = _tmap(lambda r_, v_: r_ - alpha * v_, r, v)
        done = _norm2(s_) <= goal
        shat = M(s_)
        t = A(shat)
        tt = _vdot(t, t)
        omega_new = where(tt == 0, tt, _vdot(t, s_) / where(tt == 0, one, tt))
        x = _tmap(
            lambda x_, ph, sh: where(done, x_ + alpha * ph, x_ + alpha * ph + omega_new * sh), x, phat, shat
        )
        r = _tmap(lambda s1, t_: where(done, s1, s1 - omega_new * t_), s_, t)
        broke = (rho_new == 0) | (alpha == 0) | ((omega_new == 0) & ~done)
        k = where(broke, np.int64(-1), k + 1)
        return x, r, rhat, rho_new, alpha, where(done, omega, omega_new), p, v, k

    init = (x0, r0, r0, one, one, one, zero_like, zero_like, np.int64(0))
    return while_loop(cond, body, init)[0]


def bicgstab(
    A: Any,
    b: Any,
    x0: Any = None,
    *,
    tol: float = 1e-5,
    atol: float = 0.0,
    maxiter: int | None = None,
    M: Any = None,
) -> tuple[Any, None]:
    """Solve ``A x = b`` for a general square ``A`` by the biconjugate gradient stabilized method (BiCGSTAB).

    Arguments and result as ``fl.linalg.cg``; ``A`` need not be symmetric. Reverse mode solves the transposed
    system ``A^T y = g`` with BiCGSTAB as well (``A``'s transpose is derived from ``A``).

    >>> A = fl.tensor([[3.0, 1.0], [-1.0, 2.0]])
    >>> x, _ = fl.linalg.bicgstab(A, fl.tensor([1.0, 0.0]))
    >>> x
    Tensor([0.2857143 , 0.14285715], dtype=float32)
    """
    A, b, x0, tol, atol, maxiter, M, _ = _prepare("bicgstab", A, b, x0, tol, atol, maxiter, M)

    def solve(op, rhs):
        return _bicgstab_iterations(op, rhs, x0, tol, atol, maxiter, M)

    x = custom_linear_solve(A, b, solve, transpose_solve=solve)
    return x, None


__all__ = ["cg", "bicgstab"]
