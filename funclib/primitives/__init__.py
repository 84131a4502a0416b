"""Primitive families. Importing this package registers every primitive in ``funclib.core.PRIMITIVES``."""

from . import collectives, dot, elementwise, indexing, reduce, shape, sort  # noqa: F401
