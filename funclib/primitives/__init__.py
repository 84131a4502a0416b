"""Primitive families. Importing this package registers every primitive in ``funclib.core.PRIMITIVES``."""

from . import collectives, dot, elementwise, fft, indexing, linalg, reduce, shape, sort  # noqa: F401
