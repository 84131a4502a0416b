"""float64 by choice: ``fl.set_default_dtype`` (process-wide) and ``with fl.default_dtype(...)`` (this thread),
read by Python floats, ``fl.asarray``, creation functions, random samplers, new layers and ``funclib.numpy``, and
part of ``fl.jit``'s cache key."""

from __future__ import annotations

import logging
import threading

import funclib.nn as nn
import numpy as np
import pytest

import funclib as fl
import funclib.numpy as fnp


@pytest.fixture(autouse=True)
def _restore_default():
    yield
    fl.set_default_dtype(fl.float32)


def _defaulted(k):
    return {
        "sqrt(2.0)": fl.sqrt(2.0),
        "asarray([1.0])": fl.asarray([1.0]),
        "zeros(3)": fl.zeros(3),
        "random.normal": fl.random.normal(k, (3,)),
        "random.uniform": fl.random.uniform(k, (3,)),
        "arange(0.0, 1.0, 0.5)": fl.arange(0.0, 1.0, 0.5),
        "linspace": fl.linspace(0, 1, 3),
        "full((2,), 1.5)": fl.full((2,), 1.5),
        "tensor * 2 / 3 (int / int)": fl.asarray([2]) / fl.asarray([3]),
        "Linear weight": nn.Linear(2, 2, key=k).weight,
        "fnp.mean of ints": fnp.mean(fnp.arange(3)),
    }


def test_set_default_dtype_reaches_scalars_creation_samplers_layers_and_numpy():
    k = fl.random.key(0)
    assert {n: v.dtype for n, v in _defaulted(k).items()} == dict.fromkeys(_defaulted(k), fl.float32)
    fl.set_default_dtype(fl.float64)
    assert fl.get_default_dtype() == fl.float64
    assert {n: v.dtype for n, v in _defaulted(k).items()} == dict.fromkeys(_defaulted(k), fl.float64)
    assert fl.asarray(1j).dtype == fl.complex128
    np.testing.assert_array_equal(fl.sqrt(2.0), np.sqrt(2.0))  # computed in float64, not rounded through float32
    # tensors keep their dtypes: the default is only for values that name none
    assert (fl.ones(2, dtype=fl.float32) * 0.1).dtype == fl.float32
    fl.set_default_dtype(fl.float32)
    assert fl.zeros(3).dtype == fl.float32 and fl.asarray(1j).dtype == fl.complex64


def test_the_context_manager_restores_the_default_even_on_error_and_nests():
    with fl.default_dtype(fl.float64) as d:
        assert d == fl.float64 and fl.zeros(1).dtype == fl.float64
        with fl.default_dtype(fl.float16):
            assert fl.asarray(1.5).dtype == fl.float16
        assert fl.zeros(1).dtype == fl.float64
    assert fl.zeros(1).dtype == fl.float32
    with pytest.raises(RuntimeError, match="inside"):
        with fl.default_dtype(fl.float64):
            raise RuntimeError("inside the block")
    assert fl.get_default_dtype() == fl.float32


def test_the_context_manager_is_per_thread_and_set_default_dtype_is_process_wide():
    seen = {}
    started, release = threading.Event(), threading.Event()

    def other():
        started.set()
        release.wait(10)
        seen["during"] = fl.zeros(1).dtype

    t = threading.Thread(target=other)
    t.start()
    started.wait(10)
    with fl.default_dtype(fl.float64):
        release.set()
        t.join(10)
        assert fl.zeros(1).dtype == fl.float64
    assert seen["during"] == fl.float32

    fl.set_default_dtype(fl.float64)
    t = threading.Thread(target=lambda: seen.__setitem__("process", fl.zeros(1).dtype))
    t.start()
    t.join(10)
    assert seen["process"] == fl.float64


def test_jit_retraces_when_the_default_changes_and_reuses_each_program(caplog):
    def f(x):
        return x * fl.sqrt(2.0) + fl.random.normal(fl.random.key(1), (3,))

    jf = fl.jit(f)
    x = fl.ones(3, dtype=fl.float64)
    y32 = jf(x)
    with fl.default_dtype(fl.float64):
        old = fl.config.explain_retraces
        fl.config.explain_retraces = True
        try:
            with caplog.at_level(logging.WARNING, logger="funclib.jit"):
                y64 = jf(x)
        finally:
            fl.config.explain_retraces = old
        np.testing.assert_array_equal(y64, f(x))
    assert "default float dtype (fl.set_default_dtype) changed from float32 to float64" in caplog.text
    np.testing.assert_array_equal(y32, f(x))
    assert float(fl.max(fl.abs(y64 - y32))) > 0  # float32 sqrt(2) and samples vs float64 ones
    assert jf.num_traces == 2
    jf(x)
    with fl.default_dtype(fl.float64):
        jf(x)
    assert jf.num_traces == 2


def test_jit_of_weak_python_scalars_follows_the_default_as_eager_code_does():
    g = fl.jit(lambda s: fl.sin(s))
    assert g(0.5).dtype == fl.float32
    with fl.default_dtype(fl.float64):
        assert g(0.5).dtype == fl.float64
        np.testing.assert_array_equal(g(0.5), np.sin(0.5))
    h = fl.jit(lambda x, s: x * s)  # a weak scalar meeting a tensor takes the tensor's dtype under any default
    with fl.default_dtype(fl.float64):
        assert h(fl.ones(2, dtype=fl.float32), 0.1).dtype == fl.float32


@pytest.mark.parametrize("bad", [fl.int32, "int64", fl.complex128, float, None, 3])
def test_only_real_floating_dtypes_can_be_the_default(bad):
    with pytest.raises(TypeError, match="set_default_dtype: the default dtype must be a real floating dtype"):
        fl.set_default_dtype(bad)
    with pytest.raises(TypeError, match="default_dtype"):
        with fl.default_dtype(bad):
            pass
    assert fl.get_default_dtype() == fl.float32


def test_the_examples_in_the_docstrings_run():
    import doctest

    import funclib.ops.defaults as mod

    result = doctest.testmod(mod, extraglobs={"fl": fl})
    assert result.attempted > 0 and result.failed == 0
