"""ag.nn.parallel: DistributedDataParallel under PyTorch's second name for it.

The class lives in ag.distributed, which sits above nn (it wraps Modules): nn does not import it.
distributed/ddp.py puts it here when it is imported, which ``import autograd_gpu`` always does."""

__all__ = ["DistributedDataParallel"]

DistributedDataParallel: type      # set on import by distributed/ddp.py (annotation only: no value here)
