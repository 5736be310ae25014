"""The pytest plugin (entry point `pytest11`): `pytest --aclcap-lib LIB --aclcap-namespace NS
[--aclcap-samples-from MODEL.py]` adds one item per op, `aclcap::test_meta[ns::op.default]`, that
fails with check-meta's reasons, is skipped when the op was not exercised, passes otherwise.

The checks run once, at collection, through check-meta's runner: kernels run in its worker
process, so a segfaulting op is one failed item, never a dead pytest run."""

from __future__ import annotations

from pathlib import Path

import pytest

from aclcap.status import FAILING, NOT_RUN, Status


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aclcap", "aclcap: check custom ops' meta impls")
    group.addoption("--aclcap-lib", action="append", default=[], metavar="PATH_OR_MODULE",
                    help="Op library to load (a .so, a .py file or a module); repeatable.")
    group.addoption("--aclcap-namespace", action="append", default=[], metavar="NS",
                    help="Op namespace to check; repeatable (default: those the libraries "
                    "register).")
    group.addoption("--aclcap-samples-from", action="append", default=[], metavar="MODEL.py",
                    help="Harvest sample inputs from this model file's step; repeatable.")
    group.addoption("--aclcap-device", default="cpu", metavar="DEVICE",
                    help="Where real kernels run: cpu, cuda or npu (default cpu).")
    group.addoption("--aclcap-timeout", type=float, default=60.0, metavar="SECONDS",
                    help="Seconds one op's checks may take (default 60).")


class MetaItem(pytest.Item):
    """One op's check-meta row as a test."""

    def __init__(self, *, row: dict, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.row = row

    def runtest(self) -> None:
        status = Status(self.row["status"])
        reasons = self.row["reasons"]
        if status in FAILING:
            pytest.fail(f"{self.row['op']} {status}:\n" + "\n".join(reasons), pytrace=False)
        if status in NOT_RUN:
            pytest.skip(f"{status}: {'; '.join(reasons) or 'no samples'}")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"aclcap check-meta {self.row['op']}"


def _rows(config: pytest.Config) -> list[dict]:
    from aclcap.loading.libraries import BUNDLED
    from aclcap.meta.options import CheckMetaOptions
    from aclcap.meta.runner import check_meta

    models = [str(Path(m).resolve()) for m in config.getoption("aclcap_samples_from")]
    libs = config.getoption("aclcap_lib") or ([] if models else [BUNDLED])
    options = CheckMetaOptions(libs=libs, namespaces=config.getoption("aclcap_namespace")
                               or None, device=config.getoption("aclcap_device"),
                               timeout_s=config.getoption("aclcap_timeout"),
                               samples_from=models)
    from aclcap.errors import UsageError

    try:
        return check_meta(options).to_dicts()
    except UsageError as error:  # bad input: pytest's one-line usage error, no traceback
        raise pytest.UsageError(f"aclcap: {error}") from None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if not (config.getoption("aclcap_lib") or config.getoption("aclcap_namespace")
            or config.getoption("aclcap_samples_from")):
        return
    for row in _rows(config):
        name = f"test_meta[{row['op']}]"
        # A node id of its own: the session's path would put the rootdir before every item.
        items.append(MetaItem.from_parent(session, name=name, nodeid=f"aclcap::{name}",
                                          row=row))
