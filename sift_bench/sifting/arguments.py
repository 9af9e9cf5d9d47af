"""What SiftingDataloader accepts: its arguments, checked before anything runs, and the batch size read off the
wrapped loader. The arguments:

    orig_dataloader: re-iterable (one ``iter()`` per epoch), with an int
        ``batch_size`` and optionally ``drop_last`` (default False). Batches may
        already be on the model's device.
    loss_impl, model: the scoring loss and the model, required by the policies
        that score (``RelativeProbabilisticSiftConfig``, ``StaleSBSiftConfig``,
        ``ProxySiftConfig``, whose loss_impl must be a ``ProxyLoss``); the other
        policies never call them.
    batch_transforms: a ``SiftingBatchTransform``; by default one is chosen per
        batch type for a tensor, a tuple or list of tensors, or a dict of
        tensors (a Hugging Face ``BatchEncoding`` too).
    log_batch_data: record every sifted candidate batch (epoch, index, each
        sample's loss and whether it was kept) in ``batch_log`` and log one line
        per batch (logger ``sift_bench.sifting.dataloader``, INFO). Its memory
        grows with the samples seen: for a pilot run, as SageMaker advises.
    batch_format_index: which dimension of a batch runs over its samples, for
        the default transforms (SageMaker's name): None (default) takes a
        tensor's dimension 0 and a list or tuple's dimension 1 (each element a
        column); 0 reads a list or tuple as a list of samples; 1 takes a
        tensor's samples along its dimension 1.
    seed: seeds the generator of all sampling decisions; None draws the seed from
        torch's global generator, so ``torch.manual_seed`` alone makes a run
        repeatable (as it does for a ``DataLoader`` without a generator).
    sample_ids: batch -> integer tensor [n] of sample ids in [0, num_samples),
        for the policies that remember per-sample losses; default ``default_sample_ids`` (the last
        element of a tuple batch, ``batch["sample_id"]`` of a dict batch, as
        ``IndexedDataset`` makes them).
    num_samples: the data set's size, required by the policies that remember
        per-sample losses (stale loss, InfoBatch, Stale-SB): their memory is preallocated with one entry per sample.
    num_epochs: the planned number of epochs, required by
        ``InfoBatchSiftConfig``: annealing starts once
        ``(1 - anneal_fraction) * num_epochs * num_samples`` samples were seen.
    sync, process_group: data-parallel training (an initialised
        ``torch.distributed`` group of more than one rank; otherwise ignored).
        Each rank wraps the loader of its own shard and keeps its own samples.
        Every rank yields the same number of batches per epoch: after each
        candidate batch the ranks agree how many full batches all of them have,
        and a rank's kept samples that never fill such a batch are counted in
        ``stats.samples_left_over`` (and ``samples_sifted_out``), not yielded.
        ``sync`` is the policy's setting (``SiftingBaseConfig.sync``, beside the delay); the argument, when
        given, overrides it. ``sync="global"`` (default): the losses of every candidate batch (and,
        for the training-loss policies, the recorded losses and sample ids) are
        gathered from all ranks, so every rank holds the same loss history and
        memory and gives a loss the same percentile. ``sync="local"``: each
        rank sifts alone, as SageMaker's per-rank wrapper would. Either way
        ``stats`` counts samples over all ranks (the learning-rate schedule runs
        on them) and ``stats.sync_seconds`` is the time spent communicating;
        the random draws differ per rank.
"""

from __future__ import annotations

from typing import Any

import torch

from .batch import checked_batch_format_index
from .config import is_int
from .policy import SiftPolicy
from .proxy import ProxyLoss
from .ranks import SYNC_MODES


def batch_sampler_with_size(orig_dataloader: Any) -> Any:
    """The loader's batch sampler that knows its batch size, unwrapping accelerate's (SkipBatchSampler); or None."""
    sampler = getattr(orig_dataloader, "batch_sampler", None)
    while sampler is not None and getattr(sampler, "batch_size", None) is None:
        sampler = getattr(sampler, "batch_sampler", None)
    return sampler


def loader_batch_size(orig_dataloader: Any) -> tuple[int, bool]:
    """(batch size, drop_last) of the loader: its own, or its batch sampler's when it batches through one."""
    batch_size = getattr(orig_dataloader, "batch_size", None)
    drop_last = getattr(orig_dataloader, "drop_last", False)
    if batch_size is None:
        # A DataLoader built with batch_sampler=, such as the DataLoaderShard that accelerate makes inside a Hugging
        # Face Trainer, has batch_size None: the batch sampler holds the size, and drops the last batch or not.
        sampler = batch_sampler_with_size(orig_dataloader)
        if sampler is not None:
            batch_size, drop_last = sampler.batch_size, getattr(sampler, "drop_last", False)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"orig_dataloader.batch_size must be an int >= 1 (the size of the batches "
            f"SiftingDataloader refills), got {batch_size!r} from a "
            f"{type(orig_dataloader).__name__} (nor has it a batch_sampler with an int batch_size); "
            f"build it with batch_size= or a batch_sampler that has a batch_size, or give your loader "
            f"a batch_size attribute"
        )
    return batch_size, bool(drop_last)


def checked_losses(losses: Any, n: int, subject: str) -> torch.Tensor:
    """``losses`` as a float32 CPU tensor of shape [n], or an error saying what was wrong.

    subject: who must provide them, e.g. "MyLoss.loss must return".
    """
    if not isinstance(losses, torch.Tensor):
        raise TypeError(
            f"{subject} a torch.Tensor of per-sample losses, got {type(losses).__name__}"
        )
    if tuple(losses.shape) not in ((n,), (n, 1)):
        raise ValueError(
            f"{subject} one loss per sample, of shape [n] or [n, 1] "
            f"with n = {n}, got shape {list(losses.shape)}"
        )
    # The copy to the CPU also waits for the device, so scoring_seconds is true wall time.
    return losses.detach().reshape(n).to("cpu", torch.float32)


def check_arguments(sift_config: SiftPolicy, orig_dataloader: Any, loss_impl: Any, model: Any, batch_transforms: Any,
                    *, log_batch_data: Any, batch_format_index: Any, seed: Any, sample_ids: Any, num_samples: Any,
                    num_epochs: Any, sync: Any) -> int | None:
    """A TypeError or ValueError naming the argument, its value and what is allowed, for the first argument that is
    not; else the checked batch_format_index."""
    if not hasattr(orig_dataloader, "__iter__") or hasattr(orig_dataloader, "__next__"):
        raise TypeError(
            f"orig_dataloader must be re-iterable (a DataLoader, or any iterable whose "
            f"iter() starts a new epoch), not an iterator, got "
            f"{type(orig_dataloader).__name__}"
        )
    _check_scoring_parts(sift_config, loss_impl, model)
    if batch_transforms is not None and not all(
        callable(getattr(batch_transforms, name, None))
        for name in ("transform", "reverse_transform")
    ):
        raise TypeError(
            f"batch_transforms must be a SiftingBatchTransform, "
            f"got {type(batch_transforms).__name__}"
        )
    if not isinstance(log_batch_data, bool):
        raise TypeError(f"log_batch_data must be a bool, got {log_batch_data!r}")
    batch_format_index = checked_batch_format_index(batch_format_index)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    if sample_ids is not None and not callable(sample_ids):
        raise TypeError(
            f"sample_ids must be a callable batch -> int64 tensor of sample ids, or None, "
            f"got {type(sample_ids).__name__}"
        )
    for name, value in (("num_samples", num_samples), ("num_epochs", num_epochs)):
        if value is not None and not is_int(value):
            raise TypeError(f"{name} must be an int >= 1 or None, got {value!r}")
        if value is not None and value < 1:
            raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")
    if sync not in SYNC_MODES:
        raise ValueError(f"sync must be one of {SYNC_MODES}, got {sync!r}")
    _check_policy_needs(sift_config, num_samples, num_epochs)
    return batch_format_index


def _check_scoring_parts(sift_config: SiftPolicy, loss_impl: Any, model: Any) -> None:
    """What a policy that scores needs: a Loss, a model, and for a proxy policy a ProxyLoss."""
    policy = type(sift_config).__name__
    if sift_config.scores or sift_config.scores_on_demand:
        if not callable(getattr(loss_impl, "loss", None)):
            raise TypeError(
                f"loss_impl must be a sift_bench.sifting.Loss with a "
                f"loss(model, transformed_batch, original_batch) method, "
                f"got {type(loss_impl).__name__}"
            )
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"model must be a torch.nn.Module, got {type(model).__name__}"
            )
    if sift_config.scores_with_proxy and not isinstance(loss_impl, ProxyLoss):
        raise TypeError(
            f"{policy} scores with a proxy model: loss_impl must be a sift_bench.sifting.ProxyLoss "
            f"(the proxy, the task's per-sample loss and the proxy's optimizer), got {type(loss_impl).__name__}"
        )


def _check_policy_needs(sift_config: SiftPolicy, num_samples: Any, num_epochs: Any) -> None:
    """The sizes a policy's declarations ask for: num_samples for a per-sample memory, num_epochs for a plan."""
    policy = type(sift_config).__name__
    if sift_config.tracks_samples() and num_samples is None:
        raise ValueError(
            f"{policy} needs num_samples= (the data set's size): it remembers one loss per "
            f"sample, in memory preallocated for num_samples samples"
        )
    if sift_config.needs_num_epochs and num_epochs is None:
        raise ValueError(
            f"{policy} needs num_epochs= (the planned number of epochs)"
            + (": annealing starts after (1 - anneal_fraction) * num_epochs * num_samples "
               "samples seen" if hasattr(sift_config, "anneal_fraction") else "")
        )
