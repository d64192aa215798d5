"""``privpub schema draft FILE``: a starting point for a schema, read from the data, with a warning.

A schema must come from public knowledge (a code book, a questionnaire's allowed answers, legal
ranges): bounds and categories read from the private records leak them (a unique maximum, a
category only one person has). Writing the JSON by hand is tedious, so ``draft`` reads the file,
drafts every attribute with :func:`privpub.core.infer_schema` (which warns
:class:`~privpub.errors.PrivacyWarning`) and lists what must be replaced. The draft carries a
``"draft"`` key; the publishing commands refuse it until the key is deleted.

``privpub schema show NAME`` prints a built-in dataset's schema (public metadata).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from privpub._io import write_json
from privpub.cli._common import ForceOption, check_output, handle_errors
from privpub.cli._tables import HeaderOption, NamesOption, read_records, resolve_table
from privpub.errors import ParameterError, PrivacyWarning

schema_app = typer.Typer(help="Public schemas: draft one from a file (with a privacy warning), or show a built-in one.",
                         no_args_is_help=True)

DRAFT_NOTE = ("DRAFT inferred from the private data: its bounds and categories are NOT differentially private. "
              "Replace each with public knowledge, then delete this key; privpub refuses a schema that has it.")


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub schema ...`` to the application."""
    app.add_typer(schema_app, name="schema")


def _to_replace(spec: dict[str, Any], missing: list[str]) -> list[str]:
    """One line per attribute: what the draft read from the data, and what to put instead."""
    lines = []
    for attr in spec["attributes"]:
        name = attr["name"]
        if attr["type"] == "numeric":
            lines.append(f"{name}: bounds [{attr['lo']:g}, {attr['hi']:g}] are the data's minimum and maximum; use "
                         "the public range of the variable (a questionnaire's allowed answers, a legal range) and a "
                         f"resolution (now {attr['resolution']:.3g}) chosen without looking at the data")
        else:
            n = len(attr["categories"])
            lines.append(f"{name}: {n} categories seen in the data; list the public code book's categories instead "
                         "(a category seen here only because one person has it reveals that person)")
    if spec.get("class_name"):
        lines.append(f"{spec['class_name']} (class): {len(spec['classes'])} labels seen in the data; list the public "
                     "labels")
    if missing:
        lines.append(f"missing values: {', '.join(missing)} appear as values; put the tokens that mean 'missing' in "
                     "\"missing\" (records holding one are then dropped) or declare them as categories")
    return lines


@schema_app.command("draft")
@handle_errors
def draft(
    input: Annotated[Path, typer.Argument(help="The data file (CSV with or without a header line, Parquet, JSON).")],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write the draft here (.json); default: print it.")] = None,
    class_column: Annotated[str | None, typer.Option(
        "--class-column", help="The class (label) column, for privpub decision.")] = None,
    max_categories: Annotated[int, typer.Option(
        "--max-categories", help="A numeric column with more distinct values than this is drafted as numeric.")] = 20,
    header: HeaderOption = None,
    names: NamesOption = None,
    force: ForceOption = False,
) -> None:
    """Draft a schema from FILE's values, with a PrivacyWarning and the list of what to replace.

    The draft reads the private data, so it is NOT a public schema: replace every bound and category with
    public knowledge, then delete its "draft" key (the publishing commands refuse a draft).
    """
    from privpub.core import infer_schema

    if output is not None:
        check_output(output, force=force, inputs=[input], supported=("json",))
    if max_categories < 1:
        raise ParameterError(f"--max-categories must be >= 1, got {max_categories}")
    table = resolve_table(schema_path=None, dataset_schema=None, names=names, required=False)
    frame = read_records(input, table, header=header, needed=[class_column] if class_column else [])
    if frame.shape[1] == 0 or len(frame) == 0:
        raise ParameterError(f"{str(input)!r} holds no records to draft a schema from")
    frame.columns = [str(c) for c in frame.columns]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyWarning)
        schema = infer_schema(frame.dropna(axis=1, how="all"), class_name=class_column, max_categories=max_categories)
    spec: dict[str, Any] = {"draft": DRAFT_NOTE, "columns": list(frame.columns), "missing": [], **schema.to_dict()}
    tokens = sorted({str(v) for v in ("?", "", "NA", "N/A", "null", "None", "-")
                     if frame.astype(str).isin([v]).any().any()})
    for w in caught:
        if issubclass(w.category, PrivacyWarning):
            typer.echo(f"warning: PrivacyWarning: {w.message}", err=True)
    typer.echo("Replace with public knowledge before publishing (then delete the \"draft\" key):", err=True)
    for line in _to_replace(spec, tokens):
        typer.echo(f"  - {line}", err=True)
    if output is None:
        typer.echo(json.dumps(spec, indent=2))
    else:
        write_json(spec, output, force=force)
        typer.echo(f"draft schema -> {output}", err=True)


@schema_app.command("show")
@handle_errors
def show(
    name: Annotated[str, typer.Argument(help="A built-in dataset: adult, census_income_kdd, iris or nltcs.")],
    synth: Annotated[bool, typer.Option("--synth", help="Show the coarse encoding privpub synth uses.")] = False,
) -> None:
    """Print a built-in dataset's public schema (the one --dataset-schema NAME uses) as JSON."""
    table = resolve_table(schema_path=None, dataset_schema=name, names=None, required=True)
    assert table.fmt is not None
    fmt = table.fmt
    schema = fmt.synth_schema if synth else fmt.schema
    typer.echo(fmt.describe(), err=True)
    typer.echo(json.dumps({"columns": list(fmt.columns), "missing": list(fmt.missing), **schema.to_dict()}, indent=2))
