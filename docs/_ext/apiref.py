"""The API reference, generated from the public namespaces themselves.

Each namespace in ``NAMESPACES`` gets one page, ``api/<name>.rst``, written when the build starts: a summary table
of every public name, then an autodoc entry per name. The public names are the namespace's ``__all__`` when it has
one, otherwise its attributes that do not start with ``_`` (modules and imported typing helpers left out), so a new
function appears in the reference as soon as it is exported, with no list to keep. The tests import this module to
check the same names (their examples run, their cross-references resolve).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Namespace:
    name: str  # the import path users write (``funclib.debug`` is reached as ``fl.debug``)
    title: str
    summary: str
    # the facade's namespaces keep a stricter standard (Args/Returns sections, an exact ``__all__``), checked in
    # tests/test_doctests.py
    facade: bool = False


NAMESPACES = [
    Namespace("funclib", "funclib", "The array namespace (Python Array API 2023.12), dtypes, tensors and transforms."),
    Namespace("funclib.linalg", "funclib.linalg", "Linear algebra of the Array API, with iterative solvers."),
    Namespace("funclib.fft", "funclib.fft", "Discrete Fourier transforms of the Array API."),
    Namespace("funclib.checkpoint_policies", "funclib.checkpoint_policies", "What ``fl.checkpoint`` may save."),
    Namespace("funclib.config", "funclib.config", "Global switches."),
    Namespace("funclib.errors", "funclib.errors", "The errors funclib raises."),
    Namespace("funclib.random", "funclib.random", "Splittable counter-based keys, samplers and global state."),
    Namespace("funclib.tree", "funclib.tree", "Pytrees: flatten, map and rebuild nested containers."),
    Namespace("funclib.nn", "funclib.nn", "Modules, layers and losses in PyTorch's style, as pytrees.", facade=True),
    Namespace(
        "funclib.nn.functional", "funclib.nn.functional", "The stateless functions behind the layers.", facade=True
    ),
    Namespace("funclib.nn.init", "funclib.nn.init", "Parameter initializers.", facade=True),
    Namespace("funclib.nn.parallel", "funclib.nn.parallel", "Data-parallel training over MPI.", facade=True),
    Namespace("funclib.nn.utils", "funclib.nn.utils", "Utilities for the layers.", facade=True),
    Namespace(
        "funclib.nn.utils.rnn", "funclib.nn.utils.rnn", "Padded and packed variable-length sequences.", facade=True
    ),
    Namespace(
        "funclib.optim", "funclib.optim", "Optimizers: a pure per-leaf rule with a stateful facade.", facade=True
    ),
    Namespace("funclib.optim.lr_scheduler", "funclib.optim.lr_scheduler", "Learning-rate schedules.", facade=True),
    Namespace("funclib.testing", "funclib.testing", "Check derivatives and compare trees in your own tests."),
    Namespace("funclib.testing.strategies", "funclib.testing.strategies", "Hypothesis strategies for tensors."),
    Namespace("funclib.numpy", "funclib.numpy", "NumPy's API on funclib tensors, differentiable and jittable."),
    Namespace("funclib.numpy.linalg", "funclib.numpy.linalg", "``numpy.linalg`` on funclib tensors."),
    Namespace("funclib.numpy.fft", "funclib.numpy.fft", "``numpy.fft`` on funclib tensors."),
    Namespace("funclib.quantization", "funclib.quantization", "int8, int4 and float8 quantization."),
    Namespace("funclib.sparse", "funclib.sparse", "COO and CSR matrices with gradients over their pattern."),
    Namespace("funclib.ragged", "funclib.ragged", "Ragged batches: pad and unpad with masks."),
    Namespace("funclib.distributed", "funclib.distributed", "Training on several processes over MPI."),
    Namespace("funclib.debug", "funclib.debug", "Printing, callbacks and checks inside jit."),
    Namespace("funclib.onnx", "funclib.onnx", "Export to ONNX."),
    Namespace("funclib.export", "funclib.export", "Serialize a traced program and load it back."),
]

# Sections of the ``funclib`` page, by the module that defines a name (first matching prefix wins); names from
# modules not listed land in "Other", so nothing exported is ever left out.
TOP_LEVEL_SECTIONS = [
    ("Tensors and dtypes", ("funclib.core", "funclib.dtypes", "funclib.ops.info", "<dtype>")),
    ("Transforms", ("funclib.transforms", "funclib.ops.misc")),
    ("Programs (jaxprs)", ("funclib.jaxpr",)),
    ("Creation", ("funclib.ops.creation",)),
    (
        "Elementwise functions",
        ("funclib.ops.elementwise", "funclib.primitives.elementwise", "funclib.primitives.transcendental"),
    ),
    (
        "Manipulation and indexing",
        ("funclib.ops.manipulation", "funclib.ops.indexing", "funclib.primitives.shape", "funclib.primitives.indexing"),
    ),
    ("Reductions", ("funclib.ops.reductions",)),
    ("Searching, sorting and sets", ("funclib.ops.searching", "funclib.ops.sorting", "funclib.ops.sets")),
    ("Segment reductions", ("funclib.ops.segment",)),
    ("Linear algebra", ("funclib.ops.linalg_basic",)),
    ("Neural-network functions", ("funclib.ops.nn",)),
    ("Collectives", ("funclib.primitives.collectives",)),
    ("Random numbers (global state)", ("funclib.random",)),
    ("Saving and loading", ("funclib.nn.serialization", "funclib.errors")),
    ("Constants", ("<constant>",)),
]


def resolve(dotted: str):
    """The module (or namespace object) a user reaches as ``dotted``: imported when it is a module, else looked
    up as an attribute of its parent (``funclib.debug`` is ``funclib.transforms.debug``)."""
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError as e:
        if "." not in dotted or e.name != dotted:
            raise
    parent, _, attr = dotted.rpartition(".")
    return getattr(resolve(parent), attr)


def public_names(ns) -> list[str]:
    """The names a namespace exports: its ``__all__`` (in that order), then anything else defined in its own
    public modules that ``__all__`` forgot; without ``__all__``, every attribute not starting with ``_`` that is
    not a module or an import from outside funclib, with the functions records declared public
    (``funclib.namespace.NAMESPACE``, underscored ones such as ``__array_namespace_info__`` included) and the
    names a module ``__getattr__`` provides on first use (``fl.save``). Sorted case-insensitively where no order
    is declared."""
    declared = getattr(ns, "__all__", None)
    if declared is not None:
        return list(declared) + sorted((n for n in _defined_here(ns) if n not in declared), key=str.lower)
    from funclib.namespace import NAMESPACE

    out = []
    for name in _attributes(ns):
        obj = getattr(ns, name)
        if NAMESPACE.get(name, None) is obj and obj is not None:
            out.append(name)
            continue
        if name.startswith("_") or isinstance(obj, types.ModuleType | typing.TypeVar):
            continue
        if type(obj).__module__ == "__future__":  # ``from __future__ import annotations``
            continue
        owner = getattr(obj, "__module__", None)
        # dtypes, flags and constants have no owner; anything else must come from funclib, not from an import
        if isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType) and not (owner or "").startswith(
            "funclib"
        ):
            continue
        out.append(name)
    return sorted(out, key=str.lower)


def _attributes(ns) -> list[str]:
    """A module's attributes, with those its ``__getattr__`` provides lazily (which its ``__dir__`` lists)."""
    names = list(vars(ns))
    if isinstance(ns, types.ModuleType) and "__dir__" in vars(ns):
        names += [n for n in dir(ns) if n not in vars(ns)]
    return names


def _defined_here(ns) -> list[str]:
    """Public names whose objects are defined in ``ns`` itself or, for a package, in its public submodules."""
    if not isinstance(ns, types.ModuleType):
        return []
    here = ns.__name__
    out = []
    for name, obj in vars(ns).items():
        if name.startswith("_") or isinstance(obj, types.ModuleType | typing.TypeVar):
            continue
        owner = getattr(obj, "__module__", None) or ""
        inside = hasattr(ns, "__path__") and owner.startswith(here + ".")
        if owner == here or (inside and not any(p.startswith("_") for p in owner[len(here) + 1 :].split("."))):
            out.append(name)
    return out


def namespaces() -> Iterator[tuple[Namespace, object]]:
    for spec in NAMESPACES:
        yield spec, resolve(spec.name)


def kind(obj) -> str:
    """The autodoc directive that documents ``obj``."""
    if isinstance(obj, type):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if callable(obj) and not _is_dtype(obj):
        return "autofunction"
    return "autodata"


def _is_dtype(obj) -> bool:
    import numpy as np

    try:
        return isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic))
    except TypeError:
        return False


def _section_key(obj) -> str:
    if _is_dtype(obj) or type(obj).__module__ == "numpy.dtypes":
        return "<dtype>"
    if kind(obj) == "autodata":
        return "<constant>"
    return getattr(obj, "__module__", None) or "<constant>"


def sections(spec: Namespace, ns) -> list[tuple[str | None, list[str]]]:
    names = public_names(ns)
    if spec.name != "funclib":
        return [(None, names)]
    grouped: dict[str, list[str]] = {title: [] for title, _ in TOP_LEVEL_SECTIONS}
    grouped["Other"] = []
    for name in names:
        key = _section_key(getattr(ns, name))
        title = next((t for t, prefixes in TOP_LEVEL_SECTIONS if key.startswith(prefixes)), "Other")
        grouped[title].append(name)
    return [(title, names) for title, names in grouped.items() if names]


def _underline(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def is_foreign(obj) -> bool:
    """An object funclib re-exports from NumPy or ml_dtypes (a dtype, ``np.s_``): its docstring is theirs."""
    if _is_dtype(obj):
        return True
    owner = getattr(obj, "__module__", None) if isinstance(obj, type | types.FunctionType) or callable(obj) else None
    return owner is not None and not owner.startswith("funclib")


def _entry(name: str, obj, first: str | None) -> list[str]:
    directive = kind(obj)
    if first is not None:
        # a class another namespace exports too: autodoc would register its defining name twice, so point there
        py = "exception" if directive == "autoexception" else "class"
        return [f".. py:{py}:: {name}", "", f"   The class :class:`{first}`, also exported here.", ""]
    lines = [f".. {directive}:: {name}"]
    if directive in ("autoclass", "autoexception") and not is_foreign(obj):
        lines.append("   :members:")
        if directive == "autoclass":
            lines.append("   :show-inheritance:")
    if directive == "autodata" and not isinstance(obj, bool | int | float | str | type(None)):
        lines.append("   :no-value:")
    return [*lines, ""]


def render(spec: Namespace, ns, seen: dict[int, str]) -> str:
    """One namespace's page (reStructuredText). ``seen`` maps the classes documented on earlier pages to their
    names there."""
    out = [f".. _api-{spec.name}:", "", _underline(spec.title, "="), spec.summary, ""]
    if isinstance(ns, types.ModuleType):
        out += [f".. automodule:: {spec.name}", "   :no-members:", ""]
    else:
        out += [f".. py:module:: {spec.name}", "", inspect.cleandoc(getattr(ns, "__doc__", None) or ""), ""]
    out += [f".. currentmodule:: {spec.name}", ""]
    pages = {id(resolve(s.name)): s for s in NAMESPACES}
    linked = [s for s in NAMESPACES if s.name.rpartition(".")[0] == spec.name]
    for name in public_names(ns):
        sub = pages.get(id(getattr(ns, name)))
        if sub is not None and sub not in linked:
            linked.append(sub)
    if linked:
        out += [_underline("Namespaces", "-")]
        out += [f"- :doc:`{s.name}`: {s.summary}" for s in linked] + [""]
    for title, names in sections(spec, ns):
        # namespaces are linked above, not documented as values
        # namespaces are linked above, not documented as values
        names = [n for n in names if not _is_namespace(getattr(ns, n), pages)]
        if not names:
            continue
        if title is not None:
            out.append(_underline(title, "-"))
        out += [".. autosummary::", "   :nosignatures:", ""] + [f"   {n}" for n in names] + [""]
        for name in names:
            obj = getattr(ns, name)
            out += _entry(name, obj, seen.get(id(obj)))
            if isinstance(obj, type):
                seen.setdefault(id(obj), f"{spec.name}.{name}")
    return "\n".join(out)


def _is_namespace(obj, pages: dict[int, Namespace]) -> bool:
    return id(obj) in pages or isinstance(obj, types.ModuleType)


def render_index() -> str:
    out = [".. _api:", "", _underline("API reference", "="), ""]
    out += ["Generated from the docstrings of every public name. Each page lists a namespace's exports.", ""]
    out += [".. toctree::", "   :maxdepth: 1", ""] + [f"   {s.name}" for s in NAMESPACES] + [""]
    return "\n".join(out)


def write_pages(outdir: Path) -> list[Path]:
    """Write (or refresh) the reference pages; untouched files keep their timestamps so rebuilds stay
    incremental."""
    outdir.mkdir(parents=True, exist_ok=True)
    pages = {outdir / "index.rst": render_index()}
    seen: dict[int, str] = {}
    for spec, ns in namespaces():
        pages[outdir / f"{spec.name}.rst"] = render(spec, ns, seen)
    for path, text in pages.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    for stale in set(outdir.glob("*.rst")) - set(pages):
        stale.unlink()
    return list(pages)


def _generate(app) -> None:
    write_pages(Path(app.srcdir) / "api")


def _docstring(app, what, name, obj, options, lines) -> None:
    """Re-exported NumPy objects and plain values (a dict, an int) would show NumPy's or the type's docstring,
    written for another site: say what they are instead."""
    text = "\n".join(lines).strip()
    if _is_dtype(obj) or type(obj).__module__ == "numpy.dtypes":
        lines[:] = [f"The ``{name.rpartition('.')[2]}`` data type (NumPy's ``{obj}``)."]
    elif is_foreign(obj) and what in ("function", "class", "exception", "data"):
        origin = f"{getattr(obj, '__module__', 'numpy')}.{getattr(obj, '__qualname__', name.rpartition('.')[2])}"
        lines[:] = [f"``{origin}``, re-exported unchanged."]
    elif what == "data" and text and text == inspect.cleandoc(type(obj).__doc__ or ""):
        lines[:] = []
    else:
        lines[:] = [_no_substitutions(line) for line in lines]


_SUBSTITUTION = re.compile(r"\|(?=\S)([^|]*?\S)\|")


def _no_substitutions(line: str) -> str:
    """funclib's docstrings write ``|x|`` for an absolute value, never an rst substitution: escape the bars
    (outside ``literals`` and example lines)."""
    if line.lstrip().startswith((">>>", "...")) or "|" not in line:
        return line
    parts = line.split("``")
    parts[::2] = [_SUBSTITUTION.sub(r"\\|\1\\|", p) for p in parts[::2]]
    return "``".join(parts)


def _public_bases(app, name, obj, options, bases) -> None:
    """Show a class's public ancestors, not the private helpers it is built from (``_RNNBase``)."""
    out = []
    for base in bases:
        if base.__name__.startswith("_"):
            base = next((b for b in base.__mro__[1:] if not b.__name__.startswith("_")), object)
        if base not in out:
            out.append(base)
    bases[:] = out


def setup(app):
    app.connect("builder-inited", _generate)
    app.connect("autodoc-process-docstring", _docstring)
    app.connect("autodoc-process-bases", _public_bases)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}


__all__ = ["NAMESPACES", "Namespace", "namespaces", "public_names", "render", "resolve", "write_pages"]

if __name__ == "__main__":  # python docs/_ext/apiref.py: write the pages without building
    write_pages(Path(os.path.dirname(__file__)).parent / "api")
