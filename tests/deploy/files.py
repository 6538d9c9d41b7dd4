"""Readers for the deployment files (compose, Dockerfiles, Prometheus, Grafana) and a small PromQL scanner.

The tests compare these files with the code: commands are parsed by the code's own argparse parsers, ports
are read from the parsed commands, metric names from a real scrape. Nothing here knows the expected values.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DASHBOARD_FILE = REPO / "deploy" / "grafana" / "dashboards" / "groupcoord.json"
DATASOURCES_DIR = REPO / "deploy" / "grafana" / "provisioning" / "datasources"
DASHBOARD_PROVIDERS_DIR = REPO / "deploy" / "grafana" / "provisioning" / "dashboards"
DOCKERIGNORE = REPO / ".dockerignore"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def compose() -> dict[str, Any]:
    data = load_yaml(COMPOSE_FILE)
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), f"{COMPOSE_FILE}: no services"
    return data


def service(name: str) -> dict[str, Any]:
    services = compose()["services"]
    assert name in services, f"docker-compose.yml has no service {name!r}; it has {sorted(services)}"
    svc = services[name]
    assert isinstance(svc, dict)
    return svc


def argv(value: Any) -> list[str]:
    """A compose `command`/`entrypoint` (list or string) as an argv list."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def environment(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def container_ports(svc: dict[str, Any]) -> set[int]:
    """Container-side ports a service publishes (`ports`) or exposes to the network (`expose`)."""
    out: set[int] = set()
    for entry in svc.get("ports") or []:
        if isinstance(entry, dict):
            out.add(int(entry["target"]))
        else:
            out.add(int(str(entry).split("/")[0].rsplit(":", 1)[-1]))
    for entry in svc.get("expose") or []:
        out.add(int(str(entry).split("/")[0]))
    return out


def bind_mounts(svc: dict[str, Any]) -> list[tuple[Path, str]]:
    """(host path, container path) of bind mounts (host paths starting with . or /)."""
    out: list[tuple[Path, str]] = []
    for entry in svc.get("volumes") or []:
        if isinstance(entry, dict):
            if entry.get("type") == "bind":
                out.append(((REPO / entry["source"]).resolve(), entry["target"]))
            continue
        source, target = str(entry).split(":")[:2]
        if source.startswith((".", "/")):
            out.append(((REPO / source).resolve(), target))
    return out


def groupcoord_argv() -> list[str]:
    """The coordinator container's full argv: the compose entrypoint (or the image's) plus its command."""
    svc = service("groupcoord")
    entrypoint = argv(svc.get("entrypoint"))
    if not entrypoint:
        instruction = dockerfile(svc["build"]["dockerfile"]).last("ENTRYPOINT")
        assert instruction is not None, "the coordinator image has no ENTRYPOINT"
        entrypoint = instruction.exec_form()
    return entrypoint + argv(svc["command"])


def flag(command: list[str], name: str) -> str:
    assert name in command, f"{name} missing from {command}"
    return command[command.index(name) + 1]


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


# --- Dockerfiles ------------------------------------------------------------------------------------------
@dataclass
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        """The JSON (exec) form of CMD/ENTRYPOINT/HEALTHCHECK CMD; shell form is split like a shell would."""
        text = self.args
        if self.keyword == "HEALTHCHECK":
            text = re.sub(r"^(--\S+\s+)*CMD\s+", "", text)
        text = text.strip()
        if text.startswith("["):
            value = json.loads(text)
            assert isinstance(value, list)
            return [str(v) for v in value]
        return shlex.split(text)


@dataclass
class Dockerfile:
    path: Path
    preamble: list[Instruction] = field(default_factory=list)  # ARGs before the first FROM
    stages: list[list[Instruction]] = field(default_factory=list)

    @property
    def final(self) -> list[Instruction]:
        return self.stages[-1]

    def last(self, keyword: str) -> Instruction | None:
        found = [i for i in self.final if i.keyword == keyword]
        return found[-1] if found else None

    def all(self, keyword: str) -> list[Instruction]:
        return [i for stage in [self.preamble, *self.stages] for i in stage if i.keyword == keyword]


def dockerfile(name: str) -> Dockerfile:
    path = REPO / name
    text = re.sub(r"\\\n", " ", path.read_text())
    df = Dockerfile(path)
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            df.stages.append([])
        instruction = Instruction(keyword, re.sub(r"\s+", " ", rest).strip())
        (df.stages[-1] if df.stages else df.preamble).append(instruction)
    assert df.stages, f"{name}: no FROM"
    return df


def dockerignore_patterns() -> list[str]:
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def dockerignored(relpath: str, patterns: list[str]) -> bool:
    """Whether `relpath` (or a folder above it) is excluded by .dockerignore (no `!` exceptions are used)."""
    parts = Path(relpath).parts
    for i in range(1, len(parts) + 1):
        candidate = "/".join(parts[:i])
        for pattern in patterns:
            assert not pattern.startswith("!"), "update dockerignored() for exception patterns"
            if fnmatch.fnmatchcase(candidate, pattern) or (
                    pattern.startswith("**/") and fnmatch.fnmatchcase(parts[i - 1], pattern[3:])):
                return True
    return False


# --- PromQL -----------------------------------------------------------------------------------------------
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
             "offset", "inf", "nan"}
_SELECTOR = re.compile(r"(?<![\w:$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?(\s*\()?")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


@dataclass(frozen=True)
class Selector:
    metric: str
    matchers: tuple[tuple[str, str, str], ...]  # (label, op, value)


@dataclass(frozen=True)
class Query:
    selectors: tuple[Selector, ...]
    grouping_labels: frozenset[str]  # labels named in by/without/on/ignoring clauses

    @property
    def metrics(self) -> set[str]:
        return {s.metric for s in self.selectors}


def parse_promql(expr: str) -> Query:
    """Metric selectors and grouping labels of a PromQL expression: enough to check names against a scrape.

    Functions and aggregations (an identifier followed by `(`), keywords, grouping clauses, range durations
    and Grafana variables ($__rate_interval) are not metric names.
    """
    grouping: set[str] = set()
    for m in _GROUPING.finditer(expr):
        grouping.update(label.strip() for label in m.group(1).split(",") if label.strip())
    text = _GROUPING.sub(" ", expr)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)
    selectors = []
    for m in _SELECTOR.finditer(text):
        name, braces, call = m.group(1), m.group(2), m.group(3)
        if call and not braces or name.lower() in _KEYWORDS:
            continue
        matchers = tuple(_MATCHER.findall(braces or ""))
        selectors.append(Selector(name, matchers))
    return Query(tuple(selectors), frozenset(grouping))


def dashboard_targets(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(panel title, target) for every query of every panel, rows' nested panels included."""
    out: list[tuple[str, dict[str, Any]]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            for target in panel.get("targets") or []:
                out.append((str(panel.get("title")), target))
            walk(panel.get("panels") or [])

    walk(dashboard.get("panels") or [])
    return out
