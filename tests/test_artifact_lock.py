"""Two runs that need the same program compile it once: the second waits on the program's
lock and loads what the first compiled (two CI jobs, two test workers); a program that
differs only in its weights' values loads that artifact and its own weights into it (the
ranks of a tensor-parallel step, weights drawn unseeded)."""

from __future__ import annotations

import shutil
import threading

import torch
from filelock import FileLock
from torch import nn
from torch.export import Dim

from aclcap.graph.backends.aoti import AotiBackend, program_key
from aclcap.graph.options import StepOptions
from aclcap.loading.model_file import ModelSpec


def _program(seed: int = 0, bias: bool = True) -> torch.export.ExportedProgram:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 8, bias=bias), nn.ReLU()).eval()
    return torch.export.export(model, (torch.randn(4, 8),),
                               dynamic_shapes=({0: Dim("n", min=2, max=64)},))


def test_a_run_waiting_on_the_lock_loads_what_the_other_compiled(tmp_path):
    exported = _program()
    spec = ModelSpec(tmp_path / "model.py", build_model=_program, make_inputs=_program)
    elsewhere = AotiBackend(StepOptions(), cache_dir=tmp_path / "elsewhere")
    _, compiled, _ = elsewhere.artifact(exported, spec)  # the other run's compile

    cache = tmp_path / "cache"
    key = program_key(exported, StepOptions().cache_factors(), values=False)
    (cache / "locks").mkdir(parents=True)
    waiting = AotiBackend(StepOptions(), cache_dir=cache)
    result: dict = {}
    lock = FileLock(cache / "locks" / f"{key}.lock")
    with lock:  # the other run holds the program structure's lock: it is compiling
        thread = threading.Thread(target=lambda: result.update(zip(
            ("runner", "path", "facts"), waiting.artifact(exported, spec), strict=True)))
        thread.start()
        thread.join(timeout=2)
        assert thread.is_alive()  # it waits rather than compiling the program too
        shutil.copy(compiled, cache / compiled.name)  # the other run's artifact lands
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert result["path"] == cache / compiled.name
    assert result["facts"]["cache_hit"] is True
    assert result["facts"]["cache_note"] == "compiled meanwhile by another run: loaded"
    x = torch.randn(5, 8)
    assert torch.equal(result["runner"].run([x])[0], exported.module()(x))


def test_a_program_with_other_weights_loads_them_into_the_compiled_artifact(tmp_path):
    spec = ModelSpec(tmp_path / "model.py", build_model=_program, make_inputs=_program)
    cache = tmp_path / "cache"
    first, other = _program(0, bias=False), _program(1, bias=False)
    _, compiled, facts = AotiBackend(StepOptions(), cache_dir=cache).artifact(first, spec)
    assert facts["cache_hit"] is False
    runner, path, facts = AotiBackend(StepOptions(), cache_dir=cache).artifact(other, spec)
    assert path == compiled and sorted(cache.glob("*.pt2")) == [compiled]  # no compile
    assert facts["cache_hit"] is True and facts["weights_loaded"] is True
    assert facts["cache_note"].startswith("compiled for other weights of the same program")
    x = torch.randn(5, 8)
    assert torch.equal(runner.run([x])[0], other.module()(x))  # its own weights, not first's
    assert not torch.equal(runner.run([x])[0], first.module()(x))
    # the first program still finds its own artifact, with its own weights
    runner, path, facts = AotiBackend(StepOptions(), cache_dir=cache).artifact(first, spec)
    assert path == compiled and "weights_loaded" not in facts
    assert torch.equal(runner.run([x])[0], first.module()(x))


def test_an_artifact_missing_a_weight_among_its_constants_is_not_shared(tmp_path):
    """Inductor keeps a Linear's bias out of the artifact's named constants here: loading
    the other program's weights could not replace it, so that program compiles its own."""
    spec = ModelSpec(tmp_path / "model.py", build_model=_program, make_inputs=_program)
    cache = tmp_path / "cache"
    first, other = _program(0), _program(1)
    _, compiled, _ = AotiBackend(StepOptions(), cache_dir=cache).artifact(first, spec)
    runner, path, facts = AotiBackend(StepOptions(), cache_dir=cache).artifact(other, spec)
    assert path != compiled and facts["cache_hit"] is False and "weights_loaded" not in facts
    x = torch.randn(5, 8)
    assert torch.equal(runner.run([x])[0], other.module()(x))


UNSEEDED = '''
import torch
from torch import nn

SHAPES = [1, 2]


def build_model(device, dtype):  # unseeded: other weights on every run
    return nn.Sequential(nn.Linear(16, 16, bias=False), nn.ReLU()).to(device, dtype).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 16, device=device, dtype=dtype),)
'''


def test_an_unseeded_model_captures_again_without_a_compile(tmp_path, monkeypatch):
    """Every run of a model whose weights are drawn unseeded is a new program by value: the
    second run loads the first's artifact with its own weights and still matches its own
    eager step; it writes no warm-run index entry, which would skip loading them in."""
    from aclcap.capture.options import CaptureOptions
    from aclcap.capture.run import run_capture
    from aclcap.status import Status

    monkeypatch.setenv("ACLCAP_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "unseeded.py").write_text(UNSEEDED)
    options = CaptureOptions(model=str(tmp_path / "unseeded.py"), shapes=(1, 2), device="cpu")
    first, second = run_capture(options), run_capture(options)
    assert all(r.status == Status.PASS for r in first.rows + second.rows)
    assert first.backend.cache_hit is False and second.backend.cache_hit is True
    assert second.backend.cache_note.startswith("compiled for other weights")
    aoti = tmp_path / "cache" / "aoti"
    assert len(list(aoti.glob("*.pt2"))) == 1 and len(list(aoti.glob("*.ranges.json"))) == 1
