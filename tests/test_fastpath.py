"""The compiled dispatch of the elementwise wrappers (``funclib/_fastops.c``, ``funclib/primitives/fastpath.py``).

It is an accelerator only: for every compiled operation and every kind of operand, the compiled op and the Python
wrapper it fronts (``op.__wrapped__``) give the same result (type, dtype, shape, weak type, bits) or raise the
same error; tracers of every transform take the Python path; the op behaves as a function (name, docstring,
signature, pickling, ``help``, methods and operators of ``Tensor``). The extension must be built here: the suite
fails where ``pip install`` could not compile it, and a subprocess checks the pure-Python fallback.
"""

from __future__ import annotations

import gc
import inspect
import pickle
import pydoc
import subprocess
import sys
import textwrap
import types
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funclib as fl
from funclib import dtypes as D
from funclib.core import Tensor
from funclib.errors import ShapeError
from funclib.namespace import NAMESPACE
from funclib.primitives import elementwise, fastpath

ROOT = Path(__file__).resolve().parent.parent
ELEMENTWISE = Path(elementwise.__file__).resolve()


def test_the_extension_is_built():
    assert fastpath.COMPILED, (
        "funclib._fastops was not built, so the eager ops run on the Python wrappers alone: rebuild it with "
        "`make venv` (pip install -e .), which needs a C compiler and the Python headers"
    )
    assert fastpath.DTYPE_FROM_STRUCT, (
        "this NumPy's array struct did not match the layout funclib/_fastops.c reads the dtype from; the compiled "
        "path still works, through the .dtype attribute, but slower: check ArrayHead against numpy/ndarraytypes.h"
    )


@pytest.fixture(autouse=True)
def _needs_the_extension(request):
    if not fastpath.COMPILED and request.node.originalname not in (
        "test_the_extension_is_built",
        "test_pure_python_fallback_when_the_extension_is_missing",
    ):
        pytest.skip("funclib._fastops is not built (test_the_extension_is_built fails)")


class _NotBuilt:
    """Stands for FastOp where the extension is missing: nothing is an instance of it."""


FastOp = fastpath._fastops.FastOp if fastpath.COMPILED else _NotBuilt


def _compiled_ops() -> list:
    """Every compiled op: the namespace's, Tensor's methods and operators, and the primitives modules' own."""
    import funclib.primitives as P

    found: dict[int, object] = {}
    sources = [NAMESPACE, vars(Tensor)] + [vars(m) for m in vars(P).values() if isinstance(m, types.ModuleType)]
    for src in sources:
        for v in src.values():
            if isinstance(v, FastOp):
                found[id(v)] = v
    return sorted(found.values(), key=lambda op: (op.__module__, op.__qualname__))


OPS = _compiled_ops()
UNARY = [op for op in OPS if len(inspect.signature(op).parameters) == 1]
BINARY = [op for op in OPS if op not in UNARY]


def _escaped(v) -> bool:
    """A wrapper made by unary()/binary(), or a reflected operator over a compiled op, that is plain Python."""
    if not isinstance(v, types.FunctionType):
        return False
    if v.__code__.co_name == "wrapper":
        return Path(v.__code__.co_filename).resolve() == ELEMENTWISE
    return v.__code__.co_name == "reflected" and any(isinstance(c.cell_contents, FastOp) for c in v.__closure__)


def test_every_elementwise_wrapper_is_compiled():
    escaped = [f"fl.{k}" for k, v in NAMESPACE.items() if _escaped(v)]
    escaped += [f"Tensor.{k}" for k, v in vars(Tensor).items() if _escaped(v)]
    assert not escaped, f"elementwise wrappers without compiled dispatch: {escaped}"
    names = {op.__name__ for op in OPS}
    assert {"add", "multiply", "sin", "negative", "__radd__", "__rsub__", "equal"} <= names, sorted(names)
    assert len(UNARY) > 30 and len(BINARY) > 30, (len(UNARY), len(BINARY))
    assert all(isinstance(op.__wrapped__, types.FunctionType) for op in OPS)


# ---------------------------------------------------------------------------------------------------------------
# the compiled op and its wrapper agree


DTYPES = D.ALL + (D.float8_e4m3fn, D.int4)
BIG_INTS = (2**7, -(2**7) - 1, 2**8, 2**15, 2**31, 2**32, 2**63 - 1, 2**63, -(2**63) - 1, 2**64 - 1, 2**64, 2**90)


class SubTensor(Tensor):
    __slots__ = ()


class SubArray(np.ndarray):
    pass


@st.composite
def arrays(draw, dtype, shape):
    d = np.dtype(dtype)
    if d in D.INTEGER or d == D.int4:
        lo = 0 if (d in D.UNSIGNED) else -4
        base = draw(hnp.arrays(np.int64, shape, elements=st.integers(lo, 5)))
    elif d == D.bool_:
        base = draw(hnp.arrays(np.bool_, shape))
    else:
        special = st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan])
        base = draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3, width=32) | special))
        if d in D.COMPLEX:
            base = base + 1j * draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3, width=32)))
    return base.astype(d)


def tensor(a: np.ndarray, how: str = "plain"):
    if how == "plain":
        return fl.asarray(a)
    t = object.__new__(SubTensor if how == "subclass" else Tensor)
    t._value = a.view(SubArray) if how == "subarray" else a
    return t


SCALARS = st.one_of(
    st.floats(-3, 3, width=32),
    st.sampled_from([np.nan, np.inf, -np.inf, -0.0]),
    st.integers(-5, 5),
    st.sampled_from(BIG_INTS + tuple(-v for v in BIG_INTS)),
    st.booleans(),
    st.complex_numbers(max_magnitude=3, allow_nan=False),
    st.sampled_from([np.float32(1.5), np.int8(3), np.float64(2.0)]),
)
SHAPE_PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3).map(
    lambda s: s.input_shapes
) | st.just(((2,), (3,)))


@st.composite
def binary_operands(draw):
    d = draw(st.sampled_from(DTYPES))
    sx, sy = draw(SHAPE_PAIRS)
    x = tensor(draw(arrays(d, sx)), draw(st.sampled_from(["plain"] * 6 + ["subclass", "subarray"])))
    kind = draw(st.sampled_from(["same", "same", "same", "other", "scalar", "scalar", "first", "list", "array"]))
    if kind == "same":
        return x, tensor(draw(arrays(d, sy)))
    if kind == "other":
        return x, tensor(draw(arrays(draw(st.sampled_from(DTYPES)), sy)))
    if kind == "list":
        return x, draw(arrays(d, sy)).tolist()
    if kind == "array":
        return draw(arrays(D.float32, sy)), x
    s = draw(SCALARS)
    return (x, s) if kind == "scalar" else (s, x)


@st.composite
def unary_operands(draw):
    d = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    kind = draw(st.sampled_from(["plain"] * 6 + ["subclass", "subarray", "scalar", "list"]))
    if kind == "scalar":
        return (draw(SCALARS),)
    a = draw(arrays(d, shape))
    return (a.tolist(),) if kind == "list" else (tensor(a, kind),)


def outcome(f, *args):
    """What a call gives, in a form two calls can be compared by: the result's type, dtype, shape, weak type and
    bytes, or the error's type and message."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = f(*args)
        except Exception as e:  # noqa: BLE001 - any error is an outcome the other path must match
            return ("raises", type(e), str(e))
    if isinstance(r, Tensor):
        v = r._value
        assert type(v) is np.ndarray, f"{f}: a Tensor around {type(v).__name__}"
        return (type(r), v.dtype, v.shape, r.weak_type, v.tobytes())
    return (type(r), repr(r))


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.__qualname__)
@given(args=binary_operands())
def test_binary_compiled_op_equals_its_wrapper(op, args):
    assert outcome(op, *args) == outcome(op.__wrapped__, *args)


@pytest.mark.parametrize("op", UNARY, ids=lambda op: op.__qualname__)
@given(args=unary_operands())
def test_unary_compiled_op_equals_its_wrapper(op, args):
    assert outcome(op, *args) == outcome(op.__wrapped__, *args)


@pytest.mark.parametrize("op", [fl.add, fl.sin, fl.Tensor.__rsub__], ids=lambda op: op.__qualname__)
def test_bad_calls_raise_as_the_wrapper_does(op):
    x = fl.tensor([1.0, 2.0])
    for args, kwargs in (((), {}), ((x, x, x), {}), ((x,), {"y": x}), ((), {"x": x})):
        got = outcome(lambda a=args, k=kwargs: op(*a, **k))
        want = outcome(lambda a=args, k=kwargs: op.__wrapped__(*a, **k))
        assert got == want and got[0] == "raises" and got[1] is TypeError, (got, want)


def test_a_shape_error_names_the_public_function():
    with pytest.raises(ShapeError, match="^subtract: shapes"):
        fl.tensor([1.0, 2.0]) - fl.tensor([1.0, 2.0, 3.0])


# ---------------------------------------------------------------------------------------------------------------
# which calls take the compiled path


def _spied(arity):
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(args)
        return "wrapper"

    f32, i8, f16 = D.float32, D.int8, D.float16
    if arity == 1:
        return fastpath.unary(wrapper, np.negative, {f32}), calls
    op = fastpath.binary(wrapper, np.add, {f32, i8}, {f32}, {f32, i8}, {f32}, {i8}, frozenset({f32, f16}))
    return op, calls


def test_the_fast_cases_do_not_call_the_wrapper():
    op, calls = _spied(2)
    x, i, h = fl.tensor([1.0, 2.0]), fl.tensor([1, 2], dtype=fl.int8), fl.tensor([1.0], dtype=fl.float16)
    for args in ((x, x), (i, i), (x, 2.5), (x, 10**30), (i, 127), (i, -128), (2.5, x), (3, i), (-128, i)):
        r = op(*args)
        assert type(r) is Tensor and type(r._value) is np.ndarray, args
    assert not calls
    slow = [
        (x, i), (h, h), (h, 1.0), (i, 2.5), (i, 128), (i, -129), (x, True), (i, 2**70), (2.5, i), (1, x), (300, i),
        (x, np.float32(1.0)), (SubTensor.__new__(SubTensor), x), (x._value, x), (x, [1.0]), (x,), (x, x, x),
        (x, fl.tensor([1.0, 2.0, 3.0])),
    ]
    for args in slow:
        assert op(*args) == "wrapper", args
    assert len(calls) == len(slow) and [len(c) for c in calls] == [len(a) for a in slow]
    assert op(x, y=x) == "wrapper"


def test_unary_fast_case_and_scalar_results():
    op, calls = _spied(1)
    r = op(fl.tensor(2.0))  # NumPy returns a 0-d result as a scalar: the Tensor holds an array
    assert type(r._value) is np.ndarray and r._value.shape == () and float(r) == -2.0
    assert not calls
    assert op(fl.tensor([1], dtype=fl.int32)) == "wrapper" and op(2.0) == "wrapper"


def test_tracers_take_the_python_path():
    seen = []

    def wrapper(x, y, /):
        seen.append((type(x), type(y)))
        return fl.add.__wrapped__(x, y)

    f32 = D.float32
    op = fastpath.binary(wrapper, np.add, {f32}, {f32}, {f32}, {f32}, {f32}, frozenset({f32}))
    x, y = fl.tensor([0.5, -1.0, 2.0]), fl.tensor([1.5, 2.0, -0.5])
    for transform in (fl.make_jaxpr, fl.vmap, fl.jit, lambda f: fl.grad(lambda a: fl.sum(f(a)))):
        seen.clear()
        for f in (lambda a: op(a, y), lambda a: op(2.0, a), lambda a: op(a, a)):
            transform(f)(x)
        assert len(seen) == 3 and all(issubclass(t, fl.Tracer) for t in (seen[0][0], seen[1][1], seen[2][0])), seen
    seen.clear()
    assert outcome(op, x, y) == outcome(fl.add, x, y) and not seen  # concrete: the compiled path


@pytest.mark.parametrize("op", [op for op in OPS if op.__name__ in ("add", "multiply", "subtract", "sin", "exp")])
def test_transforms_agree_on_both_paths(op):
    x, y = fl.tensor([0.5, -1.0, 2.0]), fl.tensor([1.5, 2.0, -0.5])

    def call(f):
        return (lambda a: f(a)) if op in UNARY else (lambda a: f(a, y))

    for transform in (fl.vmap, fl.jit, lambda g: fl.grad(lambda a: fl.sum(g(a))), fl.make_jaxpr):
        got, want = outcome(transform(call(op)), x), outcome(transform(call(op.__wrapped__)), x)
        assert got == want, (transform, got, want)


# ---------------------------------------------------------------------------------------------------------------
# the op is a function to its users


def test_function_attributes_signature_and_help():
    for op in (fl.add, fl.sin, Tensor.__radd__):
        w = op.__wrapped__
        assert (op.__name__, op.__qualname__, op.__module__, op.__doc__) == (
            w.__name__,
            w.__qualname__,
            w.__module__,
            w.__doc__,
        )
        assert inspect.signature(op) == inspect.signature(w)
        assert op.__name__ in repr(op)
    assert inspect.isroutine(fl.add) and callable(fl.add)
    text = pydoc.render_doc(fl.add, renderer=pydoc.plaintext)
    assert "add(x, y, /)" in text and ">>> fl.add(" in text


def test_pickles_by_reference_as_the_function_did():
    for op in (fl.add, fl.multiply, fl.equal):
        assert pickle.loads(pickle.dumps(op)) is op


def test_methods_operators_and_binding():
    x = fl.tensor([0.5, 2.0])
    assert isinstance(vars(Tensor)["__add__"], FastOp) and isinstance(vars(Tensor)["sin"], FastOp)
    assert isinstance(vars(Tensor)["__rsub__"], FastOp) and vars(Tensor)["__rsub__"].swapped_operands == 1
    bound = x.sin
    assert isinstance(bound, types.MethodType) and bound.__self__ is x
    for got, want in (
        (x.sin(), fl.sin(x)),
        (bound(), fl.sin(x)),
        (Tensor.sin(x), fl.sin(x)),
        (x.__add__(1.0), fl.add(x, 1.0)),
        (Tensor.__rsub__(x, 1.0), fl.subtract(1.0, x)),
        (1.0 - x, fl.subtract(1.0, x)),
        (3 * x, fl.multiply(3, x)),
        (-x, fl.negative(x)),
        (x == x, fl.equal(x, x)),
    ):
        assert outcome(lambda g=got: g) == outcome(lambda w=want: w)
    assert vars(Tensor)["__add__"].__get__(None, Tensor) is vars(Tensor)["__add__"]


def test_a_collected_cycle_through_an_op_is_safe():
    class Holder:
        pass

    def wrapper(x, /):
        return x

    holder = Holder()
    wrapper.holder = holder
    holder.op = fastpath.unary(wrapper, np.negative, {D.float32})  # op -> wrapper -> holder -> op
    ref = weakref.ref(holder)
    del holder, wrapper
    gc.collect()
    assert ref() is None


def test_bad_construction_is_explained():
    with pytest.raises(TypeError, match="callable"):
        FastOp(1, np.add, ())
    with pytest.raises(ValueError, match="arity"):
        FastOp(len, np.add, (), arity=3)
    with pytest.raises(ValueError, match="more than"):
        FastOp(len, np.add, [D.float32] * 100)
    with pytest.raises(TypeError, match="reflected"):
        fl.sin.swapped(len)


def test_pure_python_fallback_when_the_extension_is_missing():
    code = textwrap.dedent(
        """
        import sys, types
        sys.modules["funclib._fastops"] = None  # what an install without a C compiler looks like
        import funclib as fl
        from funclib.primitives import fastpath
        assert not fastpath.COMPILED
        assert isinstance(fl.add, types.FunctionType) and isinstance(fl.Tensor.__radd__, types.FunctionType)
        x = fl.tensor([1.0, 2.0])
        print((x + x).tolist(), (2.0 - x).tolist(), fl.sin(x * 0).tolist(), x.sin().shape)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 4.0] [1.0, 0.0] [0.0, 0.0] (2,)"
