"""The Array API namespace and the research staples, as plain Python over primitives.

The namespace is what the records declared public (``funclib.namespace``): the primitive families' wrappers and
the functions of these modules. ``funclib.linalg`` and ``funclib.fft`` are the modules ``linalg`` and ``fft``.
"""

from .. import primitives  # noqa: F401  (the families' rows declare their wrappers public)
from ..namespace import NAMESPACE as _NAMESPACE
from . import (  # noqa: F401
    creation,
    elementwise,
    fft,
    indexing,
    info,
    linalg,
    linalg_basic,
    manipulation,
    misc,
    nn,
    reductions,
    searching,
    segment,
    sets,
    sorting,
)

globals().update(_NAMESPACE)
__all__ = sorted(_NAMESPACE)
