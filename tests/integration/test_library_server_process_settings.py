"""Building and starting a server through the library changes nothing process-wide: the GC thresholds and
freeze, and the interpreter's switch interval, are `groupcoord serve`'s choices (its entry point sets them),
not a side effect on a test run or an application embedding the coordinator."""

from __future__ import annotations

import gc
import sys

from tests.integration.conftest import start_server


def test_starting_and_stopping_a_server_leaves_gc_and_the_switch_interval_as_they_were() -> None:
    before = (sys.getswitchinterval(), gc.get_freeze_count(), gc.get_threshold())
    srv = start_server({"orders": 4})
    try:
        assert (sys.getswitchinterval(), gc.get_freeze_count(), gc.get_threshold()) == before
    finally:
        srv.stop()
    assert (sys.getswitchinterval(), gc.get_freeze_count(), gc.get_threshold()) == before
