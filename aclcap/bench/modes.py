"""The modes bench times and `--modes` parsing, apart from run.py so that a bad --modes is
refused before torch is imported."""

from __future__ import annotations

from aclcap.errors import UsageError

MODES = ("eager", "compiled", "graph")


def parse_modes(text: str) -> tuple[str, ...]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if not modes or unknown:
        raise UsageError(f"--modes {text!r}: choose from {', '.join(MODES)} (comma-separated)")
    return tuple(m for m in MODES if m in modes)
