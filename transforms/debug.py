"""``fl.debug``: looking inside traced code. ``print`` and ``callback`` run host code with concrete values (also
under ``jit``, ``vmap`` and ``grad``); ``check`` and ``checkify`` turn failed conditions, NaN/Inf values and
out-of-bounds indices into errors reported after a (jitted) call.

>>> f = fl.jit(lambda x: (fl.debug.print("x = {}", x), fl.sin(x))[1])
>>> f(fl.tensor(0.0))
x = 0.0
Tensor(0., dtype=float32)
"""

from .callbacks import debug_callback as callback
from .callbacks import debug_print as print  # noqa: A004
from .checkify import (
    CheckError,
    Error,
    ErrorKind,
    all_checks,
    automatic_checks,
    check,
    checkify,
    div_checks,
    float_checks,
    index_checks,
    inf_checks,
    nan_checks,
    user_checks,
)

__all__ = [
    "print",
    "callback",
    "check",
    "checkify",
    "Error",
    "CheckError",
    "ErrorKind",
    "user_checks",
    "nan_checks",
    "inf_checks",
    "div_checks",
    "index_checks",
    "float_checks",
    "automatic_checks",
    "all_checks",
]
