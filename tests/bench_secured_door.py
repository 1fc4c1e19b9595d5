"""`make bench`, the secured front door: the Java client's documented settings through a SASL_SSL listener
(SCRAM-SHA-512 over TLS) beside the PLAINTEXT listener of the same door, in one run, alternating which goes
first. The door is a `gateway door` process in front of the query, as a door exposed to clients is deployed
(docs/deployment.md); then the same client on PLAINTEXT alone and beside a flood of failed logins (bad PLAIN passwords from
one host, 127.0.0.2, 500 a second, each answered after Kafka's 100 ms delay), first with no quota, then with
that IP held to a KIP-612 connection creation rate quota set with `kafka-configs.sh` through the door (the
operator's answer to such a host, on Kafka as here). For comparison, the same flood aimed at an Apache Kafka
broker, and at the least a server can do to answer it (`login_refuser`: canned answers), shows what the flood
itself costs the producer on two shared cores. Each row's CPU by process is printed. Reported, never asserted. Alone: `python -m tests.bench --only secured-door` (`--quick` for a smoke run)."""

from __future__ import annotations

import statistics
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from embedded.local_kafka import LocalKafka, run_kafka_tool
from front_door.cluster.leadership import DEFAULT_NODES
from streaming.config import GatewayConfig
from tests.bench_clients import JAVA_DOCUMENTED_PROPS, ClientRun, ClientSetting, _last_batch, _progress_since
from tests.bench_front_door import gateway_with_front_door
from tests.bench_stack import Row, Stack, print_cpu, print_table, target
from tests.cpu_ledger import CpuLedger, RowCpu
from tests.integration.fault_harness import GatewayDriver, _wait_for
from tests.integration.ports import free_ports
from tests.integration.secured_door import ADMIN, ADMIN_PASSWORD, add_user, make_certificates

# the documented Java row's records (quick, full): 20-60 s each through the door
JAVA_DOCUMENTED = ClientSetting("java", "Java ProducerPerformance, documented settings", JAVA_DOCUMENTED_PROPS,
                                1_500_000, 4_000_000)
FLOOD_RATE = 500  # failed logins a second from one client
FLOOD_IN_FLIGHT = 256  # at most this many at once (each waits Kafka's 100 ms delay before its answer)
FLOOD_SOURCE = "127.0.0.2"  # the flooding host, apart from the producer's 127.0.0.1
FLOOD_IP_QUOTA = 10  # connection_creation_rate for the flooding IP in the quota's rows
LISTENERS = ("SASL_SSL", "SASL_PLAINTEXT", "PLAINTEXT")
# Rows run and not reported first: a fresh Spark session's throughput still climbs over its first minute.
WARM_UP_ROWS = 2


def _java_sasl_props(ca: str) -> tuple[tuple[str, str], ...]:
    return (("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 f'username="{ADMIN}" password="{ADMIN_PASSWORD}";'),
            ("ssl.truststore.type", "PEM"), ("ssl.truststore.location", ca))


# Built by `make go` (the Makefile's GO_LOGIN_FLOOD): the attacker must share this machine's two cores with the
# door and the producer, so it is written to cost as little CPU as it can.
LOGIN_FLOOD = Path(__file__).resolve().parent / "integration" / "go" / "bin" / "login_flood"
LOGIN_REFUSER = LOGIN_FLOOD.with_name("login_refuser")


class LoginFlood:
    """Failed SASL/PLAIN logins against one listener from a process of its own (tests/integration/go/login_flood),
    `FLOOD_RATE` a second, each on a connection of its own, for as long as the block runs; afterwards
    `per_second`: the logins the door refused per second."""

    def __init__(self, address: tuple[str, int], rate: int = FLOOD_RATE, in_flight: int = FLOOD_IN_FLIGHT,
                 source: str = FLOOD_SOURCE) -> None:
        self.address, self.rate, self.in_flight, self.source = address, rate, in_flight, source
        self.attempted_per_second = self.per_second = self.unanswered_per_second = 0.0

    def __enter__(self) -> LoginFlood:
        if not LOGIN_FLOOD.exists():
            raise SystemExit(f"{LOGIN_FLOOD} is missing: `make go` builds it")
        self._began = time.monotonic()
        self._proc = subprocess.Popen([str(LOGIN_FLOOD), f"{self.address[0]}:{self.address[1]}", str(self.rate),
                                       str(self.in_flight), self.source], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self._proc.communicate("stop\n", timeout=60)
        attempted, refused, unanswered = (int(n) for n in out.split())
        elapsed = time.monotonic() - self._began
        self.attempted_per_second, self.per_second = attempted / elapsed, refused / elapsed
        self.unanswered_per_second = unanswered / elapsed


@contextmanager
def flood_target_broker(work: Path) -> Iterator[tuple[str, int]]:
    """An Apache Kafka broker of its own with a SASL_PLAINTEXT listener taking PLAIN logins (one user, so the
    flood's logins fail as at the door): its address."""
    base = free_ports(3)  # PLAINTEXT, SASL_PLAINTEXT, CONTROLLER
    broker = LocalKafka(work / "flood-target-kafka", port=base, controller_port=base + 2, broker_properties={
        "listeners": f"PLAINTEXT://127.0.0.1:{base},SASL_PLAINTEXT://127.0.0.1:{base + 1},"
                     f"CONTROLLER://127.0.0.1:{base + 2}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{ADMIN}="{ADMIN_PASSWORD}";',
    })
    broker.start()
    try:
        yield "127.0.0.1", base + 1
    finally:
        broker.stop()


@contextmanager
def login_refuser() -> Iterator[tuple[str, int]]:
    """The least a server can do to answer the flood (tests/integration/go/login_refuser, canned answers after
    Kafka's delay), in a process of its own on loopback: its address."""
    if not LOGIN_REFUSER.exists():
        raise SystemExit(f"{LOGIN_REFUSER} is missing: `make go` builds it")
    proc = subprocess.Popen([str(LOGIN_REFUSER), "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        host, port = proc.stdout.readline().strip().rsplit(":", 1)
        yield host, int(port)
    finally:
        proc.kill()
        proc.wait()


def _per_record_us(rows: list[Row], part: Callable[[CpuLedger], float]) -> str:
    values = [v for r in rows if r.cpu is not None and (v := r.cpu.per_record_us(part)) is not None]
    return f"{statistics.median(values):.2f}" if values else "-"


def bench_secured_door(stack: Stack, quick: bool) -> None:
    print("\n== the front door secured: the Java client's documented settings through SASL_SSL (SCRAM-SHA-512, TLS) "
          "beside PLAINTEXT on the same door; then PLAINTEXT beside a flood of failed logins ==")
    certificates = make_certificates(stack.work / "door-certificates")
    block: dict[str, Any] = {"ssl.keystore.location": str(certificates.door),
                             "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"}
    runner = ClientRun(stack.work / "secured-door", quick)
    rounds = 1 if quick else 4  # an even number: each side goes first as often
    quota_pair = f"a login flood, its IP held to {FLOOD_IP_QUOTA} connections/s"
    kafka_pair = "the same flood at a Kafka broker's SASL_PLAINTEXT listener"
    refuser_pair = "the same flood at canned answers (login_refuser)"
    # (beside, plain alone)
    pairs: dict[str, list[tuple[Row, Row]]] = {"SASL_SSL": [], "a login flood": [], quota_pair: [],
                                               kafka_pair: [], refuser_pair: []}
    floods: dict[str, list[LoginFlood]] = {"a login flood": [], quota_pair: [], kafka_pair: [], refuser_pair: []}
    configs: list[GatewayConfig] = []
    with gateway_with_front_door(stack, on_config=configs.append) as (_, query):
        bases = {name: free_ports(DEFAULT_NODES) for name in LISTENERS}
        block["listeners"] = ",".join(f"{name}://127.0.0.1:{bases[name]}" for name in LISTENERS)
        door = GatewayDriver(configs[0].with_overrides(
            front_door_address=f"127.0.0.1:{bases['PLAINTEXT']}", front_door_security=block, security_topic=f"security-{uuid.uuid4().hex[:8]}",
            metrics_address="127.0.0.1:0"), stack.work, "secured-door", command="door").start()
        try:
            _wait_for(lambda: "front door nodes" in door.log(), "the door process to serve", 120)

            def address(listener: str) -> str:
                return f"127.0.0.1:{bases[listener]}"

            add_user({"bootstrap.servers": address("PLAINTEXT")}, ADMIN, ADMIN_PASSWORD)
            secured = replace(JAVA_DOCUMENTED, props=JAVA_DOCUMENTED.props + _java_sasl_props(certificates.ca))

            def run(listener: str, setting: ClientSetting, label: str) -> Row:
                with stack.cpu_measured(door_pid=door.proc.pid if door.proc else None) as window:
                    row = runner.row(setting, f"door process {label}", address(listener), setting.topic(),
                                     partial(_progress_since, query, _last_batch(query)))
                return replace(row, cpu=RowCpu(window, setting.records(quick)))

            def sasl_ssl() -> Row:
                return run("SASL_SSL", secured, "SASL_SSL")

            def flooded(name: str, target: tuple[str, int] | None = None) -> Row:
                host, port = address("SASL_PLAINTEXT").split(":")
                with LoginFlood(target or (host, int(port))) as flooding:
                    row = run("PLAINTEXT", JAVA_DOCUMENTED, f"PLAINTEXT beside {name}")
                floods[name].append(flooding)
                return row

            def held_to_a_quota() -> None:
                set_quota = run_kafka_tool("kafka.admin.ConfigCommand", [
                    "--bootstrap-server", address("PLAINTEXT"), "--alter", "--entity-type", "ips", "--entity-name",
                    FLOOD_SOURCE, "--add-config", f"connection_creation_rate={FLOOD_IP_QUOTA}"])
                if set_quota.returncode != 0:
                    raise SystemExit(f"kafka-configs could not set the flood's quota: {set_quota.stderr[-2000:]}")

            for _ in range(WARM_UP_ROWS):  # the JVMs (Spark's, the broker's, the client's) and the door
                run("PLAINTEXT", JAVA_DOCUMENTED, "warm-up")
            # Each pair side by side, alternating which goes first: the JVMs still warm up over the run.
            def side_by_side(name: str, other: Callable[[], Row]) -> None:
                for i in range(rounds):
                    if i % 2 == 0:
                        plain = run("PLAINTEXT", JAVA_DOCUMENTED, "PLAINTEXT")
                        pairs[name].append((other(), plain))
                    else:
                        beside = other()
                        pairs[name].append((beside, run("PLAINTEXT", JAVA_DOCUMENTED, "PLAINTEXT")))

            side_by_side("SASL_SSL", sasl_ssl)
            side_by_side("a login flood", partial(flooded, "a login flood"))
            with flood_target_broker(stack.work) as kafka_listener:  # its JVM idle on both sides of the pairs
                side_by_side(kafka_pair, partial(flooded, kafka_pair, kafka_listener))
            with login_refuser() as refuser:
                side_by_side(refuser_pair, partial(flooded, refuser_pair, refuser))
            held_to_a_quota()
            side_by_side(quota_pair, partial(flooded, quota_pair))
        finally:
            door.stop(60)
    rows = [row for name in pairs for pair in pairs[name] for row in reversed(pair)]
    print_table(rows, tail=True)
    print_cpu(rows)
    sasl_rows, plain_rows = [b for b, _ in pairs["SASL_SSL"]], [p for _, p in pairs["SASL_SSL"]]
    print("\n  CPU per record, median of the SASL_SSL pairs (SASL_SSL / PLAINTEXT), µs: door process "
          f"{_per_record_us(sasl_rows, lambda u: u.door)} / {_per_record_us(plain_rows, lambda u: u.door)}, "
          f"client {_per_record_us(sasl_rows, lambda u: u.clients)} / {_per_record_us(plain_rows, lambda u: u.clients)}, "
          f"whole machine {_per_record_us(sasl_rows, lambda u: u.busy)} / {_per_record_us(plain_rows, lambda u: u.busy)}")
    for name, runs in floods.items():
        if runs:
            print(f"\n  {name}: {statistics.median(f.attempted_per_second for f in runs):.0f} logins attempted, "
                  f"{statistics.median(f.per_second for f in runs):.0f} refused after Kafka's delay and "
                  f"{statistics.median(f.unanswered_per_second for f in runs):.0f} closed unanswered per second "
                  f"(at most {FLOOD_IN_FLIGHT} at once, from {FLOOD_SOURCE})")

    def pair_ratio(name: str) -> float | None:
        ratios = [b.records_per_s / p.records_per_s for b, p in pairs[name] if b.records_per_s and p.records_per_s]
        if ratios:
            print(f"  {name} / PLAINTEXT by pair: {', '.join(f'{r:.2f}' for r in ratios)}")
        return statistics.median(ratios) if ratios else None

    sasl, flood_ratio, quota_ratio = pair_ratio("SASL_SSL"), pair_ratio("a login flood"), pair_ratio(quota_pair)
    kafka_ratio, refuser_ratio = pair_ratio(kafka_pair), pair_ratio(refuser_pair)
    print("\nratios and targets (records/s, the median of the pairs' ratios):")
    target("SASL_SSL / PLAINTEXT, Java documented settings", "-" if sasl is None else f"{sasl:.2f}", ">= 0.85",
           None if sasl is None else sasl >= 0.85)
    target("PLAINTEXT beside a login flood / alone", "-" if flood_ratio is None else f"{flood_ratio:.2f}", ">= 0.9",
           None if flood_ratio is None else flood_ratio >= 0.9)
    print(f"  for comparison, PLAINTEXT beside the same flood at a Kafka broker / alone: "
          f"{'-' if kafka_ratio is None else f'{kafka_ratio:.2f}'}; at canned answers (the least a server can do): "
          f"{'-' if refuser_ratio is None else f'{refuser_ratio:.2f}'}")
    target(f"PLAINTEXT beside the flood, its IP held to {FLOOD_IP_QUOTA}/s / alone",
           "-" if quota_ratio is None else f"{quota_ratio:.2f}", ">= 0.9",
           None if quota_ratio is None else quota_ratio >= 0.9)
