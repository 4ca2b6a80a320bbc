"""Functional transforms: grad, value_and_grad, vjp, jvp, jacrev (jacobian), jacfwd, hessian
(transforms.py) and vmap (vmap.py; the batching rules are declared with the ops, ops/batching.py)."""
from .transforms import grad, value_and_grad, vjp, jvp, jacrev, jacobian, jacfwd, hessian
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacobian", "jacfwd", "hessian", "vmap"]
