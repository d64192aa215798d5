"""The README's stream quickstart runs as written (bash, a real ``privpub serve`` in the background,
the CLI), except the ``pip install`` line (the package is installed) and the port (a free one)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from service_helpers import SRC, free_port

README = Path(__file__).resolve().parents[2] / "README.md"


def _snippet() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Stream service quickstart", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_readme_stream_quickstart_runs(tmp_path: Path) -> None:
    lines = [ln for ln in _snippet().splitlines() if not ln.startswith("python -m pip install")]
    assert any(ln.startswith("privpub serve") for ln in lines) and len(lines) >= 8
    port = str(free_port())
    script = "\n".join(ln.replace("8000", port) for ln in lines) + "\n"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # ``privpub`` and ``python`` as a fresh install provides them (this interpreter, these sources)
    (bindir / "privpub").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m privpub "$@"\n')
    (bindir / "privpub").chmod(0o755)
    (bindir / "python").symlink_to(sys.executable)
    # the commands' default service URL is http://127.0.0.1:8000: the free port instead
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", PYTHONPATH=str(SRC),
               PRIVPUB_URL=f"http://127.0.0.1:{port}")
    env.pop("PRIVPUB_ADMIN_TOKEN", None)
    log = tmp_path / "out.log"
    with open(log, "wb") as sink:  # a file, not a pipe: the background server keeps its stdout open
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        proc.wait(timeout=240)
        text = log.read_text(errors="replace")
        assert proc.returncode == 0, text
        assert "sent 3000 counts" in text and "released 3000 steps" in text
        assert '"estimate"' in text
        url = re.search(r"dashboard: (http://\S+)", text).group(1)  # type: ignore[union-attr]
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and 'id="series"' in page.text
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the background ``privpub serve``
        except ProcessLookupError:
            pass
        proc.wait(30)
