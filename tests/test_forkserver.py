"""aclcap's one server of child processes (check-meta workers, --nproc ranks), started
early so its imports overlap the run's own, never makes a run that ends early slow."""

from __future__ import annotations

import subprocess
import sys
import time


def test_a_run_ending_while_its_server_imports_closes_its_output_at_once():
    """A run that stops on bad input after starting the server (a library that fails to
    load) ends the server with it: a server left importing torch would hold the run's
    stdout open, and a CI step reading it would wait seconds for the error."""
    code = ("import sys\nfrom multiprocessing import forkserver\nfrom aclcap import _forkserver\n"
            "_forkserver.start()\nprint(forkserver._forkserver._forkserver_pid, flush=True)\n"
            "sys.exit(2)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip().isdigit()  # the server is running, importing
    start = time.perf_counter()
    rest = proc.stdout.read()  # EOF once every holder of the pipe is gone
    waited = time.perf_counter() - start
    assert proc.wait(timeout=60) == 2 and rest == ""
    # its imports take 2.7 s of CPU time at least; the end of the run itself, milliseconds
    assert waited < 1.0, f"the output stayed open {waited:.1f} s after the run ended"
