"""Meta-tests over the primitive registry: every primitive has a row in tests/op_table.py and every rule it
mathematically has, absent rules say why, and missing-rule errors say which file to fix."""

from __future__ import annotations

import os

import pytest
from funclib.kernels import fusion
from op_table import ROWS, rows_by_name

import funclib
from funclib import dtypes as D
from funclib.core import PRIMITIVES, Primitive
from funclib.errors import MissingRuleError

REQUIRED = ("impl", "abstract_eval", "jvp", "vmap")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRIMS = sorted(PRIMITIVES.values(), key=lambda p: p.name)


def _has(prim: Primitive, kind: str) -> bool:
    return getattr(prim, kind) is not None


def test_every_primitive_has_a_row():
    missing = [f"{p.name} (defined in {p.defined_in})" for p in PRIMS if p.name not in rows_by_name()]
    assert not missing, (
        "primitives without a row in tests/op_table.py (or a tests/op_table_<family>.py beside it): "
        + ", ".join(missing)
        + ". Add a Row with its inputs, NumPy reference and dtypes."
    )


def test_every_row_is_a_registered_primitive_once():
    names = [r.name for r in ROWS]
    stale = sorted(set(names) - set(PRIMITIVES))
    assert not stale, f"rows for primitives that are not registered: {stale}; rename or remove them"
    dupes = sorted({n for n in names if names.count(n) > 1})
    assert not dupes, f"primitives with more than one row: {dupes}"


@pytest.mark.parametrize("prim", PRIMS, ids=[p.name for p in PRIMS])
def test_primitive_has_every_rule_or_says_why(prim):
    for kind in REQUIRED:
        if not _has(prim, kind):
            reason = prim.no_rule.get(kind, "")
            assert isinstance(reason, str) and reason.strip(), (
                f"primitive '{prim.name}' has no {kind} rule and no reason in {prim.name}_p.no_rule[{kind!r}]; "
                f"add @{prim.name}_p.def_{kind} in {prim.defined_in}, or record why it has none"
            )
    if prim.linear:
        assert _has(prim, "transpose"), (
            f"primitive '{prim.name}' is marked linear but has no transpose rule; add @{prim.name}_p.def_transpose "
            f"in {prim.defined_in}"
        )
    elif not _has(prim, "transpose"):
        assert prim.no_rule.get("transpose", "").strip(), (
            f"primitive '{prim.name}' is not linear and has no transpose: record why in "
            f"{prim.name}_p.no_rule['transpose'] ({prim.defined_in})"
        )
    for kind, reason in prim.no_rule.items():
        assert kind in ("impl", "abstract_eval", "jvp", "transpose", "vmap", "lowering"), (
            f"{prim.name}.no_rule has an unknown rule name {kind!r}"
        )
        assert isinstance(reason, str) and reason.strip(), f"{prim.name}.no_rule[{kind!r}] is empty"


ELEMENTWISE = [p for p in PRIMS if p.family in ("unary", "binary", "select")]


@pytest.mark.parametrize("prim", ELEMENTWISE, ids=[p.name for p in ELEMENTWISE])
def test_elementwise_primitive_has_a_lowering_or_says_why(prim):
    """An elementwise row declares its scalar expression for jit's fused kernels, handed to the kernel layer under
    its kernel op name, or records why it has none."""
    if prim.lowering is None:
        reason = prim.no_rule.get("lowering", "")
        assert isinstance(reason, str) and reason.strip(), (
            f"elementwise primitive '{prim.name}' has no lowering and no reason in {prim.name}_p.no_rule['lowering']; "
            f"give its row lowering=Lowering(...) in {prim.defined_in} (float32 math from kernels/vmath.py), or "
            "no_lowering='why'"
        )
        assert not fusion.supports(prim.kernel or prim.name, [D.float32], D.float32), (
            f"'{prim.name}' says it has no lowering ({reason!r}) but the kernel layer fuses op {prim.kernel!r}"
        )
        return
    assert "lowering" not in prim.no_rule, f"'{prim.name}' has a lowering and a reason for having none"
    assert fusion.OPS.get(prim.kernel) is prim.lowering, (
        f"'{prim.name}' declares a lowering that kernels.fusion does not hold under its kernel op {prim.kernel!r}; "
        f"set it with {prim.name}_p.def_lowering (or the family's lowering=) so it reaches fusion.register_op"
    )
    supported = [d for d in (D.bool_, D.int32, D.float16, D.float32, D.float64)
                 if fusion.supports(prim.kernel, [d] * 3, d) or fusion.supports(prim.kernel, [d] * 3, D.bool_)]
    assert supported, f"'{prim.name}''s lowering has no template for any dtype: {prim.lowering}"


def test_a_lowering_is_a_kernel_expression_and_a_jit_step_a_function():
    """``prim.lowering`` is an elementwise row's scalar expression (a ``fusion.Lowering``); a call primitive that
    runs its body its own way under jit sets ``prim.jit_step``. jit's executor calls the latter for any equation it
    does not fuse, so a function stored as ``lowering`` would be skipped, and a ``Lowering`` called."""
    bad = [p.name for p in PRIMS if p.lowering is not None and not isinstance(p.lowering, fusion.Lowering)]
    bad += [
        p.name
        for p in PRIMS
        if p.jit_step is not None and (isinstance(p.jit_step, fusion.Lowering) or not callable(p.jit_step))
    ]
    assert not bad, (
        f"primitives whose lowering is not a fusion.Lowering or whose jit_step is not a function: {bad}; a call "
        "primitive's own jit step is prim.jit_step = fn(eqn) -> step, the elementwise record is prim.def_lowering"
    )


@pytest.mark.parametrize("prim", PRIMS, ids=[p.name for p in PRIMS])
def test_row_agrees_with_the_record(prim):
    """A row says non-differentiable only when the record explains why, and lists linear argument groups exactly
    when the primitive is linear."""
    row = rows_by_name().get(prim.name)
    if row is None:
        pytest.fail(f"no row for {prim.name}")
    if row.nondiff:
        assert "jvp" in prim.no_rule, (
            f"the row says {prim.name} is not differentiable ({row.nondiff!r}) but {prim.name}_p.no_rule has no "
            f"'jvp' reason ({prim.defined_in})"
        )
    else:
        # a 'jvp' reason beside a jvp rule documents a limitation (e.g. some params); without the rule there is
        # nothing to check
        assert _has(prim, "jvp"), (
            f"{prim.name} has no jvp rule ({prim.no_rule.get('jvp')!r}) but its row checks derivatives; set the "
            "row's nondiff to that reason"
        )
    assert bool(row.linear) == bool(prim.linear), (
        f"{prim.name}: linear={prim.linear} in the record but the row lists linear argument groups {row.linear!r}"
    )
    assert row.dtypes and all(d in D.ALL for d in row.dtypes), f"{prim.name}: bad row dtypes {row.dtypes}"


@pytest.mark.parametrize("prim", PRIMS, ids=[p.name for p in PRIMS])
def test_missing_rule_errors_name_the_file(prim):
    assert os.path.isfile(os.path.join(ROOT, prim.defined_in)), (
        f"{prim.name}.defined_in = {prim.defined_in!r} is not a file of the repository"
    )
    for kind in ("impl", "abstract_eval", "jvp", "transpose", "vmap"):
        if _has(prim, kind):
            assert prim.rule(kind) is getattr(prim, kind)
            continue
        with pytest.raises(MissingRuleError) as info:
            prim.rule(kind)
        msg = str(info.value)
        assert prim.name in msg and f"def_{kind}" in msg and prim.defined_in in msg, msg
        reason = prim.no_rule.get(kind)
        if reason:
            assert reason in msg, f"the error for {prim.name}'s missing {kind} rule does not give the reason: {msg}"


def test_missing_rule_error_points_at_the_defining_file():
    probe = Primitive("_meta_probe_primitive")
    try:
        probe.def_impl(lambda x: x)
        with pytest.raises(MissingRuleError, match=r"has no vmap rule .*it has: impl.*def_vmap in tests/test_meta\.py"):
            probe.rule("vmap")
    finally:
        del PRIMITIVES[probe.name]


def test_the_table_covers_the_public_namespace_primitives():
    # importing funclib registers the primitives behind the public namespace; the table imports all of them
    assert funclib.sin and len(PRIMITIVES) >= 90
