"""Docs that cannot drift: every option of every command's live --help has a line in its
page's options section; every fenced example marked `<!-- runnable -->` runs with the exit
code written beside it; links between the pages land on a file and a heading; the layers
docs/design.md draws are the ones import-linter enforces; the README stays short."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT, aclcap

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
# Each command's options live in one section of one page.
OPTION_SECTIONS = {(): ("contracts.md", "Global options"),
                   ("build",): ("build.md", "Options"),
                   ("check-meta",): ("check-meta.md", "Options"),
                   ("capture",): ("capture.md", "Options"),
                   ("bench",): ("bench.md", "Options")}
# An option's own row of a help panel (one space in), never a wrapped line of help text.
HELP_OPTION = re.compile(r"^│ (--[a-z][a-z0-9-]*)", re.MULTILINE)
RUNNABLE = re.compile(r"<!-- runnable -->\n```[^\n]*\n(.*?)\n```", re.DOTALL)
EXAMPLE = re.compile(r"^(aclcap(?: .*?)?)\s+# exit (\d+)$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _section(page: str, heading: str) -> str:
    """The text under `## heading` up to the next heading of the same level."""
    text = (DOCS / page).read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _help_options(command: tuple[str, ...]) -> list[str]:
    run = aclcap(*command, "--help")
    assert run.code == 0, run.stderr
    return [o for o in HELP_OPTION.findall(run.stdout) if o != "--help"]


@pytest.mark.parametrize("command", OPTION_SECTIONS, ids=lambda c: " ".join(c) or "aclcap")
def test_every_option_of_the_live_help_is_documented(command):
    options = _help_options(command)
    assert options, f"no options parsed from `aclcap {' '.join(command)} --help`"
    page, heading = OPTION_SECTIONS[command]
    section = _section(page, heading)
    missing = [o for o in options if not re.search(rf"`{re.escape(o)}(?![\w-])", section)]
    assert not missing, f"docs/{page} '## {heading}' has no line for {missing}"


def _runnable_examples() -> list[tuple[str, str, int]]:
    found = []
    for page in PAGES:
        for block in RUNNABLE.findall(page.read_text()):
            for line in block.splitlines():
                match = EXAMPLE.match(line.strip())
                assert match, f"{page.name}: a runnable line needs `aclcap ...  # exit N`: {line}"
                found.append((page.name, match.group(1), int(match.group(2))))
    return found


EXAMPLES = _runnable_examples()


def test_runnable_examples_are_few_and_marked():
    """A handful, each fast: CI runs them all (a capture or a bench run is never marked)."""
    assert 3 <= len(EXAMPLES) <= 10, EXAMPLES
    slow = [cmd for _, cmd, _ in EXAMPLES
            if re.match(r"aclcap (capture|bench)\b", cmd) and not re.search(
                r"--help|--plan-sizes", cmd)]
    assert not slow, slow


@pytest.mark.parametrize(("page", "command", "code"), EXAMPLES,
                         ids=[f"{p}: {c}" for p, c, _ in EXAMPLES])
def test_runnable_example_exits_as_documented(page, command, code, monkeypatch):
    monkeypatch.chdir(ROOT)  # examples name paths from the repository root
    run = aclcap(*shlex.split(command)[1:])
    assert run.code == code, f"{page}: `{command}` exited {run.code}\n{run.stdout}\n{run.stderr}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_land_on_a_file_and_a_heading(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # another site's page: not this repository's to check
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md"
                                 and anchor not in _anchors(file)):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def _layer_contracts() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["containers"][0]: c["layers"] for c in config["contracts"]
            if c["type"] == "layers"}


@pytest.mark.parametrize("container", _layer_contracts())
def test_design_draws_the_layers_import_linter_enforces(container):
    design = (DOCS / "design.md").read_text()
    drawn = re.search(rf"<!-- layers: {re.escape(container)} -->\n```\n(.*?)\n```", design,
                      re.DOTALL)
    assert drawn, f"docs/design.md draws no layers of {container}"
    assert drawn.group(1).splitlines() == _layer_contracts()[container]


def test_readme_is_short_and_points_into_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for page in sorted(DOCS.glob("*.md")):
        assert f"(docs/{page.name})" in readme, page.name
