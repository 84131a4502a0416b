"""``nn.Module``: a PyTorch-style module that is also a pytree.

**A module is a pytree.** Its parameters and buffers are the leaves, its submodules are child nodes, and every
other attribute (hyperparameters, ``training``, which parameters are frozen) is static structure. So every
transform applies to a model directly: ``fl.grad(loss)(model, x, y)`` returns a model-shaped tree of gradients
(``grads.fc.weight``), ``fl.vmap`` maps over stacked models, ``fl.jit`` takes and returns models, and
``fl.tree.map(f, model)`` builds a new model.

**Updates rebind, tensors never change.** A ``Module`` object is mutable; tensors are not. Assigning
``module.weight = new`` rebinds a parameter, and that is how optimizers work: ``optimizer.update(model, grads)``
computes new parameter tensors and rebinds them on ``model`` in place (it also returns ``model``).

**Frozen parameters** (``freeze()``, ``requires_grad_(False)``) stay leaves, but reading one under a transform
goes through ``fl.stop_gradient``, so its gradient is zero; ``nn.value_and_grad`` leaves them out and optimizers
skip them. Buffers are read the same way: they carry state, not gradients.

**Running statistics under transforms** (``BatchNorm`` in training mode). A layer stores new state with
``store_state(module, {name: value})``, which lowers each value to the level of the buffer it replaces before
writing it:

- eagerly, and under ``fl.grad``/``nn.value_and_grad`` of a model you hold, the new statistics are concrete
  (the primal of a gradient tracer) and are written onto your model, as PyTorch does under ``no_grad``;
- when the model is an argument of the transformed function (``fl.jit(step)(model, ...)``, ``fl.vmap`` over
  stacked models, ``fl.grad(loss)(model, ...)``), the transform works on a copy rebuilt from the leaves, the
  new statistics are stored on that copy at its level, and they come out when the function returns the model
  (``return model, ...``; for ``fl.grad``, through ``has_aux``);
- a value that cannot be lowered (a traced value headed for a module closed over by ``fl.jit`` or ``fl.vmap``)
  raises ``ModuleStateError`` instead of leaking a tracer. No tracer is ever stored above its transform.

``nn.functional_call`` writes updated buffers back into the dict you passed (or onto the module for buffers you
did not pass), as PyTorch's in-place buffer updates would.

**Randomness.** Layer constructors take ``key=`` (a ``fl.random`` key); without one they draw from the global
generator that ``fl.manual_seed`` sets. Dropout in training mode draws from the key installed by
``with nn.rng(key):`` (split on every use), else from the global generator when no transform is active
(``nn.value_and_grad`` draws one key eagerly and installs it for the traced call).

>>> import funclib as fl, funclib.nn as nn
>>> model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
>>> grads = fl.grad(lambda m, x: m(x).sum())(model, fl.ones((2, 3)))
>>> grads[0].weight.shape
(4, 3)
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

import funclib as fl
from funclib import dtypes
from funclib import random as _random
from funclib.checks import describe
from funclib.core import Tensor, Tracer, _state, _wrap
from funclib.errors import ConcretizationError, DTypeError, FunclibError

from ._pytree import _REG, _register

__all__ = [
    "Module",
    "Parameter",
    "Buffer",
    "ModuleStateError",
    "StateDictError",
    "functional_call",
    "stack_module_state",
    "value_and_grad",
    "rng",
    "next_key",
    "store_state",
]


class ModuleStateError(FunclibError, RuntimeError):
    """A layer would store a traced value on a module that outlives the transform (a leaked tracer).

    The message names the ways out: pass the model as an argument of the transformed function and return it, use
    ``nn.value_and_grad``/``nn.functional_call``, or ``model.eval()``.

    >>> bn = nn.BatchNorm1d(2)
    >>> fl.jit(lambda x: bn(x))(fl.randn(4, 2))
    Traceback (most recent call last):
    ...
    funclib.nn.module.ModuleStateError: BatchNorm1d: cannot store the new 'running_mean' computed inside jit(...
    """


class StateDictError(FunclibError, RuntimeError):
    """``load_state_dict`` found missing or unexpected keys, or shapes that do not match; the message lists all.

    >>> nn.Linear(2, 1).load_state_dict({"weight": fl.ones((1, 2))})
    Traceback (most recent call last):
    ...
    funclib.nn.module.StateDictError: Error(s) in loading state_dict for Linear:
        Missing key(s) in state_dict: "bias".
    """


class _IncompatibleKeys(NamedTuple):
    missing_keys: list[str]
    unexpected_keys: list[str]


class Parameter:
    """Marks a tensor as a parameter when assigned to a module attribute: ``self.w = nn.Parameter(t)``.

    The module stores a plain (immutable) ``Tensor``; reading ``self.w`` returns it.

    Args:
        data: the tensor (anything ``fl.asarray`` converts; default an empty tensor).
        requires_grad: False registers the parameter frozen (zero gradient, skipped by optimizers).

    >>> class Scale(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.s = nn.Parameter(fl.ones(3))
    >>> [name for name, _ in Scale().named_parameters()]
    ['s']
    """

    __slots__ = ("data", "requires_grad")

    def __init__(self, data=None, requires_grad: bool = True):
        t = fl.zeros((0,)) if data is None else as_tensor(data, "Parameter", "data")
        # a fresh Tensor object, so two Parameters made from one tensor are two parameters (not tied)
        self.data = _wrap(t._value) if not isinstance(t, Tracer) else t
        self.requires_grad = requires_grad


def as_tensor(v, op: str, what: str = "input") -> Tensor:
    """``v`` as a Tensor (anything ``fl.asarray`` converts), else a TypeError naming ``op`` and ``what``."""
    if isinstance(v, Tensor):
        return v
    try:
        return fl.asarray(v)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {what} must be a tensor (or an array fl.asarray converts), got {describe(v)}") from None


class Buffer:
    """Marks a tensor as a buffer when assigned to a module attribute: ``self.b = nn.Buffer(t)``: state that is
    saved and cast with the module but not trained.

    Args:
        data: the tensor (anything ``fl.asarray`` converts).
        persistent: False keeps it out of ``state_dict``.

    >>> class Counter(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.seen = nn.Buffer(fl.zeros(()))
    >>> list(Counter().state_dict())
    ['seen']
    """

    __slots__ = ("data", "persistent")

    def __init__(self, data, persistent: bool = True):
        self.data = as_tensor(data, "Buffer", "data")
        self.persistent = persistent


# ---------------------------------------------------------------------------------------------------------------
# Randomness for stochastic layers


class _RngState(threading.local):
    def __init__(self):
        self.stack: list[list] = []
        # inside a data-parallel wrapper: b -> this rank's rows (an int tensor) of the global batch
        self.global_rows = None


_rng_state = _RngState()


class rng:
    """Install ``key`` for the stochastic layers (``Dropout``, attention dropout) called inside the block.

    Each use splits the key, so successive layers draw independent numbers. Use it inside a jitted step with a
    key argument, so dropout stays random across calls.

    Args:
        key: a ``fl.random`` key (e.g. ``fl.random.key(0)``), concrete or traced.

    >>> with nn.rng(fl.random.key(0)):
    ...     y = nn.functional.dropout(fl.ones(4), 0.5)
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    """

    def __init__(self, key):
        if not (isinstance(key, Tensor) and key.shape == (2,) and key.dtype == fl.uint32):
            raise TypeError(
                f"nn.rng: key must be a fl.random key (a uint32 tensor of shape (2,), e.g. fl.random.key(0)), got "
                f"{describe(key)}"
            )
        self.cell = [key]

    def __enter__(self):
        _rng_state.stack.append(self.cell)
        return self

    def __exit__(self, *exc):
        _rng_state.stack.pop()

    @property
    def key(self):
        """The key the next draw will split."""
        return self.cell[0]


def next_key(op: str = "dropout"):
    """A fresh key for a stochastic layer: split from ``nn.rng``'s key, else drawn from the global generator.

    Args:
        op: the layer asking, named in the error.

    Returns:
        A ``fl.random`` key.

    Raises:
        ModuleStateError: no ``nn.rng`` key is installed and a transform is active (a global draw would be
            frozen into the traced function).

    >>> with nn.rng(fl.random.key(0)):
    ...     noise = fl.random.normal(nn.next_key("my_layer"), (2,))
    """
    stack = _rng_state.stack
    if stack:
        cell = stack[-1]
        ks = _random.split(cell[0])
        cell[0] = ks[0]
        return ks[1]
    trace = _state.trace
    if trace is not None:
        raise ModuleStateError(
            f"{op} needs random numbers inside {trace.name}, where the global generator cannot be used (one draw "
            "would be frozen into the traced function). Pass a key: wrap the call in `with nn.rng(key):` (key "
            "an argument of the traced function, split per step), use nn.value_and_grad (it installs one), or "
            "call model.eval() to turn dropout off."
        )
    return _random._next_key(op)


class _global_batch_rows:
    """Inside the block, stochastic layers draw this process's rows of the numbers drawn for a global batch:
    ``rows_of(b)`` gives, for a draw whose leading axis has ``b`` entries here, the indices of those entries in
    the global batch (an integer tensor, traced or not). ``DistributedDataParallel`` installs it, so N ranks draw
    the dropout masks one process draws for the whole batch; None turns it off inside the block."""

    def __init__(self, rows_of):
        self.rows_of = rows_of

    def __enter__(self):
        self.saved = _rng_state.global_rows
        _rng_state.global_rows = self.rows_of
        return self

    def __exit__(self, *exc):
        _rng_state.global_rows = self.saved


def _bernoulli_rows(key, p: float, shape: tuple) -> Tensor:
    """``fl.random.bernoulli(key, p, shape)``, or inside ``_global_batch_rows`` this process's rows of the draw for
    the global batch (bit for bit what one process holding the whole batch draws)."""
    rows_of = _rng_state.global_rows
    if rows_of is None or not shape:
        return _random.bernoulli(key, p, shape)
    key = _random._consume(key, "bernoulli")
    u = _random._uniform01_rows(key, shape, rows_of(shape[0]))
    return u < _random._param(p, fl.float32)


def _split_key(key, n: int) -> list:
    """``n`` subkeys of ``key``, or ``n`` fresh draws from the global generator when ``key`` is None."""
    if key is None:
        return [_random._next_key("init") for _ in range(n)]
    ks = _random.split(key, n)
    return [ks[i] for i in range(n)]


# ---------------------------------------------------------------------------------------------------------------
# State writes that never leak a tracer


def _trace_of(x):
    return x._trace if isinstance(x, Tracer) else None


def _visible_from(t, target) -> bool:
    """True when values of trace ``t`` may be stored where values of trace ``target`` live."""
    if t is None:
        return True
    s = target
    while s is not None:
        if s is t:
            return True
        s = s.parent
    return False


def _lower(value, target):
    while isinstance(value, Tracer) and not _visible_from(value._trace, target):
        try:
            value = value.to_concrete("a module buffer")
        except ConcretizationError:
            return None
    return value


def store_state(module: Module, updates: Mapping[str, Any]) -> None:
    """Rebind buffers of ``module`` (``{name: value}``), each lowered to the level of the buffer it replaces.

    Under ``fl.grad`` of a model you hold, the primal is stored (the update is concrete). A traced value that
    cannot be lowered, for example the new running mean of a ``BatchNorm`` closed over by ``fl.jit``, raises
    ``ModuleStateError`` with the ways to get the state out; then no buffer changes.

    Args:
        module: the module owning the buffers.
        updates: ``{buffer name: new value}``.

    >>> class Count(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.calls = nn.Buffer(fl.zeros(()))
    ...     def forward(self, x):
    ...         nn.store_state(self, {"calls": self.calls + 1.0})
    ...         return x
    >>> m = Count()
    >>> _ = m(fl.ones(2)); float(m.calls)
    1.0
    """
    bufs = module._buffers
    lowered = {}
    for name, value in updates.items():
        low = _lower(value, _trace_of(bufs[name]))
        if low is None:
            raise ModuleStateError(
                f"{type(module).__name__}: cannot store the new {name!r} computed inside {value._trace.name} on a "
                "module that the transform does not own (it would leak a tracer). Pass the model as an argument of "
                "the transformed function and return it (`def step(model, x): ...; return model, loss`), use "
                "nn.value_and_grad / nn.functional_call, or call model.eval() so no state is updated."
            )
        lowered[name] = low
    bufs.update(lowered)


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _is_float(t) -> bool:
    return isinstance(t, Tensor) and t.dtype in dtypes.REAL_FLOATING


# ---------------------------------------------------------------------------------------------------------------
# Module


class Module:
    """Base class of all layers and models. Subclass it, assign layers and parameters in ``__init__``, write
    ``forward``; call the module to run it.

    A module is a pytree (see the ``nn.module`` docstring): parameters and buffers are its leaves, so
    ``fl.grad``, ``fl.vmap`` and ``fl.jit`` take and return models.

    Returns:
        Calling the module returns ``forward``'s result.

    >>> class SimpleNet(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = nn.Linear(10, 5)
    ...     def forward(self, x):
    ...         return fl.relu(self.fc(x))
    >>> SimpleNet()(fl.randn(3, 10)).shape
    (3, 5)
    """

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments {args} {kwargs}: Module.__init__ takes "
                "none; call super().__init__() without arguments"
            )
        d = self.__dict__
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_modules"] = {}
        d["training"] = True
        d["_frozen"] = frozenset()
        d["_non_persistent"] = frozenset()
        d["_counters"] = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _register(cls)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward(); define forward(self, ...) in the class")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # --- attributes --------------------------------------------------------------------------------------------
    def _check_init(self, name):
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() runs: call super().__init__() first in "
                f"{type(self).__name__}.__init__"
            )

    def _discard(self, name):
        d = self.__dict__
        for reg in _REG:
            d[reg].pop(name, None)
        d.pop(name, None)

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if params is not None and name in params and (value is None or isinstance(value, Tensor)):
            params[name] = value
            return
        if isinstance(value, Parameter):
            self._check_init(name)
            self._discard(name)
            params[name] = value.data
            if not value.requires_grad:
                d["_frozen"] = d["_frozen"] | {name}
            return
        if isinstance(value, Buffer):
            self.register_buffer(name, value.data, persistent=value.persistent)
            return
        if isinstance(value, Module):
            self._check_init(name)
            self._discard(name)
            d["_modules"][name] = value
            return
        if params is not None:
            bufs = d["_buffers"]
            if name in bufs:
                if value is not None and not isinstance(value, Tensor):
                    raise TypeError(
                        f"cannot assign {type(value).__name__} as buffer {name!r} of {type(self).__name__} "
                        "(a Tensor or None expected)"
                    )
                bufs[name] = value
                return
            if name in params:
                raise TypeError(
                    f"cannot assign {type(value).__name__} as parameter {name!r} of {type(self).__name__} "
                    "(a Tensor, nn.Parameter or None expected)"
                )
            mods = d["_modules"]
            if name in mods:
                if value is not None:
                    raise TypeError(
                        f"cannot assign {type(value).__name__} as child module {name!r} of "
                        f"{type(self).__name__} (a Module or None expected)"
                    )
                mods[name] = None
                return
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        p = d.get("_parameters")
        if p is not None:
            if name in p:
                v = p[name]
                if isinstance(v, Tracer) and name in d["_frozen"]:
                    return fl.stop_gradient(v)
                return v
            b = d["_buffers"]
            if name in b:
                v = b[name]
                return fl.stop_gradient(v) if isinstance(v, Tracer) else v
            m = d["_modules"]
            if name in m:
                return m[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for reg in _REG:
            if name in d.get(reg, ()):
                del d[reg][name]
                return
        object.__delattr__(self, name)

    def __dir__(self):
        d = self.__dict__
        return sorted(set(super().__dir__()) | set(d["_parameters"]) | set(d["_buffers"]) | set(d["_modules"]))

    def register_parameter(self, name: str, param) -> None:
        """Register ``param`` (a Tensor, ``nn.Parameter`` or None) as parameter ``name``."""
        self._check_init(name)
        if not isinstance(name, str) or "." in name or not name:
            raise ValueError(f"register_parameter: name must be a non-empty string without '.', got {name!r}")
        if param is None:
            self._discard(name)
            self.__dict__["_parameters"][name] = None
            return
        self.__setattr__(name, param if isinstance(param, Parameter) else Parameter(param))

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Register ``tensor`` as buffer ``name``: state that is saved (unless ``persistent=False``) and moved by
        ``to()``, but not trained."""
        self._check_init(name)
        if not isinstance(name, str) or "." in name or not name:
            raise ValueError(f"register_buffer: name must be a non-empty string without '.', got {name!r}")
        value = None if tensor is None else as_tensor(tensor, "register_buffer", f"buffer {name!r}")
        d = self.__dict__
        self._discard(name)
        d["_buffers"][name] = value
        np_ = d["_non_persistent"]
        d["_non_persistent"] = np_ - {name} if persistent else np_ | {name}

    def _register_counter(self, name: str, value: int = 0) -> None:
        # an integer count kept as a float64 leaf so the whole model stays differentiable (fl.grad rejects
        # integer leaves); state_dict writes it as int64, and to()/half() leave it alone
        self.register_buffer(name, fl.asarray(float(value), dtype=fl.float64))
        self.__dict__["_counters"] = self.__dict__["_counters"] | {name}

    def register_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` as child ``name`` (same as ``add_module``)."""
        self.add_module(name, module)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` as child ``name``."""
        self._check_init(name)
        if module is not None and not isinstance(module, Module):
            raise TypeError(
                f"{type(self).__name__}.add_module: child {name!r} must be a Module, got {describe(module)}"
            )
        self._discard(name)
        self.__dict__["_modules"][name] = module

    # --- traversal ----------------------------------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        """``(name, module)`` for this module and all its descendants, depth first ("" names the root)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = f"{prefix}.{name}" if prefix else name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def _named_members(self, reg: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, v in m.__dict__[reg].items():
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in seen:
                        continue
                    seen.add(id(v))
                yield (f"{mp}.{name}" if mp else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """``(dotted_name, tensor)`` for every parameter; a tensor shared by two attributes is listed once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def trainable_parameters(self) -> Iterator[tuple[str, Tensor]]:
        """``(dotted_name, tensor)`` for the parameters that are not frozen."""
        for mp, m in self.named_modules():
            fr = m.__dict__["_frozen"]
            for name, v in m._parameters.items():
                if v is not None and name not in fr:
                    yield (f"{mp}.{name}" if mp else name), v

    def get_submodule(self, target: str) -> Module:
        """The descendant at dotted path ``target`` ("" is this module)."""
        m = self
        for part in target.split(".") if target else []:
            if not isinstance(m, Module) or part not in m._modules:
                raise AttributeError(
                    f"{type(self).__name__} has no submodule {target!r} (no {part!r}); named_modules() lists the paths"
                )
            m = m._modules[part]
        return m

    def get_parameter(self, target: str) -> Tensor:
        """The parameter at dotted path ``target`` (``"fc.weight"``)."""
        return self._get(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target`` (``"bn.running_mean"``)."""
        return self._get(target, "_buffers", "buffer")

    def _get(self, target: str, reg: str, what: str) -> Tensor:
        mod, _, name = target.rpartition(".")
        m = self.get_submodule(mod)
        table = m.__dict__[reg]
        if name not in table:
            raise AttributeError(
                f"{type(m).__name__} has no {what} {name!r}; its {what}s are {sorted(table)} (named_{what}s() lists "
                "every dotted path)"
            )
        return table[name]

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule (children first) and then on this module; returns ``self``."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- modes --------------------------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout on, batch statistics) on this module and its descendants."""
        if not isinstance(mode, bool):
            raise ValueError(f"train(mode): mode must be a bool, got {mode!r}")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        """Set evaluation mode (``train(False)``)."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Unfreeze (True) or freeze (False) every parameter."""
        return self.unfreeze() if requires_grad else self.freeze()

    def freeze(self, recurse: bool = True, keys: str | list[str] | None = None) -> Module:
        """Freeze parameters: they get zero gradients and optimizers skip them.

        Args:
            recurse: include descendants (default True).
            keys: only these local parameter names (e.g. ``"bias"``); default all.
        """
        return self._set_frozen(True, recurse, keys)

    def unfreeze(self, recurse: bool = True, keys: str | list[str] | None = None) -> Module:
        """Undo ``freeze`` (same arguments)."""
        return self._set_frozen(False, recurse, keys)

    def _set_frozen(self, frozen, recurse, keys):
        keys = [keys] if isinstance(keys, str) else keys
        if keys is not None:
            known = {n for m in (self.modules() if recurse else [self]) for n in m._parameters}
            unknown = sorted(set(keys) - known)
            if unknown:
                raise ValueError(
                    f"{'freeze' if frozen else 'unfreeze'}: keys {unknown} name no parameter of "
                    f"{type(self).__name__} (local parameter names: {sorted(known)})"
                )
        for m in self.modules() if recurse else [self]:
            names = set(m._parameters) if keys is None else set(keys) & set(m._parameters)
            d = m.__dict__
            d["_frozen"] = d["_frozen"] | names if frozen else d["_frozen"] - names
        return self

    # --- dtype --------------------------------------------------------------------------------------------------
    def _cast(self, dtype) -> Module:
        dtype = dtypes.canonicalize(dtype)
        if dtype not in dtypes.REAL_FLOATING:
            raise DTypeError(
                f"Module.to: only floating dtypes are supported, got {dtype.name}; pass fl.float16, fl.bfloat16, "
                "fl.float32 or fl.float64"
            )
        for m in self.modules():
            counters = m.__dict__["_counters"]
            for reg in ("_parameters", "_buffers"):
                tab = m.__dict__[reg]
                for name, v in tab.items():
                    if _is_float(v) and name not in counters and v.dtype != dtype:
                        tab[name] = v.astype(dtype)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move parameters and buffers to a device and/or cast the floating ones: ``to("cuda")``,
        ``to(fl.float64)``, ``to(device=..., dtype=...)``, ``to(tensor)`` (its device and dtype).

        Args:
            *args: a device name, a dtype or a tensor.
            **kwargs: ``device``, ``dtype``, ``non_blocking`` (accepted, ignored).

        Returns:
            ``self``, updated in place.

        Example:
            >>> nn.Linear(2, 2).to(fl.float64).weight.dtype
            dtype('float64')
        """
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"Module.to: unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, str) or a is None or hasattr(a, "index"):
                device = a
            else:
                dtype = a
        if device is not None:
            self._move(device)
        return self._cast(dtype) if dtype is not None else self

    def _move(self, device) -> None:
        for m in self.modules():
            for reg in ("_parameters", "_buffers"):
                tab = m.__dict__[reg]
                for name, v in tab.items():
                    if isinstance(v, Tensor):
                        tab[name] = v.to_device(device)

    def cuda(self, device=None) -> Module:
        """Move parameters and buffers to CUDA device ``device`` (0 by default), as PyTorch's ``Module.cuda``.

        Args:
            device: an index or a name such as ``"cuda:1"``.

        Returns:
            ``self``, updated in place.

        Example:
            >>> nn.Linear(2, 2).cuda().weight.device  # doctest: +SKIP
            'cuda:0'
        """
        return self.to(f"cuda:{device}" if isinstance(device, int) else (device or "cuda"))

    def half(self) -> Module:
        return self._cast(fl.float16)

    def bfloat16(self) -> Module:
        return self._cast(fl.bfloat16)

    def float(self) -> Module:
        return self._cast(fl.float32)

    def double(self) -> Module:
        return self._cast(fl.float64)

    def cpu(self) -> Module:
        return self.to("cpu")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to clear: gradients are returned by ``fl.grad``/``nn.value_and_grad``, never accumulated on
        the module. Kept so PyTorch training loops run unchanged."""

    # --- state_dict ---------------------------------------------------------------------------------------------
    def _state_items(self, prefix=""):
        for mp, m in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            d = m.__dict__
            for name, v in d["_parameters"].items():
                if v is not None:
                    yield (f"{mp}.{name}" if mp else name), m, "_parameters", name, v
            for name, v in d["_buffers"].items():
                if v is not None and name not in d["_non_persistent"]:
                    yield (f"{mp}.{name}" if mp else name), m, "_buffers", name, v

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """An ordered ``{dotted_name: tensor}`` of parameters and persistent buffers, named as PyTorch names them
        (``fc.weight``, ``bn.running_mean``, ``bn.num_batches_tracked``), so checkpoints interoperate."""
        out = OrderedDict() if destination is None else destination
        seen = set()
        for key, m, _, name, v in self._state_items(prefix):
            if (id(m), name) in seen:
                continue
            seen.add((id(m), name))
            if name in m.__dict__["_counters"]:
                v = v.astype(fl.int64)
            out[key] = v
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """Load parameters and buffers by name; nothing changes unless every check passes.

        Args:
            state_dict: ``{dotted_name: array}`` (Tensors, NumPy arrays, anything ``fl.asarray`` takes).
            strict: missing or unexpected keys are an error (default True); otherwise they are reported.
            assign: keep the loaded dtypes instead of casting to the module's.

        Returns:
            ``(missing_keys, unexpected_keys)``.

        Raises:
            StateDictError: listing every missing key, unexpected key and shape mismatch.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"{type(self).__name__}.load_state_dict expects a mapping of names to arrays, got "
                f"{type(state_dict).__name__}"
            )
        expected = {}
        for key, m, reg, name, v in self._state_items():
            expected.setdefault(key, (m, reg, name, v))
        missing = [k for k in expected if k not in state_dict]
        unexpected = [k for k in state_dict if k not in expected]
        errors = []
        updates = []
        for key, (m, reg, name, v) in expected.items():
            if key not in state_dict:
                continue
            new = state_dict[key]
            if not isinstance(new, Tensor):
                try:
                    new = fl.asarray(np.asarray(new))
                except (TypeError, ValueError):
                    errors.append(f"value for {key!r} is {describe(new)}, not an array")
                    continue
            if tuple(new.shape) != tuple(v.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {tuple(new.shape)} from checkpoint, "
                    f"the shape in current model is {tuple(v.shape)}."
                )
                continue
            if name in m.__dict__["_counters"]:
                new = new.astype(fl.float64)
            elif not assign and new.dtype != v.dtype:
                new = new.astype(v.dtype)
            updates.append((m, reg, name, v, new))
        if strict:
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
            if unexpected:
                errors.insert(
                    1 if missing else 0,
                    "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".",
                )
        if errors:
            raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        tied: dict[int, Tensor] = {}
        for m, reg, name, old, new in updates:
            new = tied.setdefault(id(old), new)
            m.__dict__[reg][name] = new
        return _IncompatibleKeys(missing, unexpected)

    # --- copying and printing -----------------------------------------------------------------------------------
    def __deepcopy__(self, memo):
        # tensors are immutable, so a copy shares their storage; fresh Tensor objects keep the copy's parameters
        # distinct from the original's (weight tying is by identity)
        obj = object.__new__(type(self))
        memo[id(self)] = obj
        d = obj.__dict__
        for k, v in self.__dict__.items():
            if k in ("_parameters", "_buffers"):
                d[k] = {n: _copy_tensor(t, memo) for n, t in v.items()}
            else:
                d[k] = copy.deepcopy(v, memo)
        return obj

    def extra_repr(self) -> str:
        """The text inside the parentheses of this module's repr (override in layers)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): {_addindent(repr(m), 2)}" for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"


_register(Module)


def _copy_tensor(t, memo):
    if not isinstance(t, Tensor) or isinstance(t, Tracer):
        return t
    new = memo.get(id(t))
    if new is None:
        new = memo[id(t)] = _wrap(t._value)
    return new


# ---------------------------------------------------------------------------------------------------------------
# Functional entry points


def _clone(m: Module, memo: dict) -> Module:
    """A structural copy: new module objects, the same tensors."""
    c = memo.get(id(m))
    if c is not None:
        return c
    c = object.__new__(type(m))
    memo[id(m)] = c
    d = c.__dict__
    d.update(m.__dict__)
    d["_parameters"] = dict(m._parameters)
    d["_buffers"] = dict(m._buffers)
    d["_modules"] = {k: None if v is None else _clone(v, memo) for k, v in m._modules.items()}
    return c


def _locations(model: Module, reg: str) -> dict[str, tuple[Module, str]]:
    out = {}
    for mp, m in model.named_modules(remove_duplicate=False):
        for name in m.__dict__[reg]:
            out.setdefault(f"{mp}.{name}" if mp else name, (m, name))
    return out


def functional_call(
    module: Module,
    parameter_and_buffer_dicts: Mapping[str, Any] | tuple[Mapping[str, Any], ...],
    args: Any = None,
    kwargs: Mapping[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    """Run ``module`` with some parameters and buffers replaced, without changing ``module``'s tensors.

    Args:
        module: the model.
        parameter_and_buffer_dicts: ``{dotted_name: tensor}`` (or a tuple of such dicts).
        args: positional arguments (a tuple, or one non-tuple argument).
        kwargs: keyword arguments.
        tie_weights: a replaced tensor also replaces the attributes tied to it (default True).
        strict: every parameter and buffer must be given, and no other names.

    Buffers that the forward updates (``BatchNorm`` running statistics in training mode) are written back into
    the dict that supplied them, or onto ``module`` for buffers not supplied.

    Returns:
        The forward's output.

    >>> model = nn.Linear(3, 2)
    >>> params = dict(model.named_parameters())
    >>> g = fl.grad(lambda p, x: nn.functional_call(model, p, (x,)).sum())(params, fl.ones((4, 3)))
    >>> g["weight"].shape
    (2, 3)
    """
    dicts = (
        parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, tuple) else (parameter_and_buffer_dicts,)
    )
    given: dict[str, tuple[Any, Mapping]] = {}
    for dct in dicts:
        for k, v in dct.items():
            if k in given:
                raise ValueError(f"functional_call: {k!r} appears in more than one dict; give each name once")
            given[k] = (v, dct)
    clone = _clone(module, {})
    plocs, blocs = _locations(clone, "_parameters"), _locations(clone, "_buffers")
    if strict:
        want = set(plocs) | set(blocs)
        missing = sorted(want - set(given))
        unexpected = sorted(set(given) - want)
        if missing or unexpected:
            raise StateDictError(
                f"functional_call(strict=True): missing keys {missing}, unexpected keys {unexpected}; pass every "
                "parameter and buffer by its dotted name, or strict=False"
            )
    orig_ids = {}
    if tie_weights:
        for m, n in plocs.values():
            orig_ids.setdefault(id(m._parameters[n]), []).append((m, "_parameters", n))
    for k, (v, _) in given.items():
        if k in plocs:
            m, n = plocs[k]
            targets = (
                orig_ids.get(id(m._parameters[n]), [(m, "_parameters", n)]) if tie_weights else [(m, "_parameters", n)]
            )
        elif k in blocs:
            m, n = blocs[k]
            targets = [(m, "_buffers", n)]
        else:
            raise ValueError(
                f"functional_call: {k!r} is not a parameter or buffer of {type(module).__name__}; known names "
                f"include {sorted(plocs)[:5]}"
            )
        for tm, reg, tn in targets:
            tm.__dict__[reg][tn] = v
    installed = {k: m._buffers[n] for k, (m, n) in blocs.items()}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    out = clone(*args, **(kwargs or {}))
    orig_blocs = _locations(module, "_buffers")
    for k, (m, n) in blocs.items():
        new = m._buffers[n]
        if new is installed[k]:
            continue
        if k in given:
            dct = given[k][1]
            if isinstance(dct, dict):
                dct[k] = new
        else:
            om, on = orig_blocs[k]
            store_state(om, {on: new})
    return out


def stack_module_state(models) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Stack the parameters and buffers of same-shaped models along a new leading axis, for ``fl.vmap`` over an
    ensemble with ``functional_call``.

    Args:
        models: models of one architecture (the same names and shapes).

    Returns:
        ``(params, buffers)``: dicts of dotted name to stacked tensor.

    >>> models = [nn.Linear(3, 2) for _ in range(4)]
    >>> params, buffers = nn.stack_module_state(models)
    >>> params["weight"].shape
    (4, 2, 3)
    """
    models = list(models)
    if not models:
        raise ValueError("stack_module_state: expected at least one model; pass a non-empty list of models")
    out = []
    for getter in (lambda m: dict(m.named_parameters()), lambda m: dict(m.named_buffers())):
        dicts = [getter(m) for m in models]
        keys = list(dicts[0])
        for i, dct in enumerate(dicts[1:], 1):
            if list(dct) != keys:
                raise ValueError(
                    f"stack_module_state: model {i} has entries {sorted(dct)} but model 0 has {sorted(keys)}; all "
                    "models must share one architecture"
                )
            for k in keys:
                if tuple(dct[k].shape) != tuple(dicts[0][k].shape):
                    raise ValueError(
                        f"stack_module_state: {k} has shape {tuple(dct[k].shape)} in model {i} but "
                        f"{tuple(dicts[0][k].shape)} in model 0"
                    )
        out.append({k: fl.stack([dct[k] for dct in dicts]) for k in keys})
    return out[0], out[1]


def _trainable_locations(model: Module):
    """Unique trainable tensors with every (module, name) location that holds them."""
    order: list[tuple[str, Tensor]] = []
    locs: dict[int, list[tuple[Module, str]]] = {}
    for mp, m in model.named_modules(remove_duplicate=False):
        fr = m.__dict__["_frozen"]
        for name, v in m._parameters.items():
            if v is None or name in fr:
                continue
            if id(v) not in locs:
                locs[id(v)] = []
                order.append((f"{mp}.{name}" if mp else name, v))
            if (m, name) not in locs[id(v)]:
                locs[id(v)].append((m, name))
    return order, locs


def grads_like(model: Module, grads: Mapping[str, Tensor]) -> Module:
    """A model-shaped tree holding ``grads`` (by dotted parameter name) and None everywhere else."""
    clone = _clone(model, {})
    for mp, m in clone.named_modules(remove_duplicate=False):
        d = m.__dict__
        for name in d["_parameters"]:
            d["_parameters"][name] = grads.get(f"{mp}.{name}" if mp else name)
        for name in d["_buffers"]:
            d["_buffers"][name] = None
    return clone


def value_and_grad(model: Module, fn: Callable[..., Any]) -> Callable[..., tuple[Any, Module]]:
    """MLX-style: a function returning ``(fn(*args), grads)`` with gradients of the model's trainable parameters.

    ``fn`` uses ``model`` (closed over or passed as an argument) and returns a scalar loss, or a tuple whose first
    element is the loss. ``grads`` is model-shaped: ``grads.fc.weight``; frozen parameters and buffers are None.
    Running statistics that the forward updates are written onto ``model``; dropout draws from a key that is
    taken from the global generator (or from an enclosing ``nn.rng``).

    Args:
        model: the model whose trainable parameters get gradients.
        fn: the loss function.

    Returns:
        A function taking ``fn``'s arguments and returning ``(fn's output, model-shaped gradients)``.

    >>> model = nn.Linear(3, 1)
    >>> loss_and_grad = nn.value_and_grad(model, lambda m, x: (m(x) ** 2).mean())
    >>> loss, grads = loss_and_grad(model, fl.ones((4, 3)))
    >>> grads.weight.shape
    (1, 3)
    """
    if not isinstance(model, Module):
        raise TypeError(f"nn.value_and_grad(model, fn): model must be a Module, got {type(model).__name__}")

    def inner(vals, tensors, locs, args, kwargs):
        for t, v in zip(tensors, vals):
            for m, n in locs[id(t)]:
                m._parameters[n] = v
        out = fn(*args, **kwargs)
        loss = out[0] if isinstance(out, (tuple, list)) else out
        return loss, out

    loss_and_grads = fl.value_and_grad(inner, has_aux=True)

    def wrapped(*args, **kwargs):
        target = _model_in(model, args, kwargs)
        order, locs = _trainable_locations(target)
        tensors = [t for _, t in order]
        originals = [(m, n, m._parameters[n]) for t in tensors for m, n in locs[id(t)]]
        ctx = rng(next_key()) if not _rng_state.stack and _state.trace is None else None
        try:
            if ctx is not None:
                ctx.__enter__()
            (_, out), gs = loss_and_grads(tensors, tensors, locs, args, kwargs)
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
            for m, n, v in originals:
                m._parameters[n] = v
        return out, grads_like(target, {name: g for (name, _), g in zip(order, gs)})

    wrapped.__name__ = f"value_and_grad({getattr(fn, '__name__', 'fn')})"
    return wrapped


def _model_in(model: Module, args, kwargs) -> Module:
    """The module through which ``fn`` sees ``model``: ``model`` itself, or the copy of it that a transform (jit,
    vmap) rebuilt from its leaves and passed in its place (found among the arguments, in lists, tuples and dicts)."""
    stack = [*args, *kwargs.values()]
    while stack:
        a = stack.pop()
        if a is model:
            return model
        if isinstance(a, Module):
            origin = a.__dict__.get("_origin")
            if origin is not None and origin() is model:
                return a
        elif isinstance(a, (list, tuple)):
            stack.extend(a)
        elif isinstance(a, dict):
            stack.extend(a.values())
    return model


def _named_leaves(tree) -> Iterator[tuple[str, Any]]:
    """Dotted names and leaves of a Module, a flat ``{name: tensor}`` dict or nested dicts."""
    if isinstance(tree, Module):
        for mp, m in tree.named_modules(remove_duplicate=False):
            for name, v in m._parameters.items():
                yield (f"{mp}.{name}" if mp else name), v
        return
    if isinstance(tree, Mapping):
        for k, v in tree.items():
            if isinstance(v, (Mapping, Module)):
                for sub, leaf in _named_leaves(v):
                    yield f"{k}.{sub}", leaf
            elif isinstance(v, (list, tuple)):
                for i, leaf in enumerate(v):
                    yield from _named_leaves({f"{k}.{i}": leaf})
            else:
                yield str(k), v
        return
    raise TypeError(
        f"expected gradients as a model-shaped tree, a {{name: tensor}} dict or nested dicts, got {type(tree).__name__}"
    )


def named_grads(grads) -> dict[str, Any]:
    """``{dotted_name: grad}`` from any supported gradient container (see ``Optimizer.update``)."""
    return {k: v for k, v in _named_leaves(grads) if v is not None}
