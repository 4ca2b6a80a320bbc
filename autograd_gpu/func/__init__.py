"""Functional transforms: grad, value_and_grad, vjp, jvp, jacrev (jacobian), jacfwd, hessian
(transforms.py) and vmap with its batching rules (vmap.py)."""
from .transforms import grad, value_and_grad, vjp, jvp, jacrev, jacobian, jacfwd, hessian
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacobian", "jacfwd", "hessian", "vmap"]
