"""Result objects -> rich renderables and JSON documents, one module per command, each
with `render(result, width)` and `to_document(result)`; both read the same rows, so the
printed table and `--json` never disagree (docs/contracts.md: machine-readable output). `layout`
holds what they share. Importing this package never imports torch (`aclcap build`)."""
