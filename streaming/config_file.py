"""The gateway config read from its file (`conf/gateway.json`): every setting checked (`config_rules.py`) before
anything starts, one line per problem (docs/operations.md)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_cluster.security import literal_secrets
from streaming.config import DEFAULT_CONFIG, REMOVED_SETTINGS, REPO_ROOT, GatewayConfig
from streaming.config_rules import agreement_problems, setting_problems

log = logging.getLogger("gateway.config")


class GatewayConfigError(ValueError):
    """A gateway config that cannot be used: one line per problem, each naming the file and the setting."""

    def __init__(self, path: str | Path, problems: Sequence[str]) -> None:
        self.lines = tuple(f"{path}: {problem}" for problem in problems)
        super().__init__("\n".join(self.lines))


def load_gateway_config(path: str | Path = DEFAULT_CONFIG, **overrides: Any) -> GatewayConfig:
    """The gateway config in `path`, with `overrides` (a None one leaves the file's setting), every setting checked
    (`streaming.config_rules`) before anything starts: GatewayConfigError with one line per problem."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise GatewayConfigError(path, [f"cannot read the gateway configuration: {e.strerror or e}"]) from None
    except ValueError as e:  # not JSON, or not UTF-8
        raise GatewayConfigError(path, [f"the gateway configuration is not JSON: {e}"]) from None
    if not isinstance(doc, dict):
        raise GatewayConfigError(path, ["expected a JSON object of settings (docs/configuration.md)"])
    for key in REMOVED_SETTINGS.keys() & doc.keys():
        log.warning("%s: the setting %s is no longer used and is ignored: %s; remove it", path, key, REMOVED_SETTINGS[key])
        del doc[key]
    doc.update({key: value for key, value in overrides.items() if value is not None})
    if problems := setting_problems(doc, REPO_ROOT):
        raise GatewayConfigError(path, problems)
    config = GatewayConfig(**doc)
    if problems := agreement_problems(config):
        raise GatewayConfigError(path, problems)
    for key in literal_secrets(config.kafka):
        log.warning("%s: kafka.%s is written in the file; give it as ${file:PATH} or ${env:NAME} instead", path, key)
    for key in literal_secrets(config.front_door_security):
        log.warning("%s: front_door_security.%s is written in the file; give it as ${file:PATH} or ${env:NAME} "
                    "instead", path, key)
    return config
