"""check-meta's result cache: an op's row, as its worker found it, kept under a key of
everything that decides it, so an unchanged op is answered without running its kernel
(op authors run check-meta after every edit, in pre-commit and in CI).

The key: the op's schema, kernels and meta impl as the dispatcher lists them; the content
of the files that define its kernels, meta and declared samples (op_sources.py); the
model files samples are harvested from and --shapes; the options that change a verdict
(CheckMetaOptions.CACHE_KEYED); the checks' own sources, CHECKS_VERSION, aclcap's,
torch's and Python's versions. Not in it, so `--no-cache` is the way to check again after
a change to them: environment variables a kernel reads as it runs, code its functions
reach beyond the files they name, libraries a .so links to, and the random values of
samples (a verdict that turns on them is kept as first found).

Entries live beside the AOTI cache, one file per key, each written whole (a temp file
renamed over it): a crash leaves the old entry or the new one, and an entry that does not
parse is a miss. Nothing here imports torch: the CLI asks `expect_all_cached` before it
does, to leave the workers' server unstarted on a run the cache answers."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aclcap._version import VERSION
from aclcap.build import cache_root
from aclcap.cache_budget import prune, touch
from aclcap.meta.options import CheckMetaOptions
from aclcap.status import Finding, Severity, Status

if TYPE_CHECKING:
    from aclcap.meta.registry import OpInfo

# Bump when what a row says for the same op and files changes other than through the
# checks' own sources (hashed besides: `_checks_files`), say a row field's meaning: every
# entry made before stops matching.
CHECKS_VERSION = 1
# What a row keeps from its worker (runner._Checked's fields); the rest of a row is what
# the dispatcher says now, read afresh on every run.
CACHED_FIELDS = ("status", "findings", "sample_count", "sample_sources", "data_dependent",
                 "check_s")
# Rows that say more about that run than about the op: a crash or a hang (memory, a
# signal from outside, a loaded machine) is checked again next time, never replayed.
_NOT_KEPT = frozenset({Status.CRASHED, Status.TIMEOUT})


def cache_dir() -> Path:
    """Beside the AOTI cache, under $ACLCAP_CACHE_DIR."""
    return cache_root() / "check-meta"


def _stat(path: str) -> list[int] | None:
    """What tells a rewritten file from the one read before (None: no such file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class _Files:
    """Each file's sha256, read once while its stat stays the same, and which loaded .so
    files hold a C++ source (op_sources.shared_libraries), searched once per source."""

    def __init__(self) -> None:
        self.stats: dict[str, list[int]] = {}  # every file a key was made of
        self._digests: dict[tuple[str, tuple[int, ...]], str] = {}
        self._contents: dict[tuple[str, tuple[int, ...]], bytes] = {}
        self._holding: dict[tuple[str, tuple], set[str] | None] = {}

    def digest(self, path: str) -> str | None:
        stat = _stat(path)
        if stat is None:
            return None
        self.stats[path] = stat
        memo = (path, tuple(stat))
        if memo not in self._digests:
            try:
                self._digests[memo] = hashlib.sha256(self._read(memo)).hexdigest()
            except OSError:  # unreadable: nothing can be keyed on it
                return None
        return self._digests[memo]

    def _read(self, memo: tuple[str, tuple[int, ...]]) -> bytes:
        if memo not in self._contents:
            self._contents[memo] = Path(memo[0]).read_bytes()
        return self._contents[memo]

    def holding(self, source: str) -> set[str] | None:
        """The loaded .so files built from a C++ source, None if none."""
        import torch

        from aclcap.meta.op_sources import shared_libraries

        loaded = {path: stat for path in sorted(torch.ops.loaded_libraries)
                  if (stat := _stat(path)) is not None}
        memo = (source, tuple((path, tuple(stat)) for path, stat in loaded.items()))
        if memo not in self._holding:
            contents = {}
            for path, stat in loaded.items():
                try:
                    contents[path] = self._read((path, tuple(stat)))
                except OSError:  # unreadable: no op is keyed on it
                    continue
            self._holding[memo] = shared_libraries(source, contents)
        return self._holding[memo]


def _checks_files() -> list[str]:
    """The checks' own sources: the worker and every module of aclcap.meta it runs (and
    the tensor helpers they share), so an edited check is never answered by an old row."""
    meta = Path(__file__).parent
    return sorted([*map(str, meta.glob("*.py")), str(meta.parent / "_tensors.py")])


def _identity(options: CheckMetaOptions) -> str:
    """One invocation's name (its directory, libraries and keyed options but the device,
    which `auto` names before torch can resolve it), for its manifest."""
    what = {"cwd": os.getcwd(), "libs": options.libs, "namespaces": options.namespaces,
            **options.cache_factors(), "device": None,
            "samples_from": [str(Path(m).resolve()) for m in options.samples_from]}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _write(path: Path, doc: dict) -> None:
    """Whole or not at all: a temp file in the same folder, renamed over the entry. A
    cache that cannot be written (a read-only home) costs the next run its time only."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(doc, out)
        os.replace(temp, path)
    except BaseException as exc:
        Path(temp).unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise


def _read(path: Path) -> Any:
    """The JSON at `path`, or None where it is missing or does not parse."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def expect_all_cached(options: CheckMetaOptions, root: Path | None = None) -> bool:
    """Whether the last run with these options had every checked op's row cached and no
    file it read has changed since: a guess made before torch is imported, that decides
    whether to start the workers' server early. A wrong guess costs time, never a verdict
    (the run makes the real keys, and starts the server for any op they miss)."""
    manifest = _read((root or cache_dir()) / "runs" / f"{_identity(options)}.json")
    try:
        return bool(manifest["complete"]) and all(
            _stat(path) == stat for path, stat in manifest["files"].items())
    except (TypeError, KeyError, AttributeError):
        return False


def _encode(checked: Any) -> dict:
    row = {name: getattr(checked, name) for name in CACHED_FIELDS}
    row["findings"] = [vars(f) for f in checked.findings]
    return row


def _decode(row: dict) -> dict:
    """The cached fields as runner._Checked takes them; KeyError, TypeError or ValueError
    on an entry of another shape."""
    fields = {name: row[name] for name in CACHED_FIELDS}
    fields["status"] = Status(row["status"])
    fields["findings"] = [Finding(**{**f, "severity": Severity(f["severity"])})
                          for f in row["findings"]]
    return fields


@dataclass
class ResultCache:
    """One run's view of the cache: keys made once per op, hits read, new rows written."""

    options: CheckMetaOptions  # samples_from resolved
    root: Path | None = None  # default: cache_dir()

    def __post_init__(self) -> None:
        self.dir = self.root or cache_dir()
        self.files = _Files()
        self.complete = True  # every op checked this run has its row in the cache

    def _run_key(self) -> dict | None:
        """What every op's key shares; None where a model file is gone."""
        import torch

        models = [[m, self.files.digest(m)] for m in self.options.samples_from]
        checks = {path: self.files.digest(path) for path in _checks_files()}
        if any(digest is None for _, digest in models):
            return None
        return {"checks": CHECKS_VERSION, "checks_files": checks, "aclcap": VERSION,
                "torch": torch.__version__, "python": platform.python_version(),
                **self.options.cache_factors(), "samples_from": models}

    def key(self, op: OpInfo) -> str | None:
        """The op's key, or None where a file that defines it cannot be told or read: its
        row is then checked every run (op_sources.py)."""
        from aclcap.meta.op_sources import op_sources

        run = self._run_key()
        sources = op_sources(op, self.files.holding) if run is not None else None
        if sources is None:
            return None
        digests = {path: self.files.digest(path) for path in sorted(sources)}
        if None in digests.values():
            return None
        what = {**run, "op": op.qualname, "schema": op.schema, "kernels": op.kernels,
                "meta_kind": str(op.meta_kind), "meta_source": op.meta_source,
                "files": digests}
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()

    def _entry(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def lookup(self, keys: dict[str, str | None]) -> dict[str, dict]:
        """qualname -> its cached fields (runner._Checked's), for each op whose key
        (`key`'s, by qualname) has an entry; an unreadable entry is a miss."""
        hits = {}
        for qualname, key in keys.items():
            if key is None:
                self.complete = False
                continue
            entry = _read(self._entry(key))
            try:
                if entry["op"] == qualname:
                    hits[qualname] = _decode(entry["row"])
            except (TypeError, KeyError, ValueError):
                continue
            touch(self._entry(key))
        return hits

    def store(self, op: OpInfo, checked: Any, key: str | None) -> None:
        """Keep a fresh row under `key` (made before its worker ran) unless it is a crash
        or timeout, or a file it was keyed on changed while the worker ran: the worker
        then loaded other code than the key names."""
        kept = checked.status not in _NOT_KEPT and checked.death is None
        if kept and key is not None and self.key(op) == key:
            _write(self._entry(key), {"op": op.qualname, "row": _encode(checked)})
        else:
            self.complete = False

    def finish(self, extra_files: Iterable[str] = ()) -> None:
        """The manifest `expect_all_cached` reads next time: the files this run's keys
        were made of (and the libraries named on the command line) and whether every
        checked op's row is in the cache now."""
        files = dict(self.files.stats)
        for path in extra_files:
            if (stat := _stat(path)) is not None:
                files[path] = stat
        _write(self.dir / "runs" / f"{_identity(self.options)}.json",
               {"files": files, "complete": self.complete})
        prune()
