"""Data-parallel training of the digits MLP over MPI: every rank trains on its shard of each epoch,
gradients are averaged across ranks during backward; rank 0 prints, evaluates and plots.

    pip install -e ".[distributed,examples]"
    mpiexec -n 2 python examples/train_ddp.py [--device cuda] [--epochs 20]
"""
from _common import ag, parser, parse_args, progress, set_postfix, Timer, save_curves, accuracy
from autograd_gpu import nn, optim
from autograd_gpu.data import TensorDataset, DataLoader, DistributedSampler
import autograd_gpu.distributed as dist
import autograd_gpu.nn.functional as F


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "ddp_training.png")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32, help="per rank: the global batch is this x ranks")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--hidden", type=int, default=128)
    args = parse_args(p, argv)
    dist.init_process_group()                 # "mpi", or "nccl" for CUDA tensors where NCCL loads
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.device.startswith("cuda"):
        ag.cuda.set_device(rank % ag.cuda.device_count())     # one GPU per process
        args.device = f"cuda:{rank % ag.cuda.device_count()}"
    ag.manual_seed(args.seed + rank)          # different starts: DDP broadcasts rank 0's parameters
    xtr, ytr = ag.data.datasets.load_digits(device=args.device, split="train")
    xte, yte = ag.data.datasets.load_digits(device=args.device, split="test")
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10)).to(args.device)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = optim.Adam(ddp.parameters(), lr=args.lr)
    sampler = DistributedSampler(TensorDataset(xtr, ytr), seed=args.seed)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch_size, sampler=sampler)
    epochs = 1 if args.smoke else args.epochs
    losses, test_acc = [], []
    with Timer() as timer:
        bar = progress(range(epochs), total=epochs, desc="epochs") if rank == 0 else range(epochs)
        for epoch in bar:
            sampler.set_epoch(epoch)           # a new shuffle that every rank agrees on
            ddp.train()
            for step, (xb, yb) in enumerate(loader):
                loss = F.cross_entropy(ddp(xb), yb)
                opt.zero_grad()
                loss.backward()                # averages gradients over ranks, bucket by bucket
                opt.step()
                if args.smoke and step >= 2:
                    break
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
            losses.append(mean_loss.item())
            ddp.eval()
            with ag.no_grad():
                test_acc.append(accuracy(ddp(xte), yte))
            if rank == 0:
                set_postfix(bar, loss=losses[-1], test_acc=test_acc[-1])
    if rank == 0:
        print(f"digits on {world} rank(s): test accuracy {test_acc[-1]:.2%} after {epochs} epochs in "
              f"{timer.seconds:.1f} s ({args.device}, global batch {args.batch_size * world})", flush=True)
        if save_curves(args.out, {"training loss (mean over ranks)": (range(1, epochs + 1), losses),
                                  "test accuracy": (range(1, epochs + 1), test_acc)}, f"DDP on {world} ranks"):
            print(f"saved {args.out}", flush=True)
    dist.destroy_process_group()
    return {"test_accuracy": test_acc[-1], "seconds": timer.seconds, "world": world}


if __name__ == "__main__":
    main()
