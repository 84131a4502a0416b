"""ONNX export: ``fl.onnx.export(f_or_module, example_args, path, dynamic_axes=..., opset=18)``.

The exporter traces the function as ``fl.jit`` does (the same tracing and ``passes.optimize``), inlines calls,
and lowers each equation with its primitive's rule in ``ONNX_RULES`` (one entry per primitive, registered with
``@onnx_rule`` in ``_rules/``, a module per kind of primitive). ``NOT_EXPORTABLE`` lists the primitives without a
lowering and why. ``onnx`` is imported only when a model is built (``pip install funclib[onnx]``).
"""

from . import _rules  # noqa: F401  (registers the lowerings)
from ._errors import ExportError
from ._export import export
from ._lower import MIN_OPSET, NOT_EXPORTABLE, ONNX_RULES, onnx_rule

__all__ = ["export", "ExportError", "ONNX_RULES", "NOT_EXPORTABLE", "MIN_OPSET", "onnx_rule"]
