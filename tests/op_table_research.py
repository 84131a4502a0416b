"""Op-table rows for host callbacks, runtime checks, rematerialization and implicit linear solves
(transforms/callbacks.py, checkify.py, remat.py, implicit.py).

``tests/op_table.py`` appends ``ROWS`` to its table. Each row applies its primitive the way users reach it (through
``fl.debug.callback``, ``fl.pure_callback``, ``fl.debug.check``, ``fl.debug.checkify``, ``fl.checkpoint`` and
``fl.custom_linear_solve``), around a body that is nonlinear in one argument and linear in another where the
primitive has a transpose.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from op_table import PAIRS, Row, values

import funclib as fl
from funclib import dtypes as D

ROWS: list[Row] = []

F = (D.float32, D.float64)
FC = F + (D.complex64, D.complex128)


def _shapes_cfg(**more):
    return lambda dtype: st.fixed_dictionaries({"shapes": PAIRS, **more})


def _pair(draw, cfg, dtype, smooth):
    return [values(draw, dtype, s) for s in cfg["shapes"]]


_SEEN: list = []  # what the debug_callback row's callback received (the row's rules run it many times)


def _debug_apply(cfg, x, y):
    fl.debug.callback(lambda a: _SEEN.append(a.shape), x)
    return fl.sin(x) * y


ROWS.append(Row("debug_callback", _debug_apply, _shapes_cfg(), _pair, lambda cfg, x, y: np.sin(x) * y, FC))


def _pure_apply(cfg, x, y):
    s = fl.pure_callback(np.sin, fl.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method=cfg["method"])
    return s * y


ROWS.append(
    Row(
        "pure_callback",
        _pure_apply,
        _shapes_cfg(method=st.sampled_from(["sequential", "expand_dims", "broadcast_all"])),
        _pair,
        lambda cfg, x, y: np.sin(x) * y,
        FC,
        nondiff="host code has no derivative; wrap its caller in fl.custom_jvp/custom_vjp",
    )
)


def _check_apply(cfg, x, y):
    fl.debug.check(fl.all(fl.isfinite(x)), "x must be finite, got {}", x)
    return fl.sin(x) * y


ROWS.append(Row("check", _check_apply, _shapes_cfg(), _pair, lambda cfg, x, y: np.sin(x) * y, FC))


def _checkify_apply(cfg, x, y):
    err, out = fl.debug.checkify(lambda a, b: fl.sin(a) * b, errors=fl.debug.all_checks)(x, y)
    return out


ROWS.append(Row("checkify", _checkify_apply, _shapes_cfg(), _pair, lambda cfg, x, y: np.sin(x) * y, FC))

_POLICIES = {
    "nothing": fl.checkpoint_policies.nothing_saveable,
    "dots": fl.checkpoint_policies.dots_saveable,
    "everything": fl.checkpoint_policies.everything_saveable,
}


def _remat_apply(cfg, x, y):
    def body(a, b):
        return fl.sin(a) * b + fl.sum(a * b)

    return fl.checkpoint(body, policy=_POLICIES[cfg["policy"]])(x, y)


def _remat_ref(cfg, x, y):
    return np.sin(x) * y + np.sum(x * y)


ROWS.append(
    Row(
        "checkpoint",
        _remat_apply,
        _shapes_cfg(policy=st.sampled_from(sorted(_POLICIES))),
        _pair,
        _remat_ref,
        FC,
        linear=((1,),),
    )
)


def _solve_sample(draw, cfg, dtype, smooth):
    n = cfg["n"]
    a = values(draw, dtype, (n, n))
    # diagonally dominant, so the system is well conditioned at every drawn point
    return [a + np.eye(n, dtype=dtype) * (2 * n + 1), values(draw, dtype, (n,))]


def _gauss(a, b):
    """Gaussian elimination without pivoting (the drawn matrices are diagonally dominant), in exportable ops."""
    n = a.shape[0]
    rows, rhs = [a[i] for i in range(n)], [b[i] for i in range(n)]
    for k in range(n):
        for i in range(k + 1, n):
            f = rows[i][k] / rows[k][k]
            rows[i], rhs[i] = rows[i] - f * rows[k], rhs[i] - f * rhs[k]
    x = [None] * n
    for i in reversed(range(n)):
        s = rhs[i]
        for j in range(i + 1, n):
            s = s - rows[i][j] * x[j]
        x[i] = s / rows[i][i]
    return fl.stack(x)


def _solve_apply(cfg, a, b):
    return fl.custom_linear_solve(
        lambda v: a @ v,
        b,
        lambda matvec, rhs: _gauss(a, rhs),
        transpose_solve=lambda vecmat, rhs: _gauss(fl.matrix_transpose(a), rhs),
    )


ROWS.append(
    Row(
        "custom_linear_solve",
        _solve_apply,
        lambda dtype: st.fixed_dictionaries({"n": st.integers(1, 3)}),
        _solve_sample,
        lambda cfg, a, b: np.linalg.solve(a, b),
        FC,
        linear=((1,),),
        tol=20.0,
    )
)
