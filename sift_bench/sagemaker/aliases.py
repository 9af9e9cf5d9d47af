"""`import smart_sifting...` inside the runner: each documented SageMaker module, mapped to the sift_bench module
that holds its names.

Nothing named `smart_sifting` is installed: the finder lives on `sys.meta_path` only inside `aliased()`, so on a
SageMaker container AWS's own library is untouched, and outside the runner `import smart_sifting` fails as before.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
from typing import Iterator

ROOT = "smart_sifting"

# AWS module -> (sift_bench module, the names AWS documents there).
MODULES = {
    "smart_sifting.dataloader.sift_dataloader": ("sift_bench.sifting.dataloader", ("SiftingDataloader",)),
    "smart_sifting.loss.abstract_sift_loss_module": ("sift_bench.sifting.loss", ("Loss",)),
    "smart_sifting.sift_config.sift_configs": (
        "sift_bench.sifting.config", ("RelativeProbabilisticSiftConfig", "LossConfig", "SiftingBaseConfig")),
    "smart_sifting.data_model.data_model_interface": (
        "sift_bench.sifting.batch", ("SiftingBatch", "SiftingBatchTransform")),
    "smart_sifting.data_model.list_batch": ("sift_bench.sifting.batch", ("ListBatch",)),
    "smart_sifting.data_model.tensor_batch": ("sift_bench.sifting.batch", ("TensorBatch",)),
    "smart_sifting.integrations.trainer": ("sift_bench.integrations.transformers", ("enable_sifting",)),
    "smart_sifting.metrics.lightning": ("sift_bench.integrations.lightning", ("TrainingMetricsRecorder",)),
}
# Every package on the way to a module: `smart_sifting`, `smart_sifting.dataloader`, ...
PACKAGES = sorted({name.rsplit(".", depth)[0] for name in MODULES for depth in range(1, name.count(".") + 1)})


class SmartSiftingFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `smart_sifting` modules in MODULES and PACKAGES; each is a new module holding the documented names."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MODULES or fullname in PACKAGES:
            return importlib.util.spec_from_loader(fullname, self, is_package=fullname in PACKAGES)
        if fullname.startswith(ROOT + "."):
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: sift_bench.sagemaker provides SageMaker smart sifting's documented "
                f"modules only: {', '.join(sorted(MODULES))}", name=fullname)
        return None

    def create_module(self, spec):
        return None  # a plain new module

    def exec_module(self, module) -> None:
        target, names = MODULES.get(module.__name__, (None, ()))
        if target is not None:
            source = importlib.import_module(target)
            for name in names:
                setattr(module, name, getattr(source, name))
            module.__all__ = list(names)


@contextlib.contextmanager
def aliased() -> Iterator[None]:
    """`smart_sifting` importable for the `with` block; afterwards neither the finder nor its modules remain."""
    if importlib.util.find_spec(ROOT) is not None and ROOT not in sys.modules:
        # A real smart_sifting (AWS's, on a SageMaker container) comes first on sys.path: do not shadow it.
        raise RuntimeError(
            f"a package named {ROOT!r} is installed ({importlib.util.find_spec(ROOT).origin}): it is AWS's library, "
            "and sift_bench.sagemaker will not shadow it; run the script where it is not installed")
    finder = SmartSiftingFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if name == ROOT or name.startswith(ROOT + ".")]:
            del sys.modules[name]
