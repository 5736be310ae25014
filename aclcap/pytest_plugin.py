"""The pytest plugin (entry point `pytest11`): `pytest --aclcap-lib LIB --aclcap-namespace NS
[--aclcap-samples-from MODEL.py]` adds one item per op, `aclcap::test_meta[ns::op.default]`, that
fails with check-meta's reasons, is skipped when the op was not exercised, passes otherwise.
Each flag has an ini key of its name (`aclcap_lib = ...`); a flag given wins over its key.

The checks run once, at collection, through check-meta's runner: kernels run in its worker
process, so a segfaulting op is one failed item, never a dead pytest run. Unchanged ops
answer from check-meta's result cache, as the CLI's do (`--aclcap-no-cache`: all afresh);
the terminal summary says how many."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aclcap.status import FAILING, NOT_RUN, Status

# Options as (flag, metavar, [default,] help); each has an ini key named as its dest.
_LISTS = (("--aclcap-lib", "PATH_OR_MODULE", "Op library to load (a .so, a .py file or a "
           "module); repeatable."),
          ("--aclcap-namespace", "NS", "Op namespace to check; repeatable (default: those the "
           "libraries register)."),
          ("--aclcap-samples-from", "MODEL.py", "Harvest sample inputs from this model file's "
           "step; repeatable."))
_VALUES = (("--aclcap-device", "DEVICE", "cpu", "Where real kernels run: cpu, cuda or npu "
            "(default cpu)."),
           ("--aclcap-timeout", "SECONDS", "60", "Seconds one op's checks may take "
            "(default 60)."))
# check-meta's reasons name its CLI flags; a plugin user passes the plugin's.
_CLI_FLAG = re.compile(r"(?<![\w-])--samples-from\b")
_CACHED = pytest.StashKey[tuple[int, int]]()  # (rows from the result cache, rows)


def _key(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aclcap", "aclcap: check custom ops' meta impls")
    for flag, metavar, text in _LISTS:
        group.addoption(flag, action="append", default=[], metavar=metavar, help=text)
        parser.addini(_key(flag), f"{text.split(';')[0]}, one a line ({flag} overrides).",
                      type="linelist", default=[])
    for flag, metavar, default, text in _VALUES:
        group.addoption(flag, default=None, metavar=metavar, help=text)
        parser.addini(_key(flag), f"{text} ({flag} overrides).", default=default)
    group.addoption("--aclcap-no-cache", action="store_true", help="Check every op afresh "
                    "instead of answering unchanged ones from check-meta's result cache.")


def _option(config: pytest.Config, flag: str, paths: bool = False) -> list[str] | str:
    """The command line's value of an option, else its ini key's; `paths` in an ini file are
    relative to it (module names stay as they are)."""
    given = config.getoption(_key(flag))
    if given not in (None, []):
        return given
    value = config.getini(_key(flag))
    if not paths:
        return value
    base = config.inipath.parent if config.inipath else config.rootpath
    return [str(base / spec) if (base / spec).exists() else spec for spec in value]


class MetaItem(pytest.Item):
    """One op's check-meta row as a test."""

    def __init__(self, *, row: dict, site: tuple[str, int] | None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.row = row
        self.site = site  # where the op is defined: its skip line names that file

    def runtest(self) -> None:
        status = Status(self.row["status"])
        reasons = self.row["reasons"]
        if status in FAILING:
            pytest.fail(f"{self.row['op']} {status}:\n" + "\n".join(reasons), pytrace=False)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        path, line = (Path(self.site[0]), self.site[1] - 1) if self.site and Path(
            self.site[0]).is_file() else (self.path, 0)
        return path, line, f"aclcap check-meta {self.row['op']}"


def _skip_reason(row: dict) -> str:
    """What a skipped item's line says: the op, its status and why, in the plugin's flags."""
    why = "; ".join(row["reasons"]) or "no samples"
    return _CLI_FLAG.sub("--aclcap-samples-from", f"{row['op']} {row['status']}: {why}")


def _rows(config: pytest.Config) -> list[dict]:
    from aclcap.loading.libraries import BUNDLED
    from aclcap.meta.options import CheckMetaOptions
    from aclcap.meta.runner import check_meta

    models = [str(Path(m).resolve())
              for m in _option(config, "--aclcap-samples-from", paths=True)]
    libs = list(_option(config, "--aclcap-lib", paths=True)) or ([] if models else [BUNDLED])
    options = CheckMetaOptions(libs=libs,
                               namespaces=list(_option(config, "--aclcap-namespace")) or None,
                               device=str(_option(config, "--aclcap-device")),
                               timeout_s=float(_option(config, "--aclcap-timeout")),
                               samples_from=models,
                               use_cache=not config.getoption("aclcap_no_cache"))
    from aclcap.errors import UsageError

    try:
        return check_meta(options).to_dicts()
    except UsageError as error:  # bad input: pytest's one-line usage error, no traceback
        raise pytest.UsageError(f"aclcap: {error}") from None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if not any(_option(config, flag) for flag, _, _ in _LISTS):
        return
    from aclcap.meta.registry import defined_at

    rows = _rows(config)
    config.stash[_CACHED] = (sum(row["cached"] for row in rows), len(rows))
    for row in rows:  # the libraries are loaded here now: their ops can be read
        name = f"test_meta[{row['op']}]"
        # A node id of its own: the session's path would put the rootdir before every item.
        item = MetaItem.from_parent(session, name=name, nodeid=f"aclcap::{name}", row=row,
                                    site=defined_at(row["op"]))
        if Status(row["status"]) in NOT_RUN:  # a skip mark: its line names the op, not here
            item.add_marker(pytest.mark.skip(reason=_skip_reason(row)))
        items.append(item)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """How many of the op items the result cache answered (their verdicts, unchanged)."""
    if _CACHED in config.stash:
        cached, rows = config.stash[_CACHED]
        terminalreporter.write_line(f"aclcap: {cached} of {rows} ops from check-meta's result "
                                    "cache (--aclcap-no-cache checks all afresh)")
