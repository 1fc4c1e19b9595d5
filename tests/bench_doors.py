"""`make bench`, front doors as processes of their own (`gateway door`) in front of one gateway query: the
Java client's documented settings through one door process beside the same through two door processes that
form one cluster (partitions led by both), and one produce at a time (librdkafka, linger 0) through a door
process beside the same through the door inside the query's process. Each pair alternates which row goes
first; reported, never asserted. Alone: `python -m tests.bench --only doors` (`--quick` for a smoke run).
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Callable
from functools import partial

from streaming.config import GatewayConfig
from tests.bench_clients import SETTINGS, ClientRun, _last_batch, _progress_since
from tests.bench_secured_door import JAVA_DOCUMENTED
from tests.bench_stack import Row, Stack, print_table
from tests.integration.fault_harness import GatewayDriver, _wait_for
from tests.integration.ports import free_ports

ONE_AT_A_TIME = next(s for s in SETTINGS if s.client == "send-and-wait")


def _p50(row: Row) -> float | None:
    return row.latency_at(0.5)


def bench_doors(stack: Stack, quick: bool) -> None:
    print("\n== front doors as processes of their own: the Java client's documented settings through 1 door "
          "process beside 2 (one cluster); one produce at a time through a door process beside the door in the "
          "query's process ==")
    from tests.bench_front_door import gateway_with_front_door

    runner = ClientRun(stack.work / "doors", quick)
    rounds = 1 if quick else 3
    processes: list[GatewayDriver] = []
    pairs: dict[str, list[tuple[Row, Row]]] = {"2 doors / 1 door, records/s": [],
                                               "door process / door in the query's process, p50 ms": []}
    configs: list[GatewayConfig] = []
    with gateway_with_front_door(stack, on_config=configs.append) as (inside, query):
        query_config = configs[0]

        def door(doors_topic: str, door_id: int) -> str:
            address = f"127.0.0.1:{free_ports(1)}"
            process = GatewayDriver(query_config.with_overrides(
                front_door_address=address, front_door_id=door_id, doors_topic=doors_topic, front_door_nodes=4,
                metrics_address="127.0.0.1:0"), stack.work, f"door-{doors_topic}-{door_id}", command="door")
            processes.append(process.start())
            return address

        try:
            alone = door(f"doors-{uuid.uuid4().hex[:6]}", 1)
            pair_topic = f"doors-{uuid.uuid4().hex[:6]}"
            both = ",".join((door(pair_topic, 1), door(pair_topic, 2)))
            for process in processes:
                _wait_for(lambda p=process: "front door nodes" in p.log(), f"{process.log_path.name} to serve", 120)
            _wait_for(lambda: sum("2 live door(s)" in p.log() for p in processes) == 2, "the two doors to meet", 60)

            def run(bootstrap: str, setting: object, label: str) -> Row:
                return runner.row(setting, label, bootstrap, setting.topic(),  # type: ignore[attr-defined]
                                  partial(_progress_since, query, _last_batch(query)))

            run(alone, JAVA_DOCUMENTED, "warm-up")  # the JVMs and the doors, not reported
            sides: dict[str, tuple[Callable[[], Row], Callable[[], Row]]] = {
                "2 doors / 1 door, records/s": (partial(run, both, JAVA_DOCUMENTED, "2 door processes"),
                                                partial(run, alone, JAVA_DOCUMENTED, "1 door process")),
                "door process / door in the query's process, p50 ms": (
                    partial(run, alone, ONE_AT_A_TIME, "a door process"),
                    partial(run, inside, ONE_AT_A_TIME, "the door in the query's process")),
            }
            for name, (first, second) in sides.items():
                for i in range(rounds):
                    if i % 2 == 0:
                        a = first()
                        pairs[name].append((a, second()))
                    else:
                        b = second()
                        pairs[name].append((first(), b))
        finally:
            for process in processes:
                process.stop(60)
    print_table([row for name in pairs for pair in pairs[name] for row in pair], tail=True)
    print("\nratios (reported, not targets):")
    throughput = [a.records_per_s / b.records_per_s for a, b in pairs["2 doors / 1 door, records/s"]
                  if a.records_per_s and b.records_per_s]
    if throughput:
        print(f"  2 door processes / 1, records/s by pair: {', '.join(f'{r:.2f}' for r in throughput)}; "
              f"median {statistics.median(throughput):.2f}")
    trips = [(_p50(a), _p50(b)) for a, b in pairs["door process / door in the query's process, p50 ms"]]
    trips = [(a, b) for a, b in trips if a and b]
    if trips:
        print(f"  one produce at a time, p50 ms, door process / in the query's process by pair: "
              f"{', '.join(f'{a:.0f}/{b:.0f}' for a, b in trips)}; median ratio "
              f"{statistics.median(a / b for a, b in trips):.2f}")
