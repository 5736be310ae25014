"""Synthesis of a real library's ops re-defined without their fakes, then the written fakes
run beside the library's own and its kernels on calls no sample had
(tests/real/models/fake_compare.py): what test_bitsandbytes.py and test_fbgemm.py share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, Run, aclcap_process

MODELS = ROOT / "tests" / "real" / "models"


def synthesize_and_compare(out: Path, namespace: str, source: list[str], compare: str,
                           **env: str) -> tuple[Run, dict[str, dict], dict[str, dict]]:
    """`check-meta --namespace NS --synthesize` with `source` (`--lib ...` or
    `--samples-from ...`) into `out`, then MODELS/`compare` on the written file: the run,
    each op's synthesis (JSON, by bare name) and the comparison."""
    metas = out / f"{namespace}_metas.py"
    run = aclcap_process("check-meta", *source, "--namespace", namespace, "--synthesize",
                         str(metas), "--json", str(out / "run.json"), **env)
    doc = json.loads((out / "run.json").read_text())
    done = subprocess.run([sys.executable, str(MODELS / compare), str(metas)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    synthesis = {r["op"].removeprefix(f"{namespace}::").removesuffix(".default"):
                 r["synthesis"] for r in doc["results"]}
    return run, synthesis, json.loads(done.stdout.strip().splitlines()[-1])
