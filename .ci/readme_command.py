"""Print a line of the README's Quickstart ``bash`` block (default: the first), as written.

``.ci/run`` runs the first one in a fresh virtual environment before anything else is
installed, so the command the README tells a newcomer to run first is the one CI checks.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def quickstart_commands(readme: Path) -> list[str]:
    """The lines of the first ``bash`` block under the ``## Quickstart`` heading."""
    text = readme.read_text(encoding="utf-8")
    section = re.search(r"^## Quickstart\n(.*?)(?=^## |\Z)", text, flags=re.DOTALL | re.MULTILINE)
    if section is None:
        raise SystemExit("README.md has no '## Quickstart' section")
    block = re.search(r"^```bash\n(.*?)^```", section.group(1), flags=re.DOTALL | re.MULTILINE)
    if block is None:
        raise SystemExit("README.md's Quickstart has no ```bash block")
    return [line for line in block.group(1).splitlines() if line.strip()]


if __name__ == "__main__":
    index = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    print(quickstart_commands(Path(__file__).resolve().parents[1] / "README.md")[index])
