"""Testing utilities for code built on funclib: derivative checks against finite differences, tolerant
comparisons of tensors and pytrees, and Hypothesis strategies (``funclib.testing.strategies``).

Every derivative check runs in float64: floating inputs are cast to float64 (complex ones to complex128) and
compared with central finite differences along random directions drawn from a fixed seed, so a check either
always passes or always fails. A failure raises ``AssertionError`` naming the check, the output (or input) leaf,
the worst element's index, the expected and actual values, and the absolute and relative errors.

Complex cotangents follow JAX's convention: a cotangent ``c`` of a complex value stands for the real linear
functional ``v -> Re(sum(c * v))`` (no conjugation).

>>> import funclib as fl
>>> from funclib.testing import check_grads
>>> check_grads(lambda x: fl.sin(x) * x, (fl.tensor([0.5, 1.0]),), order=2)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import optree

from .. import dtypes
from ..checks import check_callable, describe
from ..core import Tensor
from ..errors import FunclibError
from ..ops.creation import asarray
from ..transforms import jvp, linear_transpose, vjp

__all__ = [
    "assert_allclose",
    "assert_trees_allclose",
    "check_adjoint",
    "check_custom_rule",
    "check_grads",
    "check_jvp",
    "check_vjp",
    "default_tolerance",
]

_NS = "funclib"


def __getattr__(name: str):
    # the Hypothesis strategies load on first use, so the rest of funclib.testing works without Hypothesis
    if name == "strategies":
        return importlib.import_module(f"{__name__}.strategies")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# (rtol, atol) used by assert_allclose when none is given
_DEFAULT_TOL: dict[np.dtype, tuple[float, float]] = {
    dtypes.float16: (1e-3, 1e-3),
    dtypes.bfloat16: (1e-2, 1e-2),
    dtypes.float32: (1e-5, 1e-6),
    dtypes.float64: (1e-10, 1e-12),
    dtypes.complex64: (1e-5, 1e-6),
    dtypes.complex128: (1e-10, 1e-12),
}

# defaults of the finite-difference checks (always run in float64)
_GRAD_RTOL = 1e-5
_GRAD_ATOL = 1e-5
_GRAD_EPS = 1e-5
# reverse mode is compared element by element while the inputs have at most this many scalars; beyond it, along
# one random direction (each element costs two evaluations of the function)
_ELEMENTWISE_LIMIT = 48


def default_tolerance(dtype) -> tuple[float, float]:
    """The ``(rtol, atol)`` that ``assert_allclose`` uses for ``dtype`` (exact for integers and booleans).

    >>> default_tolerance(fl.float32)
    (1e-05, 1e-06)
    """
    return _DEFAULT_TOL.get(dtypes.canonicalize(dtype), (0.0, 0.0))


# ---------------------------------------------------------------------------------------------------------------
# Comparisons


def _as_numpy(x) -> np.ndarray:
    if isinstance(x, Tensor):
        return np.asarray(x)
    return np.asarray(x)


def _numeric(x, what: str, op: str = "assert_allclose") -> np.ndarray:
    """``x`` as a NumPy array of numbers or booleans; anything else is a TypeError, not a mismatch."""
    a = _as_numpy(x)
    if a.dtype.kind not in "biufc" and a.dtype not in (np.dtype(ml_dtypes.bfloat16),):
        raise TypeError(f"{op}: {what} must be a tensor, an array or a number, got {describe(x)}")
    return a


def _check_inputs(op: str, args, **functions) -> None:
    """The checks' arguments: callables and a tuple (or list) of positional arguments."""
    for name, fn in functions.items():
        check_callable(fn, op, name)
    if not isinstance(args, (tuple, list)):
        raise TypeError(
            f"{op}: args must be a tuple of the function's positional arguments (e.g. (x,)), got {describe(args)}"
        )


def _wide(a: np.ndarray) -> np.ndarray:
    """``a`` in a dtype where differences are exact enough to report: float64, complex128, or Python ints."""
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    if a.dtype.kind in "iub":
        return a.astype(object) if a.dtype.kind in "iu" and a.dtype.itemsize == 8 else a.astype(np.int64)
    return a.astype(np.float64)


def _fmt_index(idx: tuple) -> str:
    return "()" if not idx else "(" + ", ".join(str(int(i)) for i in idx) + ("," if len(idx) == 1 else "") + ")"


def _fmt_val(v) -> str:
    if isinstance(v, complex | np.complexfloating):
        return f"{complex(v):.8g}"
    if isinstance(v, float | np.floating):
        return f"{float(v):.8g}"
    return str(v)


def _mismatch(actual: np.ndarray, desired: np.ndarray, rtol: float, atol: float, equal_nan: bool):
    """``None`` if close, else a message describing the worst element."""
    a, d = _wide(actual), _wide(desired)
    if a.dtype == object or d.dtype == object:
        diff = np.asarray(a, dtype=object) - np.asarray(d, dtype=object)
        err = np.asarray(np.abs(diff), dtype=np.float64)
        allowed = atol + rtol * np.abs(np.asarray(d, dtype=np.float64))
        bad = err > allowed
        ratio = np.where(bad, err / np.maximum(allowed, np.finfo(np.float64).tiny), 0.0)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(a - d).astype(np.float64)
            allowed = atol + rtol * np.abs(d).astype(np.float64)
            nan_a, nan_d = np.isnan(a), np.isnan(d)
            same_inf = np.isinf(a) & (a == d)
            both_nan = nan_a & nan_d if equal_nan else np.zeros(a.shape, bool)
            err = np.where(same_inf | both_nan, 0.0, err)
            inf_mismatch = (np.isinf(a) | np.isinf(d)) & ~same_inf & ~both_nan
            bad = (err > allowed) | ((nan_a | nan_d) & ~both_nan) | inf_mismatch
            ratio = np.where(bad, np.where(np.isnan(err), np.inf, err / np.maximum(allowed, 1e-300)), 0.0)
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return None
    flat = int(np.argmax(ratio.reshape(-1)))
    idx = tuple(int(i) for i in np.unravel_index(flat, a.shape)) if a.shape else ()
    abs_err = float(err[idx])
    denom = float(np.abs(d[idx]))
    rel = abs_err / denom if denom else float("inf")
    return (
        f"worst element at index {_fmt_index(idx)}: expected {_fmt_val(d[idx])}, got {_fmt_val(a[idx])}\n"
        f"  abs error {abs_err:.3g}, rel error {rel:.3g} (rtol {rtol:g}, atol {atol:g}); "
        f"{n_bad} of {a.size} elements differ"
    )


def _tol_for(*arrays, rtol, atol):
    if rtol is not None and atol is not None:
        return rtol, atol
    tols = [default_tolerance(a.dtype) for a in arrays if a.dtype in _DEFAULT_TOL]
    r = max((t[0] for t in tols), default=0.0)
    a_ = max((t[1] for t in tols), default=0.0)
    return (r if rtol is None else rtol), (a_ if atol is None else atol)


def assert_allclose(
    actual,
    desired,
    rtol: float | None = None,
    atol: float | None = None,
    *,
    equal_nan: bool = True,
    check_dtype: bool = False,
    err_msg: str = "",
) -> None:
    """Assert that two tensors (or arrays, or scalars) have the same shape and close values.

    ``|actual - desired| <= atol + rtol * |desired|`` elementwise. Default tolerances come from the less precise
    of the two dtypes (``default_tolerance``); integers and booleans must match exactly. NaNs match NaNs (unless
    ``equal_nan=False``) and infinities match infinities of the same sign. On failure the message shows the worst
    element: its index, both values, and the absolute and relative errors.

    Args:
      actual, desired: tensors, NumPy arrays or Python scalars.
      rtol, atol: relative and absolute tolerance (default: by dtype).
      equal_nan: whether NaN equals NaN. Default True.
      check_dtype: also require equal dtypes. Default False.
      err_msg: prefix for the failure message.

    >>> assert_allclose(fl.tensor([1.0, 2.0]), [1.0, 2.0000001])
    """
    a, d = _numeric(actual, "actual"), _numeric(desired, "desired")
    prefix = f"{err_msg}: " if err_msg else ""
    if a.shape != d.shape:
        raise AssertionError(f"{prefix}shapes differ: actual {a.shape}, desired {d.shape}")
    if check_dtype and a.dtype != d.dtype:
        raise AssertionError(f"{prefix}dtypes differ: actual {a.dtype.name}, desired {d.dtype.name}")
    rtol, atol = _tol_for(a, d, rtol=rtol, atol=atol)
    msg = _mismatch(a, d, rtol, atol, equal_nan)
    if msg is not None:
        raise AssertionError(f"{prefix}values differ ({a.dtype.name}{list(a.shape)}):\n  {msg}")


def _fmt_path(path) -> str:
    return "".join(f"[{k!r}]" for k in path) or "<root>"


def _flatten_with_paths(tree):
    paths, leaves, treedef = optree.tree_flatten_with_path(tree, none_is_leaf=False, namespace=_NS)
    return [_fmt_path(p) for p in paths], leaves, treedef


def assert_trees_allclose(
    a,
    b,
    rtol: float | None = None,
    atol: float | None = None,
    *,
    equal_nan: bool = True,
    check_dtype: bool = False,
    err_msg: str = "",
) -> None:
    """Assert that two pytrees have the same structure and close leaves (see ``assert_allclose``).

    A structure mismatch shows both structures; a leaf mismatch names the leaf's path.

    >>> assert_trees_allclose({"w": fl.ones(2)}, {"w": fl.ones(2)})
    """
    pa, la, ta = _flatten_with_paths(a)
    pb, lb, tb = _flatten_with_paths(b)
    prefix = f"{err_msg}: " if err_msg else ""
    if ta != tb:
        raise AssertionError(f"{prefix}pytree structures differ:\n  actual:  {ta}\n  desired: {tb}")
    for path, x, y in zip(pa, la, lb):
        assert_allclose(x, y, rtol, atol, equal_nan=equal_nan, check_dtype=check_dtype, err_msg=f"{prefix}leaf {path}")


# ---------------------------------------------------------------------------------------------------------------
# float64 inputs, random directions, finite differences


def _is_diff_leaf(x) -> bool:
    """Inputs that are differentiated: floating or complex tensors/arrays and Python floats/complexes."""
    if isinstance(x, bool | int):
        return False
    if isinstance(x, float | complex):
        return True
    if isinstance(x, Tensor | np.ndarray | np.generic):
        return np.dtype(x.dtype) in dtypes.INEXACT
    return False


def _x64(x):
    if not _is_diff_leaf(x):
        return asarray(x) if isinstance(x, np.ndarray | np.generic) else x
    v = _as_numpy(x)
    wide = np.complex128 if v.dtype.kind == "c" else np.float64
    return asarray(v.astype(wide))


def _to_x64(args: tuple) -> tuple:
    return optree.tree_map(_x64, tuple(args), none_is_leaf=False, namespace=_NS)


def _random_like(tree, rng: np.random.Generator):
    """Random normal leaves for differentiable leaves; zeros (same dtype) for the rest."""

    def one(x):
        if not isinstance(x, Tensor | np.ndarray | np.generic | float | complex | int | bool):
            return x
        v = _as_numpy(x)
        if _is_diff_leaf(x):
            r = rng.standard_normal(v.shape)
            if v.dtype.kind == "c":
                r = (r + 1j * rng.standard_normal(v.shape)) / np.sqrt(2)
            return asarray(r.astype(v.dtype))
        return asarray(np.zeros(v.shape, v.dtype))

    return optree.tree_map(one, tree, none_is_leaf=False, namespace=_NS)


def _outputs(tree) -> tuple[list[str], list[np.ndarray], Any]:
    paths, leaves, treedef = _flatten_with_paths(tree)
    return paths, [_as_numpy(x) for x in leaves], treedef


def _shifted(args, tangents, eps: float):
    def one(x, t):
        if not _is_diff_leaf(x):
            return x
        v = _as_numpy(x)
        return asarray((v + eps * _as_numpy(t)).astype(v.dtype))

    return optree.tree_map(one, args, tangents, none_is_leaf=False, namespace=_NS)


def _fd_jvp(f, args, tangents, eps: float) -> list[np.ndarray]:
    """Central differences of ``f`` at ``args`` along ``tangents``, one array per output leaf."""
    _, plus, _ = _outputs(f(*_shifted(args, tangents, eps)))
    _, minus, _ = _outputs(f(*_shifted(args, tangents, -eps)))
    out = []
    for p, m in zip(plus, minus):
        if p.dtype in dtypes.INEXACT:
            out.append((_wide(p) - _wide(m)) / (2 * eps))
        else:
            out.append(np.zeros(p.shape, np.float64))
    return out


def _pair(c, v) -> float:
    """The real pairing of a cotangent with a tangent: ``Re(sum(c * v))``."""
    c, v = _as_numpy(c), _as_numpy(v)
    if c.dtype not in dtypes.INEXACT or v.dtype not in dtypes.INEXACT:
        return 0.0
    return float(np.real(np.sum(_wide(c) * _wide(v))))


def _pair_abs(c, v) -> float:
    c, v = _as_numpy(c), _as_numpy(v)
    if c.dtype not in dtypes.INEXACT or v.dtype not in dtypes.INEXACT:
        return 0.0
    return float(np.sum(np.abs(_wide(c)) * np.abs(_wide(v))))


def _pair_trees(cs, vs) -> tuple[float, float]:
    lc = optree.tree_leaves(cs, none_is_leaf=False, namespace=_NS)
    lv = optree.tree_leaves(vs, none_is_leaf=False, namespace=_NS)
    return sum(_pair(c, v) for c, v in zip(lc, lv)), sum(_pair_abs(c, v) for c, v in zip(lc, lv))


def _fd_vjp_elementwise(f, args, ct, eps: float) -> list[np.ndarray | None]:
    """``J^T ct`` by central differences of ``x -> <ct, f(x)>`` along each input element (complex: both parts)."""
    paths, leaves, treedef = _flatten_with_paths(args)
    del paths
    _, ct_leaves, _ = _outputs(ct)
    out: list[np.ndarray | None] = []

    def phi(new_leaves):
        _, ys, _ = _outputs(f(*optree.tree_unflatten(treedef, new_leaves)))
        return sum(_pair(c, y) for c, y in zip(ct_leaves, ys))

    for i, x in enumerate(leaves):
        if not _is_diff_leaf(x):
            out.append(None)
            continue
        v = _as_numpy(x)
        res = np.zeros(v.shape, v.dtype)
        units = (1.0, 1j) if v.dtype.kind == "c" else (1.0,)
        for j in np.ndindex(v.shape):
            for u in units:
                d = np.zeros(v.shape, v.dtype)
                d[j] = u
                fp = phi([_shift_leaf(y, d, eps) if k == i else y for k, y in enumerate(leaves)])
                fm = phi([_shift_leaf(y, d, -eps) if k == i else y for k, y in enumerate(leaves)])
                g = (fp - fm) / (2 * eps)
                # JAX convention: c pairs with v as Re(c v), so Re(c) = dphi/dre and Im(c) = -dphi/dim
                res[j] += g if u == 1.0 else -1j * g
        out.append(res)
    return out


def _shift_leaf(x, d: np.ndarray, eps: float):
    v = _as_numpy(x)
    return asarray((v + eps * d).astype(v.dtype))


def _n_diff_scalars(args) -> int:
    leaves = optree.tree_leaves(args, none_is_leaf=False, namespace=_NS)
    return sum(_as_numpy(x).size * (2 if _as_numpy(x).dtype.kind == "c" else 1) for x in leaves if _is_diff_leaf(x))


def _name(f) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _resolve(atol, rtol, eps):
    return (
        _GRAD_ATOL if atol is None else atol,
        _GRAD_RTOL if rtol is None else rtol,
        _GRAD_EPS if eps is None else eps,
    )


def _compare_trees(what: str, got, expected: list[np.ndarray], paths: list[str], atol: float, rtol: float):
    _, got_leaves, _ = _outputs(got)
    if len(got_leaves) != len(expected):
        raise AssertionError(f"{what}: expected {len(expected)} leaves, got {len(got_leaves)}")
    for path, g, e in zip(paths, got_leaves, expected):
        if g.shape != e.shape:
            raise AssertionError(f"{what}: leaf {path} has shape {g.shape}, expected {e.shape}")
        if g.dtype not in dtypes.INEXACT:
            continue
        msg = _mismatch(g, e, rtol, atol, equal_nan=True)
        if msg is not None:
            raise AssertionError(f"{what}, leaf {path} ({g.dtype.name}{list(g.shape)}):\n  {msg}")


# ---------------------------------------------------------------------------------------------------------------
# Derivative checks

_NOT_DIFFERENTIABLE = (FunclibError, TypeError, ValueError, NotImplementedError)


def check_jvp(
    f: Callable,
    f_jvp: Callable,
    args: Sequence,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    eps: float | None = None,
    seed: int = 0,
    err_msg: str = "",
) -> None:
    """Check a forward-mode derivative against central finite differences of ``f``, in float64.

    ``f_jvp(primals, tangents) -> (out, tangent_out)`` (the signature of ``functools.partial(fl.jvp, f)``).
    The tangent is a random direction (fixed ``seed``); integer and boolean inputs get zero tangents.

    Args:
      f: the function, of positional pytree arguments.
      f_jvp: its forward-mode derivative.
      args: a tuple of ``f``'s positional arguments.
      atol, rtol: tolerances (default 1e-5 each). eps: the finite-difference step (default 1e-5).
      seed: seeds the random direction.
      err_msg: prefix for the failure message.

    >>> check_jvp(fl.sin, lambda p, t: (fl.sin(p[0]), fl.cos(p[0]) * t[0]), (fl.tensor([0.3]),))
    """
    _check_inputs("check_jvp", args, f=f, f_jvp=f_jvp)
    atol, rtol, eps = _resolve(atol, rtol, eps)
    args = _to_x64(tuple(args))
    tangents = _random_like(args, np.random.default_rng(seed))
    what = f"{err_msg + ': ' if err_msg else ''}JVP of {_name(f)}"
    out, t_out = f_jvp(args, tangents)
    paths, want_out, _ = _outputs(f(*args))
    _compare_trees(f"{what}: primal output", out, want_out, paths, atol, rtol)
    _compare_trees(f"{what} vs finite differences", t_out, _fd_jvp(f, args, tangents, eps), paths, atol, rtol)


def check_vjp(
    f: Callable,
    f_vjp: Callable,
    args: Sequence,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    eps: float | None = None,
    seed: int = 0,
    err_msg: str = "",
) -> None:
    """Check a reverse-mode derivative against central finite differences of ``f``, in float64.

    ``f_vjp(*primals) -> (out, vjp_fn)`` with ``vjp_fn(cotangent) -> tuple of input cotangents`` (the signature
    of ``functools.partial(fl.vjp, f)``). With a random output cotangent ``u``, ``vjp_fn(u)`` is compared element
    by element with finite differences of ``x -> <u, f(x)>`` while the inputs have at most 48 scalars, and
    along a random input direction ``v`` (``<vjp_fn(u), v>`` against ``<u, J v>``) beyond that.

    Args: as in ``check_jvp``.

    >>> check_vjp(fl.sin, lambda x: (fl.sin(x), lambda u: (fl.cos(x) * u,)), (fl.tensor([0.3]),))
    """
    _check_inputs("check_vjp", args, f=f, f_vjp=f_vjp)
    atol, rtol, eps = _resolve(atol, rtol, eps)
    args = _to_x64(tuple(args))
    rng = np.random.default_rng(seed)
    what = f"{err_msg + ': ' if err_msg else ''}VJP of {_name(f)}"
    out, vjp_fn = f_vjp(*args)
    paths, want_out, _ = _outputs(f(*args))
    _compare_trees(f"{what}: primal output", out, want_out, paths, atol, rtol)
    ct = _random_like(out, rng)
    ct_in = vjp_fn(ct)
    if not isinstance(ct_in, tuple | list) or len(ct_in) != len(args):
        raise AssertionError(f"{what}: vjp_fn returned {type(ct_in).__name__}, expected a tuple of {len(args)}")
    in_paths, _, in_tree = _flatten_with_paths(args)
    _, got_leaves, got_tree = _flatten_with_paths(tuple(ct_in))
    if got_tree != in_tree:
        raise AssertionError(
            f"{what}: cotangent structure differs from the inputs':\n  got:    {got_tree}\n  inputs: {in_tree}"
        )
    if _n_diff_scalars(args) <= _ELEMENTWISE_LIMIT:
        expected = _fd_vjp_elementwise(f, args, ct, eps)
        for path, g, e in zip(in_paths, got_leaves, expected):
            if e is None:
                continue
            g = _as_numpy(g)
            if g.shape != e.shape:
                raise AssertionError(f"{what}: cotangent of input {path} has shape {g.shape}, expected {e.shape}")
            msg = _mismatch(g, e, rtol, atol, equal_nan=True)
            if msg is not None:
                raise AssertionError(
                    f"{what} vs finite differences, cotangent of input {path} ({g.dtype.name}{list(g.shape)}):\n  {msg}"
                )
        return
    v = _random_like(args, rng)
    got, scale = _pair_trees(tuple(ct_in), v)
    fd = _fd_jvp(f, args, v, eps)
    want, scale2 = _pair_trees(ct, fd)
    _assert_scalar_close(
        f"{what} vs finite differences, <vjp(u), v> against <u, J v>", got, want, max(scale, scale2), atol, rtol
    )


def _assert_scalar_close(what: str, got: float, want: float, scale: float, atol: float, rtol: float):
    err = abs(got - want)
    if not err <= atol + rtol * scale:
        rel = err / scale if scale else float("inf")
        raise AssertionError(
            f"{what}:\n  expected {want:.10g}, got {got:.10g}\n"
            f"  abs error {err:.3g}, rel error {rel:.3g} of the terms' magnitude {scale:.3g} "
            f"(rtol {rtol:g}, atol {atol:g})"
        )


def check_adjoint(
    f: Callable,
    args: Sequence,
    *,
    linear: bool = False,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
    err_msg: str = "",
) -> None:
    """Check ``<u, J v> == <J^T u, v>`` for random ``u``, ``v`` (in float64).

    By default ``J v`` comes from ``fl.jvp`` and ``J^T u`` from ``fl.vjp``, so this checks that forward and
    reverse mode agree at ``args``. With ``linear=True``, ``f`` must be linear in all its arguments: ``J v`` is
    ``f(v)`` and ``J^T u`` comes from ``fl.linear_transpose`` (this checks the transpose rules).

    >>> check_adjoint(lambda x: 3.0 * x, (fl.ones(4),), linear=True)
    """

    _check_inputs("check_adjoint", args, f=f)
    atol = _GRAD_ATOL if atol is None else atol
    rtol = _GRAD_RTOL if rtol is None else rtol
    args = _to_x64(tuple(args))
    rng = np.random.default_rng(seed)
    v = _random_like(args, rng)
    if linear:
        jv = f(*v)
        u = _random_like(jv, rng)
        jtu = linear_transpose(f, *args)(u)
        kind = "transpose"
    else:
        out, jv = jvp(f, args, v)
        u = _random_like(out, rng)
        jtu = vjp(f, *args)[1](u)
        kind = "jvp/vjp"
    lhs, s1 = _pair_trees(u, jv)
    rhs, s2 = _pair_trees(tuple(jtu), v)
    what = f"{err_msg + ': ' if err_msg else ''}adjointness ({kind}) of {_name(f)}: <u, J v> against <J^T u, v>"
    _assert_scalar_close(what, rhs, lhs, max(s1, s2), atol, rtol)


def check_grads(
    f: Callable,
    args: Sequence,
    order: int = 2,
    modes: Sequence[str] = ("fwd", "rev"),
    atol: float | None = None,
    rtol: float | None = None,
    eps: float | None = None,
    *,
    seed: int = 0,
) -> None:
    """Check ``f``'s derivatives up to ``order`` against central finite differences, in float64.

    Order 1 checks ``fl.jvp`` (mode ``"fwd"``) and ``fl.vjp`` (mode ``"rev"``) of ``f``. Order ``k`` then checks
    the derivatives of those derivatives recursively: the JVP of ``(x, t) -> jvp(f, x, t)`` and the VJP of
    ``(x, u) -> vjp(f, x)(u)``, with fixed random ``t``, ``u``. Inputs are cast to float64 (complex128);
    integer and boolean inputs are held fixed.

    Args:
      f: a function of positional pytree arguments returning a pytree of tensors.
      args: a tuple of ``f``'s positional arguments.
      order: the highest derivative order to check. Default 2.
      modes: ``"fwd"``, ``"rev"`` or both. Default both.
      atol, rtol: tolerances of the comparisons (default 1e-5 each).
      eps: the finite-difference step (default 1e-5).
      seed: seeds the random directions.

    Raises:
      AssertionError: naming the derivative (e.g. "VJP of JVP of f"), the leaf and its worst element.

    >>> check_grads(lambda x, y: fl.exp(x) * y, (fl.tensor([0.1, 0.2]), fl.tensor(3.0)))
    """

    _check_inputs("check_grads", args, f=f)
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"check_grads: order must be a positive int, got {order!r}")
    bad = [m for m in modes if m not in ("fwd", "rev")]
    if bad or not modes:
        raise ValueError(f"check_grads: modes must be a non-empty subset of ('fwd', 'rev'), got {tuple(modes)!r}")
    atol, rtol, eps = _resolve(atol, rtol, eps)
    rng = np.random.default_rng(seed)

    def run(fun, xs, k, label):
        if "fwd" in modes:
            check_jvp(
                fun,
                lambda p, t: jvp(fun, p, t),
                xs,
                atol=atol,
                rtol=rtol,
                eps=eps,
                seed=int(rng.integers(2**31)),
                err_msg=label,
            )
            if k > 1:
                n = len(xs)
                ts = _random_like(xs, rng)

                def fun_jvp(*pt, fun=fun, n=n):
                    return jvp(fun, tuple(pt[:n]), tuple(pt[n:]))

                fun_jvp.__name__ = f"JVP of {_name(fun)}"
                run(fun_jvp, tuple(xs) + tuple(ts), k - 1, label)
        if "rev" in modes:
            check_vjp(
                fun,
                lambda *p: vjp(fun, *p),
                xs,
                atol=atol,
                rtol=rtol,
                eps=eps,
                seed=int(rng.integers(2**31)),
                err_msg=label,
            )
            if k > 1:
                us = _random_like(fun(*xs), rng)

                def fun_vjp(*pu, fun=fun):
                    return vjp(fun, *pu[:-1])[1](pu[-1])

                fun_vjp.__name__ = f"VJP of {_name(fun)}"
                run(fun_vjp, tuple(xs) + (us,), k - 1, label)

    run(f, _to_x64(tuple(args)), order, "")


def check_custom_rule(
    f: Callable,
    args: Sequence,
    *,
    modes: Sequence[str] = ("fwd", "rev"),
    atol: float | None = None,
    rtol: float | None = None,
    eps: float | None = None,
    seed: int = 0,
) -> None:
    """Check the rule of a ``fl.custom_jvp`` / ``fl.custom_vjp`` function against the derivative of its primal.

    The custom rule (``fl.jvp``/``fl.vjp`` of ``f``) is compared, along random directions in float64, with
    ``fl.jvp``/``fl.vjp`` of ``f.fun``, the undecorated Python function. If ``f.fun`` cannot be differentiated
    (it leaves funclib, say through NumPy), the reference is central finite differences of ``f.fun`` instead.
    Arguments in ``f.nondiff_argnums`` are held fixed.

    Args:
      f: a ``custom_jvp`` or ``custom_vjp`` function (anything with the primal function as ``.fun``).
      args: a tuple of positional arguments.
      modes: ``"fwd"``, ``"rev"`` or both. Forward mode of a ``custom_vjp`` function differentiates the primal
        itself, so ``"rev"`` is the informative mode there.
      atol, rtol, eps, seed: as in ``check_grads``.

    >>> @fl.custom_jvp
    ... def f(x): return fl.sin(x)
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):
    ...     return f(primals[0]), fl.cos(primals[0]) * tangents[0]
    >>> check_custom_rule(f, (fl.tensor([0.5]),))
    """

    _check_inputs("check_custom_rule", args, f=f)
    bad = [m for m in modes if m not in ("fwd", "rev")]
    if bad or not modes:
        raise ValueError(
            f"check_custom_rule: modes must be a non-empty subset of ('fwd', 'rev'), got {tuple(modes)!r}"
        )
    primal = getattr(f, "fun", None)
    if primal is None or not callable(primal):
        raise TypeError(
            f"check_custom_rule: {_name(f)!r} is not a custom_jvp/custom_vjp function (it has no .fun); "
            "decorate it with @fl.custom_jvp or @fl.custom_vjp"
        )
    atol, rtol, eps = _resolve(atol, rtol, eps)
    args = _to_x64(tuple(args))
    nondiff = tuple(getattr(f, "nondiff_argnums", ()))
    dyn_idx = [i for i in range(len(args)) if i not in nondiff]

    def closed(fun):
        def g(*dyn):
            full = list(args)
            for i, d in zip(dyn_idx, dyn):
                full[i] = d
            return fun(*full)

        g.__name__ = _name(fun)
        return g

    custom, plain = closed(f), closed(primal)
    dyn = tuple(args[i] for i in dyn_idx)
    rng = np.random.default_rng(seed)
    label = f"custom rule of {_name(f)}"
    if "fwd" in modes:
        t = _random_like(dyn, rng)
        out, t_out = jvp(custom, dyn, t)
        paths, _, _ = _outputs(out)
        try:
            _, want = jvp(plain, dyn, t)
            want_leaves, ref = _outputs(want)[1], "the JVP of the primal function"
        except _NOT_DIFFERENTIABLE:  # the primal leaves funclib: fall back to finite differences
            want_leaves, ref = _fd_jvp(plain, dyn, t, eps), "finite differences of the primal function"
        _compare_trees(f"{label}: JVP vs {ref}", t_out, want_leaves, paths, atol, rtol)
    if "rev" in modes:
        out, vjp_fn = vjp(custom, *dyn)
        u = _random_like(out, rng)
        got = vjp_fn(u)
        try:
            want = vjp(plain, *dyn)[1](u)
            in_paths, want_leaves, _ = _outputs(tuple(want))
            ref = "the VJP of the primal function"
        except _NOT_DIFFERENTIABLE:  # the primal leaves funclib: fall back to finite differences
            in_paths, _, _ = _flatten_with_paths(dyn)
            fd = _fd_vjp_elementwise(plain, dyn, u, eps)
            want_leaves = [
                np.zeros(np.shape(x)) if e is None else e
                for e, x in zip(fd, optree.tree_leaves(dyn, none_is_leaf=False, namespace=_NS))
            ]
            ref = "finite differences of the primal function"
        _compare_trees(f"{label}: VJP vs {ref}", tuple(got), want_leaves, in_paths, atol, rtol)
