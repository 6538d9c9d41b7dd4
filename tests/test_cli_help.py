"""The CLI as a newcomer meets it: `groupcoord` alone gives an overview and the first thing to try, every
command's --help ends with an example, and a usage error names the fix."""

from __future__ import annotations

import importlib

import pytest

from groupcoord import cli, cli_help

PASS_THROUGH = {"simulate", "demo", "faults"}  # their modules own their flags and --help (cli.PASS_THROUGH)


def test_groupcoord_alone_lists_every_command_and_the_first_thing_to_try(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for command in ("serve", "groups", "config", "log", "simulate", "demo", "faults", "acls"):
        assert f"\n  {command} " in out, command
    assert "First thing to try:\n  groupcoord serve --topic orders:12" in out


def test_every_command_has_an_example_in_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    paths = cli_help.commands(cli.build_parser())
    assert {"serve", "groups describe", "groups reset-offsets", "config set", "log repair", "acls check"} <= set(paths)
    for path in paths:
        if path in PASS_THROUGH:
            module = importlib.import_module(cli.PASS_THROUGH[path])
            with pytest.raises(SystemExit):
                module.main(["--help"])
        else:
            with pytest.raises(SystemExit):
                cli.main([*path.split(), "--help"])
        examples = [line.strip() for line in capsys.readouterr().out.splitlines()
                    if line.startswith("  ") and line.strip().startswith(("groupcoord ", "python -m groupcoord."))]
        invocations = (f"groupcoord {path} ", f"python -m {cli.PASS_THROUGH.get(path, '-')} ")
        assert any(e.startswith(invocations) for e in examples), f"`groupcoord {path} --help` shows no example"


def test_a_missing_subcommand_names_the_commands_and_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["groups"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "groupcoord groups: the following arguments are required: COMMAND" in err
    assert "example: groupcoord groups list" in err
    assert "see `groupcoord groups --help`" in err
    assert "groups_cmd" not in err


def test_a_usage_error_ends_with_the_commands_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["acls", "check", "--acl-file", "acls.toml"])
    err = capsys.readouterr().err
    assert "example: groupcoord acls check --acl-file acls.toml --principal User:alice" in err


def test_a_server_that_cannot_be_reached_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["groups", "list", "--server", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("groupcoord: cannot reach the coordinator at 127.0.0.1:1")
    assert "--server sets the address" in err
