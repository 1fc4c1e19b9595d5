"""What the gateway's principal may do on its Kafka cluster: the ACLs it needs (`gateway_acls`, the one list the
docs and `gateway acls` print), and the check at start (`check_access`) that turns a refused login, an untrusted
certificate or a missing ACL into one line naming what to fix, before anything is started. A cluster that does
not answer yet (starting, or busy) is asked again until the check's timeout (`startup_timeout_ms` for
`gateway run`).

Kafka's rules (docs: "Authorization and ACLs", the operations each API needs): READ and WRITE on a topic imply
DESCRIBE; an idempotent producer needs no IDEMPOTENT_WRITE on the cluster once it may WRITE to a topic (KIP-679);
CreateTopics needs CREATE on the cluster or on the topic. The gateway's consumers assign partitions and never
commit, but librdkafka's look up their group all the same (FindCoordinator: DESCRIBE on the group, implied by
READ), so every group id the gateway uses begins with one prefix and one prefixed ACL covers them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from contract.topics import registry_topic, rehearsal_topic
from kafka_cluster.security import KafkaCluster

log = logging.getLogger("gateway.kafka_access")

# `check_access` against a cluster that does not answer yet: the first attempt waits this long for the answers
# (each next one twice as long), and the check pauses between attempts, first RETRY_BACKOFF_S, doubling up to
# RETRY_BACKOFF_MAX_S. With less than MIN_ATTEMPT_S left of its timeout, it gives up.
ATTEMPT_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 1.0
RETRY_BACKOFF_MAX_S = 10.0
MIN_ATTEMPT_S = 0.5

# librdkafka's own "nothing came back": no connection, no answer in time
_NO_ANSWER = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                        KafkaError.REQUEST_TIMED_OUT, KafkaError.NETWORK_EXCEPTION})
# a broker's "not now": a cluster starting, electing leaders or a controller, loading a coordinator
_NOT_YET = frozenset({KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_CONTROLLER, KafkaError.BROKER_NOT_AVAILABLE,
                      KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                      KafkaError.NOT_COORDINATOR})
# definite answers: asking again gets the same one
_DEFINITE = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED,
                       KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
                       KafkaError.CLUSTER_AUTHORIZATION_FAILED})


class KafkaAccessError(RuntimeError):
    """The cluster refuses the gateway: the message says what to fix."""


class KafkaNotAnswering(KafkaAccessError):
    """No answer from the cluster (yet): `check_access` asks again until its timeout."""


@dataclass(frozen=True)
class RequiredAcl:
    """One ALLOW ACL the gateway's principal needs."""

    resource: str  # "topic", "group" or "cluster"
    name: str  # the topic, the group prefix, or "kafka-cluster" (Kafka's name for the cluster resource)
    operation: AclOperation
    why: str
    prefixed: bool = False  # Kafka's PREFIXED resource pattern (else LITERAL)

    def command(self, bootstrap_servers: str, principal: str) -> str:
        """The `kafka-acls.sh` line that grants it (run by an administrator), with why it is needed."""
        target = "--cluster" if self.resource == "cluster" else f"--{self.resource} {self.name}"
        if self.prefixed:
            target = f"--resource-pattern-type prefixed {target}"
        operation = "".join(part.capitalize() for part in self.operation.name.split("_"))
        return (f"kafka-acls.sh --bootstrap-server {bootstrap_servers} --command-config admin.properties --add "
                f"--allow-principal {principal} --operation {operation} {target}   # {self.why}")


def gateway_acls(ingress_topic: str, response_topic: str, dlq_topic: str, groups_topic: str | None,
                 group_prefix: str, security_topic: str | None = None,
                 doors_topic: str | None = None, registry: str | None = None,
                 transaction_state_topic: str | None = None) -> list[RequiredAcl]:
    """The ACLs of a gateway with these topics (`groups_topic`, `security_topic`, `doors_topic`: None without a
    front door or, for the doors topic, without several doors)
    and consumer group prefix. CREATE on the cluster only while the gateway creates its topics: not once an administrator has."""
    acls = [
        RequiredAcl("topic", ingress_topic, AclOperation.READ, "Spark's Kafka source reads the produce batches"),
        RequiredAcl("topic", rehearsal_topic(ingress_topic), AclOperation.READ,
                    "a standby rehearses the query on it while the ingress topic is empty"),
        RequiredAcl("topic", rehearsal_topic(ingress_topic), AclOperation.WRITE, "a standby writes its rehearsal batch"),
        RequiredAcl("topic", ingress_topic, AclOperation.WRITE, "the front door and `gateway dlq replay` produce"),
        RequiredAcl("topic", response_topic, AclOperation.WRITE, "the sink publishes the produce responses"),
        RequiredAcl("topic", response_topic, AclOperation.READ, "the front door and `gateway status` read them"),
        RequiredAcl("topic", dlq_topic, AclOperation.WRITE, "the sink publishes the dead letters"),
        RequiredAcl("topic", dlq_topic, AclOperation.READ, "`gateway dlq` reads them"),
        RequiredAcl("group", group_prefix, AclOperation.READ, "the groups of the gateway's consumers (none commits)",
                    prefixed=True),
        RequiredAcl("topic", registry_topic(ingress_topic) if registry is None else registry, AclOperation.READ,
                    "the query and every front door follow the topic registry"),
        RequiredAcl("topic", registry_topic(ingress_topic) if registry is None else registry, AclOperation.WRITE,
                    "topics are created, altered and deleted in the registry"),
    ]
    if groups_topic is not None:
        acls += [RequiredAcl("topic", groups_topic, AclOperation.READ, "the front door loads its groups"),
                 RequiredAcl("topic", groups_topic, AclOperation.WRITE, "the front door stores groups and offsets")]
    if security_topic is not None:
        acls += [RequiredAcl("topic", security_topic, AclOperation.READ, "the front door loads its users and ACLs"),
                 RequiredAcl("topic", security_topic, AclOperation.WRITE, "the front door stores users and ACLs")]
    if transaction_state_topic is not None:
        acls += [RequiredAcl("topic", transaction_state_topic, AclOperation.READ,
                             "each front door follows the transactions' state"),
                 RequiredAcl("topic", transaction_state_topic, AclOperation.WRITE,
                             "the transaction coordinator stores the transactions' state")]
    if doors_topic is not None:
        acls += [RequiredAcl("topic", doors_topic, AclOperation.READ, "each front door follows the live doors"),
                 RequiredAcl("topic", doors_topic, AclOperation.WRITE, "each front door registers and heartbeats")]
    acls.append(RequiredAcl("cluster", "kafka-cluster", AclOperation.CREATE,
                            "the gateway creates its topics at start (not needed when they exist)"))
    return acls


# READ and WRITE imply DESCRIBE; ALL implies everything (Kafka's AclOperation implication rules).
_IMPLIED_BY = {AclOperation.DESCRIBE: (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                       AclOperation.ALTER)}


def check_access(cluster: KafkaCluster, acls: Sequence[RequiredAcl], timeout_s: float = 30.0, *,
                 attempt_timeout_s: float = ATTEMPT_TIMEOUT_S,
                 sleep: Callable[[float], None] = time.sleep) -> set[str]:
    """Log in to the cluster and check that the principal holds the topic and group ACLs of `acls` (Kafka's
    DescribeTopics with the caller's authorized operations, KIP-430; DescribeGroups of a group id it uses).
    Returns the topics that do not exist yet: creating them needs CREATE, which only CreateTopics itself can
    tell (a principal learns its cluster operations only with DESCRIBE on the cluster, which the gateway needs
    not).

    A cluster that does not answer yet (unreachable, starting, or too busy, e.g. creating many partitions) is
    asked again after a pause (`RETRY_BACKOFF_S`, doubling up to `RETRY_BACKOFF_MAX_S`), with a warning per
    retry, until `timeout_s` has passed in all. An attempt waits `attempt_timeout_s` for the answers, twice as
    long at each next one, so an answer slower than the first attempt still comes in a later one. Raises
    `KafkaAccessError` with one line naming the cause: at once for a definite answer (refused credentials, an
    untrusted certificate, every missing ACL with its command), after `timeout_s` for no answer."""
    errors: list[KafkaError] = []
    failed = threading.Event()

    def on_error(error: KafkaError) -> None:
        if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or "SSL handshake failed" in error.str():
            errors.append(error)
            failed.set()

    # One client for every attempt: librdkafka keeps (re)connecting in between, with its own backoff.
    admin = AdminClient(cluster.client({"error_cb": on_error, "log_level": 0}))
    deadline = time.monotonic() + timeout_s
    pause_s = RETRY_BACKOFF_S
    attempts = 0
    while True:
        attempts += 1
        attempt_s = min(attempt_timeout_s * 2 ** (attempts - 1), max(deadline - time.monotonic(), MIN_ATTEMPT_S))
        try:
            return _Attempt(admin, cluster, failed, errors, attempt_s).check(acls)
        except KafkaNotAnswering as e:
            left = deadline - time.monotonic()
            if left <= MIN_ATTEMPT_S:
                raise KafkaAccessError(
                    f"no answer from the Kafka cluster at {cluster} ({cluster.security.describe()}) within "
                    f"{timeout_s:g} s ({attempts} attempt(s), the last: {e}): check bootstrap_servers and that "
                    "kafka.security.protocol is the listener's") from None
            pause = min(pause_s, (left - MIN_ATTEMPT_S) / 2)  # the other half at least for the next attempt
            log.warning("Kafka cluster %s not answering yet (%s); retrying in %.1f s (%.0f s left)", cluster, e,
                        pause, left)
            sleep(pause)
            pause_s = min(pause_s * 2, RETRY_BACKOFF_MAX_S)


def not_answering(error: KafkaError) -> bool:
    """Whether `error` means the cluster has not answered (yet) and asking again may help: no answer in time,
    no connection, or a broker's "not now" (a controller or leader being elected, a coordinator loading). A
    definite answer (a refused login, a TLS failure, an authorization error) is not."""
    code = error.code()
    if code in _DEFINITE:
        return False
    return code in _NO_ANSWER or code in _NOT_YET or error.retriable()


class _Attempt:
    """One attempt of `check_access`, every request of it answered by `timeout_s` after it began."""

    def __init__(self, admin: AdminClient, cluster: KafkaCluster, failed: threading.Event, errors: list[KafkaError],
                 timeout_s: float) -> None:
        self.admin, self.cluster, self.failed, self.errors = admin, cluster, failed, errors
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s

    def check(self, acls: Sequence[RequiredAcl]) -> set[str]:
        admin, cluster = self.admin, self.cluster
        try:  # the login
            self._result("DescribeCluster", admin.describe_cluster(request_timeout=self.timeout_s))
        except KafkaException as e:
            if not_answering(e.args[0]):
                raise KafkaNotAnswering(f"DescribeCluster: {e.args[0].str()}") from None
            raise KafkaAccessError(f"the Kafka cluster at {cluster} refused DescribeCluster: {e.args[0].str()}") from None
        topics = sorted({a.name for a in acls if a.resource == "topic"})
        missing: list[RequiredAcl] = []
        absent: set[str] = set()
        if topics:
            futures = admin.describe_topics(TopicCollection(topics), include_authorized_operations=True,
                                            request_timeout=self.timeout_s)
            for topic, future in futures.items():
                try:
                    ops = set(self._result(f"DescribeTopics {topic}", future).authorized_operations or ())
                except KafkaException as e:
                    code = e.args[0].code()
                    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        absent.add(topic)
                        continue
                    if not_answering(e.args[0]):  # e.g. a topic whose leaders are still being elected
                        raise KafkaNotAnswering(f"DescribeTopics {topic}: {e.args[0].str()}") from None
                    if code != KafkaError.TOPIC_AUTHORIZATION_FAILED:  # not even DESCRIBE: every ACL on it is missing
                        raise KafkaAccessError(f"cannot describe topic {topic} on {cluster}: {e.args[0].str()}") from None
                    ops = set()
                missing += [a for a in acls if a.resource == "topic" and a.name == topic and not _holds(ops, a.operation)]
        for acl in (a for a in acls if a.resource == "group"):
            # A group of the prefix: without DESCRIBE on it the broker answers GROUP_AUTHORIZATION_FAILED; past
            # that check, whatever it says of a group that does not exist (not found, not coordinator) is no refusal.
            probe = cluster.group_id("access-check") if acl.prefixed else acl.name
            future = admin.describe_consumer_groups([probe], request_timeout=self.timeout_s)[probe]
            try:
                self._result("DescribeGroups", future)
            except KafkaException as e:
                if e.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    missing.append(acl)
                elif e.args[0].code() in _NO_ANSWER:  # no answer at all: nothing said of the ACL yet
                    raise KafkaNotAnswering(f"DescribeGroups: {e.args[0].str()}") from None
        if missing:
            principal = _principal(cluster)
            lines = "\n".join(f"  {a.command(cluster.bootstrap_servers, principal)}" for a in missing)
            names = ", ".join(f"{a.operation.name} on {a.resource} {a.name}{'*' if a.prefixed else ''}" for a in missing)
            raise KafkaAccessError(f"the gateway's principal {principal} lacks {len(missing)} ACL(s) on {cluster}: "
                                   f"{names}. An administrator grants them with:\n{lines}")
        return absent

    def _result(self, what: str, future: Any) -> Any:
        """The future's result, serving the client's callbacks meanwhile, so a refused login or a failed TLS
        handshake ends the wait at once instead of after the request's timeout; KafkaNotAnswering when the
        attempt's time is up first."""
        while not future.done():
            self.admin.poll(0.05)
            if self.failed.is_set():
                raise KafkaAccessError(_login_problem(self.cluster, self.errors[0]))
            if time.monotonic() > self.deadline:
                raise KafkaNotAnswering(f"{what}: no answer within {self.timeout_s:.1f} s")
        if self.failed.is_set():
            raise KafkaAccessError(_login_problem(self.cluster, self.errors[0]))
        try:
            return future.result()
        except KafkaException as e:
            if e.args[0].code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT) and self.errors:
                raise KafkaAccessError(_login_problem(self.cluster, self.errors[0])) from None
            raise


def _holds(ops: set[AclOperation], operation: AclOperation) -> bool:
    return bool(ops & {operation, AclOperation.ALL, *_IMPLIED_BY.get(operation, ())})


def _login_problem(cluster: KafkaCluster, error: KafkaError) -> str:
    security = cluster.security
    detail = error.str()
    if error.code() == KafkaError._AUTHENTICATION:
        return (f"the Kafka cluster at {cluster} refused the gateway's login ({security.describe()}): check "
                f"kafka.sasl.username and kafka.sasl.password, and that the user exists for this mechanism. "
                f"The broker said: {detail}")
    if "certificate verify failed" in detail or "could not be verified" in detail:
        return (f"the Kafka cluster's certificate at {cluster} is not trusted: kafka.ssl.ca.location must hold the "
                f"CA that signed it (and its host name must match, unless "
                f"kafka.ssl.endpoint.identification.algorithm is none). TLS said: {detail}")
    return f"TLS with the Kafka cluster at {cluster} failed ({security.describe()}): {detail}"


def _principal(cluster: KafkaCluster) -> str:
    """The principal the cluster sees, as far as the client knows it (a certificate's is the broker's mapping)."""
    security = cluster.security
    if security.username is not None:
        return f"User:{security.username}"
    return "User:<the principal of the client certificate>"
