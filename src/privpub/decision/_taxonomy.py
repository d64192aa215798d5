"""Taxonomy trees for generalising attributes (paper 003, Sec. 3.3; spec decision.md §2.1).

A taxonomy is public metadata: a tree whose leaves are an attribute's categories (or, for a
numeric attribute in taxonomy mode, tick intervals) and whose internal nodes are the
generalised values. Two text forms are accepted:

* **nested JSON** (the house format): a node is a leaf string or a one-key object
  ``{"Label": [children...]}``; ``{"Label": {"A": [...], "b": null}}`` (a mapping of children,
  ``null``/``[]`` meaning a leaf) is accepted too. A taxonomy *file* maps attribute names to
  trees: ``{"sex": {"Any": ["Female", "Male"]}, ...}``.
* **brace form** (the paper's and DiffGen's): ``{Any {A} {B {b1} {b2}}}``; numeric nodes may be
  written ``x-y`` meaning ``[x, y)``.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privpub.errors import DataNotFoundError, DomainError, ParameterError

__all__ = ["MAX_DEPTH", "Taxonomy", "load_taxonomies"]

#: deepest taxonomy accepted (root = depth 1); real generalisation hierarchies have a few levels
MAX_DEPTH = 200


def _too_deep(what: str = "taxonomy") -> ParameterError:
    return ParameterError(f"{what} is nested more than {MAX_DEPTH} levels deep; "
                          "a generalisation hierarchy that deep is not supported")


@dataclass(frozen=True)
class Taxonomy:
    """One node of a taxonomy tree (the root stands for the whole tree).

    Parameters
    ----------
    label : str
        The node's value (a category for a leaf, a generalised value otherwise).
    children : tuple of Taxonomy
        Empty for a leaf.

    Examples
    --------
    >>> tax = Taxonomy.parse({"Any": ["Female", "Male"]})
    >>> tax.leaves()
    ('Female', 'Male')
    >>> Taxonomy.parse("{Any {A} {B {b1} {b2}}}").to_json()
    {'Any': ['A', {'B': ['b1', 'b2']}]}
    >>> [c.label for c in Taxonomy.balanced([str(i) for i in range(10)]).children]
    ['0..2', '3..5', '6..7', '8..9']
    """

    label: str
    children: tuple[Taxonomy, ...] = ()
    depth: int = field(default=1, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.children:  # each child knows its own depth: O(1) per node
            depth = 1 + max(c.depth for c in self.children)
            if depth > MAX_DEPTH:
                raise _too_deep(f"taxonomy node {self.label!r}")
            object.__setattr__(self, "depth", depth)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def _preorder(self) -> Iterator[Taxonomy]:
        stack: list[Taxonomy] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def leaves(self) -> tuple[str, ...]:
        """Leaf labels in depth-first order (linear time)."""
        return tuple(n.label for n in self._preorder() if not n.children)

    def nodes(self) -> tuple[Taxonomy, ...]:
        """All nodes in depth-first pre-order (linear time)."""
        return tuple(self._preorder())

    def collapsed(self) -> Taxonomy:
        """Replace every single-child internal node by its child (specialising it wastes a level)."""
        node = self
        while len(node.children) == 1:
            node = node.children[0]
        return Taxonomy(node.label, tuple(c.collapsed() for c in node.children))

    # -- parsing -----------------------------------------------------------------------------
    @classmethod
    def parse(cls, spec: Any) -> Taxonomy:
        """Build a tree from nested JSON (str / one-key dict), a brace string, or a Taxonomy.

        Raises
        ------
        ParameterError
            Malformed trees, JSON syntax errors, trees nested more than :data:`MAX_DEPTH` deep.
        """
        if isinstance(spec, Taxonomy):
            return spec
        if isinstance(spec, str):
            text = spec.strip()
            if text.startswith("{"):
                if text.startswith('{"'):
                    return cls.parse(_loads(text, "taxonomy"))
                return _parse_brace(text)
            return cls(text)
        return _parse_node(spec, 1)

    @classmethod
    def from_json(cls, text: str) -> Taxonomy:
        """Parse one tree from JSON text."""
        return cls.parse(_loads(text, "taxonomy"))

    def to_json(self) -> Any:
        """The nested-JSON form (a leaf string or ``{label: [children]}``)."""
        if self.is_leaf:
            return self.label
        return {self.label: [c.to_json() for c in self.children]}

    def to_brace(self) -> str:
        """The brace form ``{label {child} ...}`` used by the paper and DiffGen."""
        return "{" + " ".join([self.label, *(c.to_brace() for c in self.children)]) + "}"

    @classmethod
    def balanced(cls, categories: Sequence[str], fanout: int = 4, root: str = "Any") -> Taxonomy:
        """The documented default tree: contiguous groups of the categories in schema order.

        At most ``fanout`` categories give a flat tree; otherwise the list is cut into ``fanout``
        contiguous groups whose sizes differ by at most one (larger first, as
        :func:`numpy.array_split`), recursively. Internal labels are ``"first..last"``; the root
        is ``root``. No data is read.
        """
        if not isinstance(fanout, int) or isinstance(fanout, bool) or fanout < 2:
            raise ParameterError(f"fanout must be an integer >= 2, got {fanout!r}", param="fanout")
        cats = [str(c) for c in categories]
        if not cats:
            raise ParameterError("categories must not be empty", param="categories")

        def build(group: list[str], label: str) -> Taxonomy:
            if len(group) == 1:
                return cls(group[0])
            if len(group) <= fanout:
                return cls(label, tuple(cls(c) for c in group))
            parts = [list(p) for p in np.array_split(np.array(group, dtype=object), fanout)]
            return cls(label, tuple(build(p, f"{p[0]}..{p[-1]}") for p in parts))

        if len(cats) == 1:
            return cls(root, (cls(cats[0]),)).collapsed()
        return build(cats, root)

    def check_leaves(self, categories: Sequence[str], name: str) -> None:
        """Raise unless the leaves are exactly ``categories`` and all labels are unique (linear time)."""
        leaves = self.leaves()
        dup = sorted(label for label, k in Counter(n.label for n in self._preorder()).items() if k > 1)
        if dup:
            raise DomainError(f"taxonomy of {name!r} must have unique labels, got duplicates {dup[:5]}")
        want = set(map(str, categories))
        missing = sorted(want - set(leaves))
        extra = sorted(set(leaves) - want)
        if missing or extra:
            raise DomainError(
                f"taxonomy of {name!r} must have exactly the schema's categories as leaves; "
                f"categories not covered: {missing[:5]}, leaves not in the schema: {extra[:5]}"
            )


def _loads(text: str, what: str) -> Any:
    """``json.loads`` whose every failure is a :class:`ParameterError`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"{what} must be a JSON object of trees: {exc}", param=what) from exc
    except RecursionError as exc:
        raise _too_deep(what) from exc


def _parse_node(spec: Any, depth: int) -> Taxonomy:
    if depth > MAX_DEPTH:
        raise _too_deep()
    if isinstance(spec, Taxonomy):
        return spec
    if isinstance(spec, str):
        return Taxonomy.parse(spec) if spec.strip().startswith("{") else Taxonomy(spec.strip())
    if isinstance(spec, Mapping):
        if len(spec) != 1:
            raise ParameterError(
                "a taxonomy node must be a string or a one-key object {label: [children]}, "
                f"got an object with keys {list(spec)[:5]}"
            )
        ((label, kids),) = spec.items()
        return Taxonomy(str(label), _parse_children(kids, depth))
    raise ParameterError(f"a taxonomy node must be a string or a one-key object, got {spec!r:.80}")


def _parse_children(kids: Any, depth: int) -> tuple[Taxonomy, ...]:
    if kids is None:
        return ()
    if isinstance(kids, Mapping):
        return tuple(Taxonomy(str(k)) if v is None or v == [] else Taxonomy(str(k), _parse_children(v, depth + 1))
                     for k, v in kids.items())
    if isinstance(kids, list | tuple):
        return tuple(_parse_node(k, depth + 1) for k in kids)
    raise ParameterError(f"taxonomy children must be a list or an object, got {kids!r:.80}")


_TOKEN = re.compile(r"\{|\}|[^{}]+")


def _parse_brace(text: str) -> Taxonomy:
    """Parse ``{Any {A} {B {b1} {b2}}}``; a label is the text before the node's first brace.

    Iterative (an explicit stack), so a deep or long input costs linear time and no recursion.
    """
    tokens = [t for t in _TOKEN.findall(text) if t.strip() or t in "{}"]
    stack: list[tuple[str, list[Taxonomy]]] = []
    root: Taxonomy | None = None
    pos = 0
    while pos < len(tokens):
        tok = tokens[pos]
        if root is not None:
            raise ParameterError(f"taxonomy brace form: trailing text after the root in {text[:60]!r}")
        if tok == "{":
            label = tokens[pos + 1].strip() if pos + 1 < len(tokens) and tokens[pos + 1] not in "{}" else ""
            if not label:
                raise ParameterError(f"taxonomy brace form: a node has no label in {text[:60]!r}")
            if len(stack) >= MAX_DEPTH:
                raise _too_deep()
            stack.append((label, []))
            pos += 2
            if pos < len(tokens) and tokens[pos] not in "{}":  # text after a child: not a label
                raise ParameterError(f"taxonomy brace form: unbalanced braces in {text[:60]!r}")
        elif tok == "}":
            if not stack:
                raise ParameterError(f"taxonomy brace form: unbalanced braces in {text[:60]!r}")
            label, kids = stack.pop()
            node = Taxonomy(label, tuple(kids))
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
            pos += 1
            if stack and pos < len(tokens) and tokens[pos] not in "{}":
                raise ParameterError(f"taxonomy brace form: unbalanced braces in {text[:60]!r}")
        else:
            raise ParameterError(f"taxonomy brace form: expected '{{' at token {pos} in {text[:60]!r}")
    if stack or root is None:
        raise ParameterError(f"taxonomy brace form: unbalanced braces in {text[:60]!r}")
    return root


def load_taxonomies(source: str | bytes | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Taxonomy]:
    """Read a taxonomy file: a JSON object mapping attribute names to trees.

    Parameters
    ----------
    source : path, JSON text or mapping
        A ``.json`` file (nested-JSON or brace-string values), its text, or the parsed object.

    Returns
    -------
    dict of str to Taxonomy

    Raises
    ------
    DataNotFoundError
        The file does not exist.
    ParameterError
        The file is not UTF-8 text, not JSON, not an object of trees, or a tree is malformed or
        nested too deep (the message names the file).

    Examples
    --------
    >>> load_taxonomies('{"sex": {"Any": ["Female", "Male"]}}')["sex"].leaves()
    ('Female', 'Male')
    """
    where = "taxonomy file"
    if isinstance(source, Mapping):
        obj: Any = source
    else:
        if isinstance(source, bytes):
            try:
                text = source.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ParameterError(f"taxonomy text is not UTF-8: {exc}") from exc
        else:
            text = str(source) if isinstance(source, str) else ""
        if not text.lstrip().startswith(("{", "[")):
            path = Path(source if not isinstance(source, bytes) else text)
            where = f"taxonomy file {str(path)!r}"
            if not path.is_file():
                raise DataNotFoundError(f"{where} does not exist or is not a file")
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise ParameterError(f"{where} is not UTF-8 text (a binary file?): {exc}") from exc
            except OSError as exc:
                raise ParameterError(f"{where} cannot be read: {exc}") from exc
        obj = _loads(text, where)
    if not isinstance(obj, Mapping):
        raise ParameterError(f"{where} must be a JSON object mapping names to trees, got {type(obj).__name__}")
    out: dict[str, Taxonomy] = {}
    for k, v in obj.items():
        try:
            out[str(k)] = Taxonomy.parse(v)
        except ParameterError as exc:
            raise ParameterError(f"{where}, tree of {str(k)!r}: {exc}") from exc
    return out
