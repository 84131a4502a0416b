"""Every primitive's CUDA implementation in one table: ``cuda_ops``' own (elementwise, data movement, reductions,
``dot_general``, gather and scatter-add, Threefry, sort, row scans) joined with the families built on it
(``cuda_indexing``, ``cuda_linalg``, ``cuda_sampling``, ``cuda_special``), and the PTX catalog of all their
kernel kinds.

>>> "svd" in IMPLS and "reduce_sum" in IMPLS
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import cuda_indexing, cuda_linalg, cuda_ops, cuda_sampling, cuda_special

Context = cuda_ops.Context
_FAMILIES = (cuda_indexing, cuda_linalg, cuda_sampling, cuda_special)
IMPLS: dict[str, Callable[..., Any]] = {**cuda_ops.IMPLS}
for _family in _FAMILIES:
    IMPLS.update(_family.IMPLS)


def run(ctx: cuda_ops.Context, name: str, kernel_op: str | None, args: Sequence[Any], params: dict,
        out_dtype) -> Any:
    """Primitive ``name`` on device operands (``cuda_ops.run`` with every family's table)."""
    return cuda_ops.run(ctx, name, kernel_op, args, params, out_dtype, impls=IMPLS)


def kernel_catalog() -> list[tuple[str, str, list[str], bool]]:
    """Every kernel kind generated for a CUDA device: ``(label, source, argument types, float32 kernel?)``."""
    cases = cuda_ops.kernel_catalog()
    for family in _FAMILIES:
        cases += family.catalog()
    return cases


def compile_catalog(cc: tuple[int, int] = (9, 0)) -> dict[str, str]:
    """The PTX of every ``kernel_catalog`` entry for compute capability ``cc`` (numba-cuda's NVVM; no GPU)."""
    return cuda_ops.compile_catalog(cc, kernel_catalog())
