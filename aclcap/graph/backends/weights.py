"""One AOTI artifact for every program that differs only in its weights' values: a model
whose weights are drawn unseeded on each run, a new checkpoint of the same model, ranks whose
programs differ only in their shards. AOTInductor keeps weights as named constants it can
replace at load time (AOTIModelPackageLoader.load_constants), so such a program loads the
artifact compiled for another and puts its own weights in, instead of compiling the same
code again (10 to 40 s). Only where the artifact's constants are exactly the program's
weights by name: a constant Inductor derived from a weight at compile time (folded) would
keep the other's values, so such an artifact is never shared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from aclcap.cache_budget import touch

NOTE = "compiled for other weights of the same program: this program's weights loaded in"


def program_weights(exported: torch.export.ExportedProgram) -> dict[str, torch.Tensor]:
    """Every weight, buffer and constant tensor the artifact bakes in, by name."""
    return {name: value for name, value in {**exported.state_dict, **exported.constants}.items()
            if isinstance(value, torch.Tensor)}


def pointer(cache_dir: Path, structure_key: str) -> Path:
    """The file that names the artifact serving every program of `structure_key`."""
    return cache_dir / "shared" / structure_key


def shareable(loader: Any, weights: dict[str, torch.Tensor]) -> bool:
    """Whether the artifact's constants are exactly the program's weights: then loading
    another program's weights replaces every value the artifact computes with."""
    return set(loader.get_constant_fqns()) == set(weights)


def record(cache_dir: Path, structure_key: str, artifact: Path) -> None:
    """Name `artifact` as the one programs of `structure_key` load their weights into."""
    path = pointer(cache_dir, structure_key)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(artifact.name)
    partial.replace(path)  # atomic: a concurrent run reads the old name or the new one


def shared_artifact(cache_dir: Path, structure_key: str) -> Path | None:
    """The artifact recorded for `structure_key`, where it is still in the cache."""
    path = pointer(cache_dir, structure_key)
    if not path.is_file():
        return None
    artifact = cache_dir / path.read_text().strip()
    if not artifact.is_file():
        return None
    touch(path)
    return artifact


def load_weights(loader: Any, weights: dict[str, torch.Tensor]) -> None:
    """Replace every constant of the loaded artifact with the program's own (copied: the
    artifact keeps no reference to the program's tensors); a name missing either side
    raises, so a partial replacement never runs."""
    loader.load_constants(weights, False, True, False)
