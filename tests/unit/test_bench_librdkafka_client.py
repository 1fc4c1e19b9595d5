"""The bench's librdkafka runs in a process of their own (`tests.librdkafka_client`): what the child writes
is what the parent reads, and a child that cannot run is an error in the row, not an exception."""

from __future__ import annotations

from array import array
from pathlib import Path

from tests.librdkafka_client import Deliveries, main, run_in_own_process


def test_deliveries_round_trip_through_files(tmp_path: Path) -> None:
    d = Deliveries(array("d", [1.5, 2.25, 0.0]), array("d", [3.0, 0.0, 0.0]), errors=["Local: Message timed out"],
                   client_errors=["broker down"], undelivered=1, unsent=1)
    d.save(tmp_path)
    back = Deliveries.load(tmp_path)
    assert back == d
    assert back.ok() == [0]
    assert back.problems()[0] == "1 delivery errors, 1 client errors, 1 undelivered, 1 unsent"


def test_unknown_mode_is_a_usage_error() -> None:
    assert main(["consume", "{}", "/nonexistent"]) == 2


def test_a_child_that_fails_is_reported_in_the_deliveries(tmp_path: Path) -> None:
    # an unknown librdkafka property: the child's Producer() raises before producing anything
    d = run_in_own_process("produce", tmp_path / "out", "127.0.0.1:1", "t", {"no.such.property": "1"}, 3, 10, 5.0)
    assert d.ok() == [] and d.unsent == 3
    assert "exited 1" in d.client_errors[0] and "no.such.property" in d.client_errors[0]
