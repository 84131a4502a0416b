"""The unselected side of a ``where`` gets an exactly zero cotangent, and ``0 * inf`` must not turn it into NaN.

For every differentiable unary and binary row of the op table, at special points where the op's derivative is
infinite or NaN (poles, overflow, infinities, NaN inputs): the gradient of ``sum(where(mask, op(x), 0))`` is
exactly 0 where the mask is False and the op's derivative where it is True, eagerly and under ``jit``, in reverse
and forward mode.
"""

from __future__ import annotations

import numpy as np
import pytest
from op_table import ROWS

import funclib as fl
from funclib import dtypes as D
from funclib.core import PRIMITIVES

POINTS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0, np.pi / 2, 88.8, 100.0, -100.0, 710.0, 1000.0, -1000.0]
POINTS += [3.0e38, 1.0e300, np.inf, -np.inf, np.nan]
PARAMS = {"polygamma": [{"n": 0}, {"n": 1}, {"n": 2}], "integer_pow": [{"y": y} for y in (-2, -1, 2, 3)]}


def _rows(family):
    return [
        r
        for r in ROWS
        if getattr(PRIMITIVES[r.name], "family", "") == family
        and not r.nondiff
        and r.name not in ("convert_element_type", "complex")  # their outputs change dtype (or kind)
        and any(d in r.dtypes for d in (D.float32, D.float64))
    ]


UNARY, BINARY = _rows("unary"), _rows("binary")


def _cases(rows):
    return [
        pytest.param(row, dtype, params, id=f"{row.name}-{np.dtype(dtype).name}{params or ''}")
        for row in rows
        for dtype in (D.float32, D.float64)
        if dtype in row.dtypes
        for params in PARAMS.get(row.name, [{}])
    ]


def _check_masked(op, xs, what):
    """``op`` of the float arguments ``xs`` (elementwise, one shape): check masked gradients at every point."""
    ones = [fl.ones_like(x) for x in xs]
    with np.errstate(all="ignore"):
        # the op's own partial derivatives at each point (forward mode, one argument at a time)
        partials = []
        for i in range(len(xs)):
            t = [o if j == i else fl.zeros_like(x) for j, (o, x) in enumerate(zip(ones, xs))]
            partials.append(np.asarray(fl.jvp(op, tuple(xs), tuple(t))[1].numpy(), np.float64))
        finite = np.logical_and.reduce([np.isfinite(p) for p in partials])
        mask = fl.asarray(finite)

        def masked(*a):
            return fl.sum(fl.where(mask, op(*a), fl.zeros((), dtype=xs[0].dtype)))

        argnums = tuple(range(len(xs)))
        for name, g in (("eager", fl.grad(masked, argnums)), ("jit", fl.jit(fl.grad(masked, argnums)))):
            for i, gi in enumerate(g(*xs)):
                gi = np.asarray(gi.numpy(), np.float64)
                bad = ~finite & (gi != 0)
                assert not bad.any(), (
                    f"{what}, {name}: d/d arg {i} of the unselected branch is {gi[bad]} at "
                    f"{[np.asarray(x.numpy())[bad] for x in xs]}, not 0"
                )
                np.testing.assert_allclose(gi[finite], partials[i][finite], rtol=1e-5, err_msg=f"{what}, {name}")
        tangents = tuple(fl.asarray(np.full(x.shape, 0.5, x.dtype)) for x in xs)
        t_out = fl.jvp(lambda *a: fl.where(mask, op(*a), 0.0), tuple(xs), tangents)[1].numpy()
        bad = ~finite & (t_out != 0)
        assert not bad.any(), f"{what}: forward mode through the unselected branch gives {t_out[bad]}"
    return int((~finite).sum())


@pytest.mark.parametrize(("row", "dtype", "params"), _cases(UNARY))
def test_unary_masked_branch_has_zero_gradient(row, dtype, params):
    with np.errstate(over="ignore"):
        x = fl.asarray(np.asarray(POINTS, np.float64).astype(dtype))
    cfg = {"shape": x.shape, **params}
    _check_masked(lambda v: row.apply(cfg, v), [x], f"where(mask, {row.name}{params or ''}(x), 0)")


@pytest.mark.parametrize(("row", "dtype", "params"), _cases(BINARY))
def test_binary_masked_branch_has_zero_gradient(row, dtype, params):
    a, b = np.meshgrid(np.asarray(POINTS, np.float64), np.asarray(POINTS, np.float64))
    with np.errstate(over="ignore"):
        x, y = fl.asarray(a.ravel().astype(dtype)), fl.asarray(b.ravel().astype(dtype))
    cfg = {"shapes": (x.shape, y.shape)}
    _check_masked(lambda u, v: row.apply(cfg, u, v), [x, y], f"where(mask, {row.name}(x, y), 0)")


def test_the_table_reaches_points_where_derivatives_blow_up():
    """The check above is not vacuous: these ops have non-finite derivatives among the points."""
    x = fl.asarray(np.asarray(POINTS, np.float64))
    for name in ("exp", "log", "sqrt", "tan", "lgamma", "expm1", "cosh", "sin", "atanh"):
        row = next(r for r in UNARY if r.name == name)
        n = _check_masked(lambda v, row=row: row.apply({"shape": v.shape}, v), [x], name)
        assert n > 0, f"{name}: no point with a non-finite derivative"


def test_the_reported_cases():
    with np.errstate(all="ignore"):
        x0 = fl.asarray(np.float64(0.0))
        assert float(fl.grad(lambda x: fl.sum(fl.where(x > 0, x * fl.log(x), 0.0)))(x0)) == 0.0
        big = fl.asarray(np.float64(1000.0))
        assert float(fl.grad(lambda x: fl.sum(fl.where(x < 100, fl.exp(x), 0.0)))(big)) == 0.0
        big32 = fl.asarray(np.float32(200.0))
        g = lambda x: fl.where(x < 50, fl.exp(x), 0.0)  # noqa: E731
        assert float(fl.grad(g)(big32)) == 0.0
        assert float(fl.jit(fl.grad(g))(big32)) == 0.0
        # second order too: the Hessian of the masked branch is zero
        assert float(fl.grad(fl.grad(g))(big32)) == 0.0
        assert float(fl.jit(fl.grad(fl.grad(g)))(big32)) == 0.0
        # forward-mode Jacobian off the diagonal: 0 * exp(1000) is 0, not NaN
        j = fl.jacfwd(fl.exp)(fl.asarray([1000.0, 1.0], dtype=fl.float64))
        assert j.numpy()[0, 1] == 0.0 and j.numpy()[1, 0] == 0.0
