"""One status vocabulary for every command's rows, and findings that carry a severity."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from aclcap.lint_rules import RULE_IDS


class Status(StrEnum):
    """A row's verdict. StrEnum: JSON and tables print the plain value."""

    PASS = "pass"
    FAIL = "fail"
    MISSING = "missing"  # check-meta: no meta impl
    CRASHED = "crashed"  # check-meta: the kernel took the worker down
    TIMEOUT = "timeout"
    NOT_EXERCISED = "not_exercised"  # check-meta: no sample inputs, only inspected
    UNVERIFIED = "unverified"  # check-meta: a C++ composite or Autograd body no sample ran
    NO_KERNEL = "no_kernel"  # check-meta: no kernel for the device in this build (CUDA-only)
    BUILT = "built"  # build targets
    UP_TO_DATE = "up_to_date"
    SKIPPED = "skipped"


FAILING = frozenset({Status.FAIL, Status.MISSING, Status.CRASHED, Status.TIMEOUT})
# check-meta rows no sample ran: CI reports and the pytest plugin count them skipped
NOT_RUN = frozenset({Status.NOT_EXERCISED, Status.UNVERIFIED, Status.NO_KERNEL})


class Severity(StrEnum):
    ERROR = "error"  # fails the row
    WARNING = "warning"  # reported; fails only under --strict
    NOTE = "note"  # what a passing row should know (a data-dependent output, a fixed dim)


@dataclass(frozen=True)
class Finding:
    """One thing a check found, in one line naming the argument or output. A finding in
    source code (`check-meta --lint`) also says where: file, line, rule and the code line;
    its message is the fix, which lint's table and JSON call the hint."""

    message: str
    severity: Severity = Severity.ERROR
    file: str = ""
    line: int = 0
    rule: str = ""
    code: str = ""
    column: int = 0  # 1-based; 0 where the finding has no column

    @property
    def rule_id(self) -> str:
        """The stable id of a lint rule (`ACL101`), empty for other findings."""
        return RULE_IDS.get(self.rule, "")

    @property
    def hint(self) -> str:
        return self.message

    def text(self) -> str:
        """How a reason reads in a table and in JSON `reasons`."""
        return self.message if self.severity is Severity.ERROR else \
            f"{self.severity}: {self.message}"

    def to_dict(self) -> dict:
        """The JSON form: a source finding by place and rule, any other by severity."""
        if self.file:
            return {"file": self.file, "line": self.line, "column": self.column,
                    "rule": self.rule, "rule_id": self.rule_id, "code": self.code,
                    "hint": self.message}
        return {"severity": str(self.severity), "message": self.message}
