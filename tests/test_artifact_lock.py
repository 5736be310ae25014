"""Two runs that need the same program compile it once: the second waits on the program's
lock and loads what the first compiled (two CI jobs, two test workers)."""

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


def _program() -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    return torch.export.export(model, (torch.randn(4, 8),),
                               dynamic_shapes=({0: Dim("n", min=2, max=64)},))


def test_a_run_waiting_on_the_lock_loads_what_the_other_compiled(tmp_path):
    exported = _program()
    spec = ModelSpec(tmp_path / "model.py", build_model=_program, make_inputs=_program)
    elsewhere = AotiBackend(StepOptions(), cache_dir=tmp_path / "elsewhere")
    _, compiled, _ = elsewhere.artifact(exported, spec)  # the other run's compile

    cache = tmp_path / "cache"
    key = program_key(exported, StepOptions().cache_factors())
    (cache / "locks").mkdir(parents=True)
    waiting = AotiBackend(StepOptions(), cache_dir=cache)
    result: dict = {}
    lock = FileLock(cache / "locks" / f"{key}.lock")
    with lock:  # the other run holds the program's lock: it is compiling
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
