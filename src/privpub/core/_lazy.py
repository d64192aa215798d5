"""Lazy package facades (PEP 562): a package's re-exports are imported on first use.

A facade ``__init__`` keeps its ``from privpub.x._module import name`` lines, indented under
``if TYPE_CHECKING:`` (so type checkers, linters and the layer contract in
``tests/test_architecture.py`` read them as before), and ends with::

    __getattr__, __dir__ = lazy_exports(__name__, __file__)

The first access to ``package.name`` (including ``from package import name``) imports the one
module that defines it, so ``import privpub.client`` on a small device pays for NumPy and the
client's own modules, not for every part of the library (issue 27). The import lines are read
once, from the facade's own source, so they remain the single list of what the package exports.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["lazy_exports"]


def _type_checking_imports(tree: ast.Module, package: str) -> dict[str, tuple[str, str]]:
    """``{exported name: (module, name in module)}`` from the ``if TYPE_CHECKING:`` blocks."""
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.ImportFrom):
                raise TypeError(f"{package}: only `from ... import ...` lines belong in the TYPE_CHECKING block")
            module = importlib.util.resolve_name("." * stmt.level + (stmt.module or ""), package)
            for alias in stmt.names:
                out[alias.asname or alias.name] = (module, alias.name)
    return out


def lazy_exports(package: str, file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A facade's PEP 562 ``__getattr__`` and ``__dir__``, importing each re-export on first use.

    Parameters
    ----------
    package : str
        The facade's ``__name__``.
    file : str
        The facade's ``__file__``; its ``if TYPE_CHECKING:`` block of ``from ... import ...``
        lines says which module defines each exported name.

    Returns
    -------
    (__getattr__, __dir__)
        Assign them at the end of the facade. A resolved name is stored in the package's
        namespace, so each is looked up once.

    Examples
    --------
    >>> import privpub.core
    >>> "as_generator" in dir(privpub.core)
    True
    """
    where = _type_checking_imports(ast.parse(Path(file).read_text(encoding="utf-8"), file), package)

    def __getattr__(name: str) -> Any:
        try:
            module, attr = where[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attr)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
