"""ag.distributed: data-parallel training over MPI (mpi4py) and NCCL (CuPy), launched with
``mpiexec -n N python script.py``. Importing this package does not import mpi4py:
init_process_group() does."""
from .process_group import (init_process_group, is_initialized, get_rank, get_world_size, get_backend,
                            barrier, destroy_process_group)
from .collectives import ReduceOp, all_reduce, broadcast, all_gather, reduce_scatter
from .ddp import DistributedDataParallel

__all__ = ["init_process_group", "is_initialized", "get_rank", "get_world_size", "get_backend", "barrier",
           "destroy_process_group", "ReduceOp", "all_reduce", "broadcast", "all_gather", "reduce_scatter",
           "DistributedDataParallel"]
