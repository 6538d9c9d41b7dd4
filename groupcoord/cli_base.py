"""What every `groupcoord` command shares: the error a user can fix, and how a value is quoted in one.

Kept apart from cli.py so that the modules of the commands (cli_serve, cli_admin, cli_groups, acls_cli) import
it without importing the parser that imports them: the dependency runs one way, from cli.py down.
"""

from __future__ import annotations

from collections.abc import Sequence


class CliError(Exception):
    """A mistake the user can fix: `main` prints it as one line `groupcoord: ...` and exits 1."""


def _short(value: str, limit: int = 64) -> str:
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}..."


def _parse_set(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise CliError(f"--set expects key=value, got {_short(item)}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out

