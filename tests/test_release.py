"""Release readiness: the metadata is complete, and the built wheel installs into a fresh virtual environment and
works there with no source tree in reach.

The wheel test builds an sdist and, from it, a wheel (``python -m build``), so a file missing from the sdist fails
here too; it needs the package index, as ``make venv`` does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

import funclib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
EXTRAS = {"cuda", "dist", "onnx", "test", "testing", "examples", "docs"}


def test_the_version_is_defined_once_and_is_funclib_version():
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "funclib.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?", funclib.__version__)
    # the only other place a version is written down: the changelog's entry for it
    assert re.search(rf"^## {re.escape(funclib.__version__)}\b", (ROOT / "CHANGELOG.md").read_text(), re.M)


def test_metadata_license_and_extras():
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["license-files"] == ["LICENSE"]
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert EXTRAS <= set(PROJECT["optional-dependencies"])
    cuda = {re.split(r"[<>=\[ ]", r)[0] for r in PROJECT["optional-dependencies"]["cuda"]}
    assert cuda == {"numba-cuda", "nvmath-python"}
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in PROJECT["classifiers"])
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])  # the SPDX expression says it
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(PROJECT["urls"])
    # the core stays small: every dependency is one the project chose
    core = {re.split(r"[<>=\[ ]", r)[0].lower() for r in PROJECT["dependencies"]}
    assert core == {"numpy", "numba", "ml_dtypes", "optree", "safetensors"}


def test_every_package_directory_is_in_the_distribution():
    # setuptools ships only the packages listed (the folders are mapped into one package, so find: cannot list
    # them); a sub-package missing there imports from the source tree and fails only once installed
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = {name: ROOT / folder for name, folder in setup["package-dir"].items()}
    found = set()
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            if "__pycache__" not in rel:
                found.add(".".join((name, *rel)))
    assert found - set(setup["packages"]) == set(), "add these to [tool.setuptools] packages in pyproject.toml"


SMOKE = textwrap.dedent(
    """
    import importlib.metadata, pathlib, sys
    import funclib as fl, funclib.nn as nn, funclib.optim as optim

    here = pathlib.Path(fl.__file__).resolve()
    assert pathlib.Path(sys.prefix).resolve() in here.parents, f"funclib imported from {here}, not the venv"
    installed = importlib.metadata.version("funclib")
    assert fl.__version__ == installed, (fl.__version__, installed)
    # the wheel carries the compiled dispatch of the eager ops, and it loads
    from funclib.primitives import fastpath
    assert fastpath.COMPILED and type(fl.add).__name__ == "FastOp", fl.add

    # a jitted gradient, checked against the closed form
    x = fl.tensor([0.5, 1.0, 2.0])
    g = fl.jit(fl.grad(lambda x: (fl.sin(x) ** 2).sum()))(x)
    assert float(fl.max(fl.abs(g - fl.sin(2 * x)))) < 1e-5, g

    # an nn training step, eager and jitted, lowers the loss
    fl.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    xs = fl.random.normal(fl.random.key(0), (32, 3))
    ys = xs.sum(axis=1, keepdims=True)
    loss_fn = lambda m, x, y: ((m(x) - y) ** 2).mean()
    first, _ = nn.value_and_grad(model, loss_fn)(model, xs, ys)

    @fl.jit
    def step(model, state, hyper, x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        return (*opt.functional_update(model, grads, state, hyper), loss)

    loss, grads = nn.value_and_grad(model, loss_fn)(model, xs, ys)
    opt.update(model, grads)
    state, hyper = opt.state, opt.hyperparams()
    for _ in range(20):
        model, state, loss = step(model, state, hyper, xs, ys)
    assert float(loss) < 0.5 * float(first), (float(first), float(loss))
    print("smoke ok", fl.__version__, here)
    """
)


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    sdists, wheels = list(out.glob("funclib-*.tar.gz")), list(out.glob("funclib-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return sdists[0], wheels[0]


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_REQUIRE"))}
    env["FUNCLIB_CACHE_DIR"] = str(tmp / "kernel-cache")
    return env


def test_sdist_and_wheel_contents(dist):
    sdist, wheel = dist
    version = funclib.__version__
    # a platform wheel: it holds the compiled extension for this interpreter
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert sdist.name == f"funclib-{version}.tar.gz" and wheel.name.startswith(f"funclib-{version}-{tag}-{tag}-")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = {"LICENSE", "README.md", "CHANGELOG.md", "ARCHITECTURE.md", "pyproject.toml", "transforms/jit.py"}
    expected.add("funclib/_fastops.c")
    assert expected <= names, expected - names
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        metadata = whl.read(f"funclib-{version}.dist-info/METADATA").decode()
    packages = {p.replace(".", "/") for p in PYPROJECT["tool"]["setuptools"]["packages"]}
    assert all(f"{p}/__init__.py" in names for p in packages), packages - {n.rsplit("/", 1)[0] for n in names}
    assert f"funclib-{version}.dist-info/licenses/LICENSE" in names
    assert not any(n.startswith(("tests/", "docs/", "notebooks/", "benchmarks/")) for n in names)
    assert any(n.startswith("funclib/_fastops.") and n.endswith(".so") for n in names), "no compiled extension"
    assert not any(n.endswith(".c") for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert all(f"Provides-Extra: {e}" in metadata for e in EXTRAS)


def test_wheel_works_in_a_fresh_venv_outside_the_source_tree(dist, tmp_path):
    _, wheel = dist
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    env = _clean_env(tmp_path)
    _run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], cwd=tmp_path, env=env)
    proc = _run([str(py), "-c", SMOKE], cwd=tmp_path, env=env)
    assert "smoke ok" in proc.stdout


def test_every_extra_resolves(dist, tmp_path):
    # what `pip install "funclib[cuda,dist,...]"` would install, resolved against the index without installing
    _, wheel = dist
    report = tmp_path / "report.json"
    spec = f"{wheel}[{','.join(sorted(EXTRAS))}]"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report"]
    _run([*cmd, str(report), spec], cwd=tmp_path, env=_clean_env(tmp_path))
    resolved = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    for extra in ("numba-cuda", "nvmath-python", "mpi4py", "onnxruntime", "sphinx", "myst-nb", "hypothesis"):
        assert extra in resolved, f"{extra} did not resolve: {sorted(resolved)}"
