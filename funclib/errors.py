"""Error classes raised by funclib. Each message names the operation, the values involved and the fix."""

# a warning, defined beside the kernel cache that issues it
from .kernels.diskcache import KernelCacheWarning as KernelCacheWarning


class FunclibError(Exception):
    """Base class of funclib's own errors."""


class ConcretizationError(FunclibError, TypeError):
    """A traced value was used where a concrete Python value is needed (``bool``, ``int``, a shape, NumPy)."""


class TracerLeakError(FunclibError, RuntimeError):
    """A traced value escaped the transform that created it."""


class MissingRuleError(FunclibError, NotImplementedError):
    """A primitive lacks the rule a transform needs (``prim`` and ``kind`` say which, when known)."""

    def __init__(self, msg: str = "", prim=None, kind: str | None = None):
        super().__init__(msg)
        self.prim = prim
        self.kind = kind


class NotLinearError(FunclibError, TypeError):
    """A function transposed as a linear map is not linear in its input."""


class ShapeError(FunclibError, ValueError):
    """Operand shapes do not fit the operation."""


class OutOfRangeError(FunclibError, OverflowError, ValueError):
    """A Python number does not fit the dtype it is converted to: an ``OverflowError`` as in NumPy, and a
    ``ValueError`` (a bad value, not a bad type)."""


class DTypeError(FunclibError, TypeError):
    """Operand dtypes do not fit the operation."""


class ImmutableError(FunclibError, TypeError):
    """An attempt to write into an immutable Tensor."""


class DataDependentShapeError(FunclibError, TypeError):
    """An operation whose output shape depends on data was used under tracing."""


class SerializationError(FunclibError, ValueError):
    """A checkpoint file is truncated, corrupt, or does not match what it is loaded into."""


class UnsafePickleError(SerializationError):
    """A checkpoint asks for something a data file never needs: a global outside the allowed set, or an operation
    on an object that could run code."""
