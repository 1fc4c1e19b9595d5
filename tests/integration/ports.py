"""Ports a test names before the process that listens on them starts (a broker, a front door, a Spark UI).

They are picked below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`): the kernel hands ports
in that range to every outgoing connection and every port-0 bind of the processes running beside (the other
test worker's brokers, clients and Spark), so a port picked there can be taken before it is bound — a
standby's front door binds its ports only at takeover, minutes after they were picked.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10_000
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_low() -> int:
    try:
        return int(PORT_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def free_ports(n: int) -> int:
    """A base port with `n` consecutive ports free now, below the ephemeral range (a front door's nodes
    listen on base + i)."""
    high = _ephemeral_low() - n
    for _ in range(200):
        base = random.randrange(LOWEST, high)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports between {LOWEST} and {high + n}")


def free_port() -> int:
    return free_ports(1)
