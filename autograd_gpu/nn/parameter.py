"""Parameter: a Tensor that a Module registers as trainable (requires grad by default)."""
from ..tensor import Tensor, _to_array
from ..ops.inplace import PLAIN_CLASSES

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A leaf Tensor marked as a module parameter; built from a Tensor it shares that tensor's memory."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = []
        if isinstance(data, Tensor):
            arr, dev = data.data, data.device
            self._version = data.version_counter()      # same memory, same version counter
        else:
            arr, dev = _to_array(data, None, None, copy=False, default_float=True)
        self.data = arr
        self.device = dev
        self.grad_fn = None
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        p = memo.get(id(self))
        if p is None:
            p = memo[id(self)] = Parameter(self._copy(), self.requires_grad)
            if self.grad is not None:
                p.grad = self.grad.detach()._copy()
        return p


PLAIN_CLASSES.add(Parameter)     # its .data is its own array: in-place arithmetic may take the one-call path
