"""privpub.core.lazy_exports: the package facades import each re-export on first use (issue 27)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from privpub.core import lazy_exports

SRC = Path(__file__).resolve().parents[2] / "src"
FACADES = ["privpub", "privpub.core", "privpub.ldp", "privpub.spatial"]


@pytest.mark.parametrize("name", FACADES)
def test_every_export_is_listed_by_dir_and_resolves_to_its_definition(name: str) -> None:
    module = importlib.import_module(name)
    assert set(module.__all__) <= set(dir(module))
    for item in module.__all__:
        value = getattr(module, item)
        assert vars(module)[item] is value  # cached in the namespace after the first look-up
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_import_loads_only_what_is_used() -> None:
    """A fresh ``import privpub`` loads no part and no mechanism module; a name loads its module."""
    code = ("import json, sys, privpub, privpub.core\n"
            "before = sorted(m for m in sys.modules if m.startswith('privpub'))\n"
            "privpub.core.check_epsilon(1.0)\n"
            "after = sorted(m for m in sys.modules if m.startswith('privpub'))\n"
            "print(json.dumps([before, after]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    before, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(before) <= {"privpub", "privpub.core", "privpub.core._lazy", "privpub.errors"}
    assert "privpub.core._validation" in after
    assert not any(m.startswith(("privpub.core._mechanisms", "privpub.core._domain", "privpub.ldp")) for m in after)


def _facade(tmp_path: Path, body: str) -> tuple[str, Path]:
    pkg = tmp_path / "lazy_pkg"
    pkg.mkdir()
    (pkg / "_impl.py").write_text("VALUE = 42\nOTHER = 'x'\n")
    init = pkg / "__init__.py"
    init.write_text(body)
    return "lazy_pkg", init


def test_a_facade_resolves_relative_imports_and_aliases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, init = _facade(tmp_path, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from ._impl import VALUE, OTHER as RENAMED\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = types.ModuleType(name)
    module.__path__ = [str(init.parent)]  # a package, so its submodule imports
    monkeypatch.setitem(sys.modules, name, module)
    getter, lister = lazy_exports(name, str(init))
    assert getter("VALUE") == 42 and getter("RENAMED") == "x"
    assert {"VALUE", "RENAMED"} <= set(lister())
    with pytest.raises(AttributeError):
        getter("OTHER")  # exported under its alias only


def test_a_facade_refuses_other_statements_in_its_block(tmp_path: Path) -> None:
    name, init = _facade(tmp_path, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n")
    with pytest.raises(TypeError, match=r"only `from \.\.\. import \.\.\.` lines"):
        lazy_exports(name, str(init))
