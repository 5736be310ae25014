"""Result objects -> rich renderables and JSON documents, one module per command, each
with `render(result, width)` and `to_document(result)`; both read the same rows, so the
printed table and `--json` never disagree (README: machine-readable output). `layout`
holds what they share. Importing this package never imports torch (`aclcap build`)."""

from aclcap.report.check_meta import render as meta_table
from aclcap.report.layout import console_for, document, write_json
from aclcap.report.lint import render as lint_table

# check-meta's command module calls these names (its owner moves it to render/to_document).
__all__ = ["console_for", "document", "lint_table", "meta_table", "write_json"]
