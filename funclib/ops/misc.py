"""Small utilities of the namespace."""

from __future__ import annotations

from ..primitives.elementwise import stop_gradient  # noqa: F401
