"""`groupcoord groups describe | reset-offsets | delete-offsets`: kafka-consumer-groups.sh's views and commands.

    groupcoord groups describe G [--offsets | --members [--verbose] | --state [--verbose]] [--bootstrap-server K]
    groupcoord groups reset-offsets G (--topic T[:P,...] ... | --all-topics) --to-earliest|--to-latest|
                                      --to-datetime ISO|--shift-by N|--to-offset N [--dry-run | --execute]
    groupcoord groups delete-offsets G --topic T[:P,...] ...

The columns are those of Kafka 4.x's ConsumerGroupCommand. Log end offsets and lag come from the Kafka
cluster (`--bootstrap-server`, as Kafka's tool takes it); without it those columns show "-". Resetting is
refused unless the group is inactive, with Kafka's message; deleting offsets is Kafka's OffsetDelete (the
coordinator refuses topics a member subscribes to with GROUP_SUBSCRIBED_TO_TOPIC, 86).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from groupcoord.cli_admin import _stub, _table
from groupcoord.cli_base import CliError, _short
from groupcoord.cli_kafka_offsets import KAFKA_TIMEOUT_MS, KafkaOffsets, TopicPartition, kafka_offsets

INACTIVE_STATES = {"EMPTY", "DEAD"}


# --- small helpers ------------------------------------------------------------------------------------------
def kafka_state(state: str) -> str:
    """Our STABLE / PREPARING_REBALANCE as Kafka's GroupState prints them: Stable, PreparingRebalance."""
    return "".join(w.capitalize() for w in state.split("_")) if state.isupper() else state


def _assignment(tps: Iterable[Any]) -> str:
    """Kafka's verbose ASSIGNMENT cell: topic:p,p;topic:p."""
    parts = [f"{t.topic_name or t.topic_id[:8]}:{','.join(map(str, sorted(t.partitions)))}" for t in tps
             if t.partitions]
    return ";".join(sorted(parts)) or "-"


def _count(tps: Iterable[Any]) -> int:
    return sum(len(t.partitions) for t in tps)


def _classic_assignment(member: Any) -> dict[str, list[int]]:
    """A classic member's assignment bytes, read as ConsumerProtocolAssignment (empty when they are not)."""
    from groupcoord.clients.consumer_protocol import ProtocolDecodeError, decode_assignment

    if not member.member_assignment:
        return {}
    try:
        out: dict[str, list[int]] = {}
        for topic, p in decode_assignment(member.member_assignment).partitions:
            out.setdefault(topic, []).append(p)
        return {t: sorted(ps) for t, ps in out.items()}
    except (ProtocolDecodeError, ValueError, KeyError, IndexError):
        return {}


def member_partitions(group: Any, member: Any) -> dict[str, list[int]]:
    if group.group_type == "classic":
        return _classic_assignment(member)
    return {t.topic_name or t.topic_id: sorted(t.partitions) for t in member.assignment if t.partitions}


def parse_topics(specs: Iterable[str]) -> dict[str, list[int] | None]:
    """--topic T or T:0,1,2 (Kafka's syntax); None means every partition."""
    out: dict[str, list[int] | None] = {}
    for spec in specs:
        name, sep, parts = spec.partition(":")
        if not name:
            raise CliError(f"--topic expects TOPIC or TOPIC:PARTITION,..., got {_short(spec)}")
        if not sep:
            out[name] = None
            continue
        try:
            partitions = sorted({int(p) for p in parts.split(",")})
        except ValueError:
            raise CliError(f"--topic expects TOPIC or TOPIC:PARTITION,..., got {_short(spec)}") from None
        if not partitions or partitions[0] < 0:
            raise CliError(f"--topic {_short(spec)}: partitions are non-negative integers")
        previous = out.get(name, [])
        out[name] = None if previous is None and name in out else sorted({*(previous or []), *partitions})
    return out


# --- reading the group ----------------------------------------------------------------------------------------
def _describe(stub: Any, group_id: str) -> Any:
    from groupcoord.wire.v1 import coordinator_pb2 as pb

    return stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[group_id])).groups[0]


def _committed(stub: Any, group_id: str) -> dict[TopicPartition, int]:
    from groupcoord.wire.v1 import coordinator_pb2 as pb

    resp = stub.OffsetFetch(pb.OffsetFetchRequest(group_id=group_id, member_epoch=-1))
    if resp.error_code:
        raise CliError(f"group {_short(group_id)}: error {resp.error_code}: {resp.error_message}")
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions
            if p.committed_offset >= 0 and not p.error_code}


def _coordinator(stub: Any, group_id: str) -> str:
    from groupcoord.wire.v1 import coordinator_pb2 as pb

    c = stub.FindCoordinator(pb.FindCoordinatorRequest(keys=[group_id])).coordinators[0]
    return f"{c.host}:{c.port}  ({c.node_id})" if not c.error_code else "-"


# --- describe ------------------------------------------------------------------------------------------------
def offset_rows(stub: Any, group: Any, kafka: KafkaOffsets | None) -> list[dict[str, Any]]:
    """One row per partition a member owns or the group has an offset for, as Kafka's --offsets prints."""
    committed = _committed(stub, group.group_id)
    owner: dict[TopicPartition, Any] = {}
    for m in group.members if group.group_type != "streams" else ():  # streams members own tasks, not partitions
        for topic, parts in member_partitions(group, m).items():
            for p in parts:
                owner[(topic, p)] = m
    tps = sorted(set(owner) | set(committed))
    ends = kafka.list_offsets(tps, "latest") if kafka is not None else {}
    rows = []
    for tp in tps:
        current, end, m = committed.get(tp), ends.get(tp), owner.get(tp)
        rows.append({"group": group.group_id, "topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end,
                     "lag": end - current if end is not None and current is not None and end >= 0 else None,
                     "consumer_id": m.member_id if m else None, "host": (m.client_host or None) if m else None,
                     "client_id": (m.client_id or None) if m else None})
    return rows


def share_offset_rows(stub: Any, group: Any) -> list[dict[str, Any]]:
    """A share group's partitions as kafka-share-groups.sh shows them: the share-partition start offset (records
    before it are done), plus groupcoord's in-flight, acquired and available counts."""
    from groupcoord.wire.v1 import share_pb2 as spb

    resp = stub.DescribeShareGroupOffsets(spb.DescribeShareGroupOffsetsRequest(group_id=group.group_id))
    if resp.error_code:
        raise CliError(f"{_short(group.group_id)}: error {resp.error_code}: {_short(resp.error_message)}")
    return [{"GROUP": group.group_id, "TOPIC": p.topic_name or p.topic_id, "PARTITION": p.partition,
             "START-OFFSET": p.start_offset, "END-OFFSET": p.end_offset, "IN-FLIGHT": p.in_flight,
             "ACQUIRED": p.acquired, "AVAILABLE": p.available}
            for p in sorted(resp.partitions, key=lambda p: (p.topic_name or p.topic_id, p.partition))]


def _tasks(tasks: Any) -> str:
    return " ".join(f"{t.subtopology_id}:{','.join(map(str, t.partitions))}" for t in tasks if t.partitions) or "-"


def print_streams_group(stub: Any, group_id: str) -> None:
    """A streams group's topology and each member's active, standby and warm-up tasks (StreamsGroupDescribe)."""
    from groupcoord.wire.v1 import streams_pb2 as spb

    g = stub.StreamsGroupDescribe(spb.StreamsGroupDescribeRequest(group_ids=[group_id])).groups[0]
    if g.HasField("topology"):
        print(f"topology epoch {g.topology.epoch}")
        for s in g.topology.subtopologies:
            sources = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
            changelogs = [t.name for t in s.state_changelog_topics]
            print(f"  subtopology {s.subtopology_id}: sources={','.join(sources) or '-'}  "
                  f"sinks={','.join(s.repartition_sink_topics) or '-'}  changelogs={','.join(changelogs) or '-'}")
    rows = [[m.member_id, m.process_id, str(m.member_epoch), _tasks(m.active_tasks), _tasks(m.standby_tasks),
             _tasks(m.warmup_tasks)] for m in g.members]
    print(_table(rows, ["MEMBER", "PROCESS", "EPOCH", "ACTIVE", "STANDBY", "WARMUP"]))


def member_rows(group: Any, verbose: bool) -> list[dict[str, Any]]:
    rows = []
    for m in group.members:
        parts = member_partitions(group, m)
        row: dict[str, Any] = {"group": group.group_id, "consumer_id": m.member_id, "host": m.client_host or None,
                               "client_id": m.client_id or None, "#partitions": sum(map(len, parts.values()))}
        if verbose and group.group_type == "consumer":
            row.update({"current_epoch": m.member_epoch, "current_assignment": _assignment(m.assignment),
                        "target_epoch": group.assignment_epoch,
                        "target_assignment": _assignment(m.target_assignment)})
        elif verbose:
            row["assignment"] = ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(parts.items())) or "-"
        rows.append(row)
    return rows


def state_row(stub: Any, group: Any, verbose: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"group": group.group_id, "coordinator (id)": _coordinator(stub, group.group_id),
                           "assignment-strategy": group.assignor_name or None,
                           "state": kafka_state(group.group_state)}
    if verbose:
        row.update({"group-epoch": group.group_epoch, "target-assignment-epoch": group.assignment_epoch})
    row["#members"] = len(group.members)
    return row


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def _print_rows(rows: list[dict[str, Any]], headers: list[str]) -> None:
    keys = list(rows[0]) if rows else []
    print(_table([[_cell(r[k]) for k in keys] for r in rows], headers))


def cmd_describe(args: argparse.Namespace) -> int:
    stub = _stub(args)
    kafka = kafka_offsets(args)
    view = "members" if args.members else "state" if args.state else "offsets"
    if args.verbose and view == "offsets":
        raise CliError("--verbose goes with --members or --state")
    rc, out = 0, []
    for group_id in args.group:
        g = _describe(stub, group_id)
        if g.error_code and g.error_code != 69:  # 69 GROUP_ID_NOT_FOUND: Kafka says "does not exist" below
            print(f"{g.group_id}: error {g.error_code}: {g.error_message}")
            rc = 1
            continue
        if g.error_code:
            message = f"Consumer group '{group_id}' does not exist."
            out.append({"group": group_id, "error_code": g.error_code, "error_message": message})
            if not args.json:
                print(f"Error: {message}")
            rc = 1
            continue
        if g.group_type == "streams" and not args.json:  # tasks, not partitions: the topology and task table
            print(f"group {g.group_id}  type=streams  state={g.group_state}  epoch={g.group_epoch}  "
                  f"assignment_epoch={g.assignment_epoch}")
            print_streams_group(stub, g.group_id)
            rows = offset_rows(stub, g, kafka) if view == "offsets" else []
            if rows:  # the committed offsets of the application's input topics
                print()
                _print_rows(rows, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                   "CONSUMER-ID", "HOST", "CLIENT-ID"])
            continue
        if view == "offsets" and g.group_type == "share":
            rows = share_offset_rows(stub, g)
            headers = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "IN-FLIGHT", "ACQUIRED",
                       "AVAILABLE"]
        elif view == "offsets":
            rows = offset_rows(stub, g, kafka)
            headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                       "HOST", "CLIENT-ID"]
        elif view == "members":
            rows = member_rows(g, args.verbose)
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            if args.verbose:
                headers += (["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
                            if g.group_type == "consumer" else ["ASSIGNMENT"])
        else:
            rows = [state_row(stub, g, args.verbose)]
            headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
            headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"] if args.verbose else ["#MEMBERS"]
        out.append({"group": group_id, "state": kafka_state(g.group_state), "view": view, "rows": rows,
                    "members": rows if view == "members" and args.verbose else member_rows(g, True)})
        if args.json:
            continue
        if not g.members and view != "state":
            print(f"\nConsumer group '{group_id}' has no active members.")
        print()
        _print_rows(rows, headers)
    if args.json:
        print(json.dumps(out if len(out) != 1 else out[0], indent=2))
    return rc


# --- reset-offsets -------------------------------------------------------------------------------------------
def _require_inactive(stub: Any, group_id: str) -> None:
    g = _describe(stub, group_id)
    if g.error_code and g.error_code != 69:
        raise CliError(f"group {_short(group_id)}: error {g.error_code}: {g.error_message}")
    state = "DEAD" if g.error_code else g.group_state.upper()
    if state not in INACTIVE_STATES:
        raise CliError(f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                       f"state is {kafka_state(g.group_state)}.")


def _targets(args: argparse.Namespace, committed: Mapping[TopicPartition, int],
             kafka: KafkaOffsets | None) -> list[TopicPartition]:
    """The partitions to act on: --topic T (every partition: from Kafka, or the committed ones without it),
    --topic T:0,1, or --all-topics (the partitions the group has offsets for)."""
    if args.all_topics and args.topic:
        raise CliError("--all-topics and --topic exclude each other")
    if not args.all_topics and not args.topic:
        raise CliError("say which partitions: --topic TOPIC[:PARTITION,...] (repeatable) or --all-topics")
    if args.all_topics:  # Kafka: the partitions the group has offsets for
        return sorted(committed)
    topics = parse_topics(args.topic)
    out: list[TopicPartition] = []
    for topic, parts in sorted(topics.items()):
        if parts is None:
            parts = kafka.partitions(topic) if kafka is not None else sorted(p for t, p in committed if t == topic)
            if not parts:
                raise CliError(f"group has no committed offsets for topic {_short(topic)}; name its partitions "
                               "(--topic TOPIC:0,1) or give --bootstrap-server")
        out.extend((topic, p) for p in parts)
    return out


def _parse_datetime(text: str) -> int:
    """Kafka's --to-datetime format, YYYY-MM-DDTHH:mm:SS.sss with an optional zone (UTC without one)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"--to-datetime expects YYYY-MM-DDTHH:mm:SS.sss[+HH:MM], got {_short(text)}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def new_offsets(args: argparse.Namespace, tps: list[TopicPartition], committed: Mapping[TopicPartition, int],
                kafka: KafkaOffsets | None) -> dict[TopicPartition, int]:
    """Kafka's reset rules: --shift-by and --to-offset are clamped into [log start, log end] when the cluster
    is known; --to-datetime falls back to the log end for a partition with nothing that late."""
    need_kafka = args.to_earliest or args.to_latest or args.to_datetime is not None
    if need_kafka and kafka is None:
        raise CliError("--to-earliest, --to-latest and --to-datetime read the Kafka cluster: give "
                       "--bootstrap-server HOST:PORT")
    if args.to_earliest:
        return kafka.list_offsets(tps, "earliest") if kafka else {}
    if args.to_latest:
        return kafka.list_offsets(tps, "latest") if kafka else {}
    if args.to_datetime is not None and kafka is not None:
        at = kafka.list_offsets(tps, "time", _parse_datetime(args.to_datetime))
        missing = [tp for tp, o in at.items() if o < 0]
        return {**at, **kafka.list_offsets(missing, "latest")}
    if args.shift_by is not None:
        absent = [tp for tp in tps if tp not in committed]
        if absent:
            raise CliError(f"--shift-by needs a committed offset; {absent[0][0]}-{absent[0][1]} has none")
        wanted = {tp: max(0, committed[tp] + args.shift_by) for tp in tps}
    else:
        wanted = {tp: args.to_offset for tp in tps}
    if kafka is None:
        return wanted
    starts, ends = kafka.list_offsets(tps, "earliest"), kafka.list_offsets(tps, "latest")
    return {tp: min(max(o, starts.get(tp, 0)), ends.get(tp, o)) for tp, o in wanted.items()}


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    from groupcoord.wire.v1 import coordinator_pb2 as pb

    if args.to_offset is not None and args.to_offset < 0:
        raise CliError("--to-offset expects a non-negative offset")
    stub = _stub(args)
    kafka = kafka_offsets(args)
    _require_inactive(stub, args.group)
    committed = _committed(stub, args.group)
    tps = _targets(args, committed, kafka)
    offsets = new_offsets(args, tps, committed, kafka)
    rows = [{"group": args.group, "topic": t, "partition": p, "new_offset": offsets[(t, p)]}
            for t, p in sorted(offsets)]
    rc = 0
    if args.execute:
        req = pb.OffsetCommitRequest(group_id=args.group, generation_id_or_member_epoch=-1)
        by_topic: dict[str, Any] = {}
        for (t, p), o in sorted(offsets.items()):
            topic = by_topic.get(t) or by_topic.setdefault(t, req.topics.add(name=t))
            topic.partitions.add(partition_index=p, committed_offset=o, committed_leader_epoch=-1)
        resp = stub.OffsetCommit(req)
        errors = {(t.name, p.partition_index): f"error {p.error_code}: {p.error_message}"
                  for t in resp.topics for p in t.partitions if p.error_code}
        if resp.error_code:
            raise CliError(f"group {_short(args.group)}: error {resp.error_code}: {resp.error_message}")
        for r in rows:
            r["error"] = errors.get((r["topic"], r["partition"]))
        rc = 1 if errors else 0
    if args.json:
        print(json.dumps({"group": args.group, "executed": bool(args.execute), "partitions": rows}, indent=2))
        return rc
    if not args.execute and not args.dry_run:  # Kafka's warning when neither is given
        print("WARN: No action will be performed as the --execute option is missing. In a future major release, "
              "the default behavior of this command will be to prompt the user before executing the reset "
              "rather than doing a dry run. You should add the --dry-run option explicitly if you are scripting "
              "this command and want to keep the current default behavior without prompting.")
    print()
    print(_table([[r["group"], r["topic"], str(r["partition"]), str(r["new_offset"])]
                  + ([r["error"] or "-"] if args.execute else []) for r in rows],
                 ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"] + (["ERROR"] if args.execute else [])))
    return rc


# --- delete-offsets ------------------------------------------------------------------------------------------
ERROR_NAMES = {86: "GROUP_SUBSCRIBED_TO_TOPIC", 3: "UNKNOWN_TOPIC_OR_PARTITION", 30: "GROUP_AUTHORIZATION_FAILED"}


def cmd_delete_offsets(args: argparse.Namespace) -> int:
    from groupcoord.wire.v1 import coordinator_pb2 as pb

    if not args.topic:
        raise CliError("say which offsets: --topic TOPIC[:PARTITION,...] (repeatable)")
    stub = _stub(args)
    topics = parse_topics(args.topic)
    committed: dict[TopicPartition, int] | None = None
    req = pb.OffsetDeleteRequest(group_id=args.group)
    for name, parts in sorted(topics.items()):
        if parts is None:  # every partition the group has an offset for
            committed = committed if committed is not None else _committed(stub, args.group)
            parts = sorted(p for t, p in committed if t == name)
        if parts:
            req.topics.add(name=name, partition_indexes=parts)
    resp = stub.OffsetDelete(req)
    if resp.error_code:
        message = (f"Group '{args.group}' does not exist." if resp.error_code == 69
                   else f"error {resp.error_code}: {resp.error_message}")
        if args.json:
            print(json.dumps({"group": args.group, "error_code": resp.error_code, "error_message": message}))
        else:
            print(f"Error: {message}")
        return 1
    rows = [{"topic": t.name, "partition": p.partition_index, "error_code": p.error_code,
             "status": "Successful" if not p.error_code else
             f"Error: {p.error_message or ERROR_NAMES.get(p.error_code, p.error_code)}"}
            for t in resp.topics for p in t.partitions]
    rc = 1 if any(r["error_code"] for r in rows) else 0
    if args.json:
        print(json.dumps({"group": args.group, "partitions": rows}, indent=2))
        return rc
    print("Request succeed for deleting offsets from group " + args.group + "." if not rc else
          f"Encountered some partition-level error(s) deleting offsets from group {args.group}.")
    print()
    print(_table([[r["topic"], str(r["partition"]), r["status"]] for r in rows], ["TOPIC", "PARTITION", "STATUS"]))
    return rc


# --- the parsers ---------------------------------------------------------------------------------------------
def add_parsers(gsub: Any, server: argparse.ArgumentParser, fn: Callable[[argparse.Namespace], int]) -> None:
    """`describe`, `reset-offsets`, `delete-offsets` under `groupcoord groups`; `fn` dispatches to cmd_*."""
    kafka = argparse.ArgumentParser(add_help=False)
    kafka.add_argument("--bootstrap-server", metavar="HOST:PORT",
                       help="the Kafka cluster, for LOG-END-OFFSET and LAG and the offsets of --to-earliest, "
                            "--to-latest, --to-datetime (without it: '-')")
    kafka.add_argument("--timeout", type=int, default=KAFKA_TIMEOUT_MS, metavar="MS",
                       help=f"how long to wait for the Kafka cluster (default {KAFKA_TIMEOUT_MS}, as Kafka's tool)")
    kafka.add_argument("--json", action="store_true", help="machine-readable output")
    gd = gsub.add_parser("describe", help="a group's offsets and lag, members or state (kafka-consumer-groups.sh "
                         "--describe)", parents=[server, kafka])
    gd.add_argument("group", nargs="+")
    view = gd.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets and lag per partition (the default)")
    view.add_argument("--members", action="store_true", help="one row per member")
    view.add_argument("--state", action="store_true", help="coordinator, assignor, state, member count")
    gd.add_argument("--verbose", action="store_true", help="with --members: epochs and assignments; with --state: "
                    "group and target assignment epochs")
    gd.set_defaults(fn=fn, run=cmd_describe)

    gr = gsub.add_parser("reset-offsets", help="set an inactive group's committed offsets (dry run unless "
                         "--execute)", parents=[server, kafka])
    gr.add_argument("group")
    gr.add_argument("--topic", action="append", metavar="TOPIC[:PARTITION,...]", help="repeatable")
    gr.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    to = gr.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    to.add_argument("--shift-by", type=int, metavar="N")
    to.add_argument("--to-offset", type=int, metavar="OFFSET")
    run = gr.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    gr.set_defaults(fn=fn, run=cmd_reset_offsets)

    gx = gsub.add_parser("delete-offsets", help="delete committed offsets of topics the group does not subscribe "
                         "to (Kafka's OffsetDelete)", parents=[server])
    gx.add_argument("group")
    gx.add_argument("--topic", action="append", metavar="TOPIC[:PARTITION,...]",
                    help="repeatable; without partitions, every partition with a committed offset")
    gx.add_argument("--json", action="store_true", help="machine-readable output")
    gx.set_defaults(fn=fn, run=cmd_delete_offsets)
