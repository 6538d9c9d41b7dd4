"""The launcher of the real Kafka broker for tests."""

from __future__ import annotations

import socket
import threading

import pytest

from groupcoord.kafka_broker import KafkaBroker, PortInUse, new_cluster_id


def test_a_kraft_cluster_id_never_starts_with_a_dash_that_the_storage_tool_would_read_as_an_option() -> None:
    ids = [new_cluster_id() for _ in range(2000)]  # about 31 of 2,000 plain ids would start with "-"
    assert all(not i.startswith("-") and len(i) == 22 for i in ids)


@pytest.mark.timeout(180)
def test_a_node_restarted_while_another_process_holds_its_port_starts_once_the_port_is_free() -> None:
    # Its ports are fixed by the quorum's voters; while it was down, anything could take one (another suite's
    # outgoing connection, a free-port pick). Kafka exits without a word; the launcher probes and tries again.
    with KafkaBroker(1) as broker:
        port = broker.node_ports(1)[0]
        broker.kill_node(1)
        holder = socket.socket()
        # The killed node's connections may leave the port in TIME_WAIT: SO_REUSEADDR binds through that, and
        # listening keeps Kafka (which binds with SO_REUSEADDR too) off the port until the holder closes.
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
        release = threading.Timer(8.0, holder.close)
        release.start()
        try:
            broker.restart_node(1)
        finally:
            release.cancel()
            holder.close()
        assert len(broker.admin.list_topics(timeout=10).brokers) == 1


@pytest.mark.timeout(120)
def test_a_node_that_exits_because_a_listener_port_is_taken_says_which_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse) as raised:
            KafkaBroker(1, extra_listeners={"EXTRA": [(port, port)]})
    assert raised.value.ports == [port]
