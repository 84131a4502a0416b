"""funclib: differentiable array programming with immutable tensors and composable function transforms.

>>> import funclib as fl
>>> fl.grad(lambda x: (x ** 3).sum())(fl.tensor([0.5, 1.0]))
Tensor([0.75, 3.  ], dtype=float32)
"""

import math as _math

from . import (  # noqa: F401
    config,
    dtypes,
    errors,
    primitives,
    quantization,
    ragged,
    random,  # noqa: F401, E402
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
from .jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr, typecheck  # noqa: F401
from .ops import fft, linalg  # noqa: F401
from .ops import methods as _methods  # noqa: F401
from .ops.creation import *  # noqa: F401, F403
from .ops.elementwise import *  # noqa: F401, F403
from .ops.elementwise import pow, round  # noqa: F401, A004
from .ops.indexing import take, take_along_axis  # noqa: F401
from .ops.info import __array_namespace_info__  # noqa: F401
from .ops.linalg_basic import diagonal, einsum, inner, matmul, outer, tensordot, vecdot  # noqa: F401
from .ops.manipulation import *  # noqa: F401, F403
from .ops.manipulation import matrix_transpose  # noqa: F401
from .ops.misc import no_grad, stop_gradient  # noqa: F401
from .ops.nn import *  # noqa: F401, F403
from .ops.reductions import *  # noqa: F401, F403
from .ops.reductions import all, any, max, min, sum  # noqa: F401, A004
from .ops.searching import *  # noqa: F401, F403
from .ops.segment import segment_max, segment_mean, segment_min, segment_sum  # noqa: F401
from .ops.sets import *  # noqa: F401, F403
from .ops.sorting import *  # noqa: F401, F403
from .primitives.collectives import all_gather, axis_index, pmax, pmean, pmin, ppermute, psum, psum_scatter  # noqa: F401
from .primitives.elementwise import stop_gradient  # noqa: F401, F811
from .primitives.shape import dynamic_slice, dynamic_update_slice  # noqa: F401
from .pt_reader import UnsafePickleError  # noqa: F401
from .random import global_randint as randint  # noqa: F401
from .random import manual_seed, rand, rand_like, randn, randn_like, randperm  # noqa: F401
from .serialization import SerializationError, load, save  # noqa: F401

__version__ = "0.1.0"
__array_api_version__ = "2023.12"

e = _math.e
inf = float("inf")
nan = float("nan")
pi = _math.pi
newaxis = None

from . import distributed  # noqa: E402, F401  (MPI itself loads only when used)
from .transforms import *  # noqa: E402, F401, F403
from .transforms import solvers as _solvers  # noqa: E402

# the iterative solvers need while_loop and custom_linear_solve (transforms), so they join fl.linalg here
linalg.cg = _solvers.cg
linalg.bicgstab = _solvers.bicgstab
linalg.__all__ = [*linalg.__all__, "cg", "bicgstab"]
