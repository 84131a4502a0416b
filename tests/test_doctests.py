"""The facade's documentation: every public callable of ``funclib.nn``, ``nn.functional``, ``nn.init``,
``funclib.optim`` and ``optim.lr_scheduler`` has a docstring with a summary, its arguments, what it returns and an
example; the examples (and those of the modules and methods) run; ``__all__`` lists exactly the public names."""

from __future__ import annotations

import doctest
import inspect
import types

import funclib.nn as nn
import funclib.nn.functional as F
import funclib.optim as optim
import numpy as np
import pytest
from funclib.optim import lr_scheduler

import funclib as fl

NAMESPACES = {
    "nn": nn,
    "nn.functional": F,
    "nn.init": nn.init,
    "nn.parallel": nn.parallel,
    "nn.utils": nn.utils,
    "nn.utils.rnn": nn.utils.rnn,
    "optim": optim,
    "optim.lr_scheduler": lr_scheduler,
}
# submodules that are part of the public API (the rest are where the names are defined)
PUBLIC_MODULES = {
    f"funclib.{m}"
    for m in ("nn.functional", "nn.init", "nn.parallel", "nn.utils", "nn.utils.rnn", "optim.lr_scheduler")
}
GLOBS = {"fl": fl, "nn": nn, "F": F, "optim": optim, "np": np}


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


def _callables():
    for ns, mod in NAMESPACES.items():
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not isinstance(obj, types.ModuleType):
                yield f"{ns}.{name}", obj


CALLABLES = dict(_callables())


@pytest.mark.parametrize("ns", list(NAMESPACES))
def test_all_lists_exactly_the_public_names(ns):
    mod = NAMESPACES[ns]
    assert len(mod.__all__) == len(set(mod.__all__)), "names listed twice"
    assert set(mod.__all__) == _public(mod)


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


@pytest.mark.parametrize("name", list(CALLABLES))
def test_every_public_callable_is_documented_with_an_example(name):
    obj = CALLABLES[name]
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


def _doctests():
    finder = doctest.DocTestFinder()
    seen = set()
    modules = {m for mod in NAMESPACES.values() for m in _defining_modules(mod)}
    for m in sorted(modules, key=lambda m: m.__name__):
        for t in finder.find(m, m.__name__, globs=GLOBS):
            if t.examples and t.name not in seen:
                seen.add(t.name)
                yield t


def _defining_modules(mod):
    yield mod
    for name in mod.__all__:
        owner = inspect.getmodule(getattr(mod, name))
        if owner is not None and owner.__name__.startswith("funclib."):
            yield owner


DOCTESTS = {t.name: t for t in _doctests()}


@pytest.mark.parametrize("name", list(DOCTESTS))
def test_examples_run(name):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    result = runner.run(DOCTESTS[name], out=report.append)
    assert result.failed == 0, "".join(report)
