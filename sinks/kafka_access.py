"""What the gateway's principal may do on its Kafka cluster: the ACLs it needs (`gateway_acls`, the one list the
docs and `gateway acls` print), and the check at start (`check_access`) that turns a refused login, an untrusted
certificate or a missing ACL into one line naming what to fix, before anything is started.

Kafka's rules (docs: "Authorization and ACLs", the operations each API needs): READ and WRITE on a topic imply
DESCRIBE; an idempotent producer needs no IDEMPOTENT_WRITE on the cluster once it may WRITE to a topic (KIP-679);
CreateTopics needs CREATE on the cluster or on the topic. The gateway's consumers assign partitions and never
commit, but librdkafka's look up their group all the same (FindCoordinator: DESCRIBE on the group, implied by
READ), so every group id the gateway uses begins with one prefix and one prefixed ACL covers them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from contract.topics import rehearsal_topic
from sinks.kafka_security import KafkaCluster


class KafkaAccessError(RuntimeError):
    """The cluster refuses the gateway: the message says what to fix."""


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
                 doors_topic: str | None = None) -> list[RequiredAcl]:
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
    ]
    if groups_topic is not None:
        acls += [RequiredAcl("topic", groups_topic, AclOperation.READ, "the front door loads its groups"),
                 RequiredAcl("topic", groups_topic, AclOperation.WRITE, "the front door stores groups and offsets")]
    if security_topic is not None:
        acls += [RequiredAcl("topic", security_topic, AclOperation.READ, "the front door loads its users and ACLs"),
                 RequiredAcl("topic", security_topic, AclOperation.WRITE, "the front door stores users and ACLs")]
    if doors_topic is not None:
        acls += [RequiredAcl("topic", doors_topic, AclOperation.READ, "each front door follows the live doors"),
                 RequiredAcl("topic", doors_topic, AclOperation.WRITE, "each front door registers and heartbeats")]
    acls.append(RequiredAcl("cluster", "kafka-cluster", AclOperation.CREATE,
                            "the gateway creates its topics at start (not needed when they exist)"))
    return acls


# READ and WRITE imply DESCRIBE; ALL implies everything (Kafka's AclOperation implication rules).
_IMPLIED_BY = {AclOperation.DESCRIBE: (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                       AclOperation.ALTER)}


def check_access(cluster: KafkaCluster, acls: Sequence[RequiredAcl], timeout_s: float = 30.0) -> set[str]:
    """Log in to the cluster and check that the principal holds the topic and group ACLs of `acls` (Kafka's
    DescribeTopics with the caller's authorized operations, KIP-430; DescribeGroups of a group id it uses). Raises `KafkaAccessError` naming the
    cause: refused credentials, a TLS failure, no answer, or every missing ACL with its command. Returns the
    topics that do not exist yet: creating them needs CREATE, which only CreateTopics itself can tell (a
    principal learns its cluster operations only with DESCRIBE on the cluster, which the gateway needs not)."""
    errors: list[KafkaError] = []
    failed = threading.Event()

    def on_error(error: KafkaError) -> None:
        if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or "SSL handshake failed" in error.str():
            errors.append(error)
            failed.set()

    admin = AdminClient(cluster.client({"error_cb": on_error, "log_level": 0}))
    deadline = time.monotonic() + timeout_s
    _result(admin, admin.describe_cluster(request_timeout=timeout_s), failed, deadline, cluster, errors)  # the login
    topics = sorted({a.name for a in acls if a.resource == "topic"})
    missing: list[RequiredAcl] = []
    absent: set[str] = set()
    if topics:
        futures = admin.describe_topics(TopicCollection(topics), include_authorized_operations=True,
                                        request_timeout=timeout_s)
        for topic, future in futures.items():
            try:
                ops = set(_result(admin, future, failed, deadline, cluster, errors).authorized_operations or ())
            except KafkaException as e:
                code = e.args[0].code()
                if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    absent.add(topic)
                    continue
                if code != KafkaError.TOPIC_AUTHORIZATION_FAILED:  # not even DESCRIBE: every ACL on it is missing
                    raise KafkaAccessError(f"cannot describe topic {topic} on {cluster}: {e.args[0].str()}") from None
                ops = set()
            missing += [a for a in acls if a.resource == "topic" and a.name == topic and not _holds(ops, a.operation)]
    for acl in (a for a in acls if a.resource == "group"):
        # A group of the prefix: without DESCRIBE on it the broker answers GROUP_AUTHORIZATION_FAILED; past
        # that check, whatever it says of a group that does not exist (not found, not coordinator) is no refusal.
        probe = cluster.group_id("access-check") if acl.prefixed else acl.name
        future = admin.describe_consumer_groups([probe], request_timeout=timeout_s)[probe]
        try:
            _result(admin, future, failed, deadline, cluster, errors)
        except KafkaException as e:
            if e.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                missing.append(acl)
    if missing:
        principal = _principal(cluster)
        lines = "\n".join(f"  {a.command(cluster.bootstrap_servers, principal)}" for a in missing)
        names = ", ".join(f"{a.operation.name} on {a.resource} {a.name}{'*' if a.prefixed else ''}" for a in missing)
        raise KafkaAccessError(f"the gateway's principal {principal} lacks {len(missing)} ACL(s) on {cluster}: "
                               f"{names}. An administrator grants them with:\n{lines}")
    return absent


def _holds(ops: set[AclOperation], operation: AclOperation) -> bool:
    return bool(ops & {operation, AclOperation.ALL, *_IMPLIED_BY.get(operation, ())})


def _result(admin: AdminClient, future: Any, failed: threading.Event, deadline: float, cluster: KafkaCluster,
            errors: list[KafkaError]) -> Any:
    """The future's result, serving the client's callbacks meanwhile, so a refused login or a failed TLS
    handshake ends the wait at once instead of after the request's timeout."""
    while not future.done():
        admin.poll(0.05)
        if failed.is_set():
            raise KafkaAccessError(_login_problem(cluster, errors[0]))
        if time.monotonic() > deadline:
            raise KafkaAccessError(f"no answer from the Kafka cluster at {cluster} "
                                   f"({cluster.security.describe()}) within the timeout: check bootstrap_servers "
                                   "and that kafka.security.protocol is the listener's")
    if failed.is_set():
        raise KafkaAccessError(_login_problem(cluster, errors[0]))
    try:
        return future.result()
    except KafkaException as e:
        if e.args[0].code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT) and errors:
            raise KafkaAccessError(_login_problem(cluster, errors[0])) from None
        raise


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
