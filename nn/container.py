"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``. Children are named ``"0"``, ``"1"``, ... (or by
key), so state_dict names match PyTorch's (``layers.0.weight``).

>>> import funclib as fl, funclib.nn as nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
>>> net(fl.ones((3, 4))).shape
(3, 2)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Self

from .module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


def _index(idx, n: int, what: str) -> int:
    if isinstance(idx, str):
        idx = int(idx)
    idx = int(idx)
    if not -n <= idx < n:
        raise IndexError(f"{what}: index {idx} is out of range for {n} modules")
    return idx % n


class _ModuleSequence(Module):
    """What ``Sequential`` and ``ModuleList`` share: children in order, ``len``, iteration, ``append``/``extend``."""

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Self:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Self:
        for m in modules:
            self.append(m)
        return self

    def _renumber(self, modules: list[Module]) -> None:
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def _insert(self, index: int, module: Module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._renumber([])
        for m in mods:
            self.append(m)


class Sequential(_ModuleSequence):
    """Modules applied in order: ``Sequential(a, b, c)(x) == c(b(a(x)))``. Indexing with an int gives a module,
    with a slice a new ``Sequential``.

    Args:
        *args: the modules, or one ``OrderedDict`` of named modules.

    Returns:
        A module whose ``forward(x)`` is the last module's output.

    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> net(fl.ones((3, 4))).shape, type(net[1]).__name__
    ((3, 2), 'ReLU')
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        if isinstance(idx, str) and idx in self._modules:
            return self._modules[idx]
        return items[_index(idx, len(items), "Sequential")][1]

    def __setitem__(self, idx, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self._modules), "Sequential")]
        self.add_module(key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for k in keys[idx]:
                del self._modules[k]
        else:
            del self._modules[keys[_index(idx, len(keys), "Sequential")]]
        if all(k.isdigit() for k in self._modules):
            self._renumber(list(self._modules.values()))

    def insert(self, index: int, module: Module) -> Sequential:
        self._insert(index if index >= 0 else len(self) + 1 + index, module)
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(_ModuleSequence):
    """A list of modules, registered as children ``"0"``, ``"1"``, ...; index, iterate, ``append``, ``extend``.

    Args:
        modules: the initial modules (default none).

    Returns:
        A container; it has no ``forward``: iterate over it in your module's.

    >>> blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    >>> len(blocks), [name for name, _ in blocks.named_parameters()][:2]
    (3, ['0.weight', '0.bias'])
    """

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[_index(idx, len(mods), "ModuleList")]

    def __setitem__(self, idx, module: Module) -> None:
        self.add_module(str(_index(idx, len(self._modules), "ModuleList")), module)

    def __delitem__(self, idx) -> None:
        mods = list(self._modules.values())
        del mods[idx if isinstance(idx, slice) else _index(idx, len(mods), "ModuleList")]
        self._renumber(mods)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def insert(self, index: int, module: Module) -> None:
        self._insert(index, module)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it in your module's forward")


class ModuleDict(Module):
    """A dict of modules registered under their keys; ``model.blocks["enc"]``, ``keys()``, ``items()``.

    Args:
        modules: a mapping or ``(name, module)`` pairs (default none).

    Returns:
        A container; it has no ``forward``: index it in your module's.

    >>> heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "box": nn.Linear(4, 4)})
    >>> heads["box"](fl.ones(4)).shape, list(heads)
    ((4,), ['cls', 'box'])
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        items = modules.items() if isinstance(modules, Mapping) else modules
        for k, m in items:
            self.add_module(k, m)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it in your module's forward")
