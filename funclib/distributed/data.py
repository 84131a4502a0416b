"""Sharding a dataset by rank, as PyTorch's ``DistributedSampler`` does."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from funclib.checks import check_int

from ._comm import world


class DistributedSampler:
    """The indices of one rank's share of a dataset, reshuffled each epoch with a seed all ranks share.

    Every rank gets the same number of indices (``len(sampler)``): with ``drop_last=False`` the shuffled order is
    padded by repeating its start, so that the ranks' batches keep one shape (a compiled step is traced once and
    every rank runs the same program); with ``drop_last=True`` the tail that does not divide evenly is dropped.
    Together the ranks cover the dataset once per epoch (plus the padding).

    Args:
      dataset: the dataset, or its length (anything with ``len()``, or an int).
      num_replicas: the number of ranks (default: ``fl.distributed.world_size()``).
      rank: this rank (default: ``fl.distributed.rank()``).
      shuffle: permute the indices each epoch (default True).
      seed: the base seed, the same on every rank.
      drop_last: drop the tail instead of padding.

    >>> sampler = fl.distributed.DistributedSampler(10, num_replicas=2, rank=1, shuffle=False)
    >>> list(sampler)
    [1, 3, 5, 7, 9]
    >>> sampler.set_epoch(1)  # call once per epoch before iterating, for a new order
    """

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        n = dataset if isinstance(dataset, int) else len(dataset)
        self.n = check_int(n, "DistributedSampler", "the dataset length", min=0)
        if num_replicas is None or rank is None:
            w = world()
            num_replicas = w.size if num_replicas is None else num_replicas
            rank = w.rank if rank is None else rank
        self.num_replicas = check_int(num_replicas, "DistributedSampler", "num_replicas", min=1)
        self.rank = check_int(rank, "DistributedSampler", "rank", min=0)
        if self.rank >= self.num_replicas:
            raise ValueError(
                f"DistributedSampler: rank {self.rank} is outside 0..{self.num_replicas - 1} (num_replicas="
                f"{self.num_replicas})"
            )
        self.shuffle = bool(shuffle)
        self.seed = check_int(seed, "DistributedSampler", "seed")
        self.drop_last = bool(drop_last)
        self.epoch = 0
        if self.drop_last:
            self.num_samples = self.n // self.num_replicas
        else:
            self.num_samples = math.ceil(self.n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        if not self.drop_last and self.n == 0:
            self.num_samples = self.total_size = 0

    def set_epoch(self, epoch: int) -> None:
        """Use the order of ``epoch`` (every rank must call it with the same value)."""
        self.epoch = check_int(epoch, "DistributedSampler.set_epoch", "epoch", min=0)

    def indices(self) -> np.ndarray:
        """This rank's indices for the current epoch, as an int64 array."""
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        else:
            order = np.arange(self.n)
        if self.drop_last:
            order = order[: self.total_size]
        elif self.total_size > self.n:
            order = np.concatenate([order, np.resize(order, self.total_size - self.n)])
        return order[self.rank : self.total_size : self.num_replicas].astype(np.int64)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples
