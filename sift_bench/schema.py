"""Typed configs: a dataclass per config group, registered in Hydra's ConfigStore as `schema/<name>`.

Each yaml of a group lists its schema first in its defaults (`- /schema/trainer@_here_`), so composition refuses a
misspelled key (`trainer.epoch=3`) or a wrong type (`trainer.epochs=three`) with Hydra's own message. Hydra appends a
`+key=value` even to a typed node, so `refuse_unknown_keys` checks the composed config against the same schemas
before anything runs. Either refusal of a key names the field most likely meant (`refused_key`).

The fields mirror the yaml files key for key: a key added here with a default would enter every run's config and
change its `config_hash`, so the committed table's runs would no longer be found (tests/test_identity.py). Settings
that have been given both as integers and as decimals (`beta_value: 1`, `beta_value: 0.5`) are `Any`: a `float`
type would turn 1 into 1.0, another config hash; their range checks are the sift configs' own.
"""

import difflib
from dataclasses import dataclass, field, fields, is_dataclass, make_dataclass
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from sift_bench.errors import ConfigError
from sift_bench.sifting import SiftPolicy
from sift_bench.sifting.config import BUILT_IN_POLICIES


@dataclass
class PathsConfig:
    data_dir: str = MISSING
    cache_dir: str = MISSING


@dataclass
class CostConfig:
    usd_per_hour: float = MISSING


@dataclass
class ScaleConfig:
    name: str = MISSING
    device: str = MISSING
    precision: str = MISSING
    channels_last: bool = MISSING
    usd_per_hour: float = MISSING


@dataclass
class OptimizerConfig:
    name: str = MISSING
    lr: float = MISSING
    momentum: float = MISSING
    nesterov: bool = MISSING
    betas: List[float] = MISSING
    eps: float = MISSING
    weight_decay: float = MISSING
    implementation: str = MISSING


@dataclass
class ScheduleConfig:
    name: str = MISSING
    warmup_fraction: float = MISSING
    final_lr_fraction: float = MISSING


@dataclass
class TrainerConfig:
    epochs: int = MISSING
    batch_size: int = MISSING
    eval_batch_size: int = MISSING
    evals_per_epoch: int = MISSING
    eval_every_epochs: int = MISSING
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    num_threads: Optional[int] = MISSING
    progress: bool = MISSING
    loop: str = MISSING


@dataclass
class TrackingConfig:
    uri: str = MISSING
    experiment_name: str = MISSING
    run_name: Optional[str] = MISSING
    skip_finished: bool = MISSING
    require_same_machine: bool = MISSING
    require_machine: Optional[str] = MISSING
    baseline_per_machine: bool = MISSING
    start_before: Optional[str] = MISSING
    baseline_per_sitting: bool = MISSING
    timing_slot: Optional[str] = MISSING
    rerun_contended: bool = MISSING


# ---------------------------------------------------------------- sifters: one schema per built-in policy

@dataclass
class BaselineSifter:
    name: str = MISSING


@dataclass
class DelayedSifter:
    """What every sifting policy has: its config class, when it starts, and how DDP ranks share it."""
    name: str = MISSING
    _target_: str = MISSING
    sift_delay: int = MISSING
    repeat_delay_per_epoch: bool = MISSING
    sync: str = MISSING


# A policy field's type in its schema. Decimal settings are Any (see above: 1 must stay 1); the rest as declared.
SCHEMA_TYPES = {"float": Any, "int": int, "str": str, "bool": bool}


def sifter_schema(policy: type[SiftPolicy]) -> type:
    """The typed schema of a policy's `sifter` group, read off the policy's own fields (its delay lives in
    DelayedSifter): `RelativeProbabilisticSiftConfig` -> `RelativeProbabilisticSifter`. The policy class is the one
    declaration; this is derived from it, never written beside it."""
    own = [(f.name, SCHEMA_TYPES[str(f.type)], MISSING) for f in fields(policy) if f.name != "loss_based_sift_config"]
    return make_dataclass(policy.__name__.removesuffix("SiftConfig") + "Sifter", own, bases=(DelayedSifter,))


def sifter_schemas() -> dict[str, type]:
    """`sifter_<name>` -> schema, for every built-in policy; the baseline's is BaselineSifter."""
    return {f"sifter_{policy.name}": BaselineSifter if policy.passes_through else sifter_schema(policy)
            for policy in BUILT_IN_POLICIES}


# ---------------------------------------------------------------- the built-in tasks

@dataclass
class SplitData:
    """What both built-in tasks' data share: the source, the validation and training splits, generated sizes."""
    source: str = MISSING
    val_size: int = MISSING
    train_subset: Optional[int] = MISSING
    synthetic_train_size: int = MISSING
    synthetic_test_size: int = MISSING


@dataclass
class BuiltInTask:
    """What both built-in tasks share: their builder, names and the accuracy their time-to-target is timed to."""
    _target_: str = MISSING
    name: str = MISSING
    dataset: str = MISSING
    target_accuracy: float = MISSING


@dataclass
class ResnetModel:
    arch: str = MISSING
    width_multiplier: int = MISSING


@dataclass
class CifarData(SplitData):
    crop_padding: int = MISSING


@dataclass
class Cifar10ResnetTask(BuiltInTask):
    model: ResnetModel = field(default_factory=ResnetModel)
    data: CifarData = field(default_factory=CifarData)
    label_smoothing: float = MISSING
    eval_flip_tta: bool = MISSING


@dataclass
class BertModel:
    source: str = MISSING
    name: str = MISSING


@dataclass
class Sst2Data(SplitData):
    max_length: int = MISSING


@dataclass
class Sst2BertTask(BuiltInTask):
    model: BertModel = field(default_factory=BertModel)
    data: Sst2Data = field(default_factory=Sst2Data)


# Config name under the `schema` group -> schema; a yaml extends one with `- /schema/<name>@_here_`.
SCHEMAS = {
    "paths": PathsConfig,
    "cost": CostConfig,
    "scale": ScaleConfig,
    "trainer": TrainerConfig,
    "tracking": TrackingConfig,
    **sifter_schemas(),
    "task_cifar10_resnet": Cifar10ResnetTask,
    "task_sst2_bert": Sst2BertTask,
}


def register() -> None:
    """Put every schema in Hydra's ConfigStore, as `schema/<name>`; idempotent."""
    store = ConfigStore.instance()
    for name, schema in SCHEMAS.items():
        store.store(group="schema", name=name, node=schema)


def refused_key(error: BaseException | None, group: str = "") -> str | None:
    """OmegaConf's refusal of a key that a typed node lacks, as one line that names the field most likely meant and
    where the allowed ones are: "Key 'epoch' not in 'TrainerConfig'; did you mean trainer.epochs? (allowed: ...)".
    None for any other error. `group`: the group the error's `full_key` is relative to, when not the config's root."""
    schema, key = getattr(error, "object_type", None), getattr(error, "key", None)
    if not (isinstance(error, (ConfigKeyError, ConfigAttributeError)) and isinstance(schema, type)
            and is_dataclass(schema) and isinstance(key, str)):
        return None
    path = [part for part in (group, *str(error.full_key).split(".")) if part]
    meant = difflib.get_close_matches(key, [f.name for f in fields(schema)], n=1)
    hint = f"; did you mean {'.'.join([*path[:-1], meant[0]])}?" if meant else ""
    return (f"{str(error).splitlines()[0]}{hint} (allowed: the keys of {schema.__name__}; see conf/{path[0]}/ and "
            "sift_bench/schema.py)")


def refuse_unknown_keys(cfg: DictConfig) -> None:
    """Raise ConfigError naming the first key of a typed group that its schema lacks (a `+key=value` typo)."""
    for group in ("paths", "cost", "scale", "trainer", "tracking", "sifter", "task"):
        node = cfg.get(group)
        schema = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
        if schema is None or schema is dict:
            continue  # a user's task or policy without a schema: the policy's own fields are checked when built
        try:
            OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.to_container(node, resolve=False))
        except Exception as error:  # OmegaConf's own message names the key and the schema
            refusal = refused_key(error, group) or (f"{str(error).splitlines()[0]} (allowed: the keys of "
                                                    f"{schema.__name__}; see conf/{group}/ and sift_bench/schema.py)")
            raise ConfigError(f"{group}: {refusal}") from None


register()
