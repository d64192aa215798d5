"""Public attribute domains for tabular data: declared, never read from private data."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privpub.core._validation import check_real
from privpub.errors import DomainError, ParameterError, PrivacyWarning

__all__ = ["Attribute", "CategoricalAttribute", "NumericAttribute", "Schema", "infer_schema"]


@dataclass(frozen=True)
class CategoricalAttribute:
    """A categorical attribute with a public, ordered list of categories.

    Parameters
    ----------
    name : str
        Column name.
    categories : sequence of str
        Every value the column may take (distinct). Codes are positions in this list.
    taxonomy : mapping or None
        Optional generalisation hierarchy (nested ``{"Any": {"A": ["a1", "a2"], ...}}``), used by
        :mod:`privpub.decision`; ``None`` means the part's documented default.
    """

    name: str
    categories: Sequence[str]
    taxonomy: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ParameterError(f"attribute name must be a non-empty string, got {self.name!r}")
        if isinstance(self.categories, str | bytes) or not hasattr(self.categories, "__iter__"):
            raise ParameterError(
                f"categories of {self.name!r} must be a sequence of labels, got {self.categories!r}"
            )
        cats = tuple(str(c) for c in self.categories)
        if len(cats) == 0:
            raise ParameterError(f"categories of {self.name!r} must not be empty")
        if len(set(cats)) != len(cats):
            raise ParameterError(f"categories of {self.name!r} must be distinct, got {list(cats)}")
        object.__setattr__(self, "categories", cats)

    @property
    def size(self) -> int:
        return len(self.categories)

    @property
    def kind(self) -> str:
        return "categorical"

    def encode(self, values: Any) -> NDArray[np.int64]:
        """Map values to codes ``0..size-1``; unknown values or missing entries raise DomainError."""
        ser = pd.Series(values, dtype="object")
        if ser.isna().any():
            raise DomainError(f"column {self.name!r} has {int(ser.isna().sum())} missing values; "
                              "drop or impute them before publishing")
        codes = np.asarray(pd.Index(self.categories).get_indexer(ser.astype(str)), dtype=np.int64)
        if np.any(codes < 0):
            bad = sorted(set(ser.astype(str)[codes < 0]))[:5]
            raise DomainError(
                f"column {self.name!r} has values outside its declared categories: {bad}; "
                "add them to the schema or map them to a declared category"
            )
        return codes

    def decode(self, codes: NDArray[np.integer[Any]]) -> NDArray[Any]:
        return np.asarray(self.categories, dtype=object)[np.asarray(codes)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": "categorical", "categories": list(self.categories)}
        if self.taxonomy is not None:
            out["taxonomy"] = self.taxonomy
        return out


@dataclass(frozen=True)
class NumericAttribute:
    """A numeric attribute with public bounds ``[lo, hi]``.

    Parameters
    ----------
    name : str
        Column name.
    lo, hi : float
        Public bounds; values outside raise :class:`~privpub.errors.DomainError` (never clipped).
    resolution : float
        Bin width used when a part needs a discrete domain: bins are
        ``[lo + i*resolution, lo + (i+1)*resolution)``, the last one closed at ``hi``.
    """

    name: str
    lo: float
    hi: float
    resolution: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ParameterError(f"attribute name must be a non-empty string, got {self.name!r}")
        lo = check_real(self.lo, f"lo of {self.name!r}")
        hi = check_real(self.hi, f"hi of {self.name!r}")
        res = check_real(self.resolution, f"resolution of {self.name!r}")
        if not hi > lo:
            raise ParameterError(f"hi of {self.name!r} must be > lo, got lo={lo}, hi={hi}")
        if res <= 0:
            raise ParameterError(f"resolution of {self.name!r} must be > 0, got {res}")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "resolution", res)

    @property
    def kind(self) -> str:
        return "numeric"

    @property
    def size(self) -> int:
        """Number of bins of width ``resolution`` covering ``[lo, hi]``."""
        return max(1, math.ceil((self.hi - self.lo) / self.resolution - 1e-9))

    @property
    def bin_edges(self) -> NDArray[np.float64]:
        edges = self.lo + self.resolution * np.arange(self.size + 1, dtype=np.float64)
        edges[-1] = self.hi
        return edges

    def check(self, values: Any) -> NDArray[np.float64]:
        """Return values as floats after checking they are finite and inside ``[lo, hi]``."""
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DomainError(f"column {self.name!r} must be numeric") from exc
        if not np.all(np.isfinite(arr)):
            raise DomainError(f"column {self.name!r} has {int(np.sum(~np.isfinite(arr)))} NaN or "
                              "infinite values; drop or impute them before publishing")
        if arr.size and (arr.min() < self.lo or arr.max() > self.hi):
            raise DomainError(
                f"column {self.name!r} has values outside its declared range [{self.lo}, {self.hi}] "
                f"(min {arr.min()}, max {arr.max()}); widen the range or clip explicitly"
            )
        return arr

    def encode(self, values: Any) -> NDArray[np.int64]:
        """Bin index of each value (``0..size-1``)."""
        arr = self.check(values)
        idx = np.floor((arr - self.lo) / self.resolution).astype(np.int64)
        return np.clip(idx, 0, self.size - 1)

    def decode(self, codes: NDArray[np.integer[Any]], rng: np.random.Generator | None = None) -> NDArray[np.float64]:
        """Bin midpoints (or uniform draws inside the bin when ``rng`` is given)."""
        edges = self.bin_edges
        c = np.asarray(codes)
        if rng is None:
            return np.asarray((edges[c] + edges[c + 1]) / 2.0, dtype=np.float64)
        return np.asarray(edges[c] + (edges[c + 1] - edges[c]) * rng.random(c.shape), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": "numeric", "lo": self.lo, "hi": self.hi, "resolution": self.resolution}


Attribute = CategoricalAttribute | NumericAttribute


@dataclass(frozen=True)
class Schema:
    """The public domain of a table: its attributes and, optionally, a class attribute.

    Parameters
    ----------
    attributes : sequence of CategoricalAttribute or NumericAttribute
        The (non-class) attributes, in order. Names must be distinct.
    class_name : str or None
        Name of the class (label) column, if any. It is not one of ``attributes``.
    classes : sequence of str or None
        The class labels; required when ``class_name`` is given.

    Examples
    --------
    >>> schema = Schema([NumericAttribute("age", lo=17, hi=91),
    ...                  CategoricalAttribute("sex", ["Female", "Male"])],
    ...                 class_name="income", classes=["<=50K", ">50K"])
    >>> schema.names
    ('age', 'sex')
    """

    attributes: Sequence[Attribute]
    class_name: str | None = None
    classes: Sequence[str] | None = None
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        attrs = tuple(self.attributes)
        for a in attrs:
            if not isinstance(a, CategoricalAttribute | NumericAttribute):
                raise ParameterError(f"attributes must be CategoricalAttribute or NumericAttribute, got {a!r}", param="attributes")
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            raise ParameterError(f"attribute names must be distinct, got {names}")
        if not attrs:
            raise ParameterError("attributes must not be empty", param="attributes")
        object.__setattr__(self, "attributes", attrs)
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(names)})
        if (self.class_name is None) != (self.classes is None):
            raise ParameterError("class_name and classes must be given together")
        if self.class_name is not None and self.classes is not None:
            if self.class_name in names:
                raise ParameterError(f"class_name {self.class_name!r} must not also be an attribute")
            cls = tuple(str(c) for c in self.classes)
            if len(cls) < 2 or len(set(cls)) != len(cls):
                raise ParameterError(f"classes must be >= 2 distinct labels, got {list(cls)}", param="classes")
            object.__setattr__(self, "classes", cls)

    # -- access ------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Domain size of each attribute (numeric: number of bins)."""
        return tuple(a.size for a in self.attributes)

    def __getitem__(self, name: str) -> Attribute:
        try:
            return self.attributes[self._index[name]]
        except KeyError:
            raise ParameterError(f"no attribute named {name!r}; the schema has {list(self.names)}") from None

    def __len__(self) -> int:
        return len(self.attributes)

    def __iter__(self) -> Iterator[Attribute]:
        return iter(self.attributes)

    @property
    def class_attribute(self) -> CategoricalAttribute | None:
        if self.class_name is None or self.classes is None:
            return None
        return CategoricalAttribute(self.class_name, self.classes)

    # -- data --------------------------------------------------------------------------------
    def validate(self, frame: pd.DataFrame, *, require_class: bool = False) -> None:
        """Raise DomainError unless every declared column is present and inside its domain."""
        self.encode(frame, require_class=require_class)

    def encode(self, frame: pd.DataFrame, *, require_class: bool = False) -> NDArray[np.int64]:
        """Encode the declared attributes as an (n, d) int64 array of codes (numeric: bin index).

        When ``require_class`` is True the class codes are appended as a last column.
        """
        if not isinstance(frame, pd.DataFrame):
            raise ParameterError(f"data must be a pandas DataFrame, got {type(frame).__name__}")
        cols = list(self.names) + ([self.class_name] if require_class and self.class_name else [])
        if require_class and self.class_name is None:
            raise ParameterError("the schema declares no class attribute (class_name)")
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise DomainError(f"data is missing declared columns {missing}")
        if len(frame) == 0:
            raise DomainError("data must not be empty, got 0 rows")
        parts = [a.encode(frame[a.name].to_numpy()) for a in self.attributes]
        if require_class and self.class_attribute is not None:
            parts.append(self.class_attribute.encode(frame[self.class_attribute.name].to_numpy()))
        return np.stack(parts, axis=1)

    def decode(self, codes: NDArray[np.integer[Any]], *, rng: np.random.Generator | None = None) -> pd.DataFrame:
        """Turn an (n, d) code array back into a DataFrame (numeric: bin midpoints or draws)."""
        arr = np.asarray(codes)
        out: dict[str, Any] = {}
        for j, a in enumerate(self.attributes):
            out[a.name] = a.decode(arr[:, j], rng) if isinstance(a, NumericAttribute) else a.decode(arr[:, j])
        if arr.shape[1] == len(self.attributes) + 1 and self.class_attribute is not None:
            out[self.class_attribute.name] = self.class_attribute.decode(arr[:, -1])
        return pd.DataFrame(out)

    # -- serialisation -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"attributes": [a.to_dict() for a in self.attributes]}
        if self.class_name is not None:
            out["class_name"] = self.class_name
            out["classes"] = list(self.classes or ())
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        """Build a schema from :meth:`to_dict` output (e.g. a JSON file); malformed input raises
        :class:`~privpub.errors.ParameterError`."""
        if not isinstance(data, Mapping):
            raise ParameterError(f"a schema must be a mapping with 'attributes', got {type(data).__name__}")
        attrs: list[Attribute] = []
        try:
            for spec in data.get("attributes", []):
                kind = spec.get("type")
                if kind == "categorical":
                    attrs.append(CategoricalAttribute(spec["name"], spec["categories"], spec.get("taxonomy")))
                elif kind == "numeric":
                    attrs.append(NumericAttribute(spec["name"], spec["lo"], spec["hi"], spec.get("resolution", 1.0)))
                else:
                    raise ParameterError(f"attribute type must be 'categorical' or 'numeric', got {kind!r}")
        except (KeyError, TypeError, AttributeError) as exc:
            raise ParameterError(f"malformed schema attribute: {exc!r}") from exc
        classes = data.get("classes")
        return cls(attrs, class_name=data.get("class_name"), classes=tuple(classes) if classes else None)

    def with_attributes(self, names: Sequence[str]) -> Schema:
        """A schema restricted to ``names`` (same class attribute)."""
        return Schema([self[n] for n in names], class_name=self.class_name, classes=self.classes)


def infer_schema(
    frame: pd.DataFrame, *, class_name: str | None = None, max_categories: int = 100
) -> Schema:
    """Build a schema by *reading the data* -- this leaks and emits a :class:`PrivacyWarning`.

    Numeric columns get their observed min and max as bounds, object columns their observed
    categories. A DP release built on an inferred schema is not DP: the domain itself reveals
    records (e.g. a unique maximum). Use it to draft a schema, then replace the inferred values
    with public knowledge.
    """
    warnings.warn(
        "infer_schema reads the private data: the bounds and categories it returns are not "
        "differentially private; declare the domain from public knowledge instead",
        PrivacyWarning,
        stacklevel=2,
    )
    attrs: list[Attribute] = []
    classes = None
    for col in frame.columns:
        ser = frame[col]
        if col == class_name:
            classes = tuple(sorted(map(str, ser.dropna().unique())))
            continue
        if pd.api.types.is_numeric_dtype(ser) and ser.nunique() > max_categories:
            lo, hi = float(ser.min()), float(ser.max())
            attrs.append(NumericAttribute(str(col), lo, hi if hi > lo else lo + 1.0, max((hi - lo) / 32, 1e-9)))
        else:
            attrs.append(CategoricalAttribute(str(col), sorted(map(str, ser.dropna().unique()))))
    return Schema(attrs, class_name=class_name, classes=classes)
