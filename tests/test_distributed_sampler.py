"""DistributedSampler, given num_replicas and rank (no MPI needed): PyTorch's padding and striding."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.data import DistributedSampler


def by_hand(n, replicas, rank, perm, drop_last):
    """PyTorch's documented recipe: pad by repeating from the start (or cut), then stride."""
    num = -(-(n - replicas) // replicas) if drop_last and n % replicas else -(-n // replicas)
    total = num * replicas
    idx = list(perm)[:total] if drop_last else list(perm)
    while len(idx) < total:
        idx += idx[:total - len(idx)]
    return idx[rank:total:replicas]


CASES = [(n, r, d) for n in (1, 2, 3, 7, 10, 12) for r in (1, 2, 3, 4) for d in (False, True)]


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_shards_match_pytorchs_recipe(n, replicas, drop_last):
    for shuffle in (False, True):
        for epoch in (0, 5):
            perm = np.random.default_rng(3 + epoch).permutation(n) if shuffle else range(n)
            for rank in range(replicas):
                s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=3,
                                       drop_last=drop_last)
                s.set_epoch(epoch)
                want = by_hand(n, replicas, rank, perm, drop_last)
                assert list(s) == want and len(s) == len(want)


def test_padded_shards_have_equal_length_and_cover_the_dataset():
    shards = [list(DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=False)) for r in range(4)]
    assert shards == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]


def test_set_epoch_changes_the_shuffle_and_every_rank_agrees():
    a = [list(DistributedSampler(range(20), 2, r, seed=1)) for r in range(2)]
    assert sorted(a[0] + a[1]) == list(range(20))
    s = DistributedSampler(range(20), 2, 0, seed=1)
    s.set_epoch(1)
    assert list(s) != a[0]


def test_matches_torchs_sampler_without_shuffle():
    torch_data = pytest.importorskip("torch.utils.data")
    for n, replicas, drop_last in CASES:
        for rank in range(replicas):
            theirs = torch_data.DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False,
                                                   drop_last=drop_last)
            ours = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_dataloader_takes_it_as_sampler():
    ds = ag.data.TensorDataset(ag.arange(10.0))
    loader = ag.data.DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, 3, 1, shuffle=False))
    assert [b.tolist() for (b,) in loader] == [[1.0, 4.0], [7.0, 0.0]]
    assert len(loader) == 2
    with pytest.raises(ValueError, match="sampler"):
        ag.data.DataLoader(ds, sampler=DistributedSampler(ds, 3, 1), shuffle=True)


def test_bad_rank_and_missing_process_group_raise():
    with pytest.raises(ValueError, match="rank"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))
