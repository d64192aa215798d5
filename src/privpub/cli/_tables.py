"""Tabular inputs of the CLI as they come: header detection, public schemas, missing values.

The commands that read records (``histogram --column``, ``synth``, ``decision``) share this:

* **Public schema.** ``--dataset-schema NAME`` uses a built-in dataset's description
  (:func:`privpub.datasets.table_format`: column names, missing-value token and policy, public
  domains); ``--schema FILE`` a JSON schema (``privpub.core.Schema.to_dict`` format, optionally
  with ``"columns"``, the file's column order, and ``"missing"``, its missing-value tokens). A
  schema drafted from the data (``privpub schema draft``) is refused until its ``"draft"`` key
  is removed: its domains are read from the private data.
* **Header line.** A CSV's first line is a header when it names the columns the command needs
  (or is exactly the schema's column list); a first line holding numbers or repeated values is a
  record. ``--header`` / ``--no-header`` override the detection; a header-less file takes its
  column names from ``--names``, else from the schema. Spaces after a comma are skipped (``", "``
  separated files such as adult.data); other whitespace is kept.
* **Missing values.** A record holding one of the schema's missing tokens in a column the release
  uses is dropped, and the command says how many (the documented policy of the built-in datasets:
  Adult's ``?``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from privpub.cli._common import read_json, read_table
from privpub.datasets import TableFormat, table_format, table_formats
from privpub.errors import DomainError, ParameterError

__all__ = [
    "DatasetSchemaOption",
    "HeaderOption",
    "NamesOption",
    "SchemaOption",
    "TableInput",
    "detect_header",
    "read_records",
    "resolve_table",
]

#: suffixes read as delimited text (the header rules apply); others carry their own column names
TEXT_SUFFIXES = frozenset({".csv", ".data", ".test", ".txt", ".gz", ".tsv", ""})

DatasetSchemaOption = Annotated[str | None, typer.Option(
    "--dataset-schema", help=f"Use the public schema of a built-in dataset ({', '.join(table_formats())}): its "
    "column names (for a file without a header line), missing-value policy and domains; works on the raw "
    "files as they come (e.g. adult.data).")]
SchemaOption = Annotated[Path | None, typer.Option(
    "--schema", help="Public schema JSON (privpub.core.Schema.to_dict format; optional 'columns' = the "
    "file's column order and 'missing' = missing-value tokens). Never inferred from the data "
    "(privpub schema draft only drafts one).")]
HeaderOption = Annotated[bool | None, typer.Option(
    "--header/--no-header", help="Whether the CSV's first line names the columns (default: detected).",
    show_default=False)]
NamesOption = Annotated[str | None, typer.Option(
    "--names", help="Comma-separated column names of a file without a header line (default: the schema's).")]


@dataclass(frozen=True)
class TableInput:
    """The public description a command reads its records with.

    ``fmt`` is None when the command has no schema (``histogram`` with a declared domain).
    ``names`` are the column names of a header-less file. ``privacy_id`` and
    ``max_contributions`` are what a schema file states publicly about people with many rows
    (keys ``"privacy_id"``: the id column, and ``"max_contributions"``: the most rows one id can
    hold, e.g. a collection limit); None when it does not say.
    """

    fmt: TableFormat | None
    names: tuple[str, ...] | None
    source: str
    privacy_id: str | None = None
    max_contributions: int | None = None

    @property
    def missing(self) -> tuple[str, ...]:
        return self.fmt.missing if self.fmt is not None else ()


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _schema_file(path: Path) -> TableFormat:
    """A user's schema file as a :class:`TableFormat` (its schema is also the synth encoding)."""
    from privpub.core import Schema

    spec = read_json(path, "schema")
    if not isinstance(spec, dict):
        raise ParameterError(f"--schema {str(path)!r} must hold a JSON object with 'attributes'")
    if spec.get("draft"):
        raise ParameterError(
            f"--schema {str(path)!r} is a draft inferred from the data (privpub schema draft): its bounds and "
            "categories are read from the private records, so a release built on it is not differentially "
            "private. Replace them with public knowledge, then delete the \"draft\" key")
    schema = Schema.from_dict(spec)
    columns = spec.get("columns")
    if columns is None:
        columns = [*schema.names, *([schema.class_name] if schema.class_name else [])]
    if not isinstance(columns, list) or not all(isinstance(c, str) and c for c in columns):
        raise ParameterError(f"--schema {str(path)!r}: 'columns' must be a list of column names")
    missing = spec.get("missing", [])
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        raise ParameterError(f"--schema {str(path)!r}: 'missing' must be a list of strings (missing-value tokens)")
    return TableFormat(path.name, tuple(columns), schema, schema, missing=tuple(missing), strip=False)


def resolve_table(*, schema_path: Path | None, dataset_schema: str | None, names: str | None,
                  required: bool, what: str = "the public domains") -> TableInput:
    """The schema options of a command, checked before any data is read.

    Raises
    ------
    ParameterError
        Both or (when ``required``) neither schema option, an unknown dataset name, a bad file.
    """
    if schema_path is not None and dataset_schema is not None:
        raise ParameterError("give one of --schema FILE or --dataset-schema NAME, not both")
    if required and schema_path is None and dataset_schema is None:
        raise ParameterError(f"give --schema FILE or --dataset-schema NAME (one of {', '.join(table_formats())}): "
                             f"{what} are public and declared in advance, never read from the data")
    fmt: TableFormat | None = None
    source = ""
    if dataset_schema is not None:
        try:
            fmt = table_format(dataset_schema)
        except ParameterError:
            raise ParameterError(f"--dataset-schema must be one of {', '.join(table_formats())}, got "
                                 f"{dataset_schema!r}") from None
        source = f"the {fmt.name} schema"
    elif schema_path is not None:
        fmt = _schema_file(schema_path)
        source = f"--schema {schema_path.name}"
    given = tuple(_split(names)) if names else None
    if given is not None and len(set(given)) != len(given):
        raise ParameterError(f"--names must be distinct, got {names!r}")
    pid, bound = _privacy_id_declaration(schema_path) if schema_path is not None else (None, None)
    return TableInput(fmt, given or (fmt.columns if fmt is not None else None), source, pid, bound)


def _privacy_id_declaration(path: Path) -> tuple[str | None, int | None]:
    """A schema file's public statement about repeated ids: ``"privacy_id"`` (the column) and
    ``"max_contributions"`` (the most rows one id can hold), each optional."""
    spec = read_json(path, "schema")
    pid = spec.get("privacy_id")
    bound = spec.get("max_contributions")
    if pid is not None and (not isinstance(pid, str) or not pid):
        raise ParameterError(f"--schema {str(path)!r}: 'privacy_id' must be a column name", param="privacy_id")
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
        raise ParameterError(f"--schema {str(path)!r}: 'max_contributions' must be an integer >= 1",
                             param="max_contributions")
    if bound is not None and pid is None:
        raise ParameterError(f"--schema {str(path)!r}: 'max_contributions' needs 'privacy_id' (the column it bounds)",
                             param="privacy_id")
    return pid, bound


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _first_row(path: Path, options: dict[str, Any]) -> list[str]:
    try:
        row = pd.read_csv(path, header=None, nrows=1, dtype=str, skipinitialspace=True, keep_default_na=False,
                          comment=options.get("comment"), skip_blank_lines=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as exc:
        raise ParameterError(f"could not read the first line of {str(path)!r}: {' '.join(str(exc).split())[:200]}"
                             ) from exc
    return [str(v).strip() for v in row.iloc[0].tolist()] if len(row) else []


def detect_header(fields: Sequence[str], names: Sequence[str] | None, needed: Sequence[str]) -> bool:
    """Whether a CSV's first line (``fields``) is a header, given the expected ``names`` (or None).

    A header names every ``needed`` column with distinct fields (or equals ``names``). A line
    with a number or a repeated value is a record. Without ``names`` any other line is taken as a
    header; with ``names``, a text line sharing a name with them but lacking a needed column is a
    header that does not match (:class:`~privpub.errors.DomainError`).

    Examples
    --------
    >>> detect_header(["39", "State-gov", "77516"], ["age", "workclass", "fnlwgt"], ["age"])
    False
    >>> detect_header(["age", "workclass", "fnlwgt"], ["age", "workclass", "fnlwgt"], ["age"])
    True
    >>> detect_header(["0", "0", "1"], ["0", "1", "2"], ["0"])
    False
    """
    distinct = len(set(fields)) == len(fields)
    if distinct and needed and set(needed) <= set(fields):
        return True
    if distinct and names is not None and list(fields) == list(names):
        return True
    record = not distinct or any(_is_number(f) for f in fields)
    if names is not None and not record and set(fields) & set(names):
        lacking = [c for c in needed if c not in fields]
        raise DomainError(f"the header line names the columns {list(fields)}, which lack {lacking}")
    return not record


def read_records(path: Path, table: TableInput, *, header: bool | None, needed: Sequence[str],
                 echo: Any = None) -> pd.DataFrame:
    """Read ``path`` with the rules of the module docstring; drop records with missing values.

    Parameters
    ----------
    path : Path
        CSV (any delimiter-separated text, ``.gz`` too), Parquet, JSON or .npy.
    table : TableInput
        From :func:`resolve_table`.
    header : bool or None
        ``--header`` / ``--no-header`` (None: detected).
    needed : sequence of str
        The columns the release uses (checked, and the only ones the missing-value policy reads).
    echo : callable or None
        Receives the one-line notice of dropped records.
    """
    suffix = path.suffix.lower()
    options = table.fmt.read_options() if table.fmt is not None else {"skipinitialspace": True}
    names = table.names
    if suffix not in TEXT_SUFFIXES or not path.is_file():
        frame = read_table(path)
    else:
        fields = _first_row(path, options)
        try:
            has = header if header is not None else detect_header(fields, names, needed)
        except DomainError as exc:
            raise DomainError(f"{str(path)!r}: {exc} (from {table.source}); rename the header's columns, or "
                              "pass --no-header if the first line is a record") from None
        if has:
            frame = read_table(path, csv_options=options)
        else:
            if names is None:
                raise ParameterError(
                    f"{str(path)!r} has no header line (its first line is a record: {', '.join(fields[:6])}"
                    f"{', ...' if len(fields) > 6 else ''}); name its columns with --dataset-schema NAME, a "
                    "--schema file, or --names a,b,c")
            if len(fields) != len(names):
                raise DomainError(
                    f"{str(path)!r} has no header line and {len(fields)} fields per record, but "
                    f"{len(names)} column names were given ({table.source or '--names'}: {', '.join(names[:6])}"
                    f"{', ...' if len(names) > 6 else ''}); give --names with one name per field")
            frame = read_table(path, names=list(names), csv_options=options)
    frame.columns = [str(c).strip() for c in frame.columns]
    lacking = [c for c in needed if c not in frame.columns]
    if lacking:
        hint = ""
        if suffix in TEXT_SUFFIXES and any(_is_number(str(c)) for c in frame.columns):
            hint = ("; the first line looks like a record, not a header: pass --no-header with --dataset-schema, "
                    "--schema or --names")
        raise DomainError(f"{str(path)!r} has no column {', '.join(map(repr, lacking))} (columns: "
                          f"{', '.join(map(str, frame.columns[:20]))}{', ...' if frame.shape[1] > 20 else ''}){hint}")
    if table.fmt is None:
        return frame
    n = len(frame)
    clean, dropped = table.fmt.clean(frame, used=needed)
    if dropped and echo is not None:
        tokens = ", ".join(repr(m) for m in table.fmt.missing)
        echo(f"dropped {dropped:,} of {n:,} records with a missing value ({tokens}) in the columns used "
             f"(the missing-value policy of {table.source}); {len(clean):,} remain")
    return clean
