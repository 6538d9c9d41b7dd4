"""The runnable shell and Python blocks of README.md and docs/*.md, and a runner that runs a page's blocks in order.

A block is runnable when the line before its fence is an HTML comment starting with `runnable` (invisible on
GitHub and in the MkDocs site):

    <!-- runnable -->
    ```bash
    groupcoord simulate --quick
    ```

Options, after the word `runnable` (shell-quoted):

- `timeout=SECONDS` (default 60): a block must end within it (exit 0); a background block must be ready by then.
- `expect="TEXT"`: the block's output (stdout and stderr together) must contain TEXT (repeatable).
- `background ready="TEXT"`: for a command that serves until stopped (`groupcoord serve`, a Kafka broker, a
  member that stays in its group): the block passes once TEXT shows in its output, then keeps running while
  the page's later blocks run (they can talk to it), and must still be running at the page's end, where it gets
  SIGTERM.

`bash`, `sh` and `console` blocks run with `bash -eo pipefail`; `python` blocks with the virtualenv's python.
Every block of a page runs in one fresh working directory, in order, with the virtualenv's `bin` first on PATH
(so `groupcoord` is the checkout's), as a reader who followed the README would run them. tests/docs/
test_runnable_commands.py runs every page in its own network namespace, so the documented default ports
(50051, 8080, ...) are free whatever else runs on the machine.

Run a page by hand: `python -m tests.docs.runnable README.md` (prints each block's result).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = 60.0
SHELLS = {"bash", "sh", "console", "shell"}
_MARK = re.compile(r"^\s*<!--\s*runnable\b(?P<opts>.*?)-->\s*$")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")


class RunnableSyntaxError(ValueError):
    """A `<!-- runnable ... -->` mark that does not stand before a fenced block, or an unknown option."""


@dataclass(frozen=True, slots=True)
class Block:
    path: Path
    line: int  # 1-based line of the block's first code line
    lang: str
    code: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    expect: tuple[str, ...] = ()
    background: bool = False
    ready: str | None = None

    @property
    def where(self) -> str:
        try:
            return f"{self.path.relative_to(REPO)}:{self.line}"
        except ValueError:
            return f"{self.path}:{self.line}"


def _options(path: Path, line: int, text: str) -> dict[str, object]:
    out: dict[str, object] = {"expect": []}
    for word in shlex.split(text):
        key, sep, value = word.partition("=")
        if key == "background" and not sep:
            out["background"] = True
        elif key == "timeout" and sep:
            out["timeout_s"] = float(value)
        elif key == "expect" and sep:
            out["expect"].append(value)  # type: ignore[attr-defined]
        elif key == "ready" and sep:
            out["ready"] = value
        else:
            raise RunnableSyntaxError(f"{path}:{line}: unknown runnable option {word!r} "
                                      "(timeout=S, expect=TEXT, background, ready=TEXT)")
    if out.get("background") and not out.get("ready"):
        raise RunnableSyntaxError(f"{path}:{line}: a background block needs ready=TEXT")
    out["expect"] = tuple(out["expect"])  # type: ignore[arg-type]
    return out


def extract(path: Path, text: str | None = None) -> list[Block]:
    """The runnable blocks of one Markdown file, in order."""
    lines = (path.read_text() if text is None else text).splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        mark = _MARK.match(lines[i])
        if not mark:
            i += 1
            continue
        options = _options(path, i + 1, mark.group("opts"))
        fence = _FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if fence is None:
            raise RunnableSyntaxError(f"{path}:{i + 1}: <!-- runnable --> must stand right before a fenced block")
        lang = fence.group("lang").lower()
        if lang not in SHELLS and lang != "python":
            raise RunnableSyntaxError(f"{path}:{i + 2}: runnable blocks are bash, sh, console or python, "
                                      f"not {lang or 'unlabelled'}")
        indent, close = fence.group("indent"), fence.group("fence")
        body: list[str] = []
        j = i + 2
        while j < len(lines) and not lines[j].strip().startswith(close):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        if j == len(lines):
            raise RunnableSyntaxError(f"{path}:{i + 2}: the fenced block is not closed")
        blocks.append(Block(path, i + 3, lang, "\n".join(body) + "\n", **options))  # type: ignore[arg-type]
        i = j + 1
    return blocks


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@dataclass(slots=True)
class Result:
    where: str
    ok: bool
    seconds: float
    message: str = ""
    output: str = field(default="", repr=False)


def _command(block: Block) -> list[str]:
    if block.lang == "python":
        return ["python", "-c", block.code]
    return ["bash", "-eo", "pipefail", "-c", block.code]


def _env() -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "VIRTUAL_ENV": str(Path(sys.executable).parent.parent), "PYTHONUNBUFFERED": "1"}


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _missing(block: Block, output: str) -> str:
    missing = [e for e in block.expect if e not in output]
    return f"expected {missing[0]!r} in its output" if missing else ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def run_page(blocks: list[Block], workdir: Path) -> list[Result]:
    """Run one page's blocks in order in `workdir`; background blocks run until the page's end."""
    env = _env()
    results: list[Result] = []
    background: list[tuple[Block, subprocess.Popen[bytes], Path]] = []
    try:
        for n, block in enumerate(blocks):
            started = time.monotonic()
            if not block.background:
                proc = subprocess.Popen(_command(block), cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
                try:
                    raw, _ = proc.communicate(timeout=block.timeout_s)
                except subprocess.TimeoutExpired:
                    _stop(proc)  # the block's whole process group, not only its shell
                    raw, _ = proc.communicate()
                    results.append(Result(block.where, False, time.monotonic() - started,
                                          f"did not end within {block.timeout_s:g} s", raw.decode(errors="replace")))
                    continue
                out = raw.decode(errors="replace")
                problem = f"exit status {proc.returncode}" if proc.returncode else _missing(block, out)
                results.append(Result(block.where, not problem, time.monotonic() - started, problem, out))
                continue
            log = workdir / f".runnable-{n}.log"
            with log.open("wb") as sink:
                proc = subprocess.Popen(_command(block), cwd=workdir, env=env, stdin=subprocess.PIPE,
                                        stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
            background.append((block, proc, log))
            problem = f"not ready ({block.ready!r} not seen) within {block.timeout_s:g} s"
            while time.monotonic() - started < block.timeout_s:
                out = log.read_text(errors="replace")
                if block.ready and block.ready in out:
                    problem = _missing(block, out)
                    break
                if proc.poll() is not None:
                    problem = f"exited (status {proc.returncode}) before it was ready"
                    break
                time.sleep(0.1)
            results.append(Result(block.where, not problem, time.monotonic() - started, problem,
                                  log.read_text(errors="replace")))
            if problem:
                background.pop()
                _stop(proc)
        for block, proc, log in background:
            if proc.poll() is not None:
                results.append(Result(block.where, False, 0.0, f"a background block exited (status "
                                      f"{proc.returncode}) before the page's end", log.read_text(errors="replace")))
    finally:
        for _, proc, _ in reversed(background):
            _stop(proc)
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the runnable blocks of the given pages; print a line per block, or JSON with --json."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    files = [Path(a).resolve() for a in args if a != "--json"] or pages()
    results: list[Result] = []
    for path in files:
        blocks = extract(path)
        if blocks:
            with tempfile.TemporaryDirectory(prefix="runnable-") as tmp:
                results += run_page(blocks, Path(tmp))
    if as_json:
        print(json.dumps([{"where": r.where, "ok": r.ok, "seconds": round(r.seconds, 1), "message": r.message,
                           "output": _tail(r.output)} for r in results]))
    else:
        for r in results:
            print(f"{'ok  ' if r.ok else 'FAIL'} {r.where} ({r.seconds:.1f} s) {r.message}")
            if not r.ok:
                print("    " + _tail(r.output).replace("\n", "\n    "))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
