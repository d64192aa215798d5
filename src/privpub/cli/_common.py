"""Helpers shared by the CLI commands: error mapping, shared options, input reading, budget sessions.

Every command is wrapped in :func:`handle_errors`, which turns what can go wrong into one line on
stderr and an exit code, never a traceback:

====================================  =========  =====================================================
what                                  exit code  message
====================================  =========  =====================================================
a :class:`~privpub.errors.PrivpubError`  2      ``error: <the message>`` (bad input, missing data, budget)
``MemoryError``                       2          ``error: out of memory ...`` (lower the sizes)
Ctrl-C / ``SIGTERM``                  130 / 143  ``interrupted: no output was written``
any other exception (a privpub bug)   1          ``error: internal error (<type>: <message>) ...``
====================================  =========  =====================================================

``PRIVPUB_DEBUG=1`` re-raises the last kind (with its traceback), for bug reports and for the
fuzz tests, which count such exceptions as failures.

Outputs are written through :mod:`privpub._io` (atomic, no overwrite without ``--force``,
format from the suffix).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import pandas as pd
import typer
from typer.core import TyperCommand, TyperGroup

from privpub._io import TABLE_FORMATS, atomic_output, check_output, read_npy
from privpub._io import write_table as _write_table
from privpub.errors import DataNotFoundError, ParameterError, PrivpubError

__all__ = [
    "BudgetFileOption",
    "BudgetTotalOption",
    "Checks",
    "DataLabelOption",
    "EpsilonOption",
    "ForceOption",
    "SEED_HELP",
    "Terminated",
    "check_out_dir",
    "check_output",
    "command_flags",
    "echo_session",
    "handle_errors",
    "install_sigterm_handler",
    "open_session",
    "output_file",
    "progress_bar",
    "publish_kwargs",
    "read_json",
    "read_table",
    "render_error",
    "unit_notice",
    "write_table",
]

F = TypeVar("F", bound=Callable[..., Any])

#: click's exception classes as this Typer raises them (Typer >= 0.22 vendors its own copy of click,
#: older ones use the click package): taken from Typer's own ``BadParameter``
ClickException: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

#: exit code of a command that failed with a privpub error (bad input, missing data, budget)
ERROR_EXIT_CODE = 2
#: exit code of an unexpected exception (a privpub bug)
INTERNAL_EXIT_CODE = 1
#: environment variable that makes unexpected exceptions propagate with their traceback
DEBUG_ENV = "PRIVPUB_DEBUG"

SEED_HELP = ("Random seed, for tests and reproductions only: anyone who knows the seed can recompute the "
             "noise and subtract it, so never publish it; omit it for an OS-seeded generator.")

EpsilonOption = Annotated[float, typer.Option("--epsilon", "-e", help="Total privacy budget (> 0).")]
ForceOption = Annotated[bool, typer.Option(
    "--force", help="Replace an existing output file (also one that names an input file).")]
BudgetFileOption = Annotated[Path | None, typer.Option(
    "--budget-file", help="Publish under the privacy-budget session kept in this JSON file: the release's "
    "epsilon is reserved there before any noise is drawn, and refused if the rest of the budget is too small "
    "(see privpub budget show).")]
BudgetTotalOption = Annotated[float | None, typer.Option(
    "--budget-total", help="Create --budget-file with this total epsilon if it does not exist (it must "
    "match the file's total if it does).")]
EngineOption = Annotated[str, typer.Option(
    "--engine", help="Where the data-sized aggregation runs: pandas (default, one machine) or spark (a local[2] "
    "session reads the CSV/Parquet input; needs the spark extra, privpub\\[spark]).")]
DataLabelOption = Annotated[str | None, typer.Option(
    "--data-label", help="Label of the data in the budget file (default: the input file's name).")]


class PlainHelp:
    """Help pages without Typer's placeholders: ``INPUT`` in the usage line (not ``{input}``) and no
    ``<bool>`` label on flags (``--help``, ``--version``, ``--force``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and getattr(param, "metavar", None) is None:
                param.metavar = ""
        return params  # type: ignore[no-any-return]

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)  # type: ignore[misc]
        return [re.sub(r"^\{(.+)\}", lambda m: m.group(1).upper(), p) for p in pieces]


class PlainHelpCommand(PlainHelp, TyperCommand):
    """A ``privpub`` command (see :class:`PlainHelp`)."""


class PlainHelpGroup(PlainHelp, TyperGroup):
    """A ``privpub`` command group (see :class:`PlainHelp`)."""



class Terminated(BaseException):
    """Raised in the main thread when the process receives ``SIGTERM``, so outputs are cleaned up."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def install_sigterm_handler() -> None:
    """Make ``SIGTERM`` raise :class:`Terminated` (main thread only), like Ctrl-C raises KeyboardInterrupt."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class ArgumentProblems(ParameterError):
    """Several problems with a command's arguments, found in one pass before any data was read.

    ``errors`` holds each problem as a privpub error (with its ``param``), so that the CLI renders
    every one under its flag.
    """

    def __init__(self, errors: list[PrivpubError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(_one_line(str(e)) for e in self.errors))

    @property
    def problems(self) -> list[str]:
        """The problems' messages (in the library's terms)."""
        return [_one_line(str(e)) for e in self.errors]


class Checks:
    """Collect every problem with a command's arguments, then report them all at once.

    Each command validates all its arguments *before* it reads data, reserves budget or draws
    noise; :meth:`done` raises one :class:`~privpub.errors.ParameterError` listing every problem
    (the CLI prints one ``error:`` line, then one indented line per problem). A problem keeps the
    ``param`` of its error, which the CLI renders as the flag.

    Examples
    --------
    >>> from privpub.core import check_epsilon
    >>> checks = Checks()
    >>> checks(check_epsilon, -1.0, "--epsilon") is None
    True
    >>> checks.add("--levels must be >= 1, got 0", param="--levels")
    >>> checks.problems
    ['--epsilon must be finite and > 0, got -1.0', '--levels must be >= 1, got 0']
    >>> [e.param for e in checks.errors]
    ['--epsilon', '--levels']
    """

    def __init__(self) -> None:
        self.errors: list[PrivpubError] = []

    @property
    def problems(self) -> list[str]:
        """The problems' messages."""
        return [_one_line(str(e)) for e in self.errors]

    def add(self, message: str | PrivpubError, param: str | None = None) -> None:
        """Record a problem (a message, optionally about ``param``, or a privpub error)."""
        self.errors.append(message if isinstance(message, PrivpubError) else ParameterError(message, param=param))

    def __call__(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run one check; a privpub error it raises is recorded and None returned."""
        try:
            return func(*args, **kwargs)
        except PrivpubError as exc:
            if isinstance(exc, ArgumentProblems):
                self.errors.extend(exc.errors)
            else:
                self.add(exc)
            return None

    def budget(self, epsilon: float | None, rho: float | None, *, which: str) -> None:
        """Check a command's budget pair: exactly one of ``--epsilon`` and ``--rho``, each finite
        and > 0. ``which`` says which methods take which, for the message (e.g. "pure DP" and
        "zCDP: mf_sqrt, ...")."""
        from privpub.core import check_epsilon

        if (epsilon is None) == (rho is None):
            eps_what, rho_what = which.split(" | ")
            self.add(f"give exactly one of --epsilon ({eps_what}) and --rho ({rho_what})",
                     param="--rho" if rho is not None else "--epsilon")
        if epsilon is not None:
            self(check_epsilon, epsilon, "--epsilon")
        if rho is not None:
            self(check_epsilon, rho, "--rho")

    @property
    def ok(self) -> bool:
        return not self.errors

    def done(self) -> None:
        """Raise the problems found so far (one error naming them all); do nothing if none."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ArgumentProblems(self.errors)


def command_flags(func: Callable[..., Any]) -> dict[str, tuple[str, str | None]]:
    """``{python name: (flag, negative flag)}`` of a Typer command's options, from its signature.

    Examples
    --------
    >>> def cmd(noise: Annotated[str, typer.Option("--noise")] = "discrete",
    ...         clip: bool = typer.Option(False, "--clip/--no-clip"), flip_prob: float = typer.Option(0.5)): ...
    >>> sorted(command_flags(cmd).items())
    [('clip', ('--clip', '--no-clip')), ('flip_prob', ('--flip-prob', None)), ('noise', ('--noise', None))]
    """
    from typer.models import OptionInfo

    try:
        params = inspect.signature(func, eval_str=True).parameters
    except (NameError, TypeError, ValueError):
        params = inspect.signature(func).parameters
    flags: dict[str, tuple[str, str | None]] = {}
    for name, param in params.items():
        infos = [m for m in getattr(param.annotation, "__metadata__", ()) if isinstance(m, OptionInfo)]
        if isinstance(param.default, OptionInfo):
            infos.append(param.default)
        if not infos:
            continue
        decls = [d for info in infos for decl in (info.param_decls or ()) for d in str(decl).split("/")]
        longs = [d for d in decls if d.startswith("--")]
        flag = longs[0] if longs else "--" + name.replace("_", "-")
        negative = longs[1] if len(longs) > 1 and longs[1].startswith("--no-") else None
        for key in {name, flag.lstrip("-").replace("-", "_")}:
            flags[key] = (flag, negative)
    if "seed" in flags:
        flags.setdefault("rng", flags["seed"])
    return flags


def _fix_terms(name: str, value: object, flags: dict[str, tuple[str, str | None]]) -> str | None:
    """One argument of an error's ``fix`` as the CLI spells it (``--clip``, ``--noise laplace``);
    None if the command has no flag for it."""
    if name not in flags:
        return None
    flag, negative = flags[name]
    if value is True:
        return flag
    if value is False:
        return negative or f"(without {flag})"
    return f"{flag} {value}"


def render_error(exc: PrivpubError, flags: dict[str, tuple[str, str | None]]) -> str:
    """A privpub error in the CLI's terms, from its data (``param``, ``fix``), never from its text.

    An error about a parameter that is one of the command's options is prefixed with the flag
    (``--epsilon: epsilon must be ...``); an error raised by the CLI about a flag (``param`` is the
    flag itself) already speaks the flag. ``fix`` is spelled with flags (a fix the command has no
    flag for is left out).

    Examples
    --------
    >>> from privpub.errors import DomainError
    >>> flags = {"clip": ("--clip", "--no-clip"), "noise": ("--noise", None), "epsilon": ("--epsilon", None)}
    >>> render_error(ParameterError("epsilon must be finite and > 0, got -1.0", param="epsilon"), flags)
    '--epsilon: epsilon must be finite and > 0, got -1.0'
    >>> render_error(DomainError("points lie outside the bounds", param="points", fix={"clip": True}), flags)
    'points lie outside the bounds; pass --clip'
    >>> render_error(ParameterError("--levels must be >= 1, got 0", param="--levels"), flags)
    '--levels must be >= 1, got 0'
    """
    param = getattr(exc, "param", None)
    fix: dict[str, object] = getattr(exc, "fix", None) or {}
    text = _one_line(exc.reason if fix else str(exc))
    terms = [t for t in (_fix_terms(k, v, flags) for k, v in fix.items()) if t is not None]
    if terms:
        text += "; pass " + " ".join(terms)
    if param is not None and param in flags:
        text = f"{flags[param][0]}: {text}"
    return text


def handle_errors(func: F) -> F:
    """Map what a command raises to a one-line message and an exit code (see the module docstring)."""

    flags: dict[str, tuple[str, str | None]] | None = None

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal flags
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, ClickException):
            raise
        except PrivpubError as exc:
            if flags is None:
                flags = command_flags(func)
            if isinstance(exc, ArgumentProblems) and len(exc.errors) > 1:
                typer.echo(f"error: {len(exc.errors)} problems with the arguments (nothing was read and no "
                           "budget was spent):", err=True)
                for problem in exc.errors:
                    typer.echo(f"  - {render_error(problem, flags)}", err=True)
            else:
                typer.echo(f"error: {render_error(exc, flags)}", err=True)
            raise typer.Exit(code=ERROR_EXIT_CODE) from None
        except KeyboardInterrupt:
            typer.echo("interrupted: no output was written", err=True)
            raise typer.Exit(code=130) from None
        except Terminated:
            typer.echo("terminated: no output was written", err=True)
            raise typer.Exit(code=143) from None
        except MemoryError:
            typer.echo("error: out of memory; lower the sizes of the command (bins, domain, window, rows) or "
                       "PRIVPUB_MEMORY_BUDGET", err=True)
            raise typer.Exit(code=ERROR_EXIT_CODE) from None
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            typer.echo(f"error: internal error ({type(exc).__name__}: {_one_line(str(exc))[:500]}); please report "
                       f"it, with the command (set {DEBUG_ENV}=1 to see the traceback)", err=True)
            raise typer.Exit(code=INTERNAL_EXIT_CODE) from None

    return wrapper  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------------
def read_table(path: Path | str, *, usecols: list[str] | None = None, names: list[str] | None = None,
               csv_options: dict[str, Any] | None = None) -> pd.DataFrame:
    """Read a CSV, Parquet, JSON (records) or .npy (structured) file; errors name the file.

    ``names`` reads a CSV without a header line under these column names; ``csv_options`` are
    extra ``pandas.read_csv`` options (a built-in dataset's layout).
    """
    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(f"input file {str(p)!r} does not exist or is not a file")
    suffix = p.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            try:
                import pyarrow  # noqa: F401
            except ImportError as exc:
                raise ParameterError("reading Parquet needs pyarrow: pip install 'privpub[parquet]'") from exc
            return pd.read_parquet(p)
        if suffix == ".npy":
            arr = read_npy(p)
            if arr.dtype.names is None:
                if arr.ndim != 1:
                    raise ParameterError(f"input file {str(p)!r}: a plain .npy input must be 1-D, got shape {arr.shape}")
                return pd.DataFrame({"value": arr})
            return pd.DataFrame({n: arr[n] for n in arr.dtype.names})
        if suffix == ".json":
            return pd.DataFrame(read_json(p, "input"))
        frame: pd.DataFrame  # read_csv is overloaded on chunksize/iterator; csv_options (a format's) never hold them
        if names is not None:
            frame = pd.read_csv(p, usecols=usecols, header=None, names=names, **(csv_options or {}))
        else:
            frame = pd.read_csv(p, usecols=usecols, **(csv_options or {}))
        return frame
    except PrivpubError:
        raise
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError, ValueError, OSError,
            TypeError) as exc:
        raise ParameterError(f"could not read {str(p)!r} as a {suffix.lstrip('.') or 'CSV'} table: "
                             f"{_one_line(str(exc))[:300]}") from exc
    except Exception as exc:  # pyarrow's errors are not ValueErrors
        if type(exc).__module__.startswith("pyarrow"):
            raise ParameterError(f"could not read {str(p)!r} as Parquet: {_one_line(str(exc))[:300]}") from exc
        raise


def check_engine(engine: str) -> str:
    if engine not in ("pandas", "spark"):
        raise ParameterError(f"--engine must be 'pandas' or 'spark', got {engine!r}")
    return engine


def read_spark_table(path: Path | str) -> Any:
    """A CSV (header, inferred types) or Parquet file (or directory of Parquet files) as a Spark DataFrame.

    Uses the active Spark session if any (``spark-submit``), else a ``local[2]`` one
    (:func:`privpub.spark.local_session`); only aggregates come back to this process.
    """
    p = Path(path)
    if not p.exists():
        raise DataNotFoundError(f"input {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq") and not p.is_dir():
        raise ParameterError(f"--engine spark reads CSV or Parquet input, got {str(p)!r}")
    from privpub.spark import local_session

    spark = local_session(2, app_name="privpub-cli")
    if suffix == ".csv":
        return spark.read.option("header", True).option("inferSchema", True).option("mode", "FAILFAST").csv(str(p))
    return spark.read.parquet(str(p))


def read_json(path: Path | str, what: str) -> Any:
    """Read a JSON file (a schema, a taxonomy); every failure is a privpub error naming the file."""
    import json

    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(f"{what} file {str(p)!r} does not exist or is not a file")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, OSError, RecursionError) as exc:
        raise ParameterError(f"{what} file {str(p)!r} is not valid UTF-8 JSON: {_one_line(str(exc))[:200]}") from exc


# ----------------------------------------------------------------------------------------------
# outputs
# ----------------------------------------------------------------------------------------------
def write_table(frame: Any, path: Path | str, *, force: bool = False, formats: tuple[str, ...] = TABLE_FORMATS,
                option: str = "--output", progress: str | None = None) -> Path:
    """Write a table atomically in the format of the suffix (see :func:`privpub._io.write_table`).

    ``progress`` (a description) shows a tqdm bar of the rows written.
    """
    if progress is None:
        return _write_table(frame, path, force=force, formats=formats, option=option)
    n = len(frame) if isinstance(frame, pd.DataFrame) else len(next(iter(frame.values()), ()))
    bar = progress_bar(n, progress, "rows")
    try:
        return _write_table(frame, path, force=force, formats=formats, option=option,
                            progress=None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()


def check_out_dir(path: Path, option: str = "--out") -> Path:
    """The output directory of a reproduction: it may exist, but must not be a file."""
    if path.exists() and not path.is_dir():
        raise ParameterError(f"{option} {str(path)!r} is a file; give a directory")
    return path


@contextlib.contextmanager
def output_file(path: Path | str, *, force: bool, option: str = "--output") -> Iterator[Path]:
    """A temporary path that becomes ``path`` when the block succeeds (see :func:`privpub._io.atomic_output`)."""
    with atomic_output(path, force=force, option=option) as tmp:
        yield tmp


# ----------------------------------------------------------------------------------------------
# budget sessions
# ----------------------------------------------------------------------------------------------
def open_session(budget_file: Path | None, budget_total: float | None, label: str, *, zcdp: bool = False) -> Any:
    """The :class:`~privpub.core.Session` of ``--budget-file`` (labelled ``label``), or None.

    ``zcdp``: the release is charged in rho, so a new file is a zCDP session of total rho
    ``--budget-total`` (an existing file keeps its measure, and the publisher refuses a mismatch).
    """
    from privpub.core import Session

    if budget_file is None:
        if budget_total is not None:
            raise ParameterError("--budget-total creates a --budget-file: give --budget-file PATH too")
        return None
    if "://" in str(budget_file):
        raise ParameterError("--budget-file takes the path of a JSON file (database sessions are the service's)")
    if zcdp:
        return Session.open(budget_file, total_rho=budget_total).on(label)
    return Session.open(budget_file, total_epsilon=budget_total).on(label)


def echo_session(session: Any, budget_file: Path | None, *, err: bool = False) -> None:
    """After a release under ``--budget-file``: what the file has spent and what remains."""
    if session is not None:
        from privpub.core import PURE_DP, measure_unit

        unit = "" if session.measure == PURE_DP else f" {measure_unit(session.measure)}"  # zCDP: say the amounts are rhos
        typer.echo(f"budget file {budget_file}: spent{unit} {session.spent:.6g} of {session.total_epsilon:g}, "
                   f"{session.remaining:.6g} remains", err=err)


def publish_kwargs(publish: Callable[..., Any], session: Any, command: str) -> dict[str, Any]:
    """``{"session": session}`` if the publisher accepts it; refuse ``--budget-file`` if it does not."""
    if session is None:
        return {}
    if "session" not in inspect.signature(publish).parameters:
        raise ParameterError(f"--budget-file: privpub {command} cannot publish under a budget session yet (its "
                             "publisher takes no session=); nothing was published")
    return {"session": session}


def progress_bar(total: int, desc: str, unit: str, quiet: bool = False) -> Any:
    """A tqdm bar on stderr (None when ``quiet``); the library reports progress through callbacks."""
    if quiet:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False)


def unit_notice(table: Any, privacy_id: str | None, epsilon: float, *, unit: str = "row",
                zcdp: bool = False) -> str | None:
    """What to tell a curator who publishes raw records without ``--privacy-id``.

    Only the public schema is read (a schema file's ``privacy_id`` / ``max_contributions``): the
    largest contribution is named when the schema states it, and otherwise the message says that the
    check is not run, since counting rows per id in the data would read private data for free.
    ``table`` is the command's :class:`TableInput` (or None); ``unit`` names what the release
    protects without an id ("row"; "event" for streams). ``zcdp``: ``epsilon`` is a rho, and ``k``
    rows of one person cost ``k^2`` times it (group privacy under zCDP), not ``k`` times.
    """
    if privacy_id is not None:
        return None
    pid = table.privacy_id if table is not None else None
    bound = table.max_contributions if table is not None else None
    if pid is not None and bound is not None:
        name, factor, times = ("rho", bound * bound, f"{bound}^2") if zcdp else ("epsilon", bound, f"{bound}")
        return (f"WARNING: the schema says one {pid!r} can hold up to {bound} {unit}s; this release protects one {unit}, "
                f"so such a person only at {times} x {name} = {factor * epsilon:g}. Pass --privacy-id {pid} "
                f"--max-contributions K to protect each person at {name}")
    if pid is not None:
        return (f"WARNING: the schema says {unit}s repeat per {pid!r}, but not how many one {pid!r} can hold; that "
                f"check is not run (it would read the private data). This release protects one {unit}; pass "
                f"--privacy-id {pid} --max-contributions K to protect each person")
    return (f"note: this release protects one {unit}; whether one person holds several {unit}s is not checked (the "
            "schema does not say, and counting it would read the private data). If so, pass --privacy-id COLUMN "
            "--max-contributions K")
