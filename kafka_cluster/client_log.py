"""librdkafka's own log lines through Python's logging: `KAFKA_CLIENT_LOG`, the `logger` of the gateway's clients,
with the lines known to be harmless at DEBUG (docs/operations.md: logs).

confluent-kafka hands each librdkafka line to the logger as `log(level, "%s [%s] %s", facility, client name,
message)`. A few lines report librdkafka doing what Kafka's protocol asks of a client, and need nobody:

- GETPID "Coordinator load in progress": an idempotent producer's InitProducerId answered
  COORDINATOR_LOAD_IN_PROGRESS, a retriable error, while a broker that just started loads its transaction state;
  librdkafka retries, as Kafka's Java producer does;
- BGQUEUE "Purging N unserved events": a client closing with events that nobody waits for any more.

These go to DEBUG; every other line keeps librdkafka's level (a refused connection to a running cluster is news).

But not a thousand times: librdkafka logs each failed attempt to connect, and a process's clients against a cluster
that has gone away log ~100 such lines a second. A line is shown once per `REPEAT_WINDOW_S` for each client and
message (its timings left out); the next one shown after that says how many like it were left out
(`RepeatedLines`), as the front door logs the connections it closes.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kafka_cluster.once_per_window import OncePerWindow


@dataclass(frozen=True)
class KnownLine:
    """A librdkafka line by its facility and a part of its message."""

    facility: str
    contains: str

    def matches(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 3:  # not confluent-kafka's (facility, client, message)
            return False
        facility, _client, message = args
        return facility == self.facility and self.contains in str(message)


KNOWN_HARMLESS = (
    KnownLine("GETPID", "Coordinator load in progress"),
    KnownLine("BGQUEUE", "unserved events"),
)


class KnownHarmless(logging.Filter):
    """Moves the `lines` to DEBUG: shown only where the logger logs DEBUG (GATEWAY_LOG_LEVEL=DEBUG)."""

    def __init__(self, lines: tuple[KnownLine, ...] = KNOWN_HARMLESS) -> None:
        super().__init__()
        self.lines = lines

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG or not any(line.matches(record) for line in self.lines):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        # the logger's level let the record in at its own level; at DEBUG it must pass that check again
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


# librdkafka's timings in a line ("(after 0ms in state CONNECT)", "in 1000ms"): not what makes it new
_TIMINGS = re.compile(r"\(after \d+ms[^)]*\)|\d+ms")
REPEAT_WINDOW_S = 30.0


class RepeatedLines(logging.Filter):
    """Lets a librdkafka line through once per `window_s` for each (facility, client, message without its
    timings), the next one saying how many were held back (`OncePerWindow`; module docstring)."""

    def __init__(self, window_s: float = REPEAT_WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._once = OncePerWindow(window_s, clock)
        self._guard = threading.Lock()  # librdkafka's lines arrive on the clients' threads

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 3:
            return True
        facility, client, message = args
        key = (str(facility), str(client), " ".join(_TIMINGS.sub("", str(message)).split()))
        with self._guard:
            held_back = self._once.due(key)
        if held_back is None:
            return False
        record.msg = f"{record.msg}{self._once.more(held_back)}"
        return True


KAFKA_CLIENT_LOG = logging.getLogger("gateway.kafka_client")
KAFKA_CLIENT_LOG.addFilter(KnownHarmless())
KAFKA_CLIENT_LOG.addFilter(RepeatedLines())

# The commands' clients (`dlq`, `status`): librdkafka's own lines (one per failed connection attempt, many a second
# against a cluster that does not answer) go nowhere; the command says in one line what failed.
COMMAND_CLIENT_LOG = logging.getLogger("gateway.kafka_client.command")
COMMAND_CLIENT_LOG.addHandler(logging.NullHandler())
COMMAND_CLIENT_LOG.propagate = False
