"""The public namespace ``fl.*`` and the methods of ``Tensor``, filled by the records that define them.

A family row (``unary("sin", ..., method=True)``) or a function of the namespace library (``@public`` in
``funclib/ops``) declares what it is: its name in ``fl``, and the Tensor methods, operators and properties that
are the same function. ``funclib.ops`` and ``funclib`` export ``NAMESPACE`` once every record is imported, so no
list of names is kept by hand. Methods that adapt a function to PyTorch's calling convention (``x.sum(dim=0)``)
are defined beside it with ``@tensor_method``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core import Tensor

# fl.<name> -> the function (or class) every record declared public
NAMESPACE: dict[str, Any] = {}
# Tensor attribute -> what a record installed there (anything else on Tensor is core's own)
_INSTALLED: dict[str, Any] = {}


def public(
    fn: Callable | None = None,
    /,
    *,
    name: str | None = None,
    method: bool | str = False,
    dunder: str | None = None,
    rdunder: str | None = None,
    prop: str | None = None,
):
    """Record ``fn`` as ``fl.<name>`` (by default its ``__name__``) and install it on ``Tensor``: ``method=True`` as
    the method ``x.<name>()`` (a string names the method), ``dunder`` as an operator and ``rdunder`` as its
    reflected form (``"__sub__"``, ``"__rsub__"``: ``2 - x`` is ``fn(2, x)``), ``prop`` as a property. Usable as
    ``@public``, ``@public(...)`` or ``public(fn, ...)``; returns ``fn``."""

    def record(f):
        key = name or f.__name__
        if NAMESPACE.get(key, f) is not f:
            raise ValueError(f"fl.{key} is declared public twice: by {_where(NAMESPACE[key])} and by {_where(f)}")
        NAMESPACE[key] = f
        if method:
            _install(key if method is True else method, f)
        if dunder:
            _install(dunder, f)
        if rdunder:
            _install(rdunder, _reflected(f, rdunder))
        if prop:
            _install(prop, property(f))
        return f

    return record if fn is None else record(fn)


def tensor_method(*names: str, prop: bool = False):
    """Install the decorated function as the ``Tensor`` methods ``names`` (properties with ``prop=True``) without
    making it a namespace function: an adapter such as ``x.reshape(2, 3)`` beside ``fl.reshape``."""

    def record(f):
        for n in names:
            _install(n, property(f) if prop else f)
        return f

    return record


def _install(attr: str, f) -> None:
    if attr in vars(Tensor) and _INSTALLED.get(attr) is not f:
        owner = _where(_INSTALLED[attr]) if attr in _INSTALLED else "funclib/core.py"
        raise ValueError(f"Tensor.{attr} is already defined (by {owner}); a record cannot replace it")
    _INSTALLED[attr] = f
    setattr(Tensor, attr, f)


def _reflected(f, attr: str):
    def reflected(self, other, /):
        return f(other, self)

    reflected.__name__ = reflected.__qualname__ = attr
    reflected.__doc__ = f"``x.{attr}(y)`` is ``{f.__name__}(y, x)``."
    # a compiled fast path (funclib/primitives/fastpath.py) has a reflected form in front of this one
    swapped = getattr(f, "swapped", None)
    return reflected if swapped is None else swapped(reflected)


def _where(f) -> str:
    f = getattr(f, "fget", f)
    return f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', f)}"
