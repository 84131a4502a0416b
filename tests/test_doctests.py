"""The examples in the docstrings of the public namespaces run and print what they show.

The namespaces are those of the API reference (``docs/_ext/apiref.py``), so an example that appears on the site is
an example that runs. The facade's namespaces (``nn``, ``nn.functional``, ``nn.init``, ``optim``,
``optim.lr_scheduler``) are left to their own checks, which also require every docstring's sections.
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

FACADE = {"funclib.nn", "funclib.nn.functional", "funclib.nn.init", "funclib.optim", "funclib.optim.lr_scheduler"}
GLOBS = {"fl": fl, "np": np, "fnp": fnp, "fst": fst, "nn": nn, "F": F, "optim": optim}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class _Checker(doctest.OutputChecker):
    """An example that shows no output is a call to run, not a claim that it prints nothing: it must run without
    an error. One that shows output must print it."""

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        return not want or super().check_output(want, got, optionflags)


def _public_objects():
    """(documented name, object) for each namespace module and each public callable, each object once."""
    seen: set[int] = set()
    for spec, ns in apiref.namespaces():
        if spec.name in FACADE:
            continue
        if isinstance(ns, types.ModuleType) and id(ns) not in seen:
            seen.add(id(ns))
            yield spec.name, ns
        for name in apiref.public_names(ns):
            obj = getattr(ns, name)
            if id(obj) in seen or isinstance(obj, types.ModuleType) or not callable(obj) or apiref.is_foreign(obj):
                continue
            seen.add(id(obj))
            yield f"{spec.name}.{name}", obj


def _doctests() -> dict[str, doctest.DocTest]:
    out: dict[str, doctest.DocTest] = {}
    docstrings: set[int] = set()
    for name, obj in _public_objects():
        module = obj if isinstance(obj, types.ModuleType) else inspect.getmodule(obj)
        # a class's methods are part of its entry; a module's members are listed on their own
        finder = doctest.DocTestFinder(recurse=isinstance(obj, type), exclude_empty=True)
        for test in finder.find(obj, name, module=module or False, extraglobs=GLOBS):
            if not test.examples or test.docstring is None or id(test.docstring) in docstrings:
                continue
            docstrings.add(id(test.docstring))
            out[test.name] = test
    return out


DOCTESTS = _doctests()


def test_the_examples_are_found():
    # a change to the discovery that finds nothing would pass every parametrized test below
    assert len(DOCTESTS) > 500
    assert {"funclib.grad", "funclib.random.normal", "funclib.tree.map", "funclib.numpy.pad"} <= set(DOCTESTS)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")  # strategies' .example()
@pytest.mark.parametrize("name", sorted(DOCTESTS))
def test_example_runs(name):
    report: list[str] = []
    runner = doctest.DocTestRunner(checker=_Checker(), optionflags=FLAGS)
    result = runner.run(DOCTESTS[name], out=report.append, clear_globs=True)
    assert result.failed == 0, "".join(report)
