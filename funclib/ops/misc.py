"""Small utilities of the namespace: ``stop_gradient``, ``no_grad``."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..checks import check_callable
from ..core import Trace, Tracer, _state
from ..namespace import public, tensor_method
from ..primitives.elementwise import stop_gradient, stop_gradient_p


class _NoGradTrace(Trace):
    """Sits on top of the active transforms inside ``no_grad``: every operation sees its traced operands through
    ``stop_gradient``, so its result carries no derivative for any transform (staged ones included, so a
    ``grad`` taken later of a ``jit``-ted function still respects the block)."""

    def __init__(self, parent: Trace):
        self.parent = parent
        self.name = parent.name  # errors raised by the transforms below name the transform the user wrote
        self.eager_below = parent.eager_below

    def process(self, prim, args, params):
        # written out, not `with set_trace`: once per operation in the block, like JVPTrace.process
        prev = _state.trace
        _state.trace = self.parent
        try:
            args = [stop_gradient_p.bind(a) if isinstance(a, Tracer) else a for a in args]
            return prim.bind(*args, **params)
        finally:
            _state.trace = prev


@public
class no_grad:
    """A block (or, as a decorator, a function) whose results carry no derivatives, like ``torch.no_grad``.

    Inside it every operation treats its inputs as if passed through ``fl.stop_gradient``: under ``fl.grad``,
    ``fl.jvp`` or any other transform the results are constants for differentiation, while values, shapes and
    ``vmap``/``jit`` behave as usual. A transform started inside the block (``fl.grad`` called in it)
    differentiates normally; only derivatives with respect to values from outside the block are cut. Eagerly there
    is nothing to cut and the block costs nothing.

    >>> def f(x):
    ...     with fl.no_grad():
    ...         scale = fl.max(fl.abs(x))  # a statistic used as a constant
    ...     return (x / scale).sum()
    >>> fl.grad(f)(fl.tensor([1.0, -2.0]))
    Tensor([0.5, 0.5], dtype=float32)
    """

    def __init__(self):
        self._saved: list = []

    def __enter__(self) -> None:
        t = _state.trace
        self._saved.append(t)
        if t is not None and type(t) is not _NoGradTrace:
            _state.trace = _NoGradTrace(t)

    def __exit__(self, *exc) -> None:
        _state.trace = self._saved.pop()

    def __call__(self, fn: Callable) -> Callable:
        check_callable(fn, "no_grad", "the decorated function")

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)

        return wrapped


@tensor_method("detach")
def _detach(self):
    """The same values with no derivative (``fl.stop_gradient``), as PyTorch's ``detach``.

    >>> fl.grad(lambda x: x * x.detach())(fl.tensor(3.0))
    Tensor(3., dtype=float32)
    """
    return stop_gradient(self)


@tensor_method("backward")
def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    raise TypeError(
        "Tensor.backward(): funclib tensors are immutable values that record no graph, so gradients are returned "
        "by a function instead of being stored on tensors. The equivalent of `loss.backward(); optimizer.step()` "
        "is:\n"
        "    loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)\n"
        "    optimizer.update(model, grads)\n"
        "(with `import funclib.nn as nn`); for a function of tensors use fl.grad(f)(x) or fl.value_and_grad(f)(x)."
    )
