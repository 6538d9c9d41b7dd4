"""What a newcomer sees of the CLI: the overview `groupcoord` prints alone, an example at the end of every
command's `--help`, and argparse errors that say how to fix them.

Kept apart from cli.py (which builds the parsers) so the texts are in one place: `add_examples` walks the
finished parser tree and gives every command its example from `EXAMPLES`; tests/test_cli_help.py checks that
no command lacks one.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

# Command path -> example lines (shown under "example:" at the end of its --help, and after a usage error).
EXAMPLES: dict[str, str] = {
    "serve": "groupcoord serve --topic orders:12 --http-port 8080   # then open http://127.0.0.1:8080/\n"
             "groupcoord serve --embedded-kafka --topic orders:12 --state-dir state/",
    "groups": "groupcoord groups list\n"
              "groupcoord groups describe my-group --members --verbose",
    "groups list": "groupcoord groups list --state STABLE --json",
    "groups describe": "groupcoord groups describe my-group --bootstrap-server localhost:9092   # offsets and lag",
    "groups reset-offsets": "groupcoord groups reset-offsets my-group --all-topics --to-earliest "
                            "--bootstrap-server localhost:9092 --execute",
    "groups delete-offsets": "groupcoord groups delete-offsets my-group --topic audit:0,1",
    "groups delete": "groupcoord groups delete old-group other-old-group",
    "config": "groupcoord config get my-group\n"
              "groupcoord config set my-group consumer.assignment.interval.ms=0",
    "config get": "groupcoord config get my-group --json",
    "config set": "groupcoord config set my-group consumer.heartbeat.interval.ms=6000 --validate-only\n"
                  "groupcoord config set my-group --delete consumer.heartbeat.interval.ms",
    "log": "groupcoord log check state/",
    "log check": "groupcoord log check state/   # exit 1 if damaged",
    "log repair": "groupcoord log repair state/ --yes   # stop the server first",
    "acls": "groupcoord acls list --acl-file acls.toml",
    "acls list": "groupcoord acls list --acl-file deploy/tls/acls.toml",
    "acls check": "groupcoord acls check --acl-file acls.toml --principal User:alice --operation READ --group orders",
}

FIRST_STEPS = """\
First thing to try:
  groupcoord serve --topic orders:12 --http-port 8080   # a coordinator; open http://127.0.0.1:8080/
  groupcoord groups list                                # in a second terminal: the groups it coordinates

Every command has --help with an example. The documentation: docs/index.md (`make docs` builds the site)."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors end with the command's example and where to read more."""

    def error(self, message: str) -> NoReturn:
        example = EXAMPLES.get(self.prog.removeprefix("groupcoord").strip())
        lines = [f"{self.prog}: {message}"]
        if example:
            lines.append("example: " + example.replace("\n", "\n         "))
        lines.append(f"see `{self.prog} --help`")
        self.print_usage(sys.stderr)
        self.exit(2, "\n".join(lines) + "\n")


SubParsers = argparse._SubParsersAction  # noqa: SLF001 - argparse has no public walk of its subcommands


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[SubParsers, dict[str, argparse.ArgumentParser]]]:
    return [(a, a.choices) for a in parser._actions if isinstance(a, SubParsers)]  # noqa: SLF001


def commands(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command and subcommand below `parser`, by path ("groups describe")."""
    out: dict[str, argparse.ArgumentParser] = {}
    for _, choices in _subcommands(parser):
        for name, sub in choices.items():
            here = f"{path} {name}".strip()
            out[here] = sub
            out.update(commands(sub, here))
    return out


def add_examples(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every command its example, and name subcommand choices COMMAND in errors (not `groups_cmd`)."""
    for action, choices in _subcommands(parser):
        action.metavar = "COMMAND"
        action.help = "one of: " + ", ".join(choices)
    for path, sub in commands(parser).items():
        for action, choices in _subcommands(sub):
            action.metavar = "COMMAND"
            action.help = "one of: " + ", ".join(choices)
        if path in EXAMPLES:
            sub.epilog = "example:\n  " + EXAMPLES[path].replace("\n", "\n  ")
            sub.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def overview(parser: argparse.ArgumentParser) -> str:
    """What `groupcoord` alone prints: the commands with their one-line help, and the first thing to try."""
    rows = []
    for action, _ in _subcommands(parser):
        for choice in action._choices_actions:  # noqa: SLF001 - the one-line help of each command
            rows.append(f"  {choice.dest:<10} {choice.help}")
    return ("groupcoord: a Kafka group coordinator as a gRPC service (KIP-848 consumer groups, classic, share "
            "and streams groups).\n\nCommands:\n" + "\n".join(rows) + "\n\n" + FIRST_STEPS)
