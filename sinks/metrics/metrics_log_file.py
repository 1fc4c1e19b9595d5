"""`metrics_log_file` (docs/configuration.md): each micro-batch's JSON line, the DEBUG line of logger
`gateway.metrics`, appended to a file of its own (JSON Lines) whatever the log's level."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("gateway.metrics")


class MetricsLogFile:
    """A JSON Lines file opened for each line, so a rotation that renames it (logrotate's default) needs no
    signal: the next line starts the new file. A line that cannot be written is dropped with one warning per
    streak of failures (a full disk must not fail durable micro-batches, nor log once per micro-batch)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._failing = False

    @staticmethod
    def open(path: Path) -> MetricsLogFile:
        """The file, its folder made; OSError when it cannot be appended to (checked before the gateway starts)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
        return MetricsLogFile(path)

    def write(self, line: str) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError as e:
            if not self._failing:
                log.warning("cannot write the metrics log file %s (%s): its lines are dropped until it can be "
                            "written again", self.path, e.strerror or e)
            self._failing = True
            return
        if self._failing:
            log.info("the metrics log file %s is written again", self.path)
        self._failing = False
