"""Options as data: every field of every command's options is either a factor of the AOTI
cache key or ignored by it with a reason; the options survive the trip to a rank process;
the backend summary's JSON keeps its keys and order; and the packages import downward only
(loading below graph and meta, which never import each other)."""

from __future__ import annotations

import ast
import pickle
from dataclasses import fields, replace

import pytest

from aclcap.bench.options import BenchOptions
from aclcap.capture.options import CaptureOptions
from aclcap.graph.backends.base import BackendSummary
from aclcap.graph.options import MAX_AUTOTUNE, StepOptions
from tests.conftest import ROOT

OPTIONS = (StepOptions, CaptureOptions, BenchOptions)


def _other(value: object) -> object:
    """A value of the same kind that differs from `value`."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 3
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, tuple):
        return (*value, "x")
    return (3,) if value is None else None


@pytest.mark.parametrize("cls", OPTIONS)
def test_every_field_is_keyed_or_ignored_with_a_reason(cls):
    names = [f.name for f in fields(cls)]
    keyed, ignored = cls.CACHE_KEYED, set(cls.CACHE_IGNORED)
    assert not keyed & ignored
    assert sorted(keyed | ignored) == sorted(names), "decide: does the field change the artifact?"
    assert all(len(reason.split()) >= 4 for reason in cls.CACHE_IGNORED.values())


@pytest.mark.parametrize("cls", OPTIONS)
def test_cache_factors_follow_the_keyed_fields_only(cls):
    base = cls(model="m.py")
    for name in cls.CACHE_IGNORED:
        changed = replace(base, **{name: _other(getattr(base, name))})
        assert changed.cache_factors() == base.cache_factors(), name
    tuned = replace(base, max_autotune=True)
    assert base.cache_factors() == {} and tuned.cache_factors() == MAX_AUTOTUNE
    tuned.cache_factors()["freezing"] = False  # a copy: the key's input is not shared
    assert tuned.cache_factors() == MAX_AUTOTUNE


def test_options_cross_to_a_rank_process_whole():
    options = CaptureOptions(model="m.py", shapes=(1, 2), max_autotune=True, nproc=2, pad=True)
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(AttributeError):
        options.pad = False  # type: ignore[misc]  # frozen: built once by the CLI


def test_backend_summary_json_keeps_order_and_leaves_out_what_a_backend_lacks():
    device = BackendSummary(compile_backend="inductor", compiles=2,
                            graph_api="torch.cuda.CUDAGraph", capture_order=[8, 1])
    assert list(device.to_dict()) == ["compile_backend", "compiles", "graph_api",
                                      "capture_order"]
    aoti = BackendSummary(compile_backend="eager", inductor_configs={}, artifact="a.pt2",
                          artifact_bytes=5, cache_hit=True, compile_s=0.5, artifacts=[],
                          capture_order=[2, 1])
    assert list(aoti.to_dict()) == ["compile_backend", "inductor_configs", "artifact",
                                    "artifact_bytes", "cache_hit", "compile_s", "artifacts",
                                    "capture_order"]
    assert aoti.to_dict()["inductor_configs"] == {}  # present though empty: aoti ran
    assert BackendSummary().to_dict() == {}  # nothing ran: `"backend": {}` as before


def _imports(package: str) -> dict[str, set[str]]:
    """Per module of an aclcap package, the aclcap packages it imports (at any depth)."""
    found = {}
    for path in (ROOT / "aclcap" / package).rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
        found[str(path.relative_to(ROOT))] = {n.split(".")[1] for n in names
                                             if n.startswith("aclcap.")}
    return found


@pytest.mark.parametrize("package,forbidden", [
    ("loading", {"graph", "meta", "capture", "bench", "cli", "report"}),
    ("graph", {"meta", "capture", "bench", "cli", "report"}),
    ("meta", {"graph", "capture", "bench", "cli"}),
    ("report", {"cli"}),
])
def test_packages_import_downward_only(package, forbidden):
    upward = {module: sorted(names & forbidden)
              for module, names in _imports(package).items() if names & forbidden}
    assert not upward, upward
