"""The Array API inspection namespace: ``fl.__array_namespace_info__()``.

funclib runs on one device, the CPU, named ``"cpu"`` (``Tensor.device``). ``dtypes()`` lists the dtypes of the
standard; funclib's extra ``float16`` and ``bfloat16`` are left out so generic code sees only what it expects.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..namespace import public

_STANDARD = (
    dtypes.bool_,
    dtypes.int8,
    dtypes.int16,
    dtypes.int32,
    dtypes.int64,
    dtypes.uint8,
    dtypes.uint16,
    dtypes.uint32,
    dtypes.uint64,
    dtypes.float32,
    dtypes.float64,
    dtypes.complex64,
    dtypes.complex128,
)


def _check_device(device, op):
    if device not in (None, "cpu"):
        raise ValueError(
            f"__array_namespace_info__().{op}: unknown device {device!r}; funclib has only 'cpu'"
        )


@public
class __array_namespace_info__:
    """What this namespace supports: capabilities, devices and dtypes.

    >>> info = fl.__array_namespace_info__()
    >>> info.default_dtypes()["real floating"]
    dtype('float32')
    """

    __slots__ = ()

    def capabilities(self) -> dict[str, bool]:
        """Boolean-mask indexing and data-dependent output shapes (``nonzero``, ``unique_*``) work eagerly.

        Under ``jit``/``vmap`` both raise ``DataDependentShapeError``; see ARCHITECTURE.md.
        """
        return {"boolean indexing": True, "data-dependent shapes": True}

    def default_device(self) -> str:
        """The device new tensors are created on: ``"cpu"``."""
        return "cpu"

    def devices(self) -> list[str]:
        """All devices: ``["cpu"]``."""
        return ["cpu"]

    def default_dtypes(self, *, device=None) -> dict[str, np.dtype]:
        """The dtypes creation functions pick when none is given."""
        _check_device(device, "default_dtypes")
        return {
            "real floating": dtypes.default_float,
            "complex floating": dtypes.default_complex,
            "integral": dtypes.default_int,
            "indexing": dtypes.int64,
        }

    def dtypes(self, *, device=None, kind=None) -> dict[str, np.dtype]:
        """The standard's dtypes by name, optionally only those of ``kind`` (as in ``isdtype``)."""
        _check_device(device, "dtypes")
        out = {}
        for d in _STANDARD:
            if kind is None or dtypes.isdtype(d, kind):
                out["bool" if d == dtypes.bool_ else d.name] = d
        return out
