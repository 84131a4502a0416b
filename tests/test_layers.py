"""The architecture's rules, checked on the source: imports point down the layers, no two files import each
other (directly or through others), the core stays small and no file grows past its budget."""

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder of the repository -> the package it is (pyproject.toml maps them into the one funclib package)
PACKAGES = {
    "funclib": "funclib",
    "transforms": "funclib.transforms",
    "kernels": "funclib.kernels",
    "nn": "funclib.nn",
    "optim": "funclib.optim",
}
# Layers, lowest first; a module may import its own layer and the ones below. Inside funclib/ the core (dtypes,
# Tensor, traces, jaxprs, pytrees, the namespace registry) is below the primitives, the primitives below the
# namespace library (ops), and the libraries over ops below the transforms: random, quantization (quantize,
# fake_quantize, scaled_matmul), sparse (COO/CSR on the spmm/sddmm/segment primitives), ragged (pad/unpad) and
# distributed (the process axis on MPI, over the collectives; the facade's data-parallel training builds on it).
# funclib.numpy and funclib.testing use the transforms, so they sit beside the facade.
LAYERS = {
    "kernels": 0,
    "core": 1,
    "primitives": 2,
    "ops": 3,
    "random": 4,
    "quantization": 4,
    "sparse": 4,
    "ragged": 4,
    "distributed": 4,
    "transforms": 5,
    "numpy": 6,
    "testing": 6,
    "nn": 6,
    "optim": 6,
    # the user-facing entry point re-exports every layer (fl.grad, fl.save from the facade, ...); the facade uses
    # it as users do (import funclib as fl), nothing below may
    "entry": 6,
}
ENTRY = "funclib"
CORE_BUDGET = 2000
TRANSFORM_FILE_BUDGET = 500
FILE_BUDGET = 800
# Files over their budget today, each with what removes it. The test fails once one is back under budget, so
# the entry goes with the split that fixes it.
OVER_TRANSFORM_BUDGET: dict[str, str] = {}
OVER_FILE_BUDGET: dict[str, str] = {}
# Import cycles known today, each with what removes it (stale entries fail, as above).
KNOWN_CYCLES: dict[frozenset, str] = {}


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, pkg in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join([pkg, *parts])] = path
    return mods


MODULES = _modules()
# compiled extension modules (a C source beside the Python ones, built under the same dotted name): leaves of the
# import graph in the layer of their folder, outside the line budgets
EXTENSIONS = {
    ".".join([pkg, *path.relative_to(ROOT / folder).with_suffix("").parts]): path
    for folder, pkg in PACKAGES.items()
    for path in sorted((ROOT / folder).rglob("*.c"))
}


def _layer(module: str) -> str:
    if module == ENTRY:
        return "entry"
    # funclib.<layer>..., or a module of the core (funclib.core, funclib.jaxpr, ...)
    part = module.split(".")[1]
    return part if part in LAYERS else "core"


def _resolve(name: str) -> str | None:
    """The module of the tree that importing ``name`` loads (the longest known prefix)."""
    while name and name not in MODULES and name not in EXTENSIONS:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> dict[str, list[tuple[int, bool]]]:
    """The modules of the tree ``module`` imports -> [(line, inside a function)]. ``from p import x`` is an import of
    the module ``p.x`` when there is one, else of ``p``. A package's ``__init__`` that Python runs first when a
    submodule is imported is not counted: it re-exports its submodules, so every module would depend on it."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    local = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: dict[str, list[tuple[int, bool]]] = {}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [
                f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES or f"{mod}.{a.name}" in EXTENSIONS else mod
                for a in node.names
            ]
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                out.setdefault(target, []).append((node.lineno, id(node) in local))
    return out


GRAPH = {m: _imports(m) for m in MODULES} | {m: {} for m in EXTENSIONS}


def _rel(module: str) -> str:
    return str((MODULES | EXTENSIONS)[module].relative_to(ROOT))


def test_imports_point_down():
    bad = []
    for module, targets in GRAPH.items():
        here = _layer(module)
        for target, sites in targets.items():
            there = _layer(target)
            if LAYERS[there] > LAYERS[here]:
                bad.append(f"{_rel(module)}:{sites[0][0]} imports {target} ({there}, above {here})")
    assert not bad, "imports that point up the layers " + str(LAYERS) + ":\n" + "\n".join(sorted(bad))


def _cycles() -> list[list[str]]:
    """The import cycles: strongly connected components of the file graph with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return out


def _describe_cycle(comp: list[str]) -> str:
    members = set(comp)
    edges = [
        f"  {_rel(a)}:{sites[0][0]} imports {b}{' (in a function)' if all(s[1] for s in sites) else ''}"
        for a in comp
        for b, sites in GRAPH[a].items()
        if b in members
    ]
    return "\n".join(edges)


def test_no_import_cycles():
    cycles = [c for c in _cycles() if frozenset(c) not in KNOWN_CYCLES]
    assert not cycles, (
        "files that import each other (directly or through others), imports inside functions included:\n"
        + "\n\n".join(_describe_cycle(c) for c in cycles)
    )


def test_known_cycles_are_still_there():
    found = {frozenset(c) for c in _cycles()}
    stale = [f"{sorted(c)} ({why})" for c, why in KNOWN_CYCLES.items() if c not in found]
    assert not stale, f"cycles listed in KNOWN_CYCLES are gone; remove their entries: {stale}"


def test_function_local_imports_say_why():
    """An import inside a function defers an optional dependency or a heavy import; a comment says which."""
    bad = []
    for path in MODULES.values():
        lines = path.read_text().splitlines()
        tree = ast.parse(path.read_text())
        for f in ast.walk(tree):
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(f):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    # a comment on the line, or above the block of imports the line belongs to
                    i = n.lineno - 1
                    while i > 0 and lines[i - 1].strip().startswith(("import ", "from ")):
                        i -= 1
                    if "#" not in lines[n.lineno - 1] and not (i > 0 and lines[i - 1].strip().startswith("#")):
                        bad.append(f"{path.relative_to(ROOT)}:{n.lineno}: {lines[n.lineno - 1].strip()}")
    assert not bad, (
        "imports inside functions without a comment saying why (move them to the top of the file, or say which "
        "optional dependency or heavy import they defer):\n" + "\n".join(sorted(set(bad)))
    )


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


def _core_files() -> list[Path]:
    return [MODULES[m] for m in MODULES if _layer(m) in ("core", "entry")]


def test_core_size_budget():
    # the core: funclib/ without the libraries over it (primitives, ops, random, quantization, sparse, ragged,
    # distributed, numpy, testing)
    sizes = sorted(((_code_lines(p), str(p.relative_to(ROOT))) for p in _core_files()), reverse=True)
    total = sum(n for n, _ in sizes)
    assert total <= CORE_BUDGET, f"the core is {total} code lines, over its {CORE_BUDGET}: {sizes}"


def _over(paths, budget, exceptions):
    sizes = {str(p.relative_to(ROOT)): _code_lines(p) for p in paths}
    over = {p: n for p, n in sizes.items() if n > budget}
    unexpected = {p: n for p, n in over.items() if p not in exceptions}
    stale = [p for p in exceptions if p not in over]
    return unexpected, stale


def test_transform_file_budget():
    unexpected, stale = _over((ROOT / "transforms").rglob("*.py"), TRANSFORM_FILE_BUDGET, OVER_TRANSFORM_BUDGET)
    assert not unexpected, f"transform files over {TRANSFORM_FILE_BUDGET} code lines: {unexpected}; split them"
    assert not stale, f"files back under the transform budget: remove them from OVER_TRANSFORM_BUDGET: {stale}"


def test_file_budget():
    unexpected, stale = _over(MODULES.values(), FILE_BUDGET, OVER_FILE_BUDGET)
    assert not unexpected, f"files over {FILE_BUDGET} code lines: {unexpected}; split them"
    assert not stale, f"files back under {FILE_BUDGET} code lines: remove them from OVER_FILE_BUDGET: {stale}"
