"""`groupcoord groups list | delete` and `groupcoord config get | set`: calls to a running coordinator, and
what they share with cli_groups.py's commands (the stub that turns a gRPC failure into one line, the table).

Kept apart from cli.py (the parsers and `main`) and cli_serve.py (the server): these commands only talk to a
server over gRPC, with the client's credentials.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from groupcoord.cli_base import CliError, _parse_set, _short

ADMIN_TIMEOUT_S = 10
ADMIN_MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # the server's default groupcoord.response.max.bytes


class _Stub:
    """The generated stub, with every call's gRPC failure turned into one `CliError` line."""

    def __init__(self, server: str, credentials: Any = None) -> None:
        from groupcoord.clients.credentials import NO_CREDENTIALS
        from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
        from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc
        from groupcoord.wire.v1 import streams_pb2_grpc

        self.server = server
        channel = (credentials or NO_CREDENTIALS).channel(server, options=[
            ("grpc.max_receive_message_length", ADMIN_MAX_RESPONSE_BYTES)])
        self._stub = pb_grpc.GroupCoordinatorStub(channel)
        self._share = spb_grpc.ShareGroupCoordinatorStub(channel)
        self._streams = streams_pb2_grpc.StreamsGroupCoordinatorStub(channel)

    def __getattr__(self, method: str) -> Any:
        import grpc

        call = (getattr(self._streams, method) if method.startswith("StreamsGroup")
                else getattr(self._stub, method, None) or getattr(self._share, method))

        def invoke(request: Any) -> Any:
            try:
                return call(request, timeout=ADMIN_TIMEOUT_S)
            except grpc.RpcError as e:
                code = e.code() if isinstance(e, grpc.Call) else None
                if code is grpc.StatusCode.UNAVAILABLE:
                    raise CliError(f"cannot reach the coordinator at {self.server} (is it running? --server "
                                   "sets the address)") from None
                if code is grpc.StatusCode.UNAUTHENTICATED:
                    raise CliError(f"{self.server} refused the credentials: {_short(e.details() or '', 200)} "
                                   "(--tls-cert/--tls-key, or --token / $GROUPCOORD_TOKEN)") from None
                if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise CliError(f"no answer from the coordinator at {self.server} within {ADMIN_TIMEOUT_S} s")\
                        from None
                details = e.details() if isinstance(e, grpc.Call) else str(e)
                raise CliError(f"{self.server}: {code.name if code else 'error'}: {_short(details or '', 200)}")\
                    from None
        return invoke


def _stub(args: argparse.Namespace) -> Any:
    from groupcoord.clients.credentials import Credentials

    try:
        credentials = Credentials.from_files(args.tls_ca, args.tls_cert, args.tls_key, args.token)
    except (OSError, ValueError) as e:
        raise CliError(f"credentials: {e}") from None
    return _Stub(args.server, credentials)


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def cmd_groups(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from groupcoord.wire.v1 import coordinator_pb2 as pb

    if getattr(args, "run", None) is not None:  # describe, reset-offsets, delete-offsets: cli_groups.py
        return int(args.run(args))
    stub = _stub(args)
    if args.groups_cmd == "list":
        resp = stub.ListGroups(pb.ListGroupsRequest(states_filter=args.state or [], types_filter=args.type or []))
        if args.json:
            print(json.dumps(MessageToDict(resp, preserving_proto_field_name=True), indent=2))
        else:
            print(_table([[g.group_id, g.group_type, g.group_state] for g in resp.groups], ["GROUP", "TYPE", "STATE"]))
        return 1 if resp.error_code else 0
    if args.groups_cmd == "delete":
        resp = stub.DeleteGroups(pb.DeleteGroupsRequest(group_ids=args.group))
        rc = 0
        for r in resp.results:
            print(f"{r.group_id}: " + ("deleted" if not r.error_code else f"error {r.error_code}: {r.error_message}"))
            rc |= int(bool(r.error_code))
        return rc
    raise AssertionError(args.groups_cmd)


def cmd_config(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from groupcoord.wire.v1 import coordinator_pb2 as pb

    stub = _stub(args)
    if args.config_cmd == "get":
        resp = stub.DescribeGroupConfigs(pb.DescribeGroupConfigsRequest(group_ids=[args.group]))
        if args.json:
            print(json.dumps(MessageToDict(resp, preserving_proto_field_name=True), indent=2))
            return 0
        r = resp.results[0]
        if r.error_code:
            print(f"error {r.error_code}: {r.error_message}")
            return 1
        print(_table([[c.name, c.value or "(not set)", "default" if c.is_default else "group override"]
                      for c in r.configs], ["NAME", "VALUE", "SOURCE"]))
        return 0
    if args.config_cmd == "set":
        req = pb.AlterGroupConfigsRequest(group_id=args.group, validate_only=args.validate_only)
        for name, value in _parse_set(args.pairs).items():
            req.configs.add(name=name, value=value)
        for name in args.delete or []:
            req.configs.add(name=name)
        resp = stub.AlterGroupConfigs(req)
        if resp.error_code:
            print(f"error {resp.error_code}: {resp.error_message}")
            return 1
        print("validated" if args.validate_only else "updated")
        return 0
    raise AssertionError(args.config_cmd)

