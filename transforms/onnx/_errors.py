"""The export's error type and how it names the user's line."""

from __future__ import annotations

from funclib.errors import FunclibError


class ExportError(FunclibError, ValueError):
    """A program cannot be exported to ONNX as asked; the message names the primitive, its line and the fix."""


def where(eqn) -> str:
    """`` (at file:line in fn)`` for an equation that recorded its source, else an empty string."""
    src = getattr(eqn, "source", None)
    return f" (at {src})" if src else ""
