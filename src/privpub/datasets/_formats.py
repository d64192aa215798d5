"""The raw files of the built-in tabular datasets: layout, clean-up and public encodings.

A :class:`TableFormat` is public metadata about a dataset's files, never read from the data:

* ``columns``: the file's columns in order (``adult.data`` has no header line);
* the clean-up the loaders apply (whitespace stripped, the ``.`` of ``adult.test``'s labels
  removed, ``|`` comment lines skipped);
* the **missing-value policy**: a record holding a missing token (``?``) in a column the
  release uses is dropped, and the number dropped is reported. On the full table this is the
  papers' rule (Adult keeps 30,162 of adult.data's 32,561 records and 45,222 with adult.test);
  dropping a record because of its own values keeps neighbouring tables neighbours, so every
  privacy guarantee holds on the remaining records;
* ``schema``: the public domains of the raw values (categories from ``adult.names``, numeric
  bounds from the specs), used by ``privpub histogram`` and ``privpub decision``;
* ``synth_schema``: the coarse public encoding that local-DP synthesis needs (every attribute a
  handful of categories). For Adult it is the binning of the LoPub reproduction (ldp_synth spec
  section 3.1): 15 attributes, income included; ``recode`` maps raw values onto it.

``privpub ... --dataset-schema NAME`` uses these on a raw file as it comes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privpub.core import CategoricalAttribute, NumericAttribute, Schema
from privpub.datasets._schemas import (
    ADULT_COLUMNS,
    CENSUS_COLUMNS,
    IRIS_COLUMNS,
    adult_schema,
    census_schema,
    iris_schema,
    nltcs_schema,
)
from privpub.errors import DomainError, ParameterError

__all__ = ["ADULT_RECODES", "Recode", "TableFormat", "table_format", "table_formats"]


@dataclass(frozen=True)
class Recode:
    """A public, data-independent coarsening of one column onto ``labels``.

    Exactly one of ``groups`` (categorical: the raw categories of each label) or ``edges``
    (numeric: label ``i`` holds the values ``v`` with ``edges[i-1] <= v < edges[i]``; label 0
    everything below ``edges[0]``) is given. With ``other=True`` the last label takes every raw
    category not listed in ``groups``; otherwise an unlisted category is a
    :class:`~privpub.errors.DomainError`.

    Examples
    --------
    >>> Recode(("young", "old"), edges=(40,)).apply(pd.Series([25, 40, 63]), "age").tolist()
    ['young', 'old', 'old']
    >>> Recode(("US", "other"), groups=(("United-States",),), other=True).apply(
    ...     pd.Series(["United-States", "Peru"]), "country").tolist()
    ['US', 'other']
    """

    labels: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...] | None = None
    edges: tuple[float, ...] | None = None
    other: bool = False

    def __post_init__(self) -> None:
        if (self.groups is None) == (self.edges is None):
            raise ParameterError("a Recode takes exactly one of groups or edges")
        n = len(self.labels)
        if self.groups is not None and len(self.groups) + int(self.other) != n:
            raise ParameterError(f"a Recode with {n} labels needs {n - int(self.other)} groups, got {len(self.groups)}")
        if self.edges is not None and (len(self.edges) != n - 1 or list(self.edges) != sorted(set(self.edges))):
            raise ParameterError(f"a Recode with {n} labels needs {n - 1} increasing edges, got {self.edges}")

    def apply(self, values: pd.Series, column: str) -> pd.Series:
        """The label of each value (a Series of str)."""
        labels = np.asarray(self.labels, dtype=object)
        if self.edges is not None:
            numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
            if np.isnan(numeric).any():
                bad = values[np.isnan(numeric)].astype(str).unique()[:5].tolist()
                raise DomainError(f"column {column!r} must hold numbers, got {bad}")
            codes = np.searchsorted(np.asarray(self.edges, dtype=np.float64), numeric, side="right")
            return pd.Series(labels[codes], index=values.index)
        assert self.groups is not None
        lookup = {raw: i for i, group in enumerate(self.groups) for raw in group}
        codes_s = values.astype(str).map(lookup)
        if self.other:
            codes_s = codes_s.fillna(len(self.groups))
        if codes_s.isna().any():
            bad = sorted(set(values[codes_s.isna()].astype(str)))[:5]
            raise DomainError(f"column {column!r} has values outside its declared categories: {bad}")
        return pd.Series(labels[codes_s.to_numpy(dtype=np.int64)], index=values.index)


#: Adult's coarse public encoding for local-DP synthesis (ldp_synth spec section 3.1)
ADULT_RECODES: dict[str, Recode] = {
    "age": Recode(("<=29", "30-39", "40-49", ">=50"), edges=(30, 40, 50)),
    "workclass": Recode(("Private", "Self-emp-not-inc|Without-pay", "Self-emp-inc", "Gov"), groups=(
        ("Private",), ("Self-emp-not-inc", "Without-pay"), ("Self-emp-inc",), ("Federal-gov", "Local-gov", "State-gov"))),
    "fnlwgt": Recode(("<100k", "100k-175k", "175k-250k", ">=250k"), edges=(100_000, 175_000, 250_000)),
    "education": Recode(("<=12th", "HS-grad", "Some-college|Assoc", "Bachelors+"), groups=(
        ("Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"), ("HS-grad",),
        ("Some-college", "Assoc-acdm", "Assoc-voc"), ("Bachelors", "Masters", "Prof-school", "Doctorate"))),
    "education-num": Recode(("<=8", "9", "10-12", ">=13"), edges=(9, 10, 13)),
    "marital-status": Recode(("Married", "Never-married", "Divorced|Separated", "Widowed|Spouse-absent"), groups=(
        ("Married-civ-spouse", "Married-AF-spouse"), ("Never-married",), ("Divorced", "Separated"),
        ("Widowed", "Married-spouse-absent"))),
    "occupation": Recode(("White-collar", "Blue-collar", "Service", "Sales|Armed-Forces"), groups=(
        ("Exec-managerial", "Prof-specialty", "Adm-clerical", "Tech-support"),
        ("Craft-repair", "Machine-op-inspct", "Transport-moving", "Handlers-cleaners", "Farming-fishing"),
        ("Other-service", "Protective-serv", "Priv-house-serv"), ("Sales", "Armed-Forces"))),
    "relationship": Recode(("Husband", "Wife", "Own-child", "other"), groups=(
        ("Husband",), ("Wife",), ("Own-child",), ("Not-in-family", "Other-relative", "Unmarried"))),
    "race": Recode(("White", "Black", "Asian-Pac-Islander", "other"), groups=(
        ("White",), ("Black",), ("Asian-Pac-Islander",), ("Amer-Indian-Eskimo", "Other"))),
    "sex": Recode(("Female", "Male"), groups=(("Female",), ("Male",))),
    "capital-gain": Recode(("0", "1-7000", ">7000"), edges=(1, 7001)),
    "capital-loss": Recode(("0", ">0"), edges=(1,)),
    "hours-per-week": Recode(("<=34", "35-40", "41-50", ">=51"), edges=(35, 41, 51)),
    "native-country": Recode(("United-States", "other"), groups=(("United-States",),), other=True),
    "income": Recode(("<=50K", ">50K"), groups=(("<=50K",), (">50K",))),
}


@dataclass(frozen=True)
class TableFormat:
    """Public description of a built-in dataset's raw files (see the module docstring).

    Attributes
    ----------
    name : str
        Dataset name (``"adult"``, ...).
    columns : tuple of str
        The file's columns, in order; names of a header-less file.
    schema : Schema
        Public domains of the raw values (class included when the dataset has one).
    synth_schema : Schema
        Coarse public encoding for ``privpub synth`` (no class: every column is an attribute).
    recode : mapping of str to Recode
        Raw value -> ``synth_schema`` value, for the columns that are coarsened.
    missing : tuple of str
        Tokens that mean "missing" in the files.
    label_suffix : str
        Stripped from the end of class labels (``adult.test`` writes ``<=50K.``).
    comment : str or None
        Lines starting with this character are skipped (``adult.test``'s ``|1x3`` line).
    taxonomies : mapping or None
        Public generalisation trees for ``privpub decision`` (Adult: Fung et al. 2007).
    strip : bool
        Whether the files pad values with whitespace (stripped when read); False keeps every
        value as written (a user's own schema file).
    """

    name: str
    columns: tuple[str, ...]
    schema: Schema
    synth_schema: Schema
    recode: Mapping[str, Recode] = field(default_factory=dict)
    missing: tuple[str, ...] = ("?",)
    label_suffix: str = ""
    comment: str | None = None
    taxonomies: Mapping[str, Any] | None = None
    strip: bool = True

    # -- reading -----------------------------------------------------------------------------
    def read_options(self) -> dict[str, Any]:
        """``pandas.read_csv`` options for the raw files (whitespace after commas, comment lines)."""
        if not self.strip:
            return {"skipinitialspace": True}
        return {"skipinitialspace": True, "comment": self.comment, "skip_blank_lines": True,
                "keep_default_na": False, "na_filter": False}

    def clean(self, frame: pd.DataFrame, used: Sequence[str] | None = None) -> tuple[pd.DataFrame, int]:
        """Strip text, strip the label suffix and drop the records missing a value in ``used``.

        Parameters
        ----------
        frame : DataFrame
            Raw records (column names as :attr:`columns`, or a subset).
        used : sequence of str or None
            The columns the release reads (default: every column of ``frame``).

        Returns
        -------
        (DataFrame, int)
            The clean records (index reset) and the number of records dropped.
        """
        out = frame.copy()
        for col in out.columns if self.strip else ():
            if not pd.api.types.is_numeric_dtype(out[col]):
                out[col] = out[col].astype(str).str.strip()
        cls = self.schema.class_name
        if self.label_suffix and cls is not None and cls in out.columns:
            out[cls] = out[cls].astype(str).str.removesuffix(self.label_suffix)
        cols = [c for c in (used if used is not None else out.columns) if c in out.columns]
        text = [c for c in cols if not pd.api.types.is_numeric_dtype(out[c])] if self.missing else []
        bad = out[text].isin(list(self.missing)).any(axis=1).to_numpy()
        out = out.loc[~bad].reset_index(drop=True)
        for attr in self.schema:  # a numeric column that held a missing token was read as text
            if isinstance(attr, NumericAttribute) and attr.name in out.columns and \
                    not pd.api.types.is_numeric_dtype(out[attr.name]):
                numeric = pd.to_numeric(out[attr.name], errors="coerce")
                if numeric.isna().any():
                    bad_values = out[attr.name][numeric.isna()].unique()[:5].tolist()
                    raise DomainError(f"column {attr.name!r} must hold numbers, got {bad_values}")
                out[attr.name] = numeric
        return out, int(bad.sum())

    def to_synth(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The columns of :attr:`synth_schema`, with raw values mapped onto it (clean ``frame`` first)."""
        out = {}
        for attr in self.synth_schema:
            if attr.name not in frame.columns:
                raise DomainError(f"data is missing the column {attr.name!r} of the {self.name} schema")
            values = frame[attr.name]
            rec = self.recode.get(attr.name)
            out[attr.name] = rec.apply(values, attr.name) if rec is not None else values
        return pd.DataFrame(out)

    def describe(self) -> str:
        """One paragraph for users: columns, header, missing-value policy, encodings."""
        missing = ", ".join(repr(m) for m in self.missing) or "none"
        return (f"{self.name}: {len(self.columns)} columns ({', '.join(self.columns)}); a file without a header "
                f"line gets these names. Missing-value tokens: {missing}; a record with one in a column the "
                f"release uses is dropped and counted. Histogram and decision use the raw domains "
                f"({len(self.schema)} attributes" + (f", class {self.schema.class_name!r}" if self.schema.class_name
                                                      else "") + f"); synth uses a coarse public encoding "
                f"({len(self.synth_schema)} attributes, largest domain {max(self.synth_schema.sizes)}).")


def _coarse_numeric(attr: NumericAttribute, bins: int) -> NumericAttribute:
    """``attr`` at a resolution giving at most ``bins`` bins (public: computed from the bounds only)."""
    width = (attr.hi - attr.lo) / bins
    if attr.resolution >= width:
        return attr
    step = 10 ** math.floor(math.log10(width))
    res = next(m * step for m in (1, 2, 5, 10) if m * step >= width)
    return NumericAttribute(attr.name, attr.lo, attr.hi, res)


def _with_class_attribute(schema: Schema, numeric_bins: int) -> Schema:
    """Every attribute (numeric ones coarsened) plus the class as a last categorical attribute."""
    attrs: list[CategoricalAttribute | NumericAttribute] = [
        _coarse_numeric(a, numeric_bins) if isinstance(a, NumericAttribute) else a for a in schema]
    if schema.class_attribute is not None:
        attrs.append(schema.class_attribute)
    return Schema(attrs)


def _adult() -> TableFormat:
    from privpub.datasets._taxonomies import ADULT_TAXONOMIES

    synth = Schema([CategoricalAttribute(c, ADULT_RECODES[c].labels) for c in ADULT_COLUMNS])
    return TableFormat("adult", ADULT_COLUMNS, adult_schema(), synth, ADULT_RECODES, missing=("?",),
                       label_suffix=".", comment="|", taxonomies=ADULT_TAXONOMIES)


def _census() -> TableFormat:
    return TableFormat("census_income_kdd", CENSUS_COLUMNS, census_schema(),
                       _with_class_attribute(census_schema(), 10), missing=("?",), label_suffix=".")


def _iris() -> TableFormat:
    return TableFormat("iris", IRIS_COLUMNS, iris_schema(), _with_class_attribute(iris_schema(), 12), missing=())


def _nltcs() -> TableFormat:
    schema = nltcs_schema()
    return TableFormat("nltcs", schema.names, schema, schema, missing=())


_MAKERS = {"adult": _adult, "census_income_kdd": _census, "iris": _iris, "nltcs": _nltcs}
_ALIASES = {"census": "census_income_kdd", "census_kdd": "census_income_kdd"}


def table_formats() -> tuple[str, ...]:
    """Names accepted by :func:`table_format` (and ``--dataset-schema``)."""
    return tuple(_MAKERS)


def table_format(name: str) -> TableFormat:
    """The public description of a built-in tabular dataset's raw files (no data is read).

    Parameters
    ----------
    name : {"adult", "census_income_kdd", "iris", "nltcs"}
        Dataset name (``"census"`` is accepted for Census-Income).

    Examples
    --------
    >>> fmt = table_format("adult")
    >>> fmt.columns[:3], fmt.schema.class_name, fmt.synth_schema.sizes[:3]
    (('age', 'workclass', 'fnlwgt'), 'income', (4, 4, 4))
    """
    if not isinstance(name, str):
        raise ParameterError(f"dataset schema name must be a string, got {name!r}")
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in _MAKERS:
        raise ParameterError(f"dataset schema must be one of {', '.join(_MAKERS)}, got {name!r}")
    return _MAKERS[key]()
