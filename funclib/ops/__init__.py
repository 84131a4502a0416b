"""The Array API namespace and the research staples, as plain Python over primitives."""

from . import methods  # noqa: F401  (installs Tensor's operators)
