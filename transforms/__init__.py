"""Function transforms: autodiff, vmap, jacobians, tracing."""

from .autodiff import grad, jvp, linear_transpose, linearize, value_and_grad, vjp  # noqa: F401
from .batching import vmap  # noqa: F401
from .tracing import ShapeDtypeStruct, eval_shape, make_jaxpr  # noqa: F401
