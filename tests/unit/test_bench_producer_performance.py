"""The parser of ProducerPerformance's output (`tests.producer_performance`), on lines as Kafka 4.2.1 prints them."""

from __future__ import annotations

from pathlib import Path

from tests.producer_performance import PerfSummary, exception_lines, parse_summary, producer_command, windows

# a real run's stdout (Kafka 4.2.1, 300 000 records of 100 B, --reporting-interval 1000)
RUN = """\
1 records sent, 0.8 records/sec (0.00 MB/sec), 363.0 ms avg latency, 363.0 ms max latency.
44250 records sent, 43086.7 records/sec (4.11 MB/sec), 308.3 ms avg latency, 1264.0 ms max latency.
45582 records sent, 44820.1 records/sec (4.27 MB/sec), 781.8 ms avg latency, 964.0 ms max latency.
300000 records sent, 49537.648613 records/sec (4.72 MB/sec), 1004.82 ms avg latency, 1748.00 ms max latency, \
1030 ms 50th, 1545 ms 95th, 1686 ms 99th, 1740 ms 99.9th.
"""


def test_summary_line() -> None:
    assert parse_summary(RUN) == PerfSummary(300000, 49537.648613, 4.72, 1004.82, 1748.0, 1030, 1545, 1686, 1740)
    assert parse_summary(RUN).percentiles_ms == {0.5: 1030, 0.95: 1545, 0.99: 1686, 0.999: 1740, 1.0: 1748.0}


def test_steady_state_line_is_told_apart() -> None:
    steady = ("Warmup first 1000 records. Steady state results will print after the complete test summary.\n" + RUN
              + "299000 steady state records sent, 50000.000000 records/sec (4.77 MB/sec), 900.00 ms avg latency, "
                "1700.00 ms max latency, 1000 ms 50th, 1500 ms 95th, 1600 ms 99th, 1650 ms 99.9th.\n")
    assert parse_summary(steady).records == 300000
    s = parse_summary(steady, steady_state=True)
    assert s is not None and s.steady_state and s.records == 299000 and s.p999_ms == 1650


def test_no_summary_when_killed_or_failed() -> None:
    partial = "\n".join(RUN.splitlines()[:3])
    assert parse_summary(partial) is None
    assert parse_summary("") is None
    assert windows(partial) == [(1, 0.8), (44250, 43086.7), (45582, 44820.1)]


def test_stack_trace_first_lines() -> None:
    stderr = """\
org.apache.kafka.common.errors.TimeoutException: Expiring 16 record(s) for bench-0:120001 ms has passed since batch creation
Exception in thread "main" java.lang.IllegalArgumentException: Invalid property: x
\tat org.apache.kafka.tools.ProducerPerformance.readProps(ProducerPerformance.java:1)
Caused by: java.io.IOException: boom
"""
    assert exception_lines(stderr) == [
        "org.apache.kafka.common.errors.TimeoutException: Expiring 16 record(s) for bench-0:120001 ms has passed "
        "since batch creation",
        'Exception in thread "main" java.lang.IllegalArgumentException: Invalid property: x',
    ]


def test_command_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("tests.producer_performance.tools_classpath", lambda: "cp")
    cmd = producer_command("127.0.0.1:1", "t", 10, 100, {"acks": "all", "linger.ms": "50"}, tmp_path / "l.xml")
    tail = cmd[cmd.index("org.apache.kafka.tools.ProducerPerformance") + 1:]
    assert tail == ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--num-records", "10", "--record-size", "100",
                    "--throughput", "-1", "--command-property", "acks=all", "linger.ms=50"]
    throttled = producer_command("127.0.0.1:1", "t", 10, 100, {}, tmp_path / "l.xml", throughput=280_000)
    assert throttled[throttled.index("--throughput") + 1] == "280000"  # the producer beside the backlog (bench_beside)
