"""The architecture's rules, checked on the source: imports point down the layers, and the core stays small."""

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# funclib/numpy is a library over the core (it may use the transforms), so it is a layer of its own; so is
# funclib/distributed (MPI and the process axis), which the facade's data-parallel training builds on
LAYERS = {
    "kernels": 0, "funclib": 1, "transforms": 2, "funclib/numpy": 3, "funclib/distributed": 3, "nn": 3, "optim": 3
}
PACKAGE_OF = {
    "funclib.numpy": "funclib/numpy",
    "funclib.distributed": "funclib/distributed",
    "funclib.kernels": "kernels",
    "funclib.transforms": "transforms",
    "funclib.nn": "nn",
    "funclib.optim": "optim",
}
# user-facing entry points that re-export the layers above them
EXEMPT = {"funclib/__init__.py", "funclib/testing/__init__.py", "funclib/testing/strategies.py"}


def _layer_of_module(name: str) -> str | None:
    for prefix, folder in PACKAGE_OF.items():
        if name == prefix or name.startswith(prefix + "."):
            return folder
    if name == "funclib" or name.startswith("funclib."):
        return "funclib"
    return None


def _imports(path: Path, folder: str):
    tree = ast.parse(path.read_text())
    package = {"funclib": "funclib"}.get(folder) or ("funclib." + folder.removeprefix("funclib/"))
    pkg_parts = [package] + list(
        path.relative_to(ROOT / folder).parts[:-1]
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(pkg_parts).split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod


def _in_sublayer(path: Path, folder: str) -> bool:
    """Whether ``path`` lies in a layer nested inside ``folder`` (funclib/numpy inside funclib)."""
    return any(other != folder and other.startswith(folder + "/") and path.is_relative_to(ROOT / other)
               for other in LAYERS)


def _core_files():
    return [p for p in (ROOT / "funclib").rglob("*.py") if "testing" not in p.parts and not _in_sublayer(p, "funclib")]


def test_imports_point_down():
    bad = []
    for folder, level in LAYERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = str(path.relative_to(ROOT))
            if rel in EXEMPT or _in_sublayer(path, folder):
                continue
            for mod in _imports(path, folder):
                target = _layer_of_module(mod)
                if target is not None and LAYERS[target] > level:
                    bad.append(f"{rel} imports {mod} ({target} is above {folder})")
    assert not bad, "\n".join(bad)


def _code_lines(path: Path) -> int:
    """Lines holding code: no blank lines, comments or docstrings."""
    src = path.read_text()
    doc_lines = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(getattr(first, "value", None), ast.Constant)
                and isinstance(first.value.value, str)
            ):
                doc_lines.update(range(first.lineno, first.end_lineno + 1))
    code = set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in (
            tokenize.COMMENT,
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc_lines)


def test_core_size_budget():
    # the core (funclib/ without the testing utilities) must stay far from JAX's 10,000-line files
    total = sum(_code_lines(p) for p in _core_files())
    biggest = max(((_code_lines(p), p.name) for p in (ROOT / "funclib").rglob("*.py")), default=(0, ""))
    assert total < 14000, total
    assert biggest[0] < 1500, biggest
