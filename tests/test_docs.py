"""The documentation cannot drift from the code: the guides' code runs, their links and references resolve, and the
API reference has an entry for every public name, with an example for every public callable.

This checks what ``make docs`` would fail on without building the site (``make docs`` runs Sphinx with warnings as
errors and executes the notebooks; the notebooks also run in tests/test_notebooks.py).
"""

from __future__ import annotations

import builtins
import re
import sys
import types
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
import apiref  # noqa: E402
import xrefs  # noqa: E402

# the hand-written pages, and the Markdown files of the repository they include or link to
PAGES = sorted(p for p in DOCS.glob("*.md"))
MARKDOWN = PAGES + [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "CHANGELOG.md"]
# pages that promise "every block on this page runs"
TESTED_PAGES = {"getting_started.md", "coming_from_pytorch.md", "coming_from_jax.md", "sharp_bits.md"}

FENCE = re.compile(r"^(`{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", re.S | re.M)
# scanned left to right as MyST does: a role, or inline code (which may show role syntax without being one)
INLINE = re.compile(r"\{(\w+)\}`([^`]+)`|``.+?``|`[^`\n]*`")
REF_ROLES = {"func", "class", "mod", "meth", "attr", "data", "obj", "exc", "doc"}
RST_ROLE = re.compile(r":(?:py:)?(func|class|mod|meth|attr|data|obj|exc):`([^`]+)`")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def python_blocks(text: str) -> list[str]:
    """The ```python fences of a page, in order. Code shown for another library is fenced with
    ```{code-block} python instead, and is not run."""
    return [m.group(3) for m in FENCE.finditer(text) if m.group(2).strip() == "python"]


def prose(text: str) -> str:
    """A page without its code blocks, which hold no references."""
    return FENCE.sub(lambda m: "" if "toctree" not in m.group(2) else m.group(0), text)


def roles(text: str) -> list[tuple[str, str]]:
    """The ``{role}`target``` references of a page, outside code."""
    return [(m.group(1), m.group(2)) for m in INLINE.finditer(prose(text)) if m.group(1) in REF_ROLES]


def links(text: str) -> list[str]:
    """The targets of a page's Markdown links, outside code and roles."""
    return LINK.findall(INLINE.sub("", prose(text)))


@pytest.mark.parametrize("page", sorted(TESTED_PAGES) + ["index.md"])
def test_page_code_runs(page, tmp_path, monkeypatch):
    blocks = python_blocks((DOCS / page).read_text())
    assert blocks, f"{page} has no ```python blocks to run"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs.{page}"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the sharp bits evaluate log(-1) on purpose
        for i, block in enumerate(blocks):
            exec(compile(block, f"docs/{page}, ```python block {i + 1}", "exec"), namespace)


def _slug(heading: str) -> str:
    """MyST's anchor for a heading (``myst_heading_anchors``): GitHub's rule."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m.group(1).replace("`", "")) for m in re.finditer(r"^#{1,6} +(.+)$", text, re.M)}


def _doc_exists(target: str, relative_to: Path) -> bool:
    """A Sphinx document name: a page, a notebook, or a generated reference page."""
    base = (DOCS / target.lstrip("/")) if target.startswith("/") else (relative_to.parent / target)
    if any(base.with_suffix(s).exists() for s in (".md", ".rst", ".ipynb")):
        return True
    rel = base.resolve().relative_to(DOCS.resolve()).as_posix() if base.resolve().is_relative_to(DOCS.resolve()) else ""
    return rel == "api/index" or rel in {f"api/{s.name}" for s in apiref.NAMESPACES}


def _documented(target: str, module: str | None = None) -> bool:
    """A reference resolves to an object the API reference documents (or to a member of a documented class)."""
    if "<" in target:
        target = target[target.rindex("<") + 1 : target.rindex(">")]
    target = target.lstrip("~!.")
    obj = xrefs.lookup(target, module)
    if obj is None:
        return False
    names = _canonical()
    if id(obj) in names:
        return True
    owner = xrefs.lookup(target.rpartition(".")[0], module)
    return isinstance(owner, type) and id(owner) in names


_CANONICAL: dict[int, str] = {}


def _canonical() -> dict[int, str]:
    if not _CANONICAL:
        _CANONICAL.update(xrefs.canonical_names())
    return _CANONICAL


@pytest.mark.parametrize("path", MARKDOWN, ids=[p.name for p in MARKDOWN])
def test_links_and_references_resolve(path):
    text = prose(path.read_text())
    broken = []
    for target in links(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: outside the repository
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file) if file else path
        if not dest.exists():
            broken.append(f"link {target!r}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"link {target!r}: no heading with anchor #{anchor} in {dest.name}")
    for role, target in roles(text):
        if role == "doc":
            name = target[target.rindex("<") + 1 : target.rindex(">")] if "<" in target else target
            if not _doc_exists(name, path):
                broken.append(f"{{doc}}`{target}`: no such page")
        elif not _documented(target):
            broken.append(f"{{{role}}}`{target}`: not a documented funclib object")
    for block in re.finditer(r"```\{toctree\}\n(.*?)```", path.read_text(), re.S):
        for line in block.group(1).splitlines():
            entry = line.strip()
            if not entry or entry.startswith(":"):
                continue
            if "*" in entry:
                if not list(path.parent.glob(entry + ".*")):
                    broken.append(f"toctree glob {entry!r} matches nothing")
            elif not _doc_exists(entry, path):
                broken.append(f"toctree entry {entry!r}: no such page")
    assert not broken, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(broken)


def _public_objects():
    for spec, ns in apiref.namespaces():
        for name in apiref.public_names(ns):
            yield spec, name, getattr(ns, name)


def _foreign_reference(target: str) -> bool:
    """A Python builtin (``slice``) or another library's object (``numpy.ndarray``), which Sphinx leaves unlinked."""
    target = target.lstrip("~!.")
    if "." not in target:
        return hasattr(builtins, target)
    return not target.startswith(("funclib.", *xrefs.ALIASES))


def test_docstring_references_resolve():
    broken = []
    seen = set()
    for spec, name, obj in _public_objects():
        if id(obj) in seen or apiref.is_foreign(obj):
            continue
        seen.add(id(obj))
        docs = [obj.__doc__ or ""] if not isinstance(obj, type) else [obj.__doc__ or ""] + [
            getattr(m, "__doc__", None) or "" for m in vars(obj).values()
        ]
        for doc in docs:
            for role, target in RST_ROLE.findall(doc):
                if _foreign_reference(target):
                    continue
                if not _documented(target, spec.name):
                    broken.append(f"{spec.name}.{name}: :{role}:`{target}` is not a documented funclib object")
    assert not broken, "\n".join(broken)


def test_every_public_name_has_a_reference_entry(tmp_path):
    apiref.write_pages(tmp_path)
    missing = []
    for spec, ns in apiref.namespaces():
        page = (tmp_path / f"{spec.name}.rst").read_text()
        entries = set(re.findall(r"^\.\. (?:auto\w+|py:\w+):: (\S+)$", page, re.M))
        links = set(re.findall(r":doc:`([^`]+)`", page))
        for name in apiref.public_names(ns):
            obj = getattr(ns, name)
            linked = isinstance(obj, types.ModuleType) or any(
                apiref.resolve(s.name) is obj and s.name in links for s in apiref.NAMESPACES
            )
            if name not in entries and not linked:
                missing.append(f"{spec.name}.{name}")
    assert not missing, f"no reference entry for {missing}"
    index = (tmp_path / "index.rst").read_text()
    assert all(f"   {s.name}\n" in index for s in apiref.NAMESPACES)


# Public callables whose docstrings have no example yet (a ``>>>`` line). The list may only shrink: a new public
# callable without an example fails, and so does an entry here that has gained one (delete it).
MISSING_EXAMPLES = set((Path(__file__).parent / "data" / "missing_examples.txt").read_text().split())
# the facade's namespaces require an example of every public callable themselves (tests/test_doctests.py)
FACADE = {s.name for s in apiref.NAMESPACES if s.facade}


def _callables_without_examples() -> set[str]:
    out = set()
    for spec, name, obj in _public_objects():
        if spec.name in FACADE or isinstance(obj, types.ModuleType) or not callable(obj):
            continue
        if apiref.is_foreign(obj) or apiref.kind(obj) in ("autodata", "autoexception"):
            continue
        if ">>>" not in (obj.__doc__ or ""):
            out.add(f"{spec.name}.{name}")
    return out


def test_every_public_callable_has_an_example():
    without = _callables_without_examples()
    new = sorted(without - MISSING_EXAMPLES)
    assert not new, f"public callables without an example (add one with >>> to each docstring): {new}"
    stale = sorted(MISSING_EXAMPLES - without)
    assert not stale, f"these now have examples or are gone: delete them from tests/data/missing_examples.txt: {stale}"


def test_the_checks_tell_broken_from_sound():
    # the checks above pass vacuously if these helpers accept everything or find nothing
    assert _documented("funclib.grad") and _documented("fl.random.normal") and _documented("~funclib.nn.Linear")
    assert _documented("funclib.Tensor.at") and _documented("grad <funclib.grad>")
    assert not _documented("funclib.gard") and not _documented("funclib.core.Tensor.no_such_method")
    assert _doc_exists("sharp_bits", DOCS / "index.md") and _doc_exists("api/funclib.nn", DOCS / "index.md")
    assert not _doc_exists("no_such_page", DOCS / "index.md")
    page = "```python\nrun()\n```\n\n```{code-block} python\nshown()\n```\n\n````python\nalso_run()\n````\n"
    assert python_blocks(page) == ["run()\n", "also_run()\n"]
    assert links("[a](b.md) `[c](d.md)` ![img](e.png) {doc}`x <y.md>`") == ["b.md"]
    found = roles("see {func}`funclib.gard`, [x](y.md) {doc}`z`, not `{func}`/`{doc}` or ``{func}`q` ``")
    assert found == [("func", "funclib.gard"), ("doc", "z")]
