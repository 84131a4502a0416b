"""Control flow as higher-order primitives: ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``,
``map``, ``associative_scan``.

Bodies and branches are traced once into jaxprs carried as parameters (loops stay loops: no unrolling), and
each primitive has impl, abstract eval, jvp, vmap, transpose (where linear) and partial-eval rules, so every
transform composes with them, reverse mode through ``while_loop`` included (with ``max_steps``, by
checkpointing).
"""

from ._common import CarryTypeError
from .associative import associative_scan
from .cond import cond, cond_p, switch
from .loops import WhileGradientError, fori_loop, while_loop, while_p
from .scan import map, scan, scan_p  # noqa: A004

__all__ = [
    "cond",
    "switch",
    "while_loop",
    "fori_loop",
    "scan",
    "map",
    "associative_scan",
    "CarryTypeError",
    "WhileGradientError",
    "cond_p",
    "scan_p",
    "while_p",
]
