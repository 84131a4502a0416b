"""Sphinx configuration: ``make docs`` builds the site into docs/_build/html with warnings as errors."""

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import funclib  # noqa: E402

project = "funclib"
author = "the funclib authors"
copyright = "the funclib authors"
release = funclib.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "myst_nb",
    "apiref",
    "xrefs",
]

root_doc = "index"
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "README.md"]
templates_path = []

# docstrings: Google style (Args:, Returns:), signatures with their annotations as written
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autosummary_generate = False  # the pages are written by apiref, one per namespace

# funclib's own references must resolve (a broken one fails the build); other libraries' are plain text
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!funclib\b).*")]

# pages in Markdown (MyST) and notebooks
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
myst_dmath_double_inline = True  # the notebooks write $$...$$ inside paragraphs, as Jupyter allows

# Notebooks are committed without outputs and executed here, so the site always shows what the current code
# prints and plots; executed results are cached by content, so a rebuild re-runs only notebooks that changed.
nb_execution_mode = os.environ.get("FUNCLIB_DOCS_EXECUTE", "cache")
nb_execution_cache_path = str(HERE / "_build" / ".jupyter_cache")
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True


def _kernel_for_this_python() -> None:
    """Run notebooks on the interpreter building the docs, whatever "python3" kernels the user has installed."""
    kernels = HERE / "_build" / "jupyter" / "kernels" / "python3"
    kernels.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (funclib docs)",
        "language": "python",
    }
    (kernels / "kernel.json").write_text(json.dumps(spec))
    search = [str(kernels.parent.parent), os.environ.get("JUPYTER_PATH")]
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in search if p)


_kernel_for_this_python()

html_theme = "furo"
html_title = f"funclib {release}"
html_static_path = []
