"""Small utilities of the namespace: ``stop_gradient``, ``no_grad``."""

from __future__ import annotations

import functools
from collections.abc import Callable

from .. import dtypes
from ..checks import check_callable, describe
from ..core import Tensor, Trace, Tracer, _state
from ..namespace import public, tensor_method
from ..primitives.elementwise import convert, stop_gradient, stop_gradient_p


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


@tensor_method("to")
def _to(self, *args, dtype=None, device=None, non_blocking: bool = False, copy: bool = False, memory_format=None):
    """PyTorch's ``Tensor.to``: a device (``"cuda"``, ``"cuda:1"``, ``"cpu"``), a dtype, or a tensor whose dtype and
    device to take, positionally or by keyword.

    >>> fl.tensor([1, 2]).to(fl.float32)
    Tensor([1., 2.], dtype=float32)
    >>> fl.tensor([1.5, 2.5]).to(fl.int64)
    Tensor([1, 2], dtype=int64)
    """
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, str) or hasattr(a, "index"):
            device = a
        else:
            try:
                dtype = dtypes.canonicalize(a)
            except (TypeError, ValueError):
                raise TypeError(
                    f"Tensor.to: expected a dtype, a device or a tensor, got {describe(a)}; e.g. x.to(fl.float64)"
                ) from None
    out = self if dtype is None else convert(self, dtypes.canonicalize(dtype))
    return out if device is None else out.to_device(device)


@tensor_method("cpu")
def _cpu(self):
    """This tensor on the CPU (itself when it is there already), as PyTorch's ``Tensor.cpu``.

    >>> fl.tensor([1.0]).cpu().device
    'cpu'
    """
    return self.to_device("cpu")


@tensor_method("cuda")
def _cuda(self, device=None):
    """This tensor on CUDA device ``device`` (an index or a name; device 0 by default), as PyTorch's
    ``Tensor.cuda``. Needs ``pip install funclib[cuda]`` and a visible device (or the CUDA simulator).

    >>> fl.tensor([1.0]).cuda().device  # doctest: +SKIP
    'cuda:0'
    """
    return self.to_device(f"cuda:{device}" if isinstance(device, int) else (device or "cuda"))
