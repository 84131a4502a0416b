"""Implicit differentiation: ``custom_linear_solve`` and ``custom_root``.

Both differentiate through the *solution* of an equation, not through the iterations of the solver that found it,
so the solver may be anything (a ``while_loop`` that cannot be reversed, NumPy code through ``pure_callback``) and
reverse mode keeps no per-iteration residuals.

``custom_linear_solve_p`` holds four jaxprs, ``matvec``, ``vecmat`` (its transpose), ``solve`` and
``transpose_solve``, each taking its captured values (leading operands) then a vector. Its value is ``solve(b)``.
With ``A x = b``, ``dx = solve(db - dA x)``: the JVP rule binds the primitive again on that right-hand side, so
the tangent is linear in the operand ``b``, and the transpose rule solves the transposed system (``vecmat`` and
``transpose_solve`` exchanged with ``matvec`` and ``solve``). ``custom_root`` is a ``custom_jvp`` function: with
``f(x*, p) = 0``, ``dx* = -(df/dx)^-1 (df/dp dp)``, where ``tangent_solve`` inverts the linearized ``f``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import Primitive, ShapedArray, Zero, _wrap, aval_of, is_undefined, set_trace
from funclib.errors import FunclibError, NotLinearError
from funclib.jaxpr import eval_jaxpr
from funclib.ops.creation import full
from funclib.primitives.elementwise import negative as neg
from funclib.primitives.elementwise import subtract as sub
from funclib.primitives.shape import bdim_to_front, broadcast_in_dim, instantiate, zeros

from ._api_util import as_tensor_leaf
from .autodiff import jvp, linear_transpose, linearize
from .control_flow._common import batch_jaxpr, call, trace_user_body
from .custom import custom_jvp_call_p


class SolveTreeError(FunclibError, TypeError):
    """A function given to ``custom_linear_solve`` or ``custom_root`` returned the wrong structure, shapes or
    dtypes."""


# the four jaxprs, in this order; "vecmat" and "transpose_solve" are None when reverse mode is not available
_MATVEC, _VECMAT, _SOLVE, _TSOLVE = range(4)


def _groups(args, const_lengths):
    out, i = [], 0
    for n in const_lengths:
        out.append(list(args[i : i + n]))
        i += n
    return out, list(args[i:])


def _transposed(jaxprs, const_lengths):
    mv, vm, s, ts = jaxprs
    lm, lv, ls, lt = const_lengths
    return (vm, mv, ts, s), (lv, lm, lt, ls)


custom_linear_solve_p = Primitive("custom_linear_solve", multiple_results=True, linear=True)  # linear in b
custom_linear_solve_p.family = "call"
custom_linear_solve_p.runs_on_devices = True  # its impl evaluates funclib operations


@custom_linear_solve_p.def_impl
def _ls_impl(*args, jaxprs, const_lengths):
    consts, b = _groups([_wrap(a) for a in args], const_lengths)
    s = jaxprs[_SOLVE]
    with set_trace(None):
        outs = eval_jaxpr(s.jaxpr, s.consts, *consts[_SOLVE], *b)
    return [o._value for o in outs]


def _lower_ls(eqn, body_program):
    prog = body_program(eqn.params["jaxprs"][_SOLVE])
    if prog is None:
        return None
    lengths = eqn.params["const_lengths"]
    start = sum(lengths[:_SOLVE])
    stop = start + lengths[_SOLVE]
    n_consts = sum(lengths)

    def run(*args):
        return prog.run(list(args[start:stop]) + list(args[n_consts:]))

    return run


custom_linear_solve_p.jit_step = _lower_ls


@custom_linear_solve_p.def_abstract_eval
def _ls_abstract(*avals, jaxprs, const_lengths):
    _, b = _groups(avals, const_lengths)
    want = jaxprs[_SOLVE].out_avals
    if [(a.shape, a.dtype) for a in b] != [(a.shape, a.dtype) for a in want]:
        raise TypeError(
            f"custom_linear_solve: b is [{', '.join(a.str_short() for a in b)}] but the solve returns "
            f"[{', '.join(a.str_short() for a in want)}]"
        )
    return [ShapedArray(a.shape, a.dtype) for a in b]


@custom_linear_solve_p.def_jvp
def _ls_jvp(primals, tangents, *, jaxprs, const_lengths):
    x = custom_linear_solve_p.bind(*primals, jaxprs=jaxprs, const_lengths=const_lengths)
    consts, _ = _groups(primals, const_lengths)
    t_consts, t_b = _groups(tangents, const_lengths)
    mv_t = t_consts[_MATVEC]
    rhs = list(t_b)
    if any(type(t) is not Zero for t in mv_t):
        # A x = b  =>  A dx = db - dA x
        mv = jaxprs[_MATVEC]
        _, dax = jvp(
            lambda *c: call(mv, *c, *x), tuple(consts[_MATVEC]), tuple(instantiate(t) for t in mv_t)
        )
        rhs = [neg(d) if type(t) is Zero else sub(instantiate(t), d) for t, d in zip(rhs, dax)]
    if all(type(t) is Zero for t in rhs):
        return x, [Zero(aval_of(o)) for o in x]
    flat_consts = [c for g in consts for c in g]
    dx = custom_linear_solve_p.bind(
        *flat_consts, *[instantiate(t) for t in rhs], jaxprs=jaxprs, const_lengths=const_lengths
    )
    return x, dx


@custom_linear_solve_p.def_transpose
def _ls_transpose(cts, *args, jaxprs, const_lengths):
    consts, b = _groups(args, const_lengths)
    if any(is_undefined(c) for g in consts for c in g):
        raise NotLinearError(
            "custom_linear_solve is linear in b only, but a value that matvec, solve or transpose_solve close over "
            "depends on b (or on another linear input): build such values without b (a starting point "
            "fl.zeros(b.shape) rather than b * 0)"
        )
    if jaxprs[_TSOLVE] is None:
        raise TypeError(
            "custom_linear_solve: reverse-mode differentiation (grad, vjp) needs transpose_solve, a solver for "
            "the transposed system; pass transpose_solve=..., or symmetric=True when matvec is symmetric"
        )
    t_jaxprs, t_lengths = _transposed(jaxprs, const_lengths)
    cts = [zeros(a.aval) if type(c) is Zero else c for c, a in zip(cts, b)]
    t_consts = [consts[_VECMAT], consts[_MATVEC], consts[_TSOLVE], consts[_SOLVE]]
    ct_b = custom_linear_solve_p.bind(
        *[c for g in t_consts for c in g], *cts, jaxprs=t_jaxprs, const_lengths=t_lengths
    )
    return [None] * sum(const_lengths) + list(ct_b)


@custom_linear_solve_p.def_vmap
def _ls_vmap(args, dims, *, jaxprs, const_lengths):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    c_dims, _ = _groups(dims, const_lengths)
    n_b = len(args) - sum(const_lengths)
    # the solution is batched when anything is; each jaxpr is batched over its own batched captures
    new = []
    for j, cd in zip(jaxprs, c_dims):
        if j is None:
            new.append(None)
            continue
        bj, _ = batch_jaxpr(j, size, [d is not None for d in cd] + [True] * n_b, [True] * n_b)
        new.append(bj)
    moved = [a if d is None else bdim_to_front(a, d) for a, d in zip(args, dims)]
    n_c = sum(const_lengths)
    for i in range(n_c, len(args)):
        if dims[i] is None:
            a = moved[i]
            moved[i] = broadcast_in_dim(a, (size,) + tuple(a.shape), tuple(range(1, a.ndim + 1)))
    outs = custom_linear_solve_p.bind(*moved, jaxprs=tuple(new), const_lengths=const_lengths)
    return outs, [0] * len(outs)


# ---------------------------------------------------------------------------------------------------------------
# custom_linear_solve


def _checked_tree(op: str, what: str, out, tree, avals, ref: str = "b") -> list:
    leaves, t = tree_util.flatten(out)
    if t != tree:
        raise SolveTreeError(f"{op}: {what} returned a value of structure {t}, but {ref} has structure {tree}")
    leaves = [as_tensor_leaf(x, f"{op} ({what})") for x in leaves]
    for i, (x, a) in enumerate(zip(leaves, avals)):
        if tuple(x.shape) != a.shape or x.dtype != a.dtype:
            got = ShapedArray(tuple(x.shape), x.dtype).str_short()
            raise SolveTreeError(
                f"{op}: {what} returned {got} for leaf {i}, where {ref} has {a.str_short()}; it must return values "
                "of the same shapes and dtypes"
            )
    return leaves


def custom_linear_solve(
    matvec: Callable[[Any], Any],
    b: Any,
    solve: Callable[[Callable, Any], Any],
    transpose_solve: Callable[[Callable, Any], Any] | None = None,
    symmetric: bool = False,
) -> Any:
    """Solve ``matvec(x) == b`` with ``solve``, differentiating through the solution, not through ``solve``.

    Args:
      matvec: the linear map ``A``, a function of a pytree like ``b`` (it may close over differentiated values).
      b: the right-hand side, a pytree of tensors.
      solve: ``solve(matvec, b) -> x`` with ``matvec(x) == b`` (assumed, not checked); it need not be
        differentiable (a ``while_loop``, NumPy through ``pure_callback``).
      transpose_solve: ``transpose_solve(vecmat, b) -> x`` solving the transposed system, where ``vecmat`` is
        the transpose of ``matvec``; needed for reverse mode (``grad``, ``vjp``).
      symmetric: ``matvec`` is symmetric: ``vecmat`` is ``matvec``, and ``transpose_solve`` defaults to ``solve``.

    Returns:
      ``solve(matvec, b)``. Its derivatives assume it solves the system exactly: ``dx = A^-1 (db - dA x)``;
      reverse mode solves ``A^T``.

    >>> a = fl.tensor([[4.0, 1.0], [1.0, 3.0]])
    >>> def solve(mv, b):
    ...     return fl.linalg.solve(a, b)
    >>> x = fl.custom_linear_solve(lambda v: a @ v, fl.tensor([1.0, 2.0]), solve, symmetric=True)
    >>> fl.grad(lambda b: fl.custom_linear_solve(lambda v: a @ v, b, solve, symmetric=True).sum())(
    ...     fl.tensor([1.0, 2.0]))
    Tensor([0.18181819, 0.27272728], dtype=float32)
    """
    op = "custom_linear_solve"
    check_callable(matvec, op, "matvec")
    check_callable(solve, op, "solve")
    if transpose_solve is not None:
        check_callable(transpose_solve, op, "transpose_solve")
    leaves, tree = tree_util.flatten(b)
    leaves = [as_tensor_leaf(x, f"{op} (b)") for x in leaves]
    if not leaves:
        raise ValueError(f"{op}: b has no arrays")
    avals = [aval_of(x) for x in leaves]
    for a in avals:
        if a.dtype not in dtypes.INEXACT:
            raise TypeError(f"{op}: b must be floating-point or complex, got {a.str_short()}")

    def flat(fn, what):
        def f(*xs):
            return _checked_tree(op, what, fn(tree_util.unflatten(tree, list(xs))), tree, avals)

        return f

    mv_j, mv_c, _ = trace_user_body(flat(matvec, "matvec"), avals, f"{op} matvec")
    s_j, s_c, _ = trace_user_body(flat(lambda v: solve(matvec, v), "solve"), avals, f"{op} solve")
    vm_j, vm_c, ts_j, ts_c = None, [], None, []
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    if transpose_solve is not None:
        if symmetric:
            vecmat, vm_j, vm_c = matvec, mv_j, mv_c
        else:

            def vecmat(v):
                return transposed(v)[0]

            try:
                transposed = linear_transpose(matvec, tree_util.unflatten(tree, leaves))
                vm_j, vm_c, _ = trace_user_body(flat(vecmat, "the transpose of matvec"), avals, f"{op} vecmat")
            except NotLinearError as e:
                raise NotLinearError(f"{op}: matvec must be linear in its argument: {e}") from None
        ts_j, ts_c, _ = trace_user_body(
            flat(lambda v: transpose_solve(vecmat, v), "transpose_solve"), avals, f"{op} transpose_solve"
        )
    outs = custom_linear_solve_p.bind(
        *mv_c,
        *vm_c,
        *s_c,
        *ts_c,
        *leaves,
        jaxprs=(mv_j, vm_j, s_j, ts_j),
        const_lengths=(len(mv_c), len(vm_c), len(s_c), len(ts_c)),
    )
    return tree_util.unflatten(tree, list(outs))


# ---------------------------------------------------------------------------------------------------------------
# custom_root


def _as_tangent(t, aval: ShapedArray):
    if type(t) in (bool, int, float, complex):
        return full(aval.shape, t, dtype=aval.dtype)  # g(1.0) for a scalar problem, as the docstring suggests
    t = as_tensor_leaf(t, "custom_root (the argument of the linearized f)")
    if tuple(t.shape) != aval.shape or t.dtype != aval.dtype:
        raise SolveTreeError(
            f"custom_root: the linearized f takes tangents like the initial guess ({aval.str_short()}), got "
            f"{ShapedArray(tuple(t.shape), t.dtype).str_short()}"
        )
    return t


def custom_root(
    f: Callable[[Any], Any],
    initial_guess: Any,
    solve: Callable[[Callable, Any], Any],
    tangent_solve: Callable[[Callable, Any], Any],
    has_aux: bool = False,
) -> Any:
    """Find a root of ``f`` with ``solve``, differentiating through the root (implicit function theorem).

    Args:
      f: the function whose root is sought, from a pytree to a pytree of the same structure. It may close over
        values; the root is differentiated with respect to those.
      initial_guess: where ``solve`` starts (its derivative is zero).
      solve: ``solve(f, initial_guess) -> root`` (with ``has_aux``: ``(root, aux)``); it need not be
        differentiable (a ``while_loop`` of Newton steps, a bisection, NumPy through ``pure_callback``).
      tangent_solve: ``tangent_solve(g, y) -> x`` with ``g(x) == y``, where ``g`` is ``f`` linearized at the
        root. For a scalar problem ``lambda g, y: y / g(1.0)``; for a small vector problem
        ``lambda g, y: fl.linalg.solve(fl.jacobian(g)(y), y)``; for a large one an iterative solver such as
        ``fl.linalg.cg(g, y)[0]``. It must be linear in ``y`` for reverse mode.
      has_aux: ``solve`` returns ``(root, aux)``; ``aux`` is returned beside the root, not differentiated.

    Returns:
      ``solve(f, initial_guess)``, whose derivatives assume ``f(root) == 0``: ``d root = -(df/dx)^-1 (df/dp dp)``.

    >>> def sqrt_newton(a):
    ...     f = lambda x: x * x - a
    ...     newton = lambda f, x0: fl.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x0)
    ...     return fl.custom_root(f, fl.tensor(1.0), newton, lambda g, y: y / g(1.0))
    >>> fl.grad(sqrt_newton)(fl.tensor(4.0))
    Tensor(0.25, dtype=float32)
    """
    op = "custom_root"
    check_callable(f, op, "f")
    check_callable(solve, op, "solve")
    check_callable(tangent_solve, op, "tangent_solve")
    leaves, tree = tree_util.flatten(initial_guess)
    leaves = [as_tensor_leaf(x, f"{op} (initial_guess)") for x in leaves]
    if not leaves:
        raise ValueError(f"{op}: initial_guess has no arrays")
    avals = [aval_of(x) for x in leaves]
    n = len(leaves)
    for a in avals:
        if a.dtype not in dtypes.INEXACT:
            raise TypeError(f"{op}: the unknowns must be floating-point or complex, got {a.str_short()}")

    def check_out(what, out):
        return _checked_tree(op, what, out, tree, avals, "the initial guess")

    def f_flat(*xs):
        return check_out("f", f(tree_util.unflatten(tree, list(xs))))

    store: dict = {}

    def solve_flat(*xs):
        res = solve(f, tree_util.unflatten(tree, list(xs)))
        if has_aux:
            if not (isinstance(res, tuple) and len(res) == 2):
                raise SolveTreeError(f"{op}(has_aux=True): solve must return a pair (root, aux)")
            res, aux = res
            a_leaves, store["aux"] = tree_util.flatten(aux)
            a_leaves = [as_tensor_leaf(x, f"{op} (aux)") for x in a_leaves]
        else:
            a_leaves = []
        return check_out("solve", res) + a_leaves

    def lin_solve_flat(*xb):
        x = tree_util.unflatten(tree, list(xb[:n]))
        _, f_jvp = linearize(f, x)

        def g(t):
            t_leaves, t_tree = tree_util.flatten(t)
            if t_tree != tree:
                raise SolveTreeError(f"{op}: the linearized f takes a tangent of structure {tree}, got {t_tree}")
            return f_jvp(tree_util.unflatten(tree, [_as_tangent(v, a) for v, a in zip(t_leaves, avals)]))

        return check_out("tangent_solve", tangent_solve(g, tree_util.unflatten(tree, list(xb[n:]))))

    f_j, f_c, _ = trace_user_body(f_flat, avals, f"{op} f")
    s_j, s_c, _ = trace_user_body(solve_flat, avals, f"{op} solve")
    l_j, l_c, _ = trace_user_body(lin_solve_flat, avals + avals, f"{op} tangent_solve")
    nf, ns, nl = len(f_c), len(s_c), len(l_c)

    def fun(*args):
        return call(s_j, *args[nf : nf + ns], *args[nf + ns + nl :])

    def jvp_rule(primals, tangents):
        out = fun(*primals)
        root = out[:n]
        if not nf:
            return out, [None] * len(out)
        # f(root(p), p) = 0  =>  df/dx d(root) = -df/dp dp
        _, rhs = jvp(lambda *c: call(f_j, *c, *root), tuple(primals[:nf]), tuple(tangents[:nf]))
        d_root = [neg(t) for t in call(l_j, *primals[nf + ns : nf + ns + nl], *root, *rhs)]
        return out, d_root + [None] * (len(out) - n)

    store_out: dict = {}
    outs = custom_jvp_call_p.bind(*f_c, *s_c, *l_c, *leaves, fun=fun, jvp=jvp_rule, out_tree_store=store_out)
    root = tree_util.unflatten(tree, list(outs[:n]))
    if has_aux:
        return root, tree_util.unflatten(store["aux"], list(outs[n:]))
    return root


__all__ = ["custom_linear_solve", "custom_root", "custom_linear_solve_p", "SolveTreeError"]
