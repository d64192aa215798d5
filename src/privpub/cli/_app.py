"""The Typer application: ``privpub`` with one sub-command per task and ``privpub reproduce``."""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

import privpub
from privpub.cli._common import ClickException, PlainHelp, PlainHelpCommand, PlainHelpGroup

#: click's Abort as this Typer raises it (the click package's, or Typer's vendored copy)
_CLICK_ABORTS = tuple(c for c in (getattr(importlib.import_module(ClickException.__module__), "Abort", None),)
                      if c is not None)


#: what the CLI says for a value Typer could not convert, by the pydantic error type behind it
_CONVERSION = {"int_parsing": "must be an integer", "int_from_float": "must be an integer",
               "float_parsing": "must be a number", "bool_parsing": "must be true or false",
               "finite_number": "must be a finite number"}


def _flags(param: Any) -> str:
    """How the CLI names a click parameter: ``--window / -w`` for an option, ``INPUT`` for an argument."""
    if getattr(param, "param_type_name", None) == "argument":
        return str(param.name).upper()
    return " / ".join([*param.opts, *getattr(param, "secondary_opts", ())])


def _conversion(exc: Any) -> str:
    """Why a value was refused, from the pydantic error that caused the usage error (its ``type``),
    else the usage error's own message."""
    cause = exc.__cause__
    kinds = [e.get("type") for e in cause.errors()] if hasattr(cause, "errors") else []
    for kind in kinds:
        if kind in _CONVERSION:
            return _CONVERSION[kind]
    return " ".join(str(exc.message).split())


def usage_error_line(exc: Any) -> str:
    """A click/Typer usage error (a bad value, a missing or unknown option) as the CLI's one ``error:`` line,
    rendered from the error's data (the parameter, the option name, the pydantic error type), never
    by rewriting its message.

    Examples
    --------
    >>> import typer
    >>> usage_error_line(typer.BadParameter("Input should be a valid integer", param_hint="--seed"))
    'error: invalid value for --seed: Input should be a valid integer'
    """
    kind = type(exc).__name__
    param = getattr(exc, "param", None)
    if kind == "BadParameter" and (param is not None or getattr(exc, "param_hint", None)):
        hint = _flags(param) if param is not None else str(exc.param_hint)
        message = f"invalid value for {hint}: {_conversion(exc)}"
    elif kind == "MissingParameter" and param is not None:
        message = f"missing {param.param_type_name} {_flags(param)}"
    elif kind == "NoSuchOption":
        message = f"no such option: {exc.option_name}"
        if exc.possibilities:
            message += f" (possible options: {', '.join(sorted(exc.possibilities))})"
    else:
        message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    return f"error: {message}{hint}"


def _one_paragraph(text: str | None) -> str | None:
    """The first paragraph of a help text on one line (Typer keeps a docstring's line breaks in lists)."""
    if not text:
        return None
    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


def polish_help(typer_app: typer.Typer) -> None:
    """Give every registered command the plain-help classes and a one-line short help (recursively)."""
    for info in typer_app.registered_commands:
        if info.cls is None or isinstance(info.cls, DefaultPlaceholder) or info.cls is TyperCommand:
            info.cls = PlainHelpCommand
        help_text = info.help if isinstance(info.help, str) else inspect.getdoc(info.callback)
        if help_text:  # paragraphs on one line each: rich help keeps a docstring's line breaks
            info.help = "\n\n".join(p if p.startswith("\b") else " ".join(p.split())
                                     for p in inspect.cleandoc(help_text).split("\n\n"))
        if not info.short_help or isinstance(info.short_help, DefaultPlaceholder):
            info.short_help = _one_paragraph(help_text)
    for group in typer_app.registered_groups:
        sub = group.typer_instance
        if sub is None:
            continue
        if sub.info.cls is None or isinstance(sub.info.cls, DefaultPlaceholder) or sub.info.cls is TyperGroup:
            sub.info.cls = PlainHelpGroup
        polish_help(sub)


class _RootGroup(PlainHelp, TyperGroup):
    """The ``privpub`` group: a usage error is one ``error:`` line (exit 2), as every other mistake."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except ClickException as exc:
            if type(exc).__name__ != "NoArgsIsHelpError":  # the help was printed already
                typer.echo(usage_error_line(exc), err=True)
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        except (typer.Abort, *_CLICK_ABORTS):
            typer.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)

app = typer.Typer(
    name="privpub",
    cls=_RootGroup,
    help="Publish histograms, synthetic data, spatial data, decision tables and streams under "
    "differential privacy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
reproduce_app = typer.Typer(
    help="Reproduce a paper's experiments on the real datasets (see docs/results/).",
    no_args_is_help=True,
)
app.add_typer(reproduce_app, name="reproduce")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"privpub {privpub.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """privpub: differentially private data publishing."""


# Each part registers its commands in its own module: privpub.cli._<part>.register(app, reproduce_app)
_PART_MODULES = (
    "privpub.cli._datasets",
    "privpub.cli._demo",
    "privpub.cli._histogram",
    "privpub.cli._ldp_synth",
    "privpub.cli._spatial",
    "privpub.cli._decision",
    "privpub.cli._stream",
    "privpub.cli._audit",
    "privpub.cli._budget",
    "privpub.cli._schema",
    "privpub.cli._report",
    "privpub.cli._service",
)

for _name in _PART_MODULES:
    importlib.import_module(_name).register(app, reproduce_app)
polish_help(app)


def main() -> None:
    """Console entry point (SIGTERM cleans up like Ctrl-C: no partial output is left)."""
    from privpub.cli._common import install_sigterm_handler

    install_sigterm_handler()
    sys.exit(app())
