"""`gateway users`: the front door's users (SCRAM credentials), written and read directly on the security topic
of the gateway's Kafka cluster, with the gateway's own credentials (`config.cluster`), no door running:

    gateway users add NAME --mechanism SCRAM-SHA-512 [--iterations 8192] --password-file FILE | --password-env VAR
    gateway users delete NAME --mechanism SCRAM-SHA-512 --yes
    gateway users list [--json]

Without `bootstrap_servers` in the config (`make run`'s embedded default), the users live on the embedded broker
that `make run` starts: the command reaches it while the gateway runs (where its server.properties says it
listens), and says so when nothing answers there.

This is how the first user of a door whose listeners are all SASL is made, as Kafka's `kafka-storage.sh format
--add-scram 'SCRAM-SHA-512=[name=admin,password=...]'` writes the first SCRAM credential into the metadata log
before any broker runs; afterwards Kafka's own `kafka-configs.sh --alter --entity-type users` through the door
does the same (AlterUserScramCredentials). The record is the one the door writes
(`front_door/security/scram_credentials.py`: salt, stored key, server key, iterations; never the password),
and every running door follows the topic, so a user added here logs in at once.

Kafka's rules: a SCRAM credential has 4096 to 16384 iterations (`ScramMechanism`); adding replaces the user's
credential for that mechanism; deleting one that does not exist is an error (RESOURCE_NOT_FOUND). The password
is never an argument (a command line is visible to every user of the host, and kept in shell histories): it
comes from a file or an environment variable.

Exit codes: 0 done; 1 `delete` of a credential the user does not have; 2 bad arguments or configuration, a
password that cannot be read, a cluster that cannot be reached or refuses the gateway (one `error:` line).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException

from embedded.local_kafka import started_address
from front_door.cluster.kafka_security_store import KafkaSecurityStore
from front_door.cluster.security_store import SecurityStoreError
from front_door.security.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramCredentials,
)
from kafka_cluster.access import KafkaAccessError, RequiredAcl, check_access, gateway_acls
from kafka_cluster.admin import create_topics
from kafka_cluster.security import SaslMechanism
from sinks.command_line import positive_seconds
from sinks.text_table import table_lines
from streaming.config import GatewayConfig, add_config_argument
from streaming.config_file import load_gateway_config
from streaming.config_rules import setting_argument
from streaming.query import security_topic_spec

# Twice Kafka's minimum (kafka-configs.sh's default when `iterations=` is left out is the minimum, 4096)
DEFAULT_ITERATIONS = 8192
DEFAULT_TIMEOUT_S = 10.0
EPILOG = ("exit status: 0 done; 1 delete: the user has no such credential; 2 bad arguments or configuration, an "
          "unreadable password, or a cluster that cannot be reached or refuses the gateway")
MECHANISM_NAMES = "|".join(m.value for m in reversed(SCRAM_MECHANISMS))


class UsersError(Exception):
    """What went wrong, in one line, and the command's exit status."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `users` command group to the `gateway` parser's subcommands."""
    users = sub.add_parser("users", help="the front door's users (SCRAM credentials) on the security topic: add, "
                           "delete, list; no door needs to run", epilog=EPILOG)
    cmds = users.add_subparsers(dest="users_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        add_config_argument(p)
        p.add_argument("--bootstrap-servers", metavar="HOST:PORT", type=setting_argument("bootstrap_servers"),
                       help="the gateway's Kafka cluster (default: the config's, else the embedded broker of a "
                       "running `make run`)")
        p.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                       help="give up on the Kafka cluster after this long (default %(default)s)")

    add = cmds.add_parser("add", help="add a user, or replace its credential for the mechanism", epilog=EPILOG)
    add.add_argument("name", help="the user (the door's principal User:NAME)")
    add.add_argument("--mechanism", required=True, metavar=MECHANISM_NAMES, help="the SCRAM mechanism")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                     help=f"PBKDF2 iterations, {MIN_ITERATIONS} to {MAX_ITERATIONS} (default %(default)s)")
    password = add.add_mutually_exclusive_group(required=True)
    password.add_argument("--password-file", type=Path, metavar="FILE",
                          help="a file holding the password (its final newline is not part of it)")
    password.add_argument("--password-env", metavar="VAR", help="an environment variable holding the password")
    common(add)
    delete = cmds.add_parser("delete", help="delete a user's credential for one mechanism", epilog=EPILOG)
    delete.add_argument("name", help="the user")
    delete.add_argument("--mechanism", required=True, metavar=MECHANISM_NAMES, help="the SCRAM mechanism")
    delete.add_argument("--yes", action="store_true", help="really delete (without it, nothing is changed)")
    common(delete)
    listing = cmds.add_parser("list", help="the users, their mechanisms and iterations (never salts or keys)",
                              epilog=EPILOG)
    listing.add_argument("--json", action="store_true", help="one JSON object per credential instead of a table")
    common(listing)


def run(args: argparse.Namespace) -> int:
    """`gateway users …`: one `error:` line on stderr and the status when anything is wrong."""
    try:
        return _run(args)
    except UsersError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status


@dataclass(frozen=True)
class Addition:
    """A credential to store, its arguments checked."""

    name: str
    mechanism: SaslMechanism
    iterations: int
    password: str


def _run(args: argparse.Namespace) -> int:
    # Every argument is checked before the cluster is reached: a typo costs no timeout.
    if args.users_command == "add":
        addition = Addition(_user(args.name), parse_mechanism(args.mechanism), check_iterations(args.iterations),
                             read_password(args.password_file, args.password_env))
        return add_user(_config(args.config, args.bootstrap_servers), addition, args.timeout)
    if args.users_command == "delete":
        user, mechanism = _user(args.name), parse_mechanism(args.mechanism)
        return delete_user(_config(args.config, args.bootstrap_servers), user, mechanism, args.yes, args.timeout)
    return list_users(_config(args.config, args.bootstrap_servers), args.json, args.timeout)


def parse_mechanism(text: str) -> SaslMechanism:
    """A SCRAM mechanism by Kafka's name (`kafka-configs.sh --add-config 'SCRAM-SHA-512=[...]'`)."""
    names = ", ".join(m.value for m in SCRAM_MECHANISMS)
    try:
        mechanism = SaslMechanism(text)
    except ValueError:
        raise UsersError(f"--mechanism: unknown mechanism {text!r}; one of {names}") from None
    if mechanism not in SCRAM_MECHANISMS:  # PLAIN logs in against the SCRAM credentials; it has none of its own
        raise UsersError(f"--mechanism: {mechanism.value} has no credentials of its own (the door checks PLAIN "
                         f"against the user's SCRAM ones); one of {names}")
    return mechanism


def check_iterations(iterations: int) -> int:
    """Kafka's bounds (`ScramMechanism.minIterations`/`maxIterations`), which the door's AlterUserScramCredentials
    enforces too."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UsersError(f"--iterations: {iterations} is outside Kafka's {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    return iterations


def read_password(path: Path | None, variable: str | None) -> str:
    """The password from a file (without its final newline, as `${file:…}` in the config) or a variable."""
    if path is not None:
        try:
            password = path.read_text().rstrip("\r\n")
        except FileNotFoundError:
            raise UsersError(f"--password-file: file {path} does not exist") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsersError(f"--password-file: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
        where = f"file {path}"
    else:
        assert variable is not None
        if variable not in os.environ:
            raise UsersError(f"--password-env: environment variable {variable} is not set")
        password, where = os.environ[variable], f"environment variable {variable}"
    if not password:  # Kafka refuses an empty password (UNACCEPTABLE_CREDENTIAL)
        raise UsersError(f"the password in {where} is empty")
    return password


def _user(name: str) -> str:
    if not name:  # Kafka: "Username must not be empty" (UNACCEPTABLE_CREDENTIAL)
        raise UsersError("the user name must not be empty")
    return name


def _config(path: Path, bootstrap_servers: str | None = None) -> GatewayConfig:
    # GatewayConfigError: a line per problem, status 2 (streaming.__main__)
    config = load_gateway_config(path, bootstrap_servers=bootstrap_servers)
    if config.bootstrap_servers:
        return config
    address = started_address(config.path(config.local_broker_dir), config.local_broker_port)
    if not _answers(address):
        raise UsersError(f"{path} has no bootstrap_servers, and no embedded broker answers on {address}: the users "
                         f"of `make run`'s door live on the broker it starts, so run this while `make run "
                         f"CONFIG={path}` runs (or name the gateway's cluster with --bootstrap-servers)")
    return config.with_overrides(bootstrap_servers=address)


def _answers(address: str, timeout_s: float = 2.0) -> bool:
    """Whether something accepts TCP connections on host:port (the embedded broker, before a client waits on it)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def _access(config: GatewayConfig, timeout_s: float, create: bool) -> bool:
    """Log in as the gateway and check READ and WRITE on the security topic (and its consumers' group prefix),
    creating the topic when `create` and it is missing; whether the topic exists afterwards. A refused login,
    an untrusted certificate, no answer or a missing ACL raise UsersError with `check_access`'s line."""
    acls = _security_acls(config)
    try:
        absent = check_access(config.cluster, acls, timeout_s)
        if config.security_topic not in absent:
            return True
        if not create:
            return False
        create_topics(config.cluster, [security_topic_spec(config)], timeout=timeout_s)
        check_access(config.cluster, acls, timeout_s)  # the ACLs of the topic just created
        return True
    except KafkaAccessError as e:
        raise UsersError(str(e)) from None  # one line, or a missing ACL's kafka-acls.sh lines below it
    except KafkaException as e:
        raise UsersError(f"security topic {config.security_topic} on {config.cluster}: {e.args[0].str()}") from None


def _security_acls(config: GatewayConfig) -> list[RequiredAcl]:
    """What the security store's clients need: READ and WRITE on the topic, READ on the gateway's group prefix
    (librdkafka's consumers look their group up even when they only assign partitions)."""
    acls = gateway_acls(config.ingress_topic, config.response_topic, config.dlq_topic, None,
                        config.consumer_group_prefix, config.security_topic)
    return [a for a in acls if a.name == config.security_topic or a.resource == "group"]


def _load(config: GatewayConfig, timeout_s: float) -> KafkaSecurityStore:
    store = KafkaSecurityStore(config.cluster, config.security_topic, timeout_ms=int(timeout_s * 1000))
    try:
        store.load()
    except SecurityStoreError as e:
        raise UsersError(str(e)) from None
    return store


def _write(store: KafkaSecurityStore, change: str, user: str, credential: ScramCredential | None,
           mechanism: SaslMechanism) -> None:
    """One change through the store the doors use (an idempotent acks=all producer): returns once the cluster
    has it."""

    async def write() -> None:
        store.start(asyncio.get_running_loop())
        credentials = ScramCredentials(store)
        if credential is None:
            await credentials.delete(user, mechanism)
        else:
            await credentials.upsert(user, credential)

    try:
        asyncio.run(write())
    except SecurityStoreError as e:
        raise UsersError(f"{change} {user}'s {mechanism.value} credential: {e}") from None
    finally:
        store.close()


def add_user(config: GatewayConfig, addition: Addition, timeout_s: float) -> int:
    _access(config, timeout_s, create=True)
    store = _load(config, timeout_s)
    replaced = ScramCredentials(store).get(addition.name, addition.mechanism) is not None
    credential = ScramCredential.from_password(addition.mechanism, addition.password, addition.iterations)
    _write(store, "storing", addition.name, credential, addition.mechanism)
    print(f"user {addition.name}: {'replaced' if replaced else 'added'} its {addition.mechanism.value} credential "
          f"({addition.iterations} iterations) on {config.security_topic}")
    return 0


def delete_user(config: GatewayConfig, user: str, mechanism: SaslMechanism, yes: bool, timeout_s: float) -> int:
    exists = _access(config, timeout_s, create=False)
    store = _load(config, timeout_s) if exists else None
    if store is None or ScramCredentials(store).get(user, mechanism) is None:
        # Kafka: "Attempt to delete a user credential that does not exist" (RESOURCE_NOT_FOUND)
        raise UsersError(f"user {user} has no {mechanism.value} credential on {config.security_topic}", status=1)
    if not yes:
        raise UsersError(f"deleting user {user}'s {mechanism.value} credential: add --yes to do it")
    _write(store, "deleting", user, None, mechanism)
    print(f"user {user}: deleted its {mechanism.value} credential on {config.security_topic}")
    return 0


def list_users(config: GatewayConfig, as_json: bool, timeout_s: float) -> int:
    """Kafka's `kafka-configs.sh --describe --entity-type users`: each user's mechanisms and iterations."""
    users: dict[str, tuple[ScramCredential, ...]] = {}
    if _access(config, timeout_s, create=False):
        store = _load(config, timeout_s)
        users = ScramCredentials(store).users()
        store.close()
    rows = [{"user": user, "mechanism": c.mechanism.value, "iterations": c.iterations}
            for user, credentials in users.items() for c in credentials]
    if as_json:
        for row in rows:
            print(json.dumps(row))
    else:
        print("\n".join(table_lines(rows, ["user", "mechanism", "iterations"],
                                    headers=["USER", "MECHANISM", "ITERATIONS"], right=("iterations",))))
    return 0
