"""Fixtures every test folder may use: the real Kafka broker is one per session, shared by tests/kafka,
tests/sharding and tests/realkafka (see tests/realkafka/fixtures.py)."""

pytest_plugins = ["tests.realkafka.fixtures"]
