"""The examples in the docstrings of every public namespace run and print what they show, and the facade is
documented to its own standard.

The namespaces are those of the API reference (``docs/_ext/apiref.py``), so an example that appears on the site is
an example that runs. The facade (``funclib.nn``, ``nn.functional``, ``nn.init``, ``nn.parallel``,
``funclib.optim``, ``optim.lr_scheduler``) is held to more: every public callable has a docstring with a summary,
its arguments, what it returns and an example; the examples of the modules that define its names run too (methods
and helpers included); ``__all__`` lists exactly the public names. Elsewhere a public callable without an example
is listed in tests/data/missing_examples.txt (tests/test_docs.py), a list that may only shrink.
"""

from __future__ import annotations

import doctest
import inspect
import sys
import types
from pathlib import Path

import funclib.nn as nn
import funclib.nn.functional as F
import funclib.optim as optim
import numpy as np
import pytest

import funclib as fl
import funclib.numpy as fnp
import funclib.testing.strategies as fst

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "_ext"))
import apiref  # noqa: E402

FACADE = {s.name: apiref.resolve(s.name) for s in apiref.NAMESPACES if s.facade}
# submodules that are part of the facade's public API (the rest are where the names are defined)
PUBLIC_MODULES = {
    f"funclib.{m}"
    for m in ("nn.functional", "nn.init", "nn.parallel", "nn.utils", "nn.utils.rnn", "optim.lr_scheduler")
}
GLOBS = {"fl": fl, "np": np, "fnp": fnp, "fst": fst, "nn": nn, "F": F, "optim": optim}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_the_facade_is_known():
    # the stricter checks below pass vacuously if the reference stops marking the facade's namespaces
    assert {"funclib.nn", "funclib.nn.functional", "funclib.nn.parallel", "funclib.optim.lr_scheduler"} <= set(FACADE)


# --- the facade's documentation standard ---------------------------------------------------------------------------


def _public(mod) -> set[str]:
    """Names a user of ``mod`` sees: not underscored, defined in its package (not imported helpers), no
    implementation submodules."""
    # a package's names come from its submodules, a module's from itself
    owners = (mod.__name__ + ".",) if hasattr(mod, "__path__") else ()
    out = set()
    for name, obj in vars(mod).items():
        if name.startswith("_"):
            continue
        if isinstance(obj, types.ModuleType):
            if obj.__name__ in PUBLIC_MODULES:
                out.add(name)
        elif getattr(obj, "__module__", None) == mod.__name__ or getattr(obj, "__module__", "").startswith(owners):
            out.add(name)
    return out


@pytest.mark.parametrize("ns", list(FACADE))
def test_all_lists_exactly_the_public_names(ns):
    mod = FACADE[ns]
    assert len(mod.__all__) == len(set(mod.__all__)), "names listed twice"
    assert set(mod.__all__) == _public(mod)


def _facade_callables():
    for ns, mod in FACADE.items():
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not isinstance(obj, types.ModuleType):
                yield f"{ns}.{name}", obj


FACADE_CALLABLES = dict(_facade_callables())


def _parameters(obj) -> list[str]:
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return []
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    var = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [n for n, p in sig.parameters.items() if p.kind not in var]


def _returns_something(obj) -> bool:
    """Functions and modules (a module's forward returns its output); optimizers, schedulers and markers do not."""
    if isinstance(obj, type):
        return issubclass(obj, nn.Module)
    return inspect.signature(obj).return_annotation not in ("None", None)


@pytest.mark.parametrize("name", list(FACADE_CALLABLES))
def test_every_facade_callable_is_documented_with_an_example(name):
    obj = FACADE_CALLABLES[name]
    doc = inspect.getdoc(obj) or ""
    missing = []
    if not doc or not doc.split("\n")[0].strip():
        missing.append("a one-line summary")
    if _parameters(obj) and "Args:" not in doc:
        missing.append(f"an Args: section (arguments {_parameters(obj)})")
    if _returns_something(obj) and "Returns:" not in doc:
        missing.append("a Returns: section")
    if ">>> " not in doc:
        missing.append("an example (>>> ...)")
    assert not missing, f"{name}'s docstring lacks " + ", ".join(missing)


# --- the examples ----------------------------------------------------------------------------------------------------


class _Checker(doctest.OutputChecker):
    """An example that shows no output is a call to run, not a claim that it prints nothing: it must run without
    an error. One that shows output must print it. (The facade's examples are checked strictly: each shows what it
    prints.)"""

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        return not want or super().check_output(want, got, optionflags)


def _public_objects():
    """(documented name, object) for each namespace module and each public callable, each object once."""
    seen: set[int] = set()
    for spec, ns in apiref.namespaces():
        if isinstance(ns, types.ModuleType) and id(ns) not in seen:
            seen.add(id(ns))
            yield spec.name, ns
        for name in apiref.public_names(ns):
            obj = getattr(ns, name)
            if id(obj) in seen or isinstance(obj, types.ModuleType) or not callable(obj) or apiref.is_foreign(obj):
                continue
            seen.add(id(obj))
            yield f"{spec.name}.{name}", obj


def _facade_modules():
    """The facade's namespaces and the modules that define their names: their helpers' and methods' examples run
    too, under the modules' own names."""
    out = {}
    for mod in FACADE.values():
        out[mod.__name__] = mod
        for name in mod.__all__:
            owner = inspect.getmodule(getattr(mod, name))
            if owner is not None and owner.__name__.startswith("funclib."):
                out[owner.__name__] = owner
    return [out[k] for k in sorted(out)]


def _doctests() -> dict[str, doctest.DocTest]:
    out: dict[str, doctest.DocTest] = {}
    docstrings: set[int] = set()

    def add(tests):
        for test in tests:
            if not test.examples or test.docstring is None or id(test.docstring) in docstrings:
                continue
            docstrings.add(id(test.docstring))
            out[test.name] = test

    for name, obj in _public_objects():
        module = obj if isinstance(obj, types.ModuleType) else inspect.getmodule(obj)
        # a class's methods are part of its entry; a module's members are listed on their own
        finder = doctest.DocTestFinder(recurse=isinstance(obj, type), exclude_empty=True)
        add(finder.find(obj, name, module=module or False, extraglobs=GLOBS))
    finder = doctest.DocTestFinder(exclude_empty=True)
    for mod in _facade_modules():
        add(finder.find(mod, mod.__name__, extraglobs=GLOBS))
    return out


DOCTESTS = _doctests()


def test_the_examples_are_found():
    # a change to the discovery that finds nothing would pass every parametrized test below
    assert len(DOCTESTS) > 800
    expected = {"funclib.grad", "funclib.random.normal", "funclib.tree.map", "funclib.numpy.pad", "funclib.nn.Linear"}
    assert expected <= set(DOCTESTS)
    # the facade's modules and methods too (201 when this was written)
    assert sum(name.startswith(("funclib.nn", "funclib.optim")) for name in DOCTESTS) > 190


@pytest.fixture
def global_state():
    """Examples show how to flip global switches (``fl.config``, the key-reuse check, the global seed); the
    tests after them must not run under those settings."""
    config = {k: v for k, v in vars(fl.config).items() if isinstance(v, bool)}
    reuse = fl.random.set_key_reuse_check("warn")
    fl.random.set_key_reuse_check(reuse)
    rng = fl.random.get_rng_state()
    yield
    for k, v in config.items():
        setattr(fl.config, k, v)
    fl.random.set_key_reuse_check(reuse)
    fl.random.set_rng_state(rng)


@pytest.mark.usefixtures("global_state")
@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")  # strategies' .example()
@pytest.mark.parametrize("name", sorted(DOCTESTS))
def test_example_runs(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that save a file (fl.save, fl.onnx.export) write it there
    report: list[str] = []
    strict = name.startswith(("funclib.nn.", "funclib.optim.")) or name in ("funclib.nn", "funclib.optim")
    runner = doctest.DocTestRunner(checker=doctest.OutputChecker() if strict else _Checker(), optionflags=FLAGS)
    result = runner.run(DOCTESTS[name], out=report.append, clear_globs=True)
    assert result.failed == 0, "".join(report)
