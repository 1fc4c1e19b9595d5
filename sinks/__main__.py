"""`python -m sinks`: the command groups of the sinks package.

    python -m sinks segments dump|verify|read|offsets-for-times|truncate ...   (sinks/segments_cli.py)
    python -m sinks dlq stats|list|show|replay ...                             (sinks/dlq/cli.py)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sinks import segments_cli
from sinks.command_line import CommandParser
from sinks.time_arguments import protect_relative_times


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m sinks", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="group", required=True)
    sub.add_parser("dlq", help="dead letters: stats, list, show, replay (python -m sinks dlq --help)")
    segments_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["dlq"]:  # the dead-letter command parses its own options
        from sinks.dlq.cli import main as dlq_main

        return dlq_main(argv[1:])
    return segments_cli.run(build_parser().parse_args(protect_relative_times(argv)))


if __name__ == "__main__":
    sys.exit(main())
