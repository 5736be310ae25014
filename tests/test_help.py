"""Every command's --help fits 80 columns: no option name or word cut to "…" (details live
in docs/, tests/test_docs.py; the help says what an option is for in a line)."""

from __future__ import annotations

import pytest

from tests.conftest import aclcap

COMMANDS = [(), ("build",), ("check-meta",), ("capture",), ("bench",)]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "aclcap")
def test_help_fits_80_columns_uncut(command):
    run = aclcap(*command, "--help", COLUMNS="80")
    assert run.code == 0 and "Usage: " in run.stdout, run.stderr
    assert "…" not in run.stdout, run.stdout
    assert max(len(line) for line in run.stdout.splitlines()) <= 80, run.stdout
