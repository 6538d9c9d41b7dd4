"""Kafka's ACL rules over the TOML file, and the `groupcoord acls` command that checks them offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from groupcoord.coordinator.runtime.acl import AclError, AclFileWatcher, Authorizer, parse_acls
from tests.auth.conftest import write_acls

FILE = """
[[acl]]
principal = "User:alice"
operation = "READ"
resource_type = "GROUP"
pattern_type = "PREFIXED"
resource_name = "orders-"
permission = "ALLOW"

[[acl]]
principal = "User:*"
operation = "ALL"
resource_type = "GROUP"
pattern_type = "LITERAL"
resource_name = "orders-audit"
permission = "DENY"

[[acl]]
principal = "User:ops"
operation = "ALTER_CONFIGS"
resource_type = "GROUP"
pattern_type = "LITERAL"
resource_name = "*"
permission = "ALLOW"
"""


def test_kafka_rules_prefix_wildcard_implication_and_deny_wins() -> None:
    auth = Authorizer(parse_acls(FILE))
    assert auth.allowed("User:alice", "READ", "orders-eu")
    assert auth.allowed("User:alice", "DESCRIBE", "orders-eu")  # READ implies DESCRIBE
    assert not auth.allowed("User:alice", "DESCRIBE", "orders-eu", implied=False)
    assert not auth.allowed("User:alice", "DELETE", "orders-eu")
    assert not auth.allowed("User:alice", "READ", "billing")  # deny by default
    assert not auth.allowed("User:alice", "READ", "orders-audit")  # DENY ALL on User:* wins
    assert auth.allowed("User:ops", "DESCRIBE_CONFIGS", "anything")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not auth.allowed("User:ops", "DESCRIBE", "anything")
    assert not auth.allowed("User:ops", "DESCRIBE_CONFIGS", "orders-audit")


def test_deny_of_read_does_not_deny_the_describe_it_would_imply() -> None:
    acls = parse_acls('[[acl]]\nprincipal="User:a"\noperation="ALL"\nresource_name="g"\n'
                      '[[acl]]\nprincipal="User:a"\noperation="READ"\nresource_name="g"\npermission="DENY"\n')
    auth = Authorizer(acls)
    assert not auth.allowed("User:a", "READ", "g")
    assert auth.allowed("User:a", "DESCRIBE", "g")  # as Kafka: a DENY implies nothing


@pytest.mark.parametrize("text, fragment", [
    ('[[acl]]\nprincipal="alice"\noperation="READ"\nresource_name="g"\n', "User:NAME"),
    ('[[acl]]\nprincipal="User:a"\noperation="WRITE"\nresource_name="g"\n', "operation 'WRITE'"),
    ('[[acl]]\nprincipal="User:a"\noperation="READ"\nresource_type="TOPIC"\nresource_name="g"\n', "GROUP"),
    ('[[acl]]\nprincipal="User:a"\noperation="READ"\nresource_name="g"\npermision="DENY"\n', "unknown field"),
    ('[[acl]\n', "not valid TOML"),
])
def test_bad_entries_are_refused_with_the_entry_and_field(text: str, fragment: str) -> None:
    with pytest.raises(AclError, match=fragment.replace("(", r"\(")):
        parse_acls(text)


def test_watcher_keeps_previous_acls_when_the_file_turns_bad(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "acls.toml"
    write_acls(path, ("User:a", "READ", "LITERAL:g", "ALLOW"))
    auth = Authorizer()
    watcher = AclFileWatcher(path, auth)
    assert auth.allowed("User:a", "READ", "g")
    path.write_text("")  # an editor's truncation, caught before the new content: not applied at once
    watcher.poll()
    assert auth.allowed("User:a", "READ", "g")
    path.write_text("[[acl]]\nprincipal = 'User:a'\n")
    for _ in range(4):
        watcher.poll()
    assert auth.allowed("User:a", "READ", "g")
    assert len([r for r in caplog.records if "not reloaded" in r.getMessage()]) == 1
    write_acls(path, ("User:b", "READ", "LITERAL:g", "ALLOW"), ("User:b", "DELETE", "LITERAL:g", "ALLOW"))
    watcher.poll()
    assert auth.allowed("User:a", "READ", "g")  # seen once: applied when it is still the same at the next poll
    watcher.poll()
    assert not auth.allowed("User:a", "READ", "g") and auth.allowed("User:b", "DELETE", "g")


def test_acls_check_command_prints_the_decision_and_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "acls.toml"
    path.write_text(FILE)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "groupcoord", "acls", *args, "--acl-file", str(path)],
                              capture_output=True, text=True, timeout=60)

    allowed = run("check", "--principal", "User:alice", "--operation", "read", "--group", "orders-eu")
    assert allowed.returncode == 0
    assert allowed.stdout.startswith("ALLOWED") and "PREFIXED 'orders-'" in allowed.stdout
    denied = run("check", "--principal", "User:alice", "--operation", "READ", "--group", "orders-audit")
    assert denied.returncode == 1
    assert denied.stdout.startswith("DENIED") and "DENY User:* ALL" in denied.stdout
    nothing = run("check", "--principal", "User:bob", "--operation", "READ", "--group", "x")
    assert nothing.returncode == 1 and "deny by default" in nothing.stdout
    listed = run("list")
    assert listed.returncode == 0 and "3 ACLs" in listed.stdout
