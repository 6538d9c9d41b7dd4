"""`groupcoord acls`: read an ACL file as the server would, and ask it one question.

    groupcoord acls list --acl-file acls.toml
    groupcoord acls check --acl-file acls.toml --principal User:alice --operation READ --group orders

`check` prints ALLOWED or DENIED and the entry that decided (exit 0 when allowed, 1 when denied), so an
operator can test a change to the file before the server reloads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from groupcoord.coordinator.runtime.acl import OPERATIONS, AclError, Authorizer, load_acls


def add_parser(sub: Any) -> None:
    a = sub.add_parser("acls", help="list the ACLs of a file, or check what they allow")
    asub = a.add_subparsers(dest="acls_cmd", required=True)
    al = asub.add_parser("list", help="the ACLs of a file, one a line, as the server reads them")
    al.add_argument("--acl-file", required=True)
    ac = asub.add_parser("check", help="ALLOWED or DENIED for one principal, operation and group")
    ac.add_argument("--acl-file", required=True)
    ac.add_argument("--principal", required=True, help="e.g. User:alice")
    ac.add_argument("--operation", required=True, type=str.upper, choices=OPERATIONS[:-1])
    ac.add_argument("--group", required=True)
    a.set_defaults(fn=cmd_acls)


def cmd_acls(args: argparse.Namespace) -> int:
    from groupcoord.cli_base import CliError

    try:
        acls = load_acls(Path(args.acl_file))
    except AclError as e:
        raise CliError(f"{args.acl_file}: {e}") from None
    if args.acls_cmd == "list":
        for acl in acls:
            print(acl)
        print(f"{len(acls)} ACLs")
        return 0
    decision = Authorizer(acls).decide(args.principal, args.operation, args.group)
    verdict = "ALLOWED" if decision.allowed else "DENIED"
    print(f"{verdict}: {args.principal} {args.operation} group {args.group!r}: "
          + (f"by {decision.acl}" if decision.acl else "no ACL allows it (deny by default)"))
    return 0 if decision.allowed else 1
