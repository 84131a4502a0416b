"""Primitive families. Importing this package registers every primitive in ``funclib.core.PRIMITIVES``.

A family's rules use only its own primitives and those of the families below it: ``shape`` (the structural
primitives every rule is written with) < ``elementwise`` (arithmetic, comparisons, casts) < ``transcendental``
< ``reduce``, ``indexing`` < ``sort`` < ``scatter_combine``; ``segment`` (over ``indexing``) < ``sparse`` (over
``segment`` and ``reduce``); ``dot``, ``conv``, ``fft``, ``linalg``, ``random_bits`` and ``collectives`` sit on
top.
"""

from . import (  # noqa: F401
    collectives,
    conv,
    dot,
    elementwise,
    fft,
    indexing,
    linalg,
    random_bits,
    reduce,
    scatter_combine,
    segment,
    shape,
    sort,
    sparse,
    transcendental,
)
