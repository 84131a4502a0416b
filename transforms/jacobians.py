"""Jacobians: ``jacfwd`` (vmap over jvp), ``jacrev`` (vmap over vjp), ``hessian`` (jacfwd of jacrev), ``hvp``.

Pytree inputs and outputs give nested Jacobians as JAX does: ``jac[out_leaf][in_leaf]`` has shape
``out_shape + in_shape`` (the outer structure is the output's, the inner the differentiated arguments').
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable, check_int
from funclib.core import _wrap
from funclib.primitives.shape import reshape

from ._api_util import as_tensor_leaf, check_argnums, check_float_input, leaf_labels
from .autodiff import _split_aux, check_pairs, grad, jvp, vjp
from .batching import vmap


def _std_basis(leaves):
    """Identity rows for all input leaves stacked: shape (N, *leaf_shape) per leaf, N = total size."""
    sizes = [int(np.prod(x.shape, dtype=np.int64)) for x in leaves]
    total = int(sum(sizes))
    out, off = [], 0
    for x, n in zip(leaves, sizes):
        eye = np.zeros((total, n), dtype=x.dtype)
        eye[np.arange(off, off + n), np.arange(n)] = 1
        out.append(_wrap(eye.reshape((total,) + tuple(x.shape))))
        off += n
    return out, sizes, total


def _split_basis_dim(y, sizes, shapes, axis_front: bool):
    """Split the basis axis of ``y`` (front or back) into one block per input leaf, reshaped to the leaf's shape."""
    out, off = [], 0
    for n, shp in zip(sizes, shapes):
        if axis_front:
            part = y[off : off + n]
            part = reshape(part, tuple(shp) + tuple(y.shape[1:]))
        else:
            part = y[..., off : off + n]
            part = reshape(part, tuple(y.shape[:-1]) + tuple(shp))
        out.append(part)
        off += n
    return out


def jacfwd(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    chunk_size: int | None = None,
    max_bytes: int | None = None,
) -> Callable:
    """Jacobian by forward mode: one JVP per input element, vectorized with vmap.

    ``chunk_size`` and ``max_bytes`` bound peak memory as in ``vmap``: the JVPs run in chunks of at most
    ``chunk_size`` input elements, or of as many as keep one chunk's intermediates under ``max_bytes`` bytes (the
    Jacobian itself is not counted). The result does not depend on the chunking.

    >>> fl.jacfwd(fl.sin)(fl.tensor([0.0, 1.0]))
    Tensor([[1.       , 0.       ],
           [0.       , 0.5403023]], dtype=float32)
    """
    check_callable(fun, "jacfwd")
    _check_memory_args(chunk_size, max_bytes, "jacfwd")

    def jac(*args):
        leaves, in_tree, f_flat = _differentiated(fun, argnums, args, "jacfwd")
        basis, sizes, total = _std_basis(leaves)

        def push(*tans):
            return jvp(lambda *xs: _split_aux(f_flat(*xs), has_aux, "jacfwd")[0], tuple(leaves), tuple(tans))[1]

        touts = vmap(push, in_axes=tuple([0] * len(basis)), out_axes=-1, chunk_size=chunk_size, max_bytes=max_bytes)(
            *basis
        )
        o_leaves, o_tree = tree_util.flatten(touts)
        shapes = [tuple(x.shape) for x in leaves]
        per_out = [tree_util.unflatten(in_tree, _split_basis_dim(t, sizes, shapes, axis_front=False)) for t in o_leaves]
        result = tree_util.unflatten(o_tree, [_unwrap_single(p, argnums) for p in per_out])
        if has_aux:
            # the aux value is not batched over the basis, so it is computed once more outside the vmap
            return result, _split_aux(f_flat(*leaves), True, "jacfwd")[1]
        return result

    jac.__name__ = f"jacfwd({getattr(fun, '__name__', 'fun')})"
    return jac


def _check_memory_args(chunk_size, max_bytes, op: str) -> None:
    if chunk_size is not None:
        check_int(chunk_size, op, "chunk_size", min=1)
    if max_bytes is not None:
        check_int(max_bytes, op, "max_bytes", min=1)


def _differentiated(fun, argnums, args, name):
    """The differentiated arguments' leaves, their tree, and ``fun`` as a function of those leaves."""
    nums = check_argnums(argnums, len(args), name)
    leaves, in_tree = tree_util.flatten(tuple(args[i] for i in nums))
    leaves = [as_tensor_leaf(x, name) for x in leaves]
    if not all(x.dtype in dtypes.INEXACT for x in leaves):
        for label, x in zip(leaf_labels(fun, args, nums), leaves):
            check_float_input(x, name, f"differentiated input {label}")

    def f_flat(*xs):
        d = tree_util.unflatten(in_tree, list(xs))
        a = list(args)
        for j, n in enumerate(nums):
            a[n] = d[j]
        return fun(*a)

    return leaves, in_tree, f_flat


def _unwrap_single(per_in, argnums):
    return per_in[0] if isinstance(argnums, int) else per_in


def jacrev(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    chunk_size: int | None = None,
    max_bytes: int | None = None,
) -> Callable:
    """Jacobian by reverse mode: one VJP per output element, vectorized with vmap.

    ``chunk_size`` and ``max_bytes`` bound the memory of the backward passes as in ``vmap`` (the forward pass
    runs once; its residuals and the Jacobian itself are not counted). The result does not depend on the chunking.

    >>> fl.jacrev(lambda x: x ** 2)(fl.tensor([1.0, 2.0]))
    Tensor([[2., 0.],
           [0., 4.]], dtype=float32)
    """
    check_callable(fun, "jacrev")
    _check_memory_args(chunk_size, max_bytes, "jacrev")

    def jac(*args):
        leaves, in_tree, f_flat = _differentiated(fun, argnums, args, "jacrev")
        res = vjp(f_flat, *leaves, has_aux=has_aux)
        out, f_vjp = res[0], res[1]
        aux = res[2] if has_aux else None
        o_leaves, o_tree = tree_util.flatten(out)
        o_leaves = [as_tensor_leaf(o, "jacrev output") for o in o_leaves]
        for o in o_leaves:
            if o.dtype not in dtypes.INEXACT:
                raise TypeError(f"jacrev: outputs must be floating-point, got {o.dtype.name}")
        basis, sizes, total = _std_basis(o_leaves)

        def pull(*cts):
            return f_vjp(tree_util.unflatten(o_tree, list(cts)))

        cts_in = vmap(pull, in_axes=tuple([0] * len(basis)), chunk_size=chunk_size, max_bytes=max_bytes)(*basis)
        # cts_in: tuple per input leaf, each (total, *in_shape); split the leading axis per output leaf
        per_in = tuple(as_tensor_leaf(c, "jacrev") for c in tree_util.leaves(cts_in))
        shapes = [tuple(o.shape) for o in o_leaves]
        split = [_split_basis_dim(c, sizes, shapes, axis_front=True) for c in per_in]
        per_out = []
        for j in range(len(o_leaves)):
            per_out.append(tree_util.unflatten(in_tree, [split[i][j] for i in range(len(per_in))]))
        result = tree_util.unflatten(o_tree, [_unwrap_single(p, argnums) for p in per_out])
        return (result, aux) if has_aux else result

    jac.__name__ = f"jacrev({getattr(fun, '__name__', 'fun')})"
    return jac


jacobian = jacrev


def hessian(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    chunk_size: int | None = None,
    max_bytes: int | None = None,
) -> Callable:
    """The Hessian, as ``jacfwd(jacrev(fun))`` (forward-over-reverse).

    ``chunk_size``/``max_bytes`` apply to both Jacobians: the forward-mode one runs its Hessian-vector products
    in chunks whose intermediates fit ``max_bytes`` (each chunk holds one gradient computation per lane).

    >>> fl.hessian(lambda x: (x ** 3).sum())(fl.tensor([1.0, 2.0]))
    Tensor([[ 6.,  0.],
           [ 0., 12.]], dtype=float32)
    """
    check_callable(fun, "hessian")
    _check_memory_args(chunk_size, max_bytes, "hessian")

    def hess(*args):
        check_argnums(argnums, len(args), "hessian")
        inner = jacrev(fun, argnums, has_aux=has_aux, chunk_size=chunk_size, max_bytes=max_bytes)
        return jacfwd(inner, argnums, has_aux=has_aux, chunk_size=chunk_size, max_bytes=max_bytes)(*args)

    hess.__name__ = f"hessian({getattr(fun, '__name__', 'fun')})"
    return hess


def hvp(fun: Callable, primals: Sequence, tangents: Sequence):
    """Hessian-vector product ``H(primals) @ tangents`` by forward-over-reverse, without forming H.

    Returns ``(grad(fun)(*primals), H @ tangents)``.

    >>> g, hv = fl.hvp(lambda x: (x ** 3).sum(), (fl.tensor([1.0, 2.0]),), (fl.tensor([1.0, 0.0]),))
    """
    check_callable(fun, "hvp")
    check_pairs(primals, tangents, "hvp")
    nums = tuple(range(len(primals)))
    g = grad(fun, argnums=nums)
    out, tout = jvp(g, tuple(primals), tuple(tangents))
    if len(primals) == 1:
        return out[0], tout[0]
    return out, tout
