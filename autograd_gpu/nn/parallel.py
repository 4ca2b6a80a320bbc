"""ag.nn.parallel: DistributedDataParallel, the class defined in ag.distributed (PyTorch's two names
for it). Looked up on first use, so that nn does not import distributed."""

__all__ = ["DistributedDataParallel"]


def __getattr__(name):
    if name == "DistributedDataParallel":
        from ..distributed.ddp import DistributedDataParallel
        return DistributedDataParallel
    raise AttributeError(f"module 'autograd_gpu.nn.parallel' has no attribute '{name}'")
