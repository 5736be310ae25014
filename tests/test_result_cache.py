"""check-meta's result cache (aclcap/meta/result_cache.py): an unchanged op's row comes
from the cache, identical to a fresh one but for `cached`; an edit to a kernel, a meta, a
sample or a model file re-checks exactly the ops it can change; --no-cache checks all; a
corrupt entry is a miss; a run the cache answers starts no worker.

The library under test is written into a temp folder, one file per part, so that each
edit touches the ops of one part only."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path

import pytest

from aclcap.meta.options import CheckMetaOptions
from aclcap.meta.runner import MetaReport, check_meta
from tests.conftest import aclcap

NS = "aclcap_rcache"
FILES = {
    "lib.py": '''
import importlib.util
from pathlib import Path

import torch

from aclcap import samples

NS = "aclcap_rcache"


def sibling(name):
    spec = importlib.util.spec_from_file_location(f"{NS}_{name}", Path(__file__).with_name(
        f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kernels, kernels_c = sibling("kernels"), sibling("kernels_c")
lib = torch.library.Library(NS, "DEF")
for name in "abc":
    lib.define(f"{name}(Tensor x) -> Tensor")
lib.impl("a", kernels.a, "CPU")
lib.impl("b", kernels.b, "CPU")
lib.impl("c", kernels_c.c, "CPU")
torch.library.register_fake(f"{NS}::a", sibling("meta_a").a, lib=lib)
meta_bc = sibling("meta_bc")
torch.library.register_fake(f"{NS}::b", meta_bc.b, lib=lib)
torch.library.register_fake(f"{NS}::c", meta_bc.c, lib=lib)
samples(f"{NS}::a")(sibling("samples_a").a)
samples_bc = sibling("samples_bc")
samples(f"{NS}::b")(samples_bc.b)
samples(f"{NS}::c")(samples_bc.c)

harvested = torch.library.Library(NS + "_m", "DEF")  # its samples come from model.py
harvested.define("d(Tensor x) -> Tensor")
harvested.impl("d", kernels_c.d, "CPU")
torch.library.register_fake(f"{NS}_m::d", meta_bc.d, lib=harvested)
''',
    "kernels.py": "def a(x):\n    return x * 2\n\n\ndef b(x):\n    return x + 1\n",
    "kernels_c.py": "def c(x):\n    return x.neg()\n\n\ndef d(x):\n    return x - 1\n",
    "meta_a.py": "def a(x):\n    return x.new_empty(x.shape)\n",
    "meta_bc.py": "def b(x):\n    return x.new_empty(x.shape)\n\n\n"
                  "def c(x):\n    return x.new_empty(x.shape)\n\n\n"
                  "def d(x):\n    return x.new_empty(x.shape)\n",
    "samples_a.py": '''
import torch

from aclcap import SampleInput


def a(device, dtype):
    yield SampleInput((torch.randn(3, 4, device=device, dtype=dtype),))
''',
    "samples_bc.py": '''
import torch

from aclcap import SampleInput


def b(device, dtype):
    yield SampleInput((torch.randn(2, 5, device=device, dtype=dtype),))


def c(device, dtype):
    yield SampleInput((torch.randn(4, device=device, dtype=dtype),))
''',
    "model.py": '''
import torch

OP_LIBRARIES = ["lib.py"]
SHAPES = [3]


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aclcap_rcache_m.d(x)


def build_model(device, dtype):
    return Model()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 4, device=device, dtype=dtype),)
''',
}
OPS = [f"{NS}::{name}.default" for name in "abc"]


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Iterator[Path]:
    """The library's folder, under a cache of its own that its first run filled."""
    folder = tmp_path_factory.mktemp("rcache")
    for name, text in FILES.items():
        (folder / name).write_text(text.lstrip())
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ACLCAP_CACHE_DIR", str(folder / "cache"))
        yield folder


@pytest.fixture(scope="module")
def first(library) -> MetaReport:
    """The first run: every op checked by its worker."""
    report = run(library)
    assert [r.cached for r in report.results] == [False] * 3
    assert [r.status for r in report.results] == ["pass"] * 3, report.to_dicts()
    return report


def options(library: Path, **changes) -> CheckMetaOptions:
    return replace(CheckMetaOptions([str(library / "lib.py")], [NS]), **changes)


def run(library: Path, **changes) -> MetaReport:
    return check_meta(options(library, **changes))


def cached(report: MetaReport) -> dict[str, bool]:
    return {r.op: r.cached for r in report.results}


@pytest.fixture
def edit(library):
    """edit(name, old, new): change a file of the library for one test, put back after."""
    saved: dict[Path, str] = {}

    def change(name: str, old: str, new: str) -> None:
        path = library / name
        text = saved.setdefault(path, path.read_text())
        assert old in text
        path.write_text(text.replace(old, new))

    yield change
    for path, text in saved.items():
        path.write_text(text)


def test_second_run_answers_every_op_from_the_cache_identically(library, first):
    again = run(library)
    assert cached(again) == dict.fromkeys(OPS, True) and again.workers == 0
    assert again.slowest() == []  # nothing was checked in this run
    for fresh, kept in zip(first.to_dicts(), again.to_dicts(), strict=True):
        assert kept.pop("cached") is True and fresh.pop("cached") is False
        assert kept == fresh


def test_edit_to_one_meta_rechecks_that_op_alone(library, first, edit):
    edit("meta_a.py", "x.new_empty(x.shape)", "x.new_empty(x.shape[:-1])")
    wrong = run(library)
    assert cached(wrong) == {OPS[0]: False, OPS[1]: True, OPS[2]: True}
    assert wrong.results[0].status == "fail"
    assert "fake impl output 0" in wrong.results[0].findings[0].message


def test_edit_to_a_kernel_file_rechecks_the_ops_it_defines(library, first, edit):
    edit("kernels.py", "return x + 1", "return 1 + x")
    assert cached(run(library)) == {OPS[0]: False, OPS[1]: False, OPS[2]: True}


def test_edit_to_a_sample_rechecks_that_op(library, first, edit):
    edit("samples_a.py", "torch.randn(3, 4,", "torch.randn(5, 4,")
    assert cached(run(library)) == {OPS[0]: False, OPS[1]: True, OPS[2]: True}


def test_put_back_file_is_answered_by_its_old_entry(library, first, edit):
    edit("meta_bc.py", "def c(x):\n    return x.new_empty(x.shape)",
         "def c(x):\n    return x.new_empty(x.shape).t()")
    assert cached(run(library))[OPS[2]] is False
    (library / "meta_bc.py").write_text(FILES["meta_bc.py"])
    assert cached(run(library)) == dict.fromkeys(OPS, True)


def test_model_file_and_shapes_recheck_the_harvested_op(library, edit):
    model = str(library / "model.py")
    harvest = {"libs": [], "namespaces": [f"{NS}_m"], "samples_from": [model]}
    [row] = run(library, **harvest).results
    assert row.sample_sources == ["1 from model.py:9"] and row.status == "pass"
    assert run(library, **harvest).results[0].cached
    assert not run(library, **harvest, shapes=[2]).results[0].cached
    edit("model.py", "SHAPES = [3]", "SHAPES = [3]  # edited")
    assert not run(library, **harvest).results[0].cached


def test_no_cache_checks_every_op_and_json_says_which_rows_are_cached(library, first):
    fresh = aclcap("check-meta", "--lib", str(library / "lib.py"), "--namespace", NS,
                   "--no-cache", "--json", "-")
    assert fresh.code == 0, fresh.stderr
    assert [r["cached"] for r in fresh.json()["results"]] == [False] * 3
    assert "from the result cache" not in fresh.stderr and fresh.json()["workers"] == 1
    again = aclcap("check-meta", "--lib", str(library / "lib.py"), "--namespace", NS,
                   "--json", "-")
    assert [r["cached"] for r in again.json()["results"]] == [True] * 3
    assert "3 row(s) from the result cache (--no-cache" in again.stderr
    assert "slowest ops" not in again.stderr and again.json()["workers"] == 0


def test_warm_run_starts_no_worker_nor_their_server(library, first, monkeypatch):
    args = ("check-meta", "--lib", str(library / "lib.py"), "--namespace", NS)
    assert aclcap(*args).code == 0  # the manifest for these arguments

    def refuse(*_: object) -> None:
        raise AssertionError("a run the cache answers started a worker")

    monkeypatch.setattr("aclcap._forkserver.start", refuse)
    monkeypatch.setattr("aclcap.meta.runner.run_checks", refuse)
    warm = aclcap(*args)
    assert warm.code == 0 and "3 row(s) from the result cache" in warm.stdout


def test_corrupt_entry_is_a_miss_and_rewritten(library, first):
    from aclcap.meta.registry import list_ops
    from aclcap.meta.result_cache import ResultCache, cache_dir

    cache = ResultCache(options(library))
    op = next(o for o in list_ops([NS]) if o.qualname == OPS[1])
    key = cache.key(op)
    assert key is not None
    entry = cache_dir() / key[:2] / f"{key}.json"
    for garbage in ("{not json", json.dumps({"op": OPS[1], "row": {"status": "pass"}})):
        entry.write_text(garbage)
        assert cached(run(library)) == {OPS[0]: True, OPS[1]: False, OPS[2]: True}
        assert json.loads(entry.read_text())["row"]["status"] == "pass"


def test_crash_and_timeout_rows_are_never_kept(library, first, tmp_path):
    from aclcap.meta.registry import list_ops
    from aclcap.meta.result_cache import ResultCache
    from aclcap.meta.runner import _Checked
    from aclcap.status import Finding, Status

    cache = ResultCache(options(library), root=tmp_path)
    op = list_ops([NS])[0]
    for status in (Status.CRASHED, Status.TIMEOUT):
        cache.store(op, _Checked(status, [Finding("gone")]), cache.key(op))
    died = _Checked(Status.FAIL, [Finding("crashed on fakes")], death="crashed (signal 11)")
    cache.store(op, died, cache.key(op))
    assert not list(tmp_path.rglob("*.json")) and not cache.complete


def test_python_kernel_registered_out_of_sight_is_never_cached():
    """A Python kernel registered before check-meta recorded it: the dispatcher names no
    function, so no file can key its op; it is checked every run."""
    import torch

    from aclcap.meta.op_sources import op_sources
    from aclcap.meta.registry import list_ops

    lib = torch.library.Library("aclcap_unseen", "DEF")
    lib.define("e(Tensor x) -> Tensor")
    lib.impl("e", lambda x: x, "CPU")
    torch.library.register_fake("aclcap_unseen::e", lambda x: x.new_empty(x.shape), lib=lib)
    assert op_sources(list_ops(["aclcap_unseen"])[0], lambda source: None) is None


def test_cpp_kernels_are_keyed_on_the_library_built_from_them(bundled):
    """The bundled ops' C++ kernels: the loaded .so whose bytes hold their sources' path;
    a C++ registration in no loaded library leaves the op unkeyed."""
    import torch

    from aclcap.meta.op_sources import op_sources, shared_libraries
    from aclcap.meta.registry import list_ops

    [so] = [p for p in torch.ops.loaded_libraries if p.endswith("aclcap_ops_cpu.so")]
    libraries = {so: Path(so).read_bytes(), "other.so": b"no source path here"}

    def holding(source: str) -> set[str] | None:
        return shared_libraries(source, libraries)

    ops = {o.qualname: o for o in list_ops(["aclcap"])}
    cpp_meta = op_sources(ops["aclcap::silu_and_mul.default"], holding)
    assert cpp_meta is not None and so in cpp_meta and "other.so" not in cpp_meta
    assert any(f.endswith("aclcap_ops/samples.py") for f in cpp_meta)
    python_meta = op_sources(ops["aclcap::rms_norm.default"], holding)
    assert python_meta is not None and any(f.endswith("aclcap_ops/meta.py") for f in python_meta)
    assert op_sources(ops["aclcap::rms_norm.default"], lambda source: None) is None


def test_every_option_is_keyed_or_ignored_with_a_reason():
    names = {f.name for f in fields(CheckMetaOptions)}
    keyed, ignored = CheckMetaOptions.CACHE_KEYED, set(CheckMetaOptions.CACHE_IGNORED)
    assert not keyed & ignored
    assert keyed | ignored == names, "decide: does the option change a verdict?"
    assert set(CheckMetaOptions(["x"]).cache_factors()) == keyed
    assert all(len(reason.split()) >= 4 for reason in CheckMetaOptions.CACHE_IGNORED.values())


def test_entries_are_written_whole(library, first):
    """No temp file is left beside the entries: each was renamed into place."""
    from aclcap.meta.result_cache import cache_dir

    assert not [p for p in cache_dir().rglob("*") if p.name.startswith(".tmp-")]
    assert os.listdir(cache_dir() / "runs")


def test_over_its_budget_the_cache_drops_what_no_run_used_and_keeps_what_this_one_did(
        library, first, monkeypatch):
    root = library / "cache"
    day_ago = time.time() - 86400
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (day_ago, day_ago))
    stale = root / "check-meta" / "zz" / "stale.json"  # a row of code long since edited
    stale.parent.mkdir(exist_ok=True)
    stale.write_bytes(b"x" * 2**20)
    os.utime(stale, (day_ago - 86400, day_ago - 86400))
    held = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    monkeypatch.setenv("ACLCAP_CACHE_MAX", str(held - 2**19))  # over by half the stale row
    assert cached(run(library)) == dict.fromkeys(OPS, True)
    assert not stale.exists()
    assert sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) <= held - 2**19
    assert cached(run(library)) == dict.fromkeys(OPS, True)  # the rows it used stayed
