"""The C++ signatures an op library registered its kernels with, read in a child process by
a small probe library (signature_probe.cpp), so that an emitted Meta kernel repeats them:
the dispatcher aborts the process that loads a kernel of another C++ signature for the same
op (`at::Tensor` by value where the library takes `const at::Tensor&`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROBE_SOURCE = Path(__file__).with_name("signature_probe.cpp")


@dataclass(frozen=True)
class CppSignature:
    """`ret (params...)` as the dispatcher prints it, split: `at::Tensor`,
    [`at::Tensor const&`, `long`]."""

    ret: str
    params: tuple[str, ...]


def split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside <>, () and []."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def parse_signature(text: str) -> CppSignature | None:
    """`at::Tensor (at::Tensor const&, long)` -> CppSignature; None for anything else."""
    text = text.strip()
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            ret, params = text[:i].strip(), text[i + 1:-1]
            if not ret:
                return None
            return CppSignature(ret, tuple(split_top(params)))
    return None


def _probe(libs: list[str], ops: list[str], build_dir: str) -> dict[str, str]:
    """In the child: the libraries, the probe, and each op's signature text ("" for none)."""
    import torch

    from aclcap.build import compile_library
    from aclcap.loading.libraries import load_libraries

    load_libraries(libs)
    compile_library("aclcap_signature_probe", [PROBE_SOURCE], Path(build_dir), flags=["-O1"])
    return {op: torch.ops.aclcap_probe.cpp_signature(op) for op in ops}


def probe_signatures(libs: list[str], ops: list[str], build_dir: Path
                     ) -> dict[str, CppSignature]:
    """op -> the C++ signature its library registered, for the ops that have a typed
    kernel; {} where the probe cannot run (the caller then emits its own signature)."""
    from aclcap._isolated import ChildDied, run_isolated

    if not ops:
        return {}
    try:
        texts = run_isolated(_probe, libs, ops, str(build_dir))
    except ChildDied:
        return {}
    found = {op: parse_signature(text) for op, text in texts.items() if text}
    return {op: sig for op, sig in found.items() if sig is not None}
