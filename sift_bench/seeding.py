"""One seed for every generator a run draws from: Python's, NumPy's and torch's (CPU and every CUDA device)."""

import os
import random

import numpy as np
import torch


def seed_everything(seed: int, *, lightning: bool = False) -> None:
    """Seeds python, numpy and torch; with `lightning`, also PL_GLOBAL_SEED, which Lightning's own
    seed_everything() without an argument, and its samplers, read (a SageMaker script may be a Lightning one)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if lightning:
        os.environ["PL_GLOBAL_SEED"] = str(seed)
