"""`groupcoord serve` refuses state-topic flags that cannot work, before starting anything."""

from __future__ import annotations

import pytest

from groupcoord import cli


@pytest.mark.parametrize(("flags", "message"), [
    (["--state-topic", "s", "--state-dir", "/tmp/x", "--bootstrap-servers", "k:9092"], "choose one"),
    (["--state-topic", "s"], "--state-topic needs --bootstrap-servers"),
    (["--state-topic", "s", "--bootstrap-servers", "k:9092", "--state-partitions", "0"], "must be positive"),
    (["--state-topic", "s", "--bootstrap-servers", "k:9092", "--state-lease-margin-ms", "10000"],
     "--state-lease-margin-ms must be at least 0 and below --state-session-timeout-ms"),
    (["--state-topic", "s", "--bootstrap-servers", "k:9092", "--advertised-listener", "nohost"],
     "expected HOST:PORT"),
])
def test_serve_refuses_state_topic_flags_that_cannot_work(flags: list[str], message: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--listen", "127.0.0.1:0", *flags]) == 2
    assert message in capsys.readouterr().err
