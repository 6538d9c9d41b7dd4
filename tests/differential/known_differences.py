"""Differences between Kafka 4.4's coordinator and groupcoord that are kept on purpose, per scenario, as
(step.field path, Kafka's value, groupcoord's value). The README lists them with their reasons."""

from __future__ import annotations

from typing import Any

KNOWN: dict[str, list[tuple[str, Any, Any]]] = {}
