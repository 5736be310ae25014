"""Issue 58 item 2: the result cache never changes a synthesis verdict. The same synthesis
runs cold, then warm (check-meta's rows from its cache), on an op harvested from a step
that draws host lengths with Python's `random` (tests/models/host_lens_step.py): every
worker harvests the same calls, so the verifying worker makes the held-out calls again
(they went missing: "verification FAILED (python: the verifying worker could not make the
held-out calls again)"), and both runs write the same file, byte for byte."""

from __future__ import annotations

from tests.conftest import ROOT, aclcap_process

MODEL = ROOT / "tests" / "models" / "host_lens_step.py"
OP = "aclcap_hostlens::decode_attn_host.default"


def test_the_same_synthesis_cold_then_warm_gives_the_same_verdicts_and_file(tmp_path):
    runs = []
    for name in ("cold", "warm"):
        (tmp_path / name).mkdir()
        run = aclcap_process("check-meta", "--samples-from", str(MODEL), "--namespace",
                             "aclcap_hostlens", "--synthesize", "fakes.py", "--json", "-",
                             cwd=tmp_path / name, ACLCAP_CACHE_DIR=str(tmp_path / "cache"))
        assert run.code == 1, run.stdout + run.stderr  # the library ships no meta: a finding
        runs.append(run.json())
    cold, warm = ({r["op"]: (r["status"], r["synthesis"]) for r in doc["results"]}
                  for doc in runs)
    assert cold[OP][1]["status"] == "verified", cold[OP][1]["verdict"]
    assert warm == cold  # every row and verdict, on the cache the first run filled
    assert (tmp_path / "cold" / "fakes.py").read_bytes() == \
        (tmp_path / "warm" / "fakes.py").read_bytes()
