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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privpub.errors import DataNotFoundError, DomainError, ParameterError

__all__ = ["Taxonomy", "load_taxonomies"]


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

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def leaves(self) -> tuple[str, ...]:
        """Leaf labels in depth-first order."""
        if self.is_leaf:
            return (self.label,)
        return tuple(x for c in self.children for x in c.leaves())

    def nodes(self) -> tuple[Taxonomy, ...]:
        """All nodes in depth-first pre-order."""
        return (self, *(n for c in self.children for n in c.nodes()))

    def collapsed(self) -> Taxonomy:
        """Replace every single-child internal node by its child (specialising it wastes a level)."""
        node = self
        while len(node.children) == 1:
            node = node.children[0]
        return Taxonomy(node.label, tuple(c.collapsed() for c in node.children))

    # -- parsing -----------------------------------------------------------------------------
    @classmethod
    def parse(cls, spec: Any) -> Taxonomy:
        """Build a tree from nested JSON (str / one-key dict), a brace string, or a Taxonomy."""
        if isinstance(spec, Taxonomy):
            return spec
        if isinstance(spec, str):
            text = spec.strip()
            if text.startswith("{"):
                if text.startswith('{"'):
                    return cls.parse(json.loads(text))
                return _parse_brace(text)
            return cls(text)
        if isinstance(spec, Mapping):
            if len(spec) != 1:
                raise ParameterError(
                    "a taxonomy node must be a string or a one-key object {label: [children]}, "
                    f"got an object with keys {list(spec)[:5]}"
                )
            ((label, kids),) = spec.items()
            return cls(str(label), _parse_children(kids))
        raise ParameterError(f"a taxonomy node must be a string or a one-key object, got {spec!r:.80}")

    @classmethod
    def from_json(cls, text: str) -> Taxonomy:
        """Parse one tree from JSON text."""
        return cls.parse(json.loads(text))

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
            raise ParameterError(f"fanout must be an integer >= 2, got {fanout!r}")
        cats = [str(c) for c in categories]
        if not cats:
            raise ParameterError("categories must not be empty")

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
        """Raise unless the leaves are exactly ``categories`` and all labels are unique."""
        leaves = self.leaves()
        labels = [n.label for n in self.nodes()]
        dup = sorted({x for x in labels if labels.count(x) > 1})
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


def _parse_children(kids: Any) -> tuple[Taxonomy, ...]:
    if kids is None:
        return ()
    if isinstance(kids, Mapping):
        return tuple(Taxonomy(str(k)) if v is None or v == [] else Taxonomy(str(k), _parse_children(v))
                     for k, v in kids.items())
    if isinstance(kids, list | tuple):
        return tuple(Taxonomy.parse(k) for k in kids)
    raise ParameterError(f"taxonomy children must be a list or an object, got {kids!r:.80}")


_TOKEN = re.compile(r"\{|\}|[^{}]+")


def _parse_brace(text: str) -> Taxonomy:
    """Parse ``{Any {A} {B {b1} {b2}}}``; a label is the text before the node's first brace."""
    tokens = [t for t in _TOKEN.findall(text) if t.strip() or t in "{}"]
    pos = 0

    def node() -> Taxonomy:
        nonlocal pos
        if pos >= len(tokens) or tokens[pos] != "{":
            raise ParameterError(f"taxonomy brace form: expected '{{' at token {pos} in {text[:60]!r}")
        pos += 1
        label = ""
        if pos < len(tokens) and tokens[pos] not in "{}":
            label = tokens[pos].strip()
            pos += 1
        if not label:
            raise ParameterError(f"taxonomy brace form: a node has no label in {text[:60]!r}")
        kids = []
        while pos < len(tokens) and tokens[pos] == "{":
            kids.append(node())
        if pos >= len(tokens) or tokens[pos] != "}":
            raise ParameterError(f"taxonomy brace form: unbalanced braces in {text[:60]!r}")
        pos += 1
        return Taxonomy(label, tuple(kids))

    out = node()
    if pos != len(tokens):
        raise ParameterError(f"taxonomy brace form: trailing text after the root in {text[:60]!r}")
    return out


def load_taxonomies(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Taxonomy]:
    """Read a taxonomy file: a JSON object mapping attribute names to trees.

    Parameters
    ----------
    source : path, JSON text or mapping
        A ``.json`` file (nested-JSON or brace-string values), its text, or the parsed object.

    Returns
    -------
    dict of str to Taxonomy

    Examples
    --------
    >>> load_taxonomies('{"sex": {"Any": ["Female", "Male"]}}')["sex"].leaves()
    ('Female', 'Male')
    """
    if isinstance(source, Mapping):
        obj: Any = source
    else:
        text = str(source)
        if not text.lstrip().startswith(("{", "[")):
            path = Path(source)
            if not path.exists():
                raise DataNotFoundError(f"taxonomy file {str(path)!r} does not exist")
            text = path.read_text(encoding="utf-8")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParameterError(f"taxonomy file must be a JSON object of trees: {exc}") from exc
    if not isinstance(obj, Mapping):
        raise ParameterError(f"taxonomy file must be a JSON object mapping names to trees, got {type(obj).__name__}")
    return {str(k): Taxonomy.parse(v) for k, v in obj.items()}
