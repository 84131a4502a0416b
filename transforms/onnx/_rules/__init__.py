"""One ONNX lowering per primitive, registered by name with ``@onnx_rule``, in a module per kind of primitive.

A rule gets the lowering context, the equation and the ONNX names of its inputs, and returns the names of its
outputs. Every rule matches the primitive's NumPy reference (``impl``): where an ONNX operator's semantics differ
(NaN handling, rounding of integer division, signed shifts) the rule composes operators that do match.
"""

from . import arrays, binary, control, unary  # noqa: F401  (each registers its rules)
