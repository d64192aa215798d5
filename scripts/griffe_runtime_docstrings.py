"""A griffe extension for the API reference (mkdocs.yml): docstrings written as ``__doc__ = f"..."``.

Some classes build their docstring at import time (the stream publishers share their parameter
text as an f-string); griffe reads the source and would show them without one. For a class with
no static docstring and a ``__doc__`` assignment, this takes the docstring of the imported class.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from typing import Any

import griffe


class RuntimeDocstrings(griffe.Extension):
    def on_class_members(self, *, node: ast.AST | griffe.ObjectNode, cls: griffe.Class, agent: Any,
                         **kwargs: Any) -> None:
        if cls.docstring is not None or "__doc__" not in cls.members:
            return
        doc = getattr(importlib.import_module(cls.module.path), cls.name).__doc__
        if doc:
            cls.docstring = griffe.Docstring(inspect.cleandoc(doc), parent=cls, parser=agent.docstring_parser,
                                            parser_options=agent.docstring_options)
            del cls.members["__doc__"]
