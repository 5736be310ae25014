"""The cache within its budget (aclcap/cache_budget.py): least recently used entries go
first, down to a margin under the budget; entries in use, locks and build outputs stay; a
bad $ACLCAP_CACHE_MAX is one line and exit 2 before any work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aclcap.cache_budget import DEFAULT_MAX_BYTES, ENV, max_bytes, prune, touch
from aclcap.errors import UsageError
from tests.conftest import aclcap

NOW = 1_000_000.0


def _file(root: Path, name: str, size: int, age_s: float) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (NOW - age_s, NOW - age_s))
    return path


def test_least_recently_used_go_first_down_to_a_margin_under_the_budget(tmp_path):
    oldest = _file(tmp_path, "aoti/a-1.pt2", 400, 5000)
    old = _file(tmp_path, "capture/b.json", 300, 4000)
    recent = _file(tmp_path, "check-meta/12/c.json", 200, 3000)
    newest = _file(tmp_path, "aoti/d-2.pt2", 100, 2000)
    pruned = prune(tmp_path, limit=900, now=NOW)  # 1000 held: down to 720 at most
    assert not oldest.exists() and all(p.exists() for p in (old, recent, newest))
    assert (pruned.removed, pruned.freed_bytes, pruned.total_bytes) == (1, 400, 600)
    assert prune(tmp_path, limit=900, now=NOW).removed == 0  # within it: nothing to do


def test_a_hit_makes_an_entry_recent(tmp_path):
    first = _file(tmp_path, "aoti/a.pt2", 500, 5000)
    second = _file(tmp_path, "aoti/b.pt2", 500, 4000)
    touch(first)  # used by this run: now
    prune(tmp_path, limit=600)
    assert first.exists() and not second.exists()


def test_entries_in_use_locks_and_build_outputs_stay(tmp_path):
    in_use = _file(tmp_path, "aoti/new.pt2", 1000, 10)  # written by a run going on now
    lock = _file(tmp_path, "aoti/locks/k.lock", 1000, 9000)
    built = _file(tmp_path, "build/cpu/ops.so", 1000, 9000)
    synthesized = _file(tmp_path, "synthesized/lib.so", 1000, 9000)
    assert prune(tmp_path, limit=1, now=NOW).removed == 0
    assert all(p.exists() for p in (in_use, lock, built, synthesized))


@pytest.mark.parametrize(("text", "size"), [
    ("", DEFAULT_MAX_BYTES), ("123", 123), ("500M", 500 * 2**20), ("20G", 20 * 2**30),
    ("1.5g", int(1.5 * 2**30)), ("64MiB", 64 * 2**20), ("0", None)])
def test_budget_from_the_environment(monkeypatch, text, size):
    monkeypatch.setenv(ENV, text)
    assert max_bytes() == size


def test_a_bad_budget_is_one_line_and_exit_2_before_any_work(monkeypatch):
    monkeypatch.setenv(ENV, "lots")
    with pytest.raises(UsageError, match="500M or 20G"):
        max_bytes()
    run = aclcap("check-meta", ACLCAP_CACHE_MAX="lots")
    assert run.code == 2 and run.stderr.strip().splitlines() == [
        "error: ACLCAP_CACHE_MAX=lots: not a size; give bytes or a size such as 500M or 20G "
        "(0: no limit)"]
    helped = aclcap("check-meta", "--help", ACLCAP_CACHE_MAX="lots")  # no work: it answers
    assert helped.code == 0 and "--no-cache" in helped.stdout
