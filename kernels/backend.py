"""What the jit lowering needs from a device: the interface a code generator (an *emitter*) implements.

The lowering (``transforms/lowering.py``) plans a program once for every device: which elementwise equations fuse
into one region, which reductions join them, which staged row kernels form, where each value lives. It then asks
an emitter, the one object that knows the device, to turn those plans into code and memory:

- **capabilities** the planner reads: ``supports`` (an elementwise op at these dtypes can be written in a fused
  kernel), ``reducible`` (a reduction of this dtype can be fused), ``carrier`` (dtypes the kernels cannot hold,
  passed as views of these unsigned integer dtypes), and optionally ``fuses_single_ops`` (a lone elementwise op
  gets a kernel of its own too; the CPU runs it through NumPy);
- **kernels** from backend-neutral specs: ``fused_kernel`` (a ``fusion.KernelSpec``: one loop nest with an
  optional reduction), ``staged_kernel`` (a ``fusion.StagedSpec``: passes over the rows of a (rows, cols) space),
  ``loop_kernel`` (a ``loopgen.LoopSpec``: a whole loop), each raising ``Unsupported`` for what it cannot
  generate so that the lowering runs the equations another way;
- **memory**: ``empty`` for outputs, ``asarray`` for constants, ``scratch`` for the row buffers a kernel asks for,
  and an optional placement of large outputs relative to an input (``placed``, ``anchor``, ``empty_near``);
- **everything else**: ``primitive`` gives the function that runs one non-fused equation on the device
  (``dot_general`` is the call into BLAS).

A kernel from ``fused_kernel``/``staged_kernel`` is called as ``fn(*inputs, *outputs, *scratch, dims)`` (a fused
kernel with a reduction takes its accumulator before ``dims``), inputs and outputs collapsed to the spec's rank
(staged: 2-D), carried dtypes as their carriers' views, ``dims`` the collapsed sizes as an int64 array. Sizes are
run-time values, so one kernel serves every batch size.

The numba CPU emitter is ``kernels.numba_cpu.CPU``; ``kernels.cuda_emit.CudaEmitter`` implements the same methods
for a CUDA device (numba-cuda kernels launched over a grid, device allocations, cuBLAS for ``dot_general``); the
planner, the steps and the program are the same for both.

>>> from funclib.kernels.numba_cpu import CPU
>>> isinstance(CPU, Emitter)
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from .fusion import KernelSpec, StagedSpec


class Unsupported(Exception):
    """A spec holds something an emitter does not generate; the lowering runs those equations another way."""


@runtime_checkable
class Kernel(Protocol):
    """Generated code for one spec: its source (shown by ``jit(f).lower(...)``; the disk cache's key) and the
    dtypes of the scratch rows it takes after its outputs. ``load()`` compiles it (or fetches it from the cache)
    and returns the function to call."""

    source: str
    scratch: tuple[np.dtype, ...]

    def load(self) -> Callable[..., Any]: ...


@runtime_checkable
class Emitter(Protocol):
    """A code generator and memory manager for one kind of device (see the module docstring)."""

    name: str
    carrier: Mapping[np.dtype, np.dtype]

    def supports(self, op: str, dtypes_in: Sequence[np.dtype], dtype_out: np.dtype) -> bool:
        """Whether the elementwise ``op`` with these operand and result dtypes can be written in a fused kernel."""
        ...

    def reducible(self, dtype: np.dtype) -> bool:
        """Whether a sum/max/min of this dtype can be fused into a kernel."""
        ...

    def fused_kernel(self, spec: KernelSpec, cols: int) -> Kernel:
        """The kernel of one fused loop nest; ``cols`` is the innermost collapsed size it is planned for."""
        ...

    def staged_kernel(self, spec: StagedSpec, cols: int) -> Kernel:
        """The kernel of one staged group over rows of ``cols`` elements."""
        ...

    def loop_kernel(self, spec: Any) -> Callable[..., Any]:  # a loopgen.LoopSpec (loopgen imports this module)
        """A whole loop: ``k(length, consts, init_carry, xs) -> (final_carry, ys)``; ``Unsupported`` if not."""
        ...

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A new array on the device, contents undefined."""
        ...

    def asarray(self, x: Any) -> Any:
        """``x`` as an array on the device: a program's constants, and the scalars a NumPy impl may return."""
        ...

    def placed(self, nbytes: int) -> bool:
        """Whether an output of ``nbytes`` is allocated with ``empty_near`` (when an ``anchor`` exists)."""
        ...

    def anchor(self, arrays: Sequence[Any]) -> Any:
        """The input that outputs and scratch rows are placed against, or None."""
        ...

    def empty_near(self, shape: tuple[int, ...], dtype: np.dtype, anchor: Any, k: int) -> Any:
        """``empty(shape, dtype)`` placed relative to ``anchor`` (``k`` tells apart arrays placed together)."""
        ...

    def scratch(self, n: int, dtype: np.dtype, anchor: Any, k: int) -> Any:
        """Scratch row ``k`` of ``n`` elements for a kernel that asked for it (``Kernel.scratch``)."""
        ...

    def primitive(self, name: str, impl: Callable[..., Any], params: dict) -> Callable[..., Any]:
        """The function running one equation of primitive ``name`` outside generated kernels; ``impl`` is its
        NumPy implementation and ``params`` its parameters."""
        ...
