"""The commands' argument parser and the argument types they share: a bad argument is one `error:` line naming
the command, the option and what it takes, and exit status 2, before anything is reached (a cluster, a file).

argparse's own error prints the whole usage first (a dozen lines for a command with many options) and then the
message; `CommandParser` prints the message alone, with where the usage is. Its subcommands' parsers are
`CommandParser`s too (argparse makes them of the parent's class).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import NoReturn

from sinks.addresses import bootstrap_problem
from validators.topic_config import topic_name_error


class CommandParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (usage: {self.prog} --help)\n")


def _number(text: str, expected: str, cast: Callable[[str], float]) -> float:
    try:
        value = cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A timeout or an interval in seconds: above 0."""
    value = _number(text, "a positive number of seconds", float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def whole_number(lowest: int) -> Callable[[str], int]:
    """A whole number of at least `lowest` (a count, a partition, an id)."""
    expected = f"a whole number of at least {lowest}"

    def parse(text: str) -> int:
        value = int(_number(text, expected, int))
        if value < lowest:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


def topic_name(text: str) -> str:
    """A Kafka topic name (Kafka's `Topic.validate`)."""
    if (problem := topic_name_error(text)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def bootstrap_servers(text: str) -> str:
    """Kafka's `bootstrap.servers`: `host:port[,host:port...]`."""
    if (problem := bootstrap_problem(text)) is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT[,HOST:PORT...] ({problem})")
    return text


_PRINCIPAL = re.compile(r"^[A-Za-z][A-Za-z0-9_]*:.+$")


def principal(text: str) -> str:
    """A Kafka principal as Kafka's tools write it, `TYPE:NAME` (`User:alice`)."""
    if not _PRINCIPAL.match(text):
        raise argparse.ArgumentTypeError(f"expected a principal TYPE:NAME such as User:alice, got {text!r}")
    return text
