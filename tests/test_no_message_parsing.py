"""Errors as data (issue 24): the CLI and the service never parse or rewrite an error's message.

They render an error from its data (``PrivpubError.param`` and ``fix``, pydantic's ``loc`` and
``type``, click's parameter): this test reads their source and fails on any regular expression
(``re.sub``, ``re.match``, ...) or string surgery (``.replace``, ``.split(sep)``, ``.partition``,
``.startswith``, ...) applied to an exception's text: ``str(exc)``, ``exc.args``, ``exc.message``,
``exc.format_message()``, a caught exception itself, a parameter named ``exc``/``message``/..., or a
name assigned from one of these.
Whitespace only (``" ".join(text.split())``, ``text.strip()``) stays allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "privpub"
LAYERS = ("cli", "service")

#: ``re`` functions that read a string
RE_FUNCS = {"sub", "subn", "match", "fullmatch", "search", "findall", "finditer", "split"}
#: string methods that pick a message apart (``split`` only with a separator)
STR_SURGERY = {"replace", "partition", "rpartition", "startswith", "endswith", "removeprefix", "removesuffix",
               "find", "rfind", "index", "rindex", "rsplit", "split", "lstrip", "rstrip", "strip", "count"}
#: attributes that are an exception's text
TEXT_ATTRS = {"args", "message", "msg"}


#: parameters that hold an exception or its message (``def usage_error_line(exc)``, ``def f(message)``)
TEXT_PARAMS = {"exc", "err", "error", "message", "msg"}


def _caught_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names that hold an exception or its text: caught ones, and parameters named as one."""
    caught = {h.name for h in ast.walk(func) if isinstance(h, ast.ExceptHandler) and h.name}
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    return caught | (params & TEXT_PARAMS)


def _walk_values(node: ast.AST) -> list[ast.AST]:
    """The nodes of an expression, without ``type(x)`` calls (an exception's class is not its text)."""
    out = [node]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
        return []
    for child in ast.iter_child_nodes(node):
        out.extend(_walk_values(child))
    return out


def _is_text(node: ast.AST, tainted: set[str]) -> bool:
    """Whether ``node`` (an expression) holds an exception's text."""
    for sub in _walk_values(node):
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in TEXT_ATTRS and isinstance(sub.value, ast.Name) \
                and sub.value.id in tainted | {"exc", "err", "error", "e"}:
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "format_message":
            return True
    return False


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [n for elt in node.elts for n in _targets(elt)]
    return []


def message_parsing(source: str, filename: str = "<source>") -> list[str]:
    """Every place in ``source`` where a regular expression or string surgery reads an exception's text."""
    tree = ast.parse(source, filename)
    found: list[str] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for func in functions:
        tainted = _caught_names(func)
        if not tainted:
            continue
        changed = True
        while changed:  # names assigned from an exception's text are its text too
            changed = False
            for node in ast.walk(func):
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None \
                        and _is_text(node.value, tainted):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for name in (n for t in targets for n in _targets(t)):
                        if name not in tainted:
                            tainted.add(name)
                            changed = True
        for node in ast.walk(func):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            attr = node.func.attr
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "re" and attr in RE_FUNCS:
                if any(_is_text(a, tainted) for a in [*node.args, *(k.value for k in node.keywords)]):
                    found.append(f"{filename}:{node.lineno}: re.{attr} over an exception's message")
            elif attr in RE_FUNCS and any(_is_text(a, tainted) for a in node.args) \
                    and not isinstance(owner, ast.Constant):  # a compiled pattern's .sub(...)/.match(...)
                if attr != "split" or node.args:
                    found.append(f"{filename}:{node.lineno}: pattern.{attr} over an exception's message")
            if attr in STR_SURGERY and _is_text(owner, tainted):
                if attr in ("split", "strip", "lstrip", "rstrip") and not node.args and not node.keywords:
                    continue  # " ".join(text.split()), text.strip(): whitespace only
                found.append(f"{filename}:{node.lineno}: .{attr}() of an exception's message")
    return found


def _files() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (SRC / layer).rglob("*.py") if "migrations" not in p.parts)


def test_the_layers_exist() -> None:
    assert len(_files()) > 20


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_message_parsing(path: Path) -> None:
    assert message_parsing(path.read_text(encoding="utf-8"), str(path.relative_to(SRC))) == []


def test_flag_terms_is_gone() -> None:
    """The CLI's message rewriter (issue 24) must not come back under its name."""
    for path in _files():
        assert "flag_terms" not in path.read_text(encoding="utf-8"), path


@pytest.mark.parametrize("snippet", [
    # the service's old field guess
    "def f():\n    try:\n        g()\n    except E as exc:\n        msg = str(exc)\n"
    "        first = msg.split(' ', 1)[0]\n",
    # the service's old rewording
    "def f():\n    try:\n        g()\n    except E as exc:\n        raise S(422, str(exc).replace('items', 'counts', 1))\n",
    # the CLI's old flag rewriting
    "import re\ndef f():\n    try:\n        g()\n    except E as exc:\n"
    "        echo(re.sub(r'^epsilon must', '--epsilon must', str(exc)))\n",
    # the CLI's old usage-error rewriting
    "import re\ndef f():\n    try:\n        g()\n    except E as exc:\n        m = exc.format_message()\n"
    "        m = re.sub(r\"'(-[\\w-]+)'\", r'\\1', m)\n",
    # the CLI's old helpers: a message (or an exception) handed to a function that rewrites it
    "import re\ndef flag_terms(message, flags):\n    return re.sub(r'^epsilon', '--epsilon', message)\n",
    "import re\ndef usage_error_line(exc):\n    message = ' '.join(exc.format_message().split())\n"
    "    return re.sub(r\"'(-[\\w-]+)'\", r'\\1', message)\n",
    # a compiled pattern over the message
    "import re\nP = re.compile('x')\ndef f():\n    try:\n        g()\n    except E as e:\n        P.match(e.args[0])\n",
    "def f():\n    try:\n        g()\n    except E as exc:\n        if str(exc).startswith('epsilon'):\n            pass\n",
])
def test_the_check_finds_message_parsing(snippet: str) -> None:
    """Negative controls: the message parsing this issue removed is found."""
    assert message_parsing(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "def f():\n    try:\n        g()\n    except E as exc:\n        echo(' '.join(str(exc).split()))\n",
    "def f():\n    try:\n        g()\n    except E as exc:\n        echo(flags[exc.param], str(exc))\n",
    "import re\ndef f(path):\n    return re.match(r'^/streams/([0-9a-f]{16})$', path)\n",
])
def test_the_check_allows_rendering_from_data(snippet: str) -> None:
    assert message_parsing(snippet) == []
