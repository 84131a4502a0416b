"""Function transforms: autodiff, vmap, control flow, jacobians, custom rules, tracing."""

from . import debug, export, onnx
from .autodiff import grad, jvp, linear_transpose, linearize, value_and_grad, vjp
from .batching import vmap
from .callbacks import pure_callback
from .control_flow import associative_scan, cond, fori_loop, map, scan, switch, while_loop  # noqa: A004
from .custom import custom_jvp, custom_vjp
from .implicit import custom_linear_solve, custom_root
from .jacobians import hessian, hvp, jacfwd, jacobian, jacrev
from .jit import jit
from .remat import checkpoint, checkpoint_policies, remat, saved_residuals
from .tracing import ShapeDtypeStruct, eval_shape, make_jaxpr

__all__ = [
    "debug",
    "pure_callback",
    "export",
    "grad",
    "jvp",
    "linear_transpose",
    "linearize",
    "value_and_grad",
    "vjp",
    "vmap",
    "associative_scan",
    "cond",
    "fori_loop",
    "map",
    "scan",
    "switch",
    "while_loop",
    "checkpoint",
    "custom_jvp",
    "custom_vjp",
    "remat",
    "checkpoint_policies",
    "custom_linear_solve",
    "custom_root",
    "saved_residuals",
    "hessian",
    "hvp",
    "jacfwd",
    "jacobian",
    "jacrev",
    "jit",
    "ShapeDtypeStruct",
    "eval_shape",
    "make_jaxpr",
    "onnx",
]
