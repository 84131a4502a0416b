"""Module classes made from table rows (the activation layers, the loss modules): one constructor with a real
signature, so ``help()`` and ``inspect.signature`` show PyTorch's arguments and defaults, and a docstring with
Args, Returns and an example."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .module import Module

_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD


def row_class(
    base: type[Module], name: str, module: str, function: Callable[..., Any], params: dict[str, Any], **attrs
) -> type:
    """A subclass ``name`` of ``base``, defined in ``module``, whose constructor takes ``params`` (name: default)
    and hands the bound arguments to ``self._setup(**arguments)``. ``attrs`` become class attributes, but for the
    docstring's parts ``summary``, ``args`` (name: text), ``returns``, ``example`` and ``output`` (what it prints)."""
    sig = inspect.Signature([inspect.Parameter(k, _POSITIONAL, default=v) for k, v in params.items()])

    def __init__(self, *args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{name}{sig}: {e}") from None
        bound.apply_defaults()
        Module.__init__(self)
        self._setup(**bound.arguments)

    __init__.__qualname__ = f"{name}.__init__"
    __init__.__signature__ = sig.replace(parameters=[inspect.Parameter("self", _POSITIONAL), *sig.parameters.values()])
    args = "".join(f"\n        {k}: {v}" for k, v in attrs.pop("args").items())
    doc = (
        attrs.pop("summary")
        + (f"\n\n    Args:{args}" if args else "")
        + f"\n\n    Returns:\n        {attrs.pop('returns')}"
        + f"\n\n    >>> {attrs.pop('example')}\n    {attrs.pop('output')}\n    "
    )
    body = {"__module__": module, "__qualname__": name, "__doc__": doc, "__init__": __init__}
    return type(name, (base,), {**body, "_function": staticmethod(function), **attrs})
