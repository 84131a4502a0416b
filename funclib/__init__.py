"""funclib: differentiable array programming with immutable tensors and composable function transforms.

>>> import funclib as fl
>>> fl.grad(lambda x: (fl.sin(x) ** 2).sum())(fl.tensor([0.5, 1.0]))
Tensor([0.84147096, 0.9092974 ], dtype=float32)
"""

import math as _math

# funclib.distributed loads mpi4py (and MPI) only when a process axis is used
from . import (  # noqa: F401
    config,
    distributed,
    dtypes,
    errors,
    ops,
    primitives,
    quantization,
    ragged,
    random,
    sparse,
    tree,
)
from .core import ShapedArray, Tensor, Tracer  # noqa: F401
from .dtypes import (  # noqa: F401
    bfloat16,
    can_cast,
    complex64,
    complex128,
    finfo,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float16,
    float32,
    float64,
    iinfo,
    int4,
    int8,
    int16,
    int32,
    int64,
    isdtype,
    result_type,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .dtypes import bool_ as bool  # noqa: F401, A001
from .errors import SerializationError, UnsafePickleError  # noqa: F401
from .jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr, typecheck  # noqa: F401
from .namespace import NAMESPACE as _NAMESPACE
from .ops import fft, linalg  # noqa: F401
from .random import global_randint as randint  # noqa: F401
from .random import manual_seed, rand, rand_like, randn, randn_like, randperm  # noqa: F401

# the Array API namespace and the research staples: every function a record declared public
globals().update(_NAMESPACE)
del _NAMESPACE

__version__ = "0.1.0"
__array_api_version__ = "2023.12"

e = _math.e
inf = float("inf")
nan = float("nan")
pi = _math.pi
newaxis = None

from .transforms import *  # noqa: E402, F401, F403
from .transforms import solvers as _solvers  # noqa: E402

# the iterative solvers need while_loop and custom_linear_solve (transforms), so they join fl.linalg here
linalg.cg = _solvers.cg
linalg.bicgstab = _solvers.bicgstab


def __getattr__(name: str):
    if name in ("save", "load"):
        # fl.save/fl.load live in the facade beside state_dicts (funclib.nn.serialization); importing it on first
        # use keeps `import funclib` from loading funclib.nn and the PyTorch reader
        from .nn import serialization

        return getattr(serialization, name)
    raise AttributeError(f"module 'funclib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"save", "load"})
