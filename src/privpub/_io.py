"""Files privpub writes: one output writer (atomic, no silent overwrite, format from the suffix).

Every command of the CLI writes through :func:`write_table` / :func:`atomic_output`, and the
report and the experiment tables write their CSV cells through :func:`neutralise_frame`:

* **Atomic.** The output is written to a temporary file in the target folder and renamed onto
  the target only when complete; an error, Ctrl-C (``KeyboardInterrupt``) or ``SIGTERM`` (the
  CLI turns it into an exception) removes the temporary file, so a half-written release never
  sits under the name of a complete one.
* **No silent overwrite.** An existing output, or an output that names one of the command's
  input files, is refused unless ``force`` (``--force``). Without ``force`` the rename itself
  refuses to replace a file created meanwhile (a hard link, which fails if the name exists).
* **Format from the suffix.** ``.csv``, ``.json``, ``.npy``, ``.parquet`` (with pyarrow) ...;
  a suffix the command does not support is refused with the list of those it does.
* **Clear errors.** An output naming a directory, or a folder that does not exist, is a
  :class:`~privpub.errors.ParameterError` naming the option.
* **CSV cells are neutralised** against spreadsheet formula injection (OWASP, "CSV Injection"):
  a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (or their
  full-width forms), and is not a plain number, gets a leading ``'``; so does a text cell that
  already starts with ``'``, which makes the escape exactly reversible (:func:`restore_cell`).
  Numeric columns, and text cells that are plain numbers such as ``-1.5``, are written as they
  are. Column names get the same treatment.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privpub.errors import DataNotFoundError, ParameterError

__all__ = [
    "FORMATS",
    "TABLE_FORMATS",
    "atomic_output",
    "check_output",
    "neutralise_cell",
    "neutralise_frame",
    "output_format",
    "read_npy",
    "restore_cell",
    "restore_frame",
    "write_json",
    "write_table",
]

#: output suffix -> format name
FORMATS: dict[str, str] = {
    ".csv": "csv", ".json": "json", ".npy": "npy", ".parquet": "parquet", ".pq": "parquet",
    ".png": "png", ".svg": "svg", ".pdf": "pdf", ".html": "html", ".md": "markdown",
}
#: formats a table can be written in (``.npy`` only for all-numeric tables)
TABLE_FORMATS = ("csv", "json", "parquet", "npy")

#: first characters that make a spreadsheet read a cell as a formula (OWASP), plus full-width forms
_TRIGGERS = frozenset("=+-@\t\r\uff1d\uff0b\uff0d\uff20")
_ESCAPE = "'"
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)",
                           flags=re.IGNORECASE)
#: rows per chunk when a large table is written
CHUNK_ROWS = 1 << 20


# ----------------------------------------------------------------------------------------------
# CSV injection
# ----------------------------------------------------------------------------------------------
def neutralise_cell(value: Any) -> Any:
    """``value`` made safe for a spreadsheet: text that could start a formula gets a leading ``'``.

    Examples
    --------
    >>> neutralise_cell("=HYPERLINK(\\"http://x\\")"), neutralise_cell("-1.5"), neutralise_cell(-3)
    ('\\'=HYPERLINK("http://x")', '-1.5', -3)
    >>> neutralise_cell("'quoted")
    "''quoted"
    """
    if not isinstance(value, str) or not value:
        return value
    first = value[0]
    if first == _ESCAPE or (first in _TRIGGERS and not _PLAIN_NUMBER.fullmatch(value)):
        return _ESCAPE + value
    return value


def restore_cell(value: Any) -> Any:
    """Undo :func:`neutralise_cell` (exact: every written cell that starts with ``'`` was escaped)."""
    if isinstance(value, str) and value.startswith(_ESCAPE):
        return value[1:]
    return value


def _neutralise_series(s: pd.Series) -> pd.Series:
    if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s) or \
            pd.api.types.is_datetime64_any_dtype(s):
        return s
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    text = s.astype("string")
    first = text.str[:1]
    trigger = first.isin(list(_TRIGGERS)).fillna(False).astype(bool)
    plain = text.str.fullmatch(_PLAIN_NUMBER.pattern, case=False).fillna(False).astype(bool)
    escaped = first.eq(_ESCAPE).fillna(False).astype(bool)
    # only real strings are escaped: numbers held in an object column stay numbers
    if s.dtype == object and pd.api.types.infer_dtype(s, skipna=True) != "string":
        is_text = s.map(lambda v: isinstance(v, str))  # mixed column: numbers stay numbers
    else:
        is_text = pd.Series(True, index=s.index)
    need = ((trigger & ~plain) | escaped) & is_text.astype(bool)
    if not need.any():
        return s
    out = s.astype(object).copy()
    out[need] = _ESCAPE + text[need].astype(object)
    return out


def neutralise_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names are safe in a spreadsheet.

    Examples
    --------
    >>> import pandas as pd
    >>> neutralise_frame(pd.DataFrame({"=x": ["=1+2", "-2", "ok"], "n": [-1, 2, 3]})).to_dict("list")
    {"'=x": ["'=1+2", '-2', 'ok'], 'n': [-1, 2, 3]}
    """
    out = frame.copy(deep=False)
    for col in out.columns:
        out[col] = _neutralise_series(out[col])
    out.columns = [neutralise_cell(str(c)) if isinstance(c, str) else c for c in out.columns]
    return out


def restore_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Undo :func:`neutralise_frame` on a table read back from a CSV privpub wrote."""
    out = frame.copy(deep=False)
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(restore_cell)
    out.columns = [restore_cell(c) for c in out.columns]
    return out


# ----------------------------------------------------------------------------------------------
# paths, formats, atomic writes
# ----------------------------------------------------------------------------------------------
def output_format(path: str | os.PathLike[str], supported: Sequence[str], option: str = "--output") -> str:
    """The format of ``path`` from its suffix, if the command supports it.

    Raises
    ------
    ParameterError
        Unknown or unsupported suffix; the message lists the supported ones.

    Examples
    --------
    >>> output_format("out.JSON", ("csv", "json"))
    'json'
    """
    p = Path(path)
    fmt = FORMATS.get(p.suffix.lower())
    allowed = ", ".join(s for s, f in FORMATS.items() if f in supported)
    if fmt is None or fmt not in supported:
        got = f"suffix {p.suffix!r}" if p.suffix else "no suffix"
        raise ParameterError(f"{option} {str(p)!r} has {got}: the format is taken from the suffix, "
                             f"one of {allowed}")
    return fmt


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def check_output(
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    inputs: Sequence[str | os.PathLike[str] | None] = (),
    option: str = "--output",
    supported: Sequence[str] | None = None,
) -> Path:
    """Validate an output path before any work is done; return it as a :class:`Path`.

    Refuses (``ParameterError``): an empty name, a directory, a folder that does not exist, a
    suffix outside ``supported``, and -- unless ``force`` -- an existing file or one of ``inputs``.
    """
    text = os.fspath(path)
    if not text.strip():
        raise ParameterError(f"{option} must name a file, got an empty path")
    p = Path(text)
    if p.is_dir():
        raise ParameterError(f"{option} {text!r} is a directory; give a file name inside it")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise ParameterError(f"{option} {text!r}: the folder {str(parent)!r} {what} (create it first)")
    if supported is not None:
        output_format(p, supported, option)
    if not force:
        for inp in inputs:
            if inp is not None and _same_file(p, Path(inp)):
                raise ParameterError(f"{option} {text!r} is an input file of this command; "
                                     "choose another name (or pass --force to replace it)")
        if p.exists() or p.is_symlink():
            raise ParameterError(f"{option} {text!r} already exists; choose another name or pass --force "
                                 "to replace it")
    return p


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, force: bool = False,
                  option: str = "--output") -> Iterator[Path]:
    """Yield a temporary path in ``path``'s folder; on success move it onto ``path`` atomically.

    On any exception (including ``KeyboardInterrupt`` and the CLI's ``SIGTERM`` exception) the
    temporary file is removed and ``path`` is left as it was. Without ``force`` an existing
    ``path`` is never replaced, even one created while the output was being written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_output(d / "a.txt") as tmp:
    ...     _ = tmp.write_text("done")
    >>> (d / "a.txt").read_text(), sorted(p.name for p in d.iterdir())
    ('done', ['a.txt'])
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=f".partial{target.suffix}", dir=parent)
    except FileNotFoundError as exc:
        raise ParameterError(f"{option} {str(target)!r}: the folder {str(parent)!r} does not exist") from exc
    except OSError as exc:
        raise ParameterError(f"{option} {str(target)!r} cannot be written: {exc.strerror}") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        if force:
            if target.is_dir():
                raise ParameterError(f"{option} {str(target)!r} is a directory; give a file name inside it")
            os.replace(tmp, target)
        else:
            _link_no_clobber(tmp, target, option)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _link_no_clobber(tmp: Path, target: Path, option: str) -> None:
    try:
        os.link(tmp, target)
    except FileExistsError as exc:
        raise ParameterError(f"{option} {str(target)!r} already exists; choose another name or pass --force "
                             "to replace it") from exc
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise ParameterError(f"{option} {str(target)!r} cannot be written: {exc.strerror}") from exc
        if target.exists():  # a filesystem without hard links: check, then rename
            raise ParameterError(f"{option} {str(target)!r} already exists; choose another name or pass "
                                 "--force to replace it") from exc
        os.replace(tmp, target)


# ----------------------------------------------------------------------------------------------
# writers
# ----------------------------------------------------------------------------------------------
Columns = Mapping[str, Any]
Progress = Callable[[int], object] | None


def _n_rows(data: pd.DataFrame | Columns) -> int:
    if isinstance(data, pd.DataFrame):
        return len(data)
    lengths = {len(v) for v in data.values()}
    if len(lengths) > 1:
        raise ParameterError(f"columns of one table must have one length, got {sorted(lengths)}")
    return lengths.pop() if lengths else 0


def _slice(values: Any, a: int, b: int) -> Any:
    if isinstance(values, range):
        r = values[a:b]
        return np.arange(r.start, r.stop, r.step, dtype=np.int64)
    return values[a:b]


def _chunks(data: pd.DataFrame | Columns, progress: Progress = None) -> Iterator[pd.DataFrame]:
    n = _n_rows(data)
    for a in range(0, max(n, 1), CHUNK_ROWS):
        if isinstance(data, pd.DataFrame):
            chunk = data.iloc[a : a + CHUNK_ROWS]
        else:
            chunk = pd.DataFrame({k: _slice(v, a, a + CHUNK_ROWS) for k, v in data.items()})
        yield chunk
        if progress is not None:
            progress(len(chunk))


def _write_csv(data: pd.DataFrame | Columns, tmp: Path, progress: Progress) -> None:
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        for i, chunk in enumerate(_chunks(data, progress)):
            neutralise_frame(chunk).to_csv(fh, index=False, header=i == 0, lineterminator="\n")


def _write_json(data: pd.DataFrame | Columns, tmp: Path, progress: Progress) -> None:
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("[")
        first = True
        for chunk in _chunks(data, progress):
            if len(chunk) == 0:
                continue
            text = chunk.to_json(orient="records", force_ascii=False, double_precision=15)
            fh.write(("" if first else ",") + text[1:-1])
            first = False
        fh.write("]\n")


def _write_npy(data: pd.DataFrame | Columns, tmp: Path, progress: Progress) -> None:
    cols = dict(data.items()) if isinstance(data, pd.DataFrame) else dict(data)
    fields = []
    for name, values in cols.items():
        dtype = values.dtype if isinstance(values, pd.Series) else np.asarray(_slice(values, 0, 1)).dtype
        # a pandas extension dtype (str, nullable Int64, category ...) is no numpy dtype: refused too
        if not isinstance(dtype, np.dtype) or not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
            raise ParameterError(f"a .npy output holds numbers only, but column {name!r} holds {dtype}; "
                                 "write .csv, .json or .parquet instead")
        fields.append((str(name), dtype))
    n = _n_rows(data)
    dtype = np.dtype(fields)
    # written chunk by chunk through the file: a memory map of the whole output would keep its
    # n * itemsize bytes resident (max RSS) until the process ends (issue 27, CLI memory)
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n,)}
    buf = np.empty(min(n, CHUNK_ROWS), dtype=dtype)
    with open(tmp, "wb") as fh:
        try:
            np.lib.format.write_array_header_1_0(fh, header)  # what np.save writes
        except ValueError:  # a header beyond 64 KiB (thousands of columns)
            np.lib.format.write_array_header_2_0(fh, header)
        for a in range(0, n, CHUNK_ROWS):
            chunk = buf[: min(CHUNK_ROWS, n - a)]
            for name, values in cols.items():
                chunk[str(name)] = np.asarray(_slice(values, a, a + CHUNK_ROWS))
            fh.write(chunk.data)
            if progress is not None:
                progress(len(chunk))


def _write_parquet(data: pd.DataFrame | Columns, tmp: Path, progress: Progress) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ParameterError("writing Parquet needs pyarrow: pip install 'privpub[parquet]'") from exc
    if isinstance(data, pd.DataFrame):
        table = pa.Table.from_pandas(data.rename(columns=str), preserve_index=False)
    else:
        table = pa.table({str(k): np.asarray(_slice(v, 0, len(v))) for k, v in data.items()})
    pq.write_table(table, tmp)
    if progress is not None:
        progress(table.num_rows)


_WRITERS = {"csv": _write_csv, "json": _write_json, "npy": _write_npy, "parquet": _write_parquet}


def write_table(
    data: pd.DataFrame | Columns,
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    formats: Sequence[str] = TABLE_FORMATS,
    option: str = "--output",
    progress: Progress = None,
) -> Path:
    """Write a table atomically in the format of ``path``'s suffix.

    Parameters
    ----------
    data : DataFrame or mapping of column name to 1-D array
        The table. A mapping is written in chunks of :data:`CHUNK_ROWS` rows, so a large
        release is never copied whole into a DataFrame.
    path : path-like
        The output; its suffix picks the format among ``formats``.
    force : bool
        Replace an existing file.
    formats : sequence of str
        The formats the caller supports (subset of :data:`TABLE_FORMATS`).
    option : str
        The option named in error messages.
    progress : callable or None
        Called with the number of rows written after each chunk.

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import tempfile, pathlib, pandas as pd
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = write_table(pd.DataFrame({"label": ["=cmd", "ok"], "count": [-1, 2]}), d / "t.csv")
    >>> print((d / "t.csv").read_text(), end="")
    label,count
    '=cmd,-1
    ok,2
    """
    p = check_output(path, force=True, option=option, supported=formats)
    fmt = output_format(p, formats, option)
    with atomic_output(p, force=force, option=option) as tmp:
        _WRITERS[fmt](data, tmp, progress)
    return p


def write_json(obj: Any, path: str | os.PathLike[str], *, force: bool = False, option: str = "--output") -> Path:
    """Write ``obj`` as JSON atomically (the same rules as :func:`write_table`)."""
    p = check_output(path, force=True, option=option, supported=("json",))
    with atomic_output(p, force=force, option=option) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return p


# ----------------------------------------------------------------------------------------------
# readers
# ----------------------------------------------------------------------------------------------
def read_npy(path: str | os.PathLike[str], what: str = "input") -> np.ndarray:
    """Read a ``.npy`` array memory-mapped (no pickles); a damaged file is a privpub error."""
    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(f"{what} file {str(p)!r} does not exist or is not a file")
    try:
        arr: np.ndarray = np.load(p, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError, OSError, TypeError) as exc:
        raise ParameterError(f"{what} file {str(p)!r} is not a valid .npy array: {exc}") from exc
    if not isinstance(arr, np.ndarray):  # an .npz archive under a .npy name
        raise ParameterError(f"{what} file {str(p)!r} is not a .npy array (an .npz archive?)")
    return arr
