"""Every primitive's CUDA implementation in one table: ``cuda_ops``' own (elementwise, data movement, reductions,
``dot_general``, gather and scatter-add, Threefry, sort, row scans) joined with the families built on it
(``cuda_indexing``, ``cuda_linalg`` and ``cuda_cxlinalg``, ``cuda_sampling``, ``cuda_special``, ``cuda_fft``,
``cuda_eig``), the complex kernels (``cuda_complex``), and the PTX catalog of all their kernel kinds.

>>> "svd" in IMPLS and "reduce_sum" in IMPLS and "fft" in IMPLS and "eig" in IMPLS
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import (
    cuda_complex,
    cuda_cxlinalg,
    cuda_eig,
    cuda_fft,
    cuda_indexing,
    cuda_linalg,
    cuda_ops,
    cuda_sampling,
    cuda_special,
)

Context = cuda_ops.Context
_FAMILIES = (cuda_indexing, cuda_linalg, cuda_cxlinalg, cuda_sampling, cuda_special, cuda_fft, cuda_eig)
IMPLS: dict[str, Callable[..., Any]] = {**cuda_ops.IMPLS}
for _family in _FAMILIES:
    IMPLS.update(_family.IMPLS)
_COMPLEX_TABLE = cuda_complex.TABLE_KERNELS | cuda_fft.IMPLS.keys() | cuda_eig.IMPLS.keys()


def run(ctx: cuda_ops.Context, name: str, kernel_op: str | None, args: Sequence[Any], params: dict,
        out_dtype) -> Any:
    """Primitive ``name`` on device operands (``cuda_ops.run`` with every family's table; a complex operand or
    result goes to the kernels that compute in complex, or is refused naming ``name``)."""
    if cuda_complex.involves_complex(args, out_dtype):
        if name not in IMPLS:
            args = [cuda_ops._on_device(ctx, a, keep_scalar=True) for a in args]
            return cuda_complex.run_elementwise(ctx, name, args, params, out_dtype)
        if name not in _COMPLEX_TABLE:
            raise cuda_complex.UnsupportedOnDevice(
                f"'{name}' on complex operands has no CUDA kernel (its kernel computes in real numbers); run it on "
                "the CPU with x.to_device('cpu')"
            )
    return cuda_ops.run(ctx, name, kernel_op, args, params, out_dtype, impls=IMPLS)


def kernel_catalog() -> list[tuple[str, str, list[str], bool]]:
    """Every kernel kind generated for a CUDA device: ``(label, source, argument types, float32 kernel?)``."""
    cases = cuda_ops.kernel_catalog()
    for family in (*_FAMILIES, cuda_complex):
        cases += family.catalog()
    return cases


def compile_catalog(cc: tuple[int, int] = (9, 0)) -> dict[str, str]:
    """The PTX of every ``kernel_catalog`` entry for compute capability ``cc`` (numba-cuda's NVVM; no GPU)."""
    return cuda_ops.compile_catalog(cc, kernel_catalog())
