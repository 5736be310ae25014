"""A warm capture without tracing: an unchanged step's trace comes from the cache (said in
the report, with when it was taken) and replays as before; an edit to the model file or a
module next to it, the weights, the sizes or --no-cache traces again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, aclcap

MODEL = '''import torch
from helper import WIDTH


def build_model(device, dtype):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()).to(device, dtype)


def make_inputs(size, device, dtype):
    return (torch.randn(size, WIDTH, device=device, dtype=dtype),)
'''


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache for the module: the artifact is compiled once, by the first test."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def model(tmp_path):
    (tmp_path / "helper.py").write_text("WIDTH = 8\n")
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def _capture(model, cache, *extra):
    run = aclcap("capture", str(model), "--device", "cpu", "--shapes", "2,4", "--json", "-",
                 *extra, ACLCAP_CACHE_DIR=str(cache))
    assert run.code == 0, run.stderr
    return run.json(), " ".join(run.stderr.split())


def test_unchanged_step_replays_from_the_cached_trace(model, cache):
    first, _ = _capture(model, cache)
    again, said = _capture(model, cache)
    assert first["trace_cache"] is None and again["trace_cache"]["hit"] is True
    assert again["trace"] == first["trace"]  # the same report, compiles included
    assert [(r["size"], r["status"]) for r in again["results"]] == [(2, "pass"), (4, "pass")]
    assert again["backend"]["cache_hit"] and again["phases_s"]["export"] == 0
    assert f"(from the cache: traced {again['trace_cache']['taken']}" in said
    entries = list((cache / "capture").glob("*.json"))
    assert len(entries) == 1 and json.loads(entries[0].read_text())["index_key"]


@pytest.mark.parametrize("edit", ["model file", "module next to it", "sizes", "no-cache"])
def test_what_the_trace_depends_on_traces_again(model, cache, edit):
    _capture(model, cache)
    extra: tuple[str, ...] = ()
    if edit == "model file":
        model.write_text(MODEL + "# edited\n")
    elif edit == "module next to it":
        (model.parent / "helper.py").write_text("WIDTH = 8  # edited\n")
    elif edit == "sizes":
        extra = ("--shapes", "2,8")
    else:
        extra = ("--no-cache",)
    doc, _ = _capture(model, cache, *extra)
    assert doc["trace_cache"] is None, edit


def test_unseeded_weights_are_part_of_the_key(model, cache):
    model.write_text(MODEL.replace("torch.manual_seed(0)", "pass"))
    _capture(model, cache)
    doc, _ = _capture(model, cache)  # other weights: AOTI bakes them in, so no reuse
    assert doc["trace_cache"] is None
    assert [r["status"] for r in doc["results"]] == ["pass", "pass"]


def test_a_corrupt_entry_is_a_miss(model, cache):
    _capture(model, cache)
    for entry in (cache / "capture").glob("*.json"):
        entry.write_text("{not json")
    doc, _ = _capture(model, cache)
    assert doc["trace_cache"] is None
    assert [r["status"] for r in doc["results"]] == ["pass", "pass"]


def test_a_step_reading_its_environment_is_traced_again_not_failed(model, cache):
    """The key cannot see an environment variable: a cached trace that fails its replay is
    traced again before the verdict."""
    model.write_text(MODEL.replace(
        "torch.nn.ReLU())", "*([torch.nn.ReLU()] if os.environ.get('RELU') else []))")
        .replace("import torch", "import os\nimport torch"))
    _capture(model, cache)
    run = aclcap("capture", str(model), "--device", "cpu", "--shapes", "2,4", "--json", "-",
                 ACLCAP_CACHE_DIR=str(cache), RELU="1")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["trace_cache"] is None  # the cached trace's replay failed: traced again
    assert [r["status"] for r in doc["results"]] == ["pass", "pass"]


def test_an_artifact_the_cache_budget_removed_is_compiled_again_under_the_cached_trace(
        model, cache):
    # (last in the file: every later capture of this cache would compile again)
    _capture(model, cache)
    for artifact in (cache / "aoti").glob("*.pt2"):
        artifact.unlink()
    doc, _ = _capture(model, cache)
    assert doc["trace_cache"]["hit"] is True and doc["backend"]["cache_hit"] is False
    assert [(r["size"], r["status"]) for r in doc["results"]] == [(2, "pass"), (4, "pass")]


def test_two_model_files_in_one_folder_keep_their_own_traces(tmp_path):
    """Steps beside each other with the same (here: no) weights: each keeps its own cached
    trace, and one that breaks its graph on a host read never answers from another's. A
    failure met under a cached trace at any stage (here torch.export's) would be traced
    again before its verdict."""
    cache = tmp_path / "cache"
    library = ROOT / "tests/models/library_reads"
    (tmp_path / "masks.py").write_text((library / "masks.py").read_text())
    quiet = (library / "read_eager_only.py").read_text()
    (tmp_path / "double.py").write_text(quiet)
    (tmp_path / "triple.py").write_text(quiet.replace("* 2", "* 3"))
    (tmp_path / "read_always.py").write_text((library / "read_always.py").read_text())
    args = ("--device", "cpu", "--shapes", "2,4", "--json", "-")
    for name in ("double", "triple"):
        run = aclcap("capture", str(tmp_path / f"{name}.py"), *args, ACLCAP_CACHE_DIR=str(cache))
        assert run.code == 0 and run.json()["trace_cache"] is None, run.stdout + run.stderr
    assert len(list((cache / "capture").glob("*.json"))) == 2
    reads = aclcap("capture", str(tmp_path / "read_always.py"), *args,
                   ACLCAP_CACHE_DIR=str(cache))
    assert reads.code == 1 and reads.json()["trace_cache"] is None
    assert reads.json()["trace"]["graph_breaks"], reads.stdout


def test_what_capture_caches_is_keyed_on_aclcap_s_own_sources(tmp_path, monkeypatch):
    """aclcap's version stayed 0.1.0 while the size ranges an export is split into changed:
    a warm mamba capture replayed an older run's range at a size its guards refuse. The
    keys now hold a hash of the package's sources, so an edit of any of them is a miss."""
    from aclcap import _version

    package = Path(_version.__file__).parent
    copy = tmp_path / "aclcap"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(_version, "__file__", str(copy / "_version.py"))
    before = _version.code_fingerprint.__wrapped__()
    assert before.startswith(_version.VERSION + "+") and \
        before == _version.code_fingerprint.__wrapped__()
    (copy / "graph" / "export.py").write_text((copy / "graph" / "export.py").read_text()
                                              + "\n# an edit\n")
    assert _version.code_fingerprint.__wrapped__() != before
