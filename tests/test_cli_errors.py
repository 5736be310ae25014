"""The exit-code contract, the same in every command: 1 a check failed, 2 bad input (one
line, no traceback), 3 an internal error (one line pointing at --debug); output paths are
checked before any work starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import BADOPS, ROOT, aclcap, aclcap_process

TINY = str(ROOT / "examples" / "tiny_llama.py")
BREAKS = str(ROOT / "examples" / "graph_break.py")

BAD_INPUT = [
    (("check-meta", "--lib", "no/such/lib.so"), "op library no/such/lib.so not found"),
    (("check-meta", "--lib", "no_such_module_xyz"), "op library 'no_such_module_xyz' not found"),
    (("check-meta", "--device", "tpu"), "unknown device 'tpu'"),
    (("check-meta", "--device", "cuda"), "cuda: "),
    (("check-meta", "--emit-stubs", "/no/such/dir/x.py"), "folder /no/such/dir does not exist"),
    (("check-meta", "--json", "/no/such/dir/x.json"), "--json /no/such/dir/x.json: folder"),
    (("check-meta", "--lint", "no/such/dir"), "--lint no/such/dir: no such file or folder"),
    (("capture", "no/such/model.py"), "model file no/such/model.py not found"),
    (("capture", TINY, "--shapes", "1,x"), "--shapes '1,x': give a comma-separated list"),
    (("capture", TINY, "--shapes", "0,2"), "--shapes '0,2'"),
    (("capture", TINY, "--shapes", "1,,2"), "--shapes '1,,2': give a comma-separated list"),
    (("capture", TINY, "--device", "tpu"), "unknown device 'tpu'"),
    (("capture", TINY, "--device", "npu"), "npu: torch_npu not installed"),
    (("capture", TINY, "--dtype", "int8"), "--dtype 'int8': choose one of float32, bfloat16"),
    (("capture", TINY, "--json", "/no/such/dir/x.json"), "--json /no/such/dir/x.json: folder"),
    (("capture", TINY, "--compile-backend", "turbo"),
     "--compile-backend 'turbo' is not a torch.compile backend; choose one of"),
    (("capture", TINY, "--compile-backend", "no_such_mod_xyz:fn"),
     "--compile-backend 'no_such_mod_xyz:fn': cannot import it"),
    (("bench", TINY, "--baseline", "no/such/base.json"), "--baseline no/such/base.json: file"),
    (("bench", TINY, "--modes", "eager,turbo"), "--modes 'eager,turbo': choose from eager"),
    (("bench", TINY, "--rounds", "2"), "Invalid value for '--rounds': Input should be greater "
     "than or equal to 5"),
    (("bench", TINY, "--max-regression", "-1"), "Invalid value for '--max-regression'"),
    (("check-meta", "--timeout", "-5"), "Invalid value for '--timeout'"),
    (("check-meta", "--timeout", "0"), "Invalid value for '--timeout'"),
    (("capture", TINY, "--timeout", "0"), "Invalid value for '--timeout'"),
    (("capture", TINY, "--nproc", "0"), "Invalid value for '--nproc'"),
    (("capture", TINY, "--nproc", "2", "--port", "70000"), "Invalid value for '--port'"),
    (("capture", "--plan-sizes", "--budget", "0"), "Invalid value for '--budget'"),
    (("capture", "--plan-sizes", "--max-size", "0"), "Invalid value for '--max-size'"),
    (("capture", TINY, "--no-such-option"), "No such option: --no-such-option"),
    (("capture", TINY, "--nproc", "4096"), "--nproc 4096: "),  # more than cores or devices
    (("capture", TINY, "--nproc", "4096", "--oversubscribe"), "GiB available; give --nproc"),
    (("bench", TINY, "--nproc", "4096"), "--nproc 4096: "),
    (("capture", str(ROOT / "examples")), "is a directory"),
    (("bench", TINY, "--plot", "/no/such/dir/p.png"), "--plot /no/such/dir/p.png: folder"),
    (("bench", TINY, "--save-baseline", "/no/such/b.json"), "--save-baseline /no/such/b.json"),
    (("build", "--json", "/no/such/dir/b.json"), "--json /no/such/dir/b.json: folder"),
    (("check-meta", "--lib", str(ROOT / "examples")), "examples: is a directory; pass the op "
     "library's .so or .py file"),
    (("check-meta", "--samples-from", str(ROOT / "examples")), "examples: is a directory; pass "
     "a model file"),
    (("check-meta", "--shapes", "1,2"), "--shapes is the sizes --samples-from runs its model "
     "at: add --samples-from MODEL.py, or drop --shapes"),
]


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
@pytest.mark.parametrize("args,message", BAD_INPUT, ids=[" ".join(a[:2]) + f" #{i}"
                                                          for i, (a, _) in enumerate(BAD_INPUT)])
def test_bad_input_is_one_line_exit_2(args, message, debug):
    """The exit code comes from the exception alone: --debug only adds the traceback."""
    cpu = ("--device", "cpu") if args[0] in ("capture", "bench") and "--device" not in args \
        else ()
    run = aclcap(*(("--debug",) if debug else ()), *args, *cpu)
    assert run.code == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and message in lines[-1], run.stderr
    assert not run.stderr.startswith("\n")  # one error-line format: no leading blank line
    if not debug:
        assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr


def test_output_path_is_checked_before_any_work(tmp_path):
    marker = tmp_path / "imported"
    model = tmp_path / "model.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\n")
    run = aclcap("capture", str(model), "--json", str(tmp_path / "no" / "x.json"))
    assert run.code == 2 and not marker.exists()


def test_internal_error_exits_3_in_one_line(monkeypatch):
    from aclcap.capture import run as capture_run

    def broken(*args, **kwargs):
        raise KeyError("output 1")  # stands for any bug of aclcap's own

    monkeypatch.setattr(capture_run, "run_capture", broken)
    run = aclcap("capture", TINY, "--device", "cpu")
    assert run.code == 3
    assert run.stderr.strip().splitlines() == [
        "internal error: KeyError: 'output 1' (a bug of aclcap: rerun with --debug for the "
        "traceback)"]


def test_debug_keeps_exit_3_of_an_internal_error(monkeypatch):
    from aclcap.capture import run as capture_run

    def broken(*args, **kwargs):
        raise KeyError("output 1")

    monkeypatch.setattr(capture_run, "run_capture", broken)
    run = aclcap("--debug", "capture", TINY, "--device", "cpu")
    assert run.code == 3 and "Traceback" in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("internal error: KeyError")


@pytest.mark.parametrize("command", ["capture", "bench"])
def test_capture_failure_exits_1_in_every_command(command):
    extra = ("--modes", "graph", "--rounds", "5") if command == "bench" else ()
    run = aclcap(command, BREAKS, "--device", "cpu", "--shapes", "2", *extra)
    assert run.code == 1, run.stderr
    # capture names the host read behind the branch before exporting; bench carries
    # capture's verdict and times nothing capture fails (issue 50 item 7)
    said = " ".join((run.stdout + run.stderr).split())
    assert "branches on a tensor's values at graph_break.py:30" in said
    if command == "bench":
        assert "graph_break.py: cpu, float32, nothing timed" in said
        assert "size 2: graph replay is NOT VALID, not timed: `aclcap capture` fails it" in said


def test_debug_shows_traceback():
    run = aclcap_process("--debug", "check-meta", "--lib", "no/such/lib.so")
    assert run.code != 0 and "Traceback" in run.stderr


def test_library_that_fails_to_import_is_bad_input_not_a_bug():
    run = aclcap("check-meta", "--lib", str(BADOPS.with_name("missing.py")))
    assert run.code == 2


BEFORE_TORCH = [
    ("capture", TINY, "--shapes", "0", "--device", "cpu"),
    ("capture", TINY, "--dtype", "int8", "--device", "cpu"),
    ("capture", TINY, "--device", "tpu"),
    ("capture", TINY, "--timeout", "0"),
    ("capture", TINY, "--nproc", "4096", "--device", "cpu"),
    ("capture", str(ROOT / "examples")),
    ("capture", "no/such/model.py", "--device", "cpu"),
    ("capture", "--plan-sizes"),
    ("check-meta", "--lib", "no/such/lib.so"),
    ("check-meta", "--lib", "no_such_module_xyz"),
    ("check-meta", "--timeout", "-5"),
    ("check-meta", "--samples-from", "no/such.py"),
    ("check-meta", "--lib", str(ROOT / "examples")),
    ("check-meta", "--shapes", "1,2"),
    ("bench", TINY, "--rounds", "2", "--device", "cpu"),
    ("bench", TINY, "--baseline", "no/such/base.json", "--device", "cpu"),
    ("bench", TINY, "--nproc", "4096", "--device", "cpu"),
    ("bench", TINY, "--modes", "eager,turbo", "--device", "cpu"),
    ("build", "--json", "/no/such/dir/b.json"),
]


@pytest.mark.parametrize("args", BEFORE_TORCH, ids=[" ".join(a[:3]) for a in BEFORE_TORCH])
def test_arguments_are_checked_before_torch_or_the_model_is_imported(args):
    """Bad arguments cost no torch import (seconds): refused in well under 2 s."""
    import subprocess
    import sys

    code = ("import sys\nfrom aclcap.cli import main\nsys.argv = ['aclcap', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print(code, 'torch' in sys.modules, flush=True)")
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert run.stdout.split() == ["2", "False"], run.stdout + run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_dtype_names_checked_early_are_the_step_ones():
    from aclcap.cli._options import DTYPE_NAMES
    from aclcap.graph.step import DTYPES

    assert tuple(DTYPES) == DTYPE_NAMES


UNWRITABLE = [
    ("check-meta", "--json", "/proc/x.json"),
    ("check-meta", "--junit-xml", "/proc/x.xml"),
    ("check-meta", "--emit-stubs", "/proc/x.py"),
    ("check-meta", "--synthesize", "/proc/x.py"),
    ("check-meta", "--synthesize-cpp", "/proc/x.cpp"),
    ("check-meta", "--lint", "--format", "text", "--output", "/proc/x.txt"),
    ("capture", TINY, "--device", "cpu", "--json", "/proc/x.json"),
    ("capture", TINY, "--device", "cpu", "--junit-xml", "/proc/x.xml"),
    ("bench", TINY, "--device", "cpu", "--save-baseline", "/proc/x.json"),
    ("build", "--json", "/proc/x.json"),
]


@pytest.mark.parametrize("args", UNWRITABLE, ids=[" ".join(a[-2:]) for a in UNWRITABLE])
def test_unwritable_output_is_bad_input_before_any_work(args):
    """A folder that exists but takes no file (/proc) is refused with the other arguments,
    not after the whole run as an internal FileNotFoundError."""
    run = aclcap(*args)
    assert run.code == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"error: {args[-2]} {args[-1]}: cannot be written") and \
        "writable folder" in line, line


def test_output_check_leaves_no_file_behind(tmp_path):
    out = tmp_path / "x.json"
    run = aclcap("check-meta", "--json", str(out), "--device", "tpu")
    assert run.code == 2 and not out.exists()
    out.write_text("kept")  # an existing file is checked without being emptied
    assert aclcap("check-meta", "--json", str(out), "--device", "tpu").code == 2
    assert out.read_text() == "kept"


@pytest.mark.parametrize("args,words", [
    (("capture", TINY, "--split-ops", "ux::nosuch"),
     ["--split-ops ux::nosuch:", "no op of namespace ux", "aclcap"]),
    (("capture", TINY, "--split-ops", "aclcap::paged_atention"),
     ["--split-ops aclcap::paged_atention:", "did you mean aclcap::paged_attention"]),
    (("bench", TINY, "--split-ops", "aclcap::nosuch"),
     ["--split-ops aclcap::nosuch:", "aclcap::rms_norm"]),
], ids=["namespace", "typo", "bench"])
def test_unknown_split_op_is_bad_input_naming_ops_nearby(args, words):
    """An op that is not registered would split nowhere: one whole graph, exit 0."""
    run = aclcap(*args, "--device", "cpu", "--graph-mode", "piecewise", "--shapes", "1")
    assert run.code == 2, run.stdout + run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert all(w in line for w in words), line


@pytest.mark.parametrize("fmt", ["text", "github", "table"])
def test_a_closed_pipe_ends_quietly(tmp_path, fmt):
    """`aclcap check-meta --lint DIR | head -1`: the reader is gone before the lines are
    written; the run ends quietly, as `cat` does (exit 1, Python's code on EPIPE), not in
    `internal error: BrokenPipeError`."""
    import os
    import subprocess
    import sys

    source = tmp_path / "many.py"
    source.write_text("import torch\n\n\n@torch.library.register_fake('ns::op')\n"
                      "def _fake(x):\n" + "    n = int(x.shape[0])\n" * 3000
                      + "    return x.new_empty((n,))\n")
    read, write = os.pipe()
    os.close(read)  # as `head -1` does once it has its line
    exe = Path(sys.executable).with_name("aclcap")
    proc = subprocess.run([str(exe), "check-meta", "--lint", str(source), "--format", fmt],
                          stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    os.close(write)
    assert proc.stderr == "" and proc.returncode == 1, proc.stderr
