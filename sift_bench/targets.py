"""What a config names by import path (`_target_`): a task's builder and a sifter's policy.

Nothing here lists tasks or policies: `task._target_` names a function `(cfg, device) -> TaskParts` and
`sifter._target_` a `sift_bench.sifting.SiftPolicy` subclass, in any importable module, so a user's own task or
policy needs no edit of sift_bench (examples/digits/ and tests/test_policy_protocol.py show both).
"""

from dataclasses import fields

from hydra.utils import get_class, get_method
from omegaconf import OmegaConf

from sift_bench.errors import ConfigError
from sift_bench.sifting import LossConfig, SiftingBaseConfig, SiftPolicy

# The sifter settings every policy shares, which go into its loss_based_sift_config or to the harness.
SHARED_SIFTER_KEYS = ("name", "_target_", "sift_delay", "repeat_delay_per_epoch", "sync")


def _resolve(kind, path, setting: str, allowed: str):
    try:
        return kind(path)
    except Exception as error:  # Hydra wraps ImportError, AttributeError and ValueError alike
        cause = error.__cause__ or error
        raise ConfigError(f"{setting}={path!r} is not allowed: it must name {allowed} by import path "
                          f"({type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''})") from None


BASELINE = "none"


def is_baseline(sifter_cfg) -> bool:
    """The plain loader, every sample trained on: `sifter=none`."""
    return sifter_cfg.name == BASELINE


def policy_class(sifter_cfg) -> type[SiftPolicy]:
    """The SiftPolicy subclass `sifter._target_` names."""
    path = sifter_cfg.get("_target_")
    if path is None:
        raise ConfigError(f"sifter._target_ is missing for sifter={sifter_cfg.get('name')}: set it to the policy's "
                          "config class, a sift_bench.sifting.SiftPolicy subclass (see conf/sifter/)")
    cls = _resolve(get_class, path, "sifter._target_", "a sift_bench.sifting.SiftPolicy subclass")
    if not issubclass(cls, SiftPolicy):
        raise ConfigError(f"sifter._target_={path!r} is not allowed: {cls.__name__} is not a subclass of "
                          "sift_bench.sifting.SiftPolicy (see sift_bench/sifting/policy.py)")
    return cls


def build_sift_config(sifter_cfg):
    """The policy's config from the flat `sifter` settings, or None for the baseline. Raises ConfigError."""
    if is_baseline(sifter_cfg):
        return None
    cls = policy_class(sifter_cfg)
    settings = OmegaConf.to_container(sifter_cfg, resolve=True)
    own = {f.name for f in fields(cls)} - {"loss_based_sift_config"}
    unknown = sorted(set(settings) - own - set(SHARED_SIFTER_KEYS))
    if unknown:
        raise ConfigError(f"sifter.{unknown[0]} is not a setting of {cls.__name__} (sifter={settings.get('name')}): "
                          f"it takes {sorted(own)} and {list(SHARED_SIFTER_KEYS[2:])}")
    for key in ("sift_delay", "repeat_delay_per_epoch"):
        if key not in settings:
            raise ConfigError(f"sifter.{key} is missing: every policy's yaml sets it (see conf/sifter/)")
    try:
        # How DDP ranks share the sifter is the policy's setting too (global where a yaml predates it).
        delay = SiftingBaseConfig(sift_delay=settings["sift_delay"],
                                  repeat_delay_per_epoch=settings["repeat_delay_per_epoch"],
                                  sync=settings.get("sync", "global"))
        return cls(**{key: settings[key] for key in own if key in settings},
                   loss_based_sift_config=LossConfig(sift_config=delay))
    except (TypeError, ValueError) as error:
        raise ConfigError(f"sifter={settings.get('name')}: {error}") from error


def task_builder(task_cfg):
    """The function `task._target_` names: (cfg, device) -> TaskParts."""
    path = task_cfg.get("_target_")
    if path is None:
        raise ConfigError(f"task._target_ is missing for task={task_cfg.get('name')}: set it to a function "
                          "(cfg, device) -> sift_bench.tasks.TaskParts, e.g. sift_bench.tasks.sst2_bert.build")
    return _resolve(get_method, path, "task._target_", "a function (cfg, device) -> sift_bench.tasks.TaskParts")
