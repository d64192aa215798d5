"""SIGTERM (and Ctrl-C) during a real ``privpub`` process leaves no partial output behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: runs ``privpub synth`` through the console entry point, with the CSV writer slowed down so the
#: signal arrives while the output is half written
DRIVER = textwrap.dedent("""
    import signal, sys, time
    # a user at a terminal: SIGINT raises KeyboardInterrupt even when this test runs under a shell's
    # background job, whose children inherit SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import privpub._io as io
    original = io._write_csv

    def slow(data, tmp, progress):
        with open(tmp, "w") as fh:
            fh.write("a,b,n\\n" + "x,u,1\\n" * 1000)     # a prefix that looks like a complete table
            fh.flush()
        # a writer at work returns to Python often; short sleeps keep that true (a signal that the
        # kernel hands to one of the EM kernel's native threads runs its handler at the next one)
        for _ in range(600):
            time.sleep(0.1)

    io._WRITERS["csv"] = slow
    sys.argv = ["privpub"] + sys.argv[1:]
    from privpub.cli import main
    main()
""")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_while_writing_leaves_no_output(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    """Finding: an interrupted ``privpub synth`` left a truncated CSV that looked complete."""
    data = tmp_path / "t.csv"
    pd.DataFrame({"a": ["x", "y"] * 20, "b": ["u", "v"] * 20, "n": [1, 2] * 20}).to_csv(data, index=False)
    schema = tmp_path / "s.json"
    schema.write_text('{"attributes": [{"name": "a", "type": "categorical", "categories": ["x", "y"]}, '
                      '{"name": "b", "type": "categorical", "categories": ["u", "v"]}, '
                      '{"name": "n", "type": "numeric", "lo": 0, "hi": 9}]}', encoding="utf-8")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "synthetic.csv"
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, "synth", str(data), "--schema", str(schema), "--epsilon",
                             "2", "--degree", "1", "--quiet", "-o", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.endswith(".partial.csv") and p.stat().st_size > 1000 for p in out_dir.iterdir()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never started writing"
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "no output was written" in err and "Traceback" not in err
    assert list(out_dir.iterdir()) == []
