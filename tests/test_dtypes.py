"""dtypes against the Array API 2023.12 text: the promotion tables, weak Python scalars, result_type,
can_cast, finfo, iinfo and isdtype.

The expected tables are written out from the standard's "Type Promotion Rules" section, not derived from
funclib's lattice, so a wrong edge in ``funclib/dtypes.py`` shows up here.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest

import funclib as fl
from funclib.errors import DTypeError

B = fl.bool
I8, I16, I32, I64 = fl.int8, fl.int16, fl.int32, fl.int64
U8, U16, U32, U64 = fl.uint8, fl.uint16, fl.uint32, fl.uint64
F32, F64 = fl.float32, fl.float64
C64, C128 = fl.complex64, fl.complex128

SIGNED = [I8, I16, I32, I64]
UNSIGNED = [U8, U16, U32, U64]
INTS = SIGNED + UNSIGNED
REAL_FLOATS = [F32, F64]
COMPLEX = [C64, C128]
FLOATS = REAL_FLOATS + COMPLEX
STANDARD = [B] + INTS + FLOATS

# The standard's tables, one row per unordered pair (the tables are symmetric).
_TABLE = {
    (B, B): B,
    # signed with signed: the wider
    **{(a, b): SIGNED[max(SIGNED.index(a), SIGNED.index(b))] for a in SIGNED for b in SIGNED},
    # unsigned with unsigned: the wider
    **{(a, b): UNSIGNED[max(UNSIGNED.index(a), UNSIGNED.index(b))] for a in UNSIGNED for b in UNSIGNED},
    # mixed signedness (uint64 with a signed integer is left to implementations)
    (U8, I8): I16, (U8, I16): I16, (U8, I32): I32, (U8, I64): I64,
    (U16, I8): I32, (U16, I16): I32, (U16, I32): I32, (U16, I64): I64,
    (U32, I8): I64, (U32, I16): I64, (U32, I32): I64, (U32, I64): I64,
    # floating point
    (F32, F32): F32, (F32, F64): F64, (F64, F64): F64,
    (C64, C64): C64, (C64, C128): C128, (C128, C128): C128,
    (F32, C64): C64, (F32, C128): C128, (F64, C64): C128, (F64, C128): C128,
}  # fmt: skip
PROMOTION = {**_TABLE, **{(b, a): r for (a, b), r in _TABLE.items()}}
PAIRS = sorted(PROMOTION.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1])))


def _ids(pairs):
    return [f"{a.name}-{b.name}" for (a, b), _ in pairs]


def _one(dtype):
    return fl.ones((2,), dtype=dtype)


@pytest.mark.parametrize(("pair", "expected"), PAIRS, ids=_ids(PAIRS))
def test_result_type_follows_the_promotion_table(pair, expected):
    a, b = pair
    assert fl.result_type(a, b) == expected
    assert fl.result_type(_one(a), b) == expected
    assert fl.result_type(_one(a), _one(b)) == expected


def test_result_type_is_associative_over_many_arguments():
    assert fl.result_type(I8, U8, I32) == I32
    assert fl.result_type(F32, C64, F64) == C128
    assert fl.result_type(U8, U16, I8) == I32
    assert fl.result_type(B, B, B) == B
    assert fl.result_type(F32) == F32


def test_result_type_needs_an_argument():
    with pytest.raises(ValueError, match="at least one"):
        fl.result_type()


_BINARY = {
    "add": (operator.add, "numeric"),
    "subtract": (operator.sub, "numeric"),
    "multiply": (operator.mul, "numeric"),
    "equal": (operator.eq, "any"),
    "not_equal": (operator.ne, "any"),
    "less": (operator.lt, "real"),
    "greater_equal": (operator.ge, "real"),
    "bitwise_and": (operator.and_, "int_bool"),
    "bitwise_xor": (operator.xor, "int_bool"),
    "maximum": (None, "real"),
    "divide": (operator.truediv, "float"),
    "pow": (operator.pow, "float"),
}


def _accepts(kind, dtype):
    return {
        "any": True,
        "numeric": dtype != B,
        "real": dtype in INTS + REAL_FLOATS,
        "int_bool": dtype in INTS + [B],
        "float": dtype in FLOATS,
    }[kind]


@pytest.mark.parametrize("name", sorted(_BINARY))
def test_binary_functions_and_operators_promote_per_table(name):
    op, kind = _BINARY[name]
    fn = getattr(fl, name)
    boolean = name in ("equal", "not_equal", "less", "greater_equal")
    for (a, b), expected in PAIRS:
        if not (_accepts(kind, a) and _accepts(kind, b) and _accepts(kind, expected)):
            continue
        want = B if boolean else expected
        assert fn(_one(a), _one(b)).dtype == want, (name, a, b)
        if op is not None:
            assert op(_one(a), _one(b)).dtype == want, (name, a, b)


# Python scalars are weak: the array's dtype wins, for each scalar kind the standard allows with that dtype.
_SCALARS = {"bool": True, "int": 3, "float": 0.5, "complex": 1 + 2j}


def _allowed_scalars(dtype):
    if dtype == B:
        return ["bool"]
    if dtype in INTS:
        return ["int"]
    if dtype in REAL_FLOATS:
        return ["int", "float"]
    return ["int", "float", "complex"]


@pytest.mark.parametrize("dtype", STANDARD, ids=[d.name for d in STANDARD])
def test_python_scalars_are_weak(dtype):
    x = _one(dtype)
    for kind in _allowed_scalars(dtype):
        s = _SCALARS[kind]
        assert (x == s).dtype == B
        if dtype == B:
            assert (x & s).dtype == B and (s | x).dtype == B
            continue
        for op in (operator.add, operator.sub, operator.mul):
            assert op(x, s).dtype == dtype, (op, kind)
            assert op(s, x).dtype == dtype, (op, kind)
        assert fl.add(x, s).dtype == dtype and fl.multiply(s, x).dtype == dtype
        assert fl.result_type(x, s) == dtype
        if dtype in FLOATS:
            assert (x / s).dtype == dtype and (s / x).dtype == dtype and (x**s).dtype == dtype


def test_weak_scalars_keep_narrow_dtypes():
    assert (fl.ones(3, dtype=F32) * 2.5).dtype == F32
    assert (fl.ones(3, dtype=I8) + 100).dtype == I8
    assert (fl.ones(3, dtype=U8) * 2).dtype == U8
    assert (fl.ones(3, dtype=fl.float16) + 1.0).dtype == fl.float16
    assert (fl.ones(3, dtype=C64) * 1j).dtype == C64


def test_complex_scalar_with_real_array_goes_complex_of_matching_precision():
    assert (fl.ones(2, dtype=F32) * 1j).dtype == C64
    assert (fl.ones(2, dtype=F64) + 1j).dtype == C128


def test_python_int_out_of_range_raises():
    with pytest.raises(OverflowError, match="out of range for int8"):
        fl.ones(2, dtype=I8) + 1000
    with pytest.raises(OverflowError, match="uint8"):
        fl.add(fl.ones(2, dtype=U8), -1)


def test_python_scalar_pairs_use_default_dtypes():
    assert fl.result_type(1, 2) == fl.int64
    assert fl.result_type(1.0) == fl.float32
    assert fl.result_type(True) == fl.bool
    assert fl.result_type(1j) == fl.complex64


@pytest.mark.parametrize("frm", STANDARD, ids=[d.name for d in STANDARD])
def test_can_cast_follows_promotion(frm):
    for to in STANDARD:
        # (None == np.float64 holds in NumPy, so test for a table entry explicitly)
        expected = (frm, to) in PROMOTION and PROMOTION[frm, to] == to
        assert fl.can_cast(frm, to) == expected, (frm, to)
        assert fl.can_cast(_one(frm), to) == expected, (frm, to)


def test_can_cast_never_crosses_kinds():
    assert not fl.can_cast(F32, I64)
    assert not fl.can_cast(C64, F64)
    assert not fl.can_cast(I8, B)
    assert fl.can_cast(B, B)


@pytest.mark.parametrize("dtype", FLOATS, ids=[d.name for d in FLOATS])
def test_finfo(dtype):
    fi = fl.finfo(dtype)
    real = {C64: F32, C128: F64}.get(dtype, dtype)
    ref = np.finfo(real)
    assert fi.bits == ref.bits and fi.dtype == real
    for field in ("eps", "max", "min", "smallest_normal"):
        value = getattr(fi, field)
        assert type(value) is float, field
        assert value == float(getattr(ref, field)), field
    assert type(fi.bits) is int
    assert fl.finfo(fl.ones(1, dtype=dtype)) == fi


def test_finfo_of_bfloat16_and_float16():
    assert fl.finfo(fl.bfloat16).bits == 16 and fl.finfo(fl.bfloat16).eps == 2.0**-7
    assert fl.finfo(fl.float16).max == 65504.0


@pytest.mark.parametrize("dtype", INTS, ids=[d.name for d in INTS])
def test_iinfo(dtype):
    ii = fl.iinfo(dtype)
    ref = np.iinfo(dtype)
    assert (ii.bits, ii.min, ii.max, ii.dtype) == (ref.bits, ref.min, ref.max, dtype)
    assert all(type(v) is int for v in (ii.bits, ii.min, ii.max))
    assert fl.iinfo(fl.ones(1, dtype=dtype)) == ii


def test_finfo_iinfo_reject_the_wrong_kind():
    with pytest.raises(DTypeError, match="iinfo"):
        fl.finfo(I32)
    with pytest.raises(DTypeError, match="finfo"):
        fl.iinfo(F32)


_KIND_MEMBERS = {
    "bool": [B],
    "signed integer": SIGNED,
    "unsigned integer": UNSIGNED,
    "integral": INTS,
    "real floating": REAL_FLOATS,
    "complex floating": COMPLEX,
    "numeric": INTS + FLOATS,
}


@pytest.mark.parametrize("kind", sorted(_KIND_MEMBERS))
def test_isdtype_kinds(kind):
    for d in STANDARD:
        assert fl.isdtype(d, kind) == (d in _KIND_MEMBERS[kind]), (d, kind)


def test_isdtype_with_dtypes_and_tuples():
    assert fl.isdtype(F32, F32) and not fl.isdtype(F32, F64)
    assert fl.isdtype(I8, ("real floating", "signed integer"))
    assert not fl.isdtype(U8, ("bool", "complex floating", F32))
    assert fl.isdtype(fl.float16, "real floating") and fl.isdtype(fl.bfloat16, "numeric")
    with pytest.raises(ValueError, match="unknown kind"):
        fl.isdtype(F32, "floating")


def test_dtype_objects_compare_like_numpy_and_strings():
    assert fl.float32 == np.float32 and fl.int64 == np.dtype("int64")
    assert fl.bool == np.bool_
    assert len({*STANDARD}) == len(STANDARD)
    for a, b in itertools.combinations(STANDARD, 2):
        assert a != b
