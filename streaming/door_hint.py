"""What `gateway run` tells an operator when its front door opens: where each listener is, and one kcat line to
try. The line is for the listener a first client can use: a PLAINTEXT one while ACLs are off (it works as
written), else a SASL listener, else an SSL one, with the `-X` settings that listener needs (a user and
password, the CA of the door's certificate, a client certificate) as placeholders to fill in
(docs/security.md). A PLAINTEXT listener is the last choice once ACLs are on: its clients are User:ANONYMOUS."""

from __future__ import annotations

from collections.abc import Sequence

from front_door.security.config import FrontDoorSecurity
from front_door.security.listeners import Listener
from front_door.security.tls import ClientAuth
from kafka_cluster.security import SecurityProtocol

# Which listener the hint names, best first: without ACLs anyone may use a PLAINTEXT listener; with them only
# a principal with ACLs may, and SASL's users are the ones an operator makes first (`gateway users add`).
_OPEN_ORDER = (SecurityProtocol.PLAINTEXT, SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL,
               SecurityProtocol.SSL)
_ACL_ORDER = (SecurityProtocol.SASL_SSL, SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SSL,
              SecurityProtocol.PLAINTEXT)


def listeners_line(addresses: Sequence[tuple[Listener, str]]) -> str:
    """Each listener and node 1's advertised address on it."""
    return ", ".join(f"{listener.name} on {address}" for listener, address in addresses)


def kcat_hint(addresses: Sequence[tuple[Listener, str]], security: FrontDoorSecurity, topic: str) -> str:
    """A produce of one message and its read-back with kcat on the listener a first client can use; `addresses`:
    each listener with node 1's advertised address, in the configured order."""
    order = _ACL_ORDER if security.authorizer else _OPEN_ORDER
    listener, address = min(addresses, key=lambda pair: order.index(pair[0].protocol))
    settings = _settings(listener, security)
    client = " ".join([f"kcat -b {address}", *(f"-X {s}" for s in settings)])
    # the consume reads back the partition's last record: the one just written, where nothing else writes
    line = f"echo hello | {client} -P -t {topic} -p 0 && {client} -C -t {topic} -p 0 -o -1 -c 1 -e"
    who = _who(listener, security, topic)
    return f"try{f' ({who})' if who else ''}: {line}"


def _settings(listener: Listener, security: FrontDoorSecurity) -> list[str]:
    protocol = listener.protocol
    if protocol is SecurityProtocol.PLAINTEXT:
        return []
    settings = [f"security.protocol={protocol.value}"]
    if protocol.sasl:
        settings += [f"sasl.mechanisms={security.sasl_mechanisms[0].value}", "sasl.username=USER",
                     "sasl.password=PASSWORD"]
    if protocol.tls:
        settings.append("ssl.ca.location=CA.pem")  # the CA that signed the door's certificate
        if security.tls is not None and security.tls.client_auth_of(listener)[0] is not ClientAuth.NONE:
            settings += ["ssl.certificate.location=CLIENT.pem", "ssl.key.location=CLIENT.key"]
    return settings


def _who(listener: Listener, security: FrontDoorSecurity, topic: str) -> str:
    """Who the line is for, when it does not work as written; empty when it does."""
    if listener.protocol is SecurityProtocol.PLAINTEXT:
        return (f"as User:ANONYMOUS, once it has WRITE and READ on {topic}: ACLs are on; docs/security.md"
                if security.authorizer else "")
    what = []
    if listener.protocol.sasl:
        what.append("USER and PASSWORD of a user of the door (gateway users add, kafka-configs.sh)")
    if listener.protocol.tls:
        what.append("CA.pem: the CA of the door's certificate")
    if "ssl.certificate.location=CLIENT.pem" in _settings(listener, security):
        what.append("CLIENT.pem and CLIENT.key: a client certificate a CA of ssl.truststore.location signed")
    if security.authorizer:
        what.append(f"ACLs: WRITE and READ on {topic}")
    return "; ".join(what) + "; docs/security.md"
