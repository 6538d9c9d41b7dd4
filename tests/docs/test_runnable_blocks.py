"""How runnable blocks are found and run (tests/docs/runnable.py), on small pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.runnable import RunnableSyntaxError, extract, pages, run_page

PAGE = """# A page

```bash
not marked, never run
```

<!-- runnable timeout=5 expect="hello" -->
```bash
echo hello
```

<!-- runnable background ready="serving" -->
```python
import time
print("serving", flush=True)
time.sleep(60)
```
"""


def test_only_marked_blocks_are_runnable_with_their_options(tmp_path: Path) -> None:
    blocks = extract(tmp_path / "p.md", PAGE)
    assert [(b.lang, b.line, b.timeout_s, b.expect, b.background, b.ready) for b in blocks] == [
        ("bash", 9, 5.0, ("hello",), False, None), ("python", 14, 60.0, (), True, "serving")]
    assert blocks[0].code == "echo hello\n"


def test_a_mark_without_a_fenced_block_or_with_an_unknown_option_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RunnableSyntaxError, match="right before a fenced block"):
        extract(tmp_path / "p.md", "<!-- runnable -->\ntext\n")
    with pytest.raises(RunnableSyntaxError, match="unknown runnable option"):
        extract(tmp_path / "p.md", "<!-- runnable timout=3 -->\n```bash\ntrue\n```\n")
    with pytest.raises(RunnableSyntaxError, match="needs ready"):
        extract(tmp_path / "p.md", "<!-- runnable background -->\n```bash\nsleep 9\n```\n")


def test_a_page_passes_when_every_block_ends_well_and_background_blocks_run_to_its_end(tmp_path: Path) -> None:
    blocks = extract(tmp_path / "p.md", PAGE)
    results = run_page(blocks, tmp_path)
    assert [r.ok for r in results] == [True, True], results


def test_a_failing_command_a_missing_text_and_a_server_that_dies_fail_the_page(tmp_path: Path) -> None:
    page = ('<!-- runnable -->\n```bash\nfalse\n```\n'
            '<!-- runnable expect="bye" -->\n```bash\necho hello\n```\n'
            '<!-- runnable timeout=2 -->\n```bash\nsleep 10\n```\n'
            '<!-- runnable background ready="up" timeout=10 -->\n```python\nraise NameError("x")\n```\n'
            '<!-- runnable background ready="up" timeout=10 -->\n```bash\necho up; sleep 1; exit 3\n```\n'
            '<!-- runnable timeout=5 -->\n```bash\nsleep 2\n```\n')
    results = run_page(extract(tmp_path / "p.md", page), tmp_path)
    assert [r.message for r in results] == [
        "exit status 1", "expected 'bye' in its output", "did not end within 2 s",
        "exited (status 1) before it was ready", "", "",
        "a background block exited (status 3) before the page's end"]
    assert "NameError" in results[3].output


def test_every_page_of_the_docs_parses() -> None:
    for page in pages():
        extract(page)
