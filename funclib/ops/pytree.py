"""``fl.tree.ravel``: a pytree of tensors as one flat vector and the function that rebuilds the tree.

It lives over the namespace (it concatenates, reshapes and casts) while ``fl.tree`` is in the core, so the entry
point adds it to ``fl.tree``, as it adds the iterative solvers to ``fl.linalg``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .. import dtypes
from .. import tree as tree_util
from ..checks import describe
from ..core import Tensor
from ..errors import DTypeError, ShapeError
from ..primitives.elementwise import convert
from .creation import asarray, zeros
from .manipulation import concat, reshape


def ravel(tree: Any) -> tuple[Tensor, Callable[[Tensor], Any]]:
    """Flatten a pytree of tensors into one vector, and return the function that rebuilds the tree from a vector.

    As JAX's ``ravel_pytree``: leaves are raveled in tree order and concatenated; mixed dtypes are promoted to
    their ``fl.result_type`` and cast back by the rebuilding function, which expects a vector of that dtype and
    length. Both directions are compositions of differentiable operations, so ``grad``, ``vmap`` and ``jit`` apply.

    Args:
        tree: a pytree whose leaves are tensors (or Python scalars / NumPy arrays).

    Returns:
        ``(flat, unravel)``: a 1-d tensor and ``unravel(vector) -> tree``. An empty tree gives a vector of length 0
        in the default float dtype.

    >>> flat, unravel = fl.tree.ravel({"b": fl.zeros(2), "w": fl.ones((2, 2))})
    >>> flat
    Tensor([0., 0., 1., 1., 1., 1.], dtype=float32)
    >>> unravel(flat * 2)["w"]
    Tensor([[2., 2.],
            [2., 2.]], dtype=float32)
    """
    leaves, treedef = tree_util.flatten(tree)
    leaves = [x if isinstance(x, Tensor) else _leaf(x) for x in leaves]
    shapes = [tuple(x.shape) for x in leaves]
    from_dtypes = [x.dtype for x in leaves]
    to = dtypes.result_type(*from_dtypes) if leaves else dtypes.float_default()
    sizes = [math.prod(s) for s in shapes]
    if not leaves:
        flat = zeros((0,), dtype=to)
    else:
        parts = [reshape(x if x.dtype == to else convert(x, to), (-1,)) for x in leaves]
        flat = parts[0] if len(parts) == 1 else concat(parts)
    total = sum(sizes)

    def unravel(vector: Tensor) -> Any:
        v = vector if isinstance(vector, Tensor) else _leaf(vector)
        if tuple(v.shape) != (total,):
            raise ShapeError(
                f"tree.ravel's unravel: expected a vector of shape ({total},) (the raveled tree's length), got "
                f"{describe(vector)}"
            )
        if v.dtype != to:
            raise DTypeError(
                f"tree.ravel's unravel: expected a vector of dtype {to.name} (the raveled tree's), got "
                f"{v.dtype.name}; cast it with .astype(fl.{to.name})"
            )
        out, at = [], 0
        for shape, size, d in zip(shapes, sizes, from_dtypes):
            piece = reshape(v[at : at + size], shape)
            out.append(piece if d == to else convert(piece, d))
            at += size
        return tree_util.unflatten(treedef, out)

    return flat, unravel


def _leaf(x) -> Tensor:
    try:
        return asarray(x)
    except (TypeError, ValueError):
        raise TypeError(
            f"tree.ravel: leaves must be tensors (or Python scalars / NumPy arrays), got {describe(x)}; take other "
            "values out of the tree"
        ) from None
