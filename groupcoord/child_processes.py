"""Child processes of tests, benchmarks and the demo (Kafka brokers, Spark daemons): the free loopback ports they
listen on, and a command line that makes them die with this process."""

from __future__ import annotations

import shutil
import socket


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (held open together so none repeats)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ports_in_use(ports: list[int]) -> list[int]:
    """Those of `ports` something listens on or holds now (a bind with SO_REUSEADDR fails, as a server's would):
    a child that exited at start-up without saying why (a Kafka node without an SLF4J binding) lost a port
    picked by `free_ports` to another process between the pick and its bind."""
    taken = []
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                taken.append(port)
    return taken


def die_with_parent(command: list[str]) -> list[str]:
    """`command` run so that the JVM gets SIGKILL when this process dies (Linux's PR_SET_PDEATHSIG, set by
    util-linux's `setpriv` before it execs the JVM), so no broker outlives a killed pytest. Not by a
    `preexec_fn`: that makes Python fork rather than vfork, and in a process with gRPC's threads the fork ran
    gRPC's fork handlers in the child, whose restarted poller died on a closed descriptor before the exec
    (a node that exited with SIGABRT, once in a suite run). Without `setpriv`, the command as it is."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *command] if setpriv else command
