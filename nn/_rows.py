"""Module classes made from table rows (the activation layers, the loss modules): one constructor with a real
signature, so ``help()`` and ``inspect.signature`` show PyTorch's arguments and defaults."""

from __future__ import annotations

import inspect
from typing import Any

from .module import Module

_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD


def row_class(base: type[Module], name: str, module: str, params: dict[str, Any], doc: str, **attrs) -> type:
    """A subclass ``name`` of ``base``, defined in ``module``, whose constructor takes ``params`` (name: default)
    and hands the bound arguments to ``self._setup(**arguments)``; ``attrs`` become class attributes."""
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
    body = {"__module__": module, "__qualname__": name, "__doc__": doc, "__init__": __init__, **attrs}
    return type(name, (base,), body)


def row_doc(summary: str, arg_docs: dict[str, str], returns: str, example: str, output: str) -> str:
    """A row's docstring: summary, Args, Returns and an example with the output it prints."""
    args = "".join(f"\n        {k}: {v}" for k, v in arg_docs.items())
    return (
        summary
        + (f"\n\n    Args:{args}" if args else "")
        + f"\n\n    Returns:\n        {returns}"
        + f"\n\n    >>> {example}\n    {output}\n    "
    )
