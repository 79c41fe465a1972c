"""The canary config: schema, loading (YAML, --set overrides, readable errors) and thresholds."""

from canary_action.config.load import (
    LoadedConfig,
    config_hash,
    load_config,
    load_threshold_file,
    parse_config,
)
from canary_action.config.sample import write_sample_config

__all__ = [
    "LoadedConfig",
    "config_hash",
    "load_config",
    "load_threshold_file",
    "parse_config",
    "write_sample_config",
]
