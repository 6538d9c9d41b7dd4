"""The README is the front door: short, and every link from it leads to a page that exists (mkdocs checks the
links between pages of docs/, not the README's)."""

from __future__ import annotations

import re

from tests.docs.runnable import REPO

README = (REPO / "README.md").read_text()


def test_the_readme_stays_a_front_door_of_at_most_250_lines() -> None:
    assert len(README.splitlines()) <= 250, "move details into docs/ (the README has the two commands, the tour, links)"


def test_every_relative_link_of_the_readme_leads_to_a_file_that_exists() -> None:
    links = [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", README)
             if not target.startswith(("http://", "https://", "#"))]
    assert links, "the README links into docs/"
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing, f"the README links to missing files: {missing}"


def test_the_getting_started_page_includes_the_readme_tour() -> None:
    """docs/getting-started.md takes the tour from the README (pymdownx.snippets), so they cannot differ."""
    assert '--8<-- "README.md:tour"' in (REPO / "docs" / "getting-started.md").read_text()
    assert README.count("--8<-- [start:tour]") == 1 and README.count("--8<-- [end:tour]") == 1
