"""Whether an op name a user gave is registered once a model file has loaded its op
libraries, and if not, what is registered near it: a name that matches nothing would
silently do nothing (a split at no op)."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from pathlib import Path


def unregistered_op(model: Path | str, op: str) -> str | None:
    """None where `op` (`ns::name`) is registered after `model` is imported (once per
    process: the run reuses it), else why not and the ops nearby. A namespace with no op
    yet is not judged here: build_model's imports may register it (transformers registers
    `transformers::` there), and the traced graph's ops decide then."""
    from aclcap._compat import op_names
    from aclcap.loading.model_file import load_model_file

    load_model_file(model)
    known = {name.split(".", 1)[0] for name in op_names()}
    if op in known or not any(n.startswith(op.split("::", 1)[0] + "::") for n in known):
        return None
    return nearby(op, known)


def nearby(op: str, known: Collection[str]) -> str:
    """What is registered near `op`: close names (difflib), else its namespace's ops, else
    the custom namespaces there are."""
    from aclcap.loading.libraries import custom_namespaces

    namespace, name = op.split("::", 1)
    siblings = sorted(n for n in known if n.startswith(namespace + "::"))
    if siblings:  # the names alone: a shared namespace would make every op look close
        bare = [n.split("::", 1)[1] for n in siblings]
        close = [f"{namespace}::{n}" for n in difflib.get_close_matches(name, bare, n=3)]
    else:
        close = difflib.get_close_matches(op, known, n=3)
    where = f"no op of that name in namespace {namespace}" if siblings else \
        f"no op of namespace {namespace} is registered (custom namespaces: " \
        f"{', '.join(custom_namespaces()) or 'none'})"
    if close:
        return f"{where}; did you mean {' or '.join(close)}?"
    if siblings:
        more = f" and {len(siblings) - 8} more" if len(siblings) > 8 else ""
        return f"{where}; it has {', '.join(siblings[:8])}{more}"
    return f"{where}; give ops as namespace::name from the model's op libraries"
