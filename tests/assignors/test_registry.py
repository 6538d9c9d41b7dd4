"""The assignor registry: what consumer groups may name, and a safe first load from several threads."""

from __future__ import annotations

import pytest

from groupcoord.assignors.registry import get_server_assignor, server_assignor_names
from groupcoord.coordinator.core.config import BrokerConfig, ConfigError


def test_the_share_only_simple_assignor_cannot_serve_consumer_groups() -> None:
    assert get_server_assignor("simple").name == "simple"  # registered, for offloaded share runs
    assert "simple" not in server_assignor_names()
    with pytest.raises(ConfigError, match="unknown assignor"):
        BrokerConfig.from_mapping({"group.consumer.assignors": ["simple"]})
