"""Memory limits checked before anything is allocated.

A size that a user or a file sets (a domain, a number of bins, a grid, a tree height, a window,
a number of levels or categories, a time range) can ask for more memory than the machine has: a
three-line file declaring an integer domain ``0:10^13`` would make NumPy request terabytes, and
the process would die (or swap the machine to a halt) long after the mistake was made.
:func:`check_allocation` turns that into a :class:`~privpub.errors.ParameterError` that names the
size, the bytes and the option that lowers it, *before* the allocation.

The budget
----------
:func:`memory_budget` is the number of bytes one allocation may take:

* ``PRIVPUB_MEMORY_BUDGET`` when set: bytes (``"8000000000"``), with a unit (``"512M"``,
  ``"8G"``, ``"1.5T"``; powers of 1024) or a percentage of the machine's memory (``"75%"``);
* otherwise half (:data:`DEFAULT_MEMORY_FRACTION`) of the machine's physical memory, or of the
  container's memory limit (cgroup v2 / v1) when that is lower.

The check is about one planned allocation (:func:`check_allocation`) or the planned *peak* of a
whole call (:func:`check_working_set`): a publisher whose arrays each pass the per-allocation
check can still hold several of them at once (HPHP on 10^8 bins keeps the counts, the noisy
counts, the sort order, the sorted values and the grouping's tables alive together), so each
publisher states its peak bytes per input item, measured with :mod:`tracemalloc` at moderate
sizes and tested to be an upper bound, and checks it before its first allocation. Neither is a
process-wide limit: memory the caller already holds (the input) is not counted.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from privpub.errors import ParameterError

__all__ = ["DEFAULT_MEMORY_FRACTION", "MEMORY_BUDGET_ENV", "check_allocation", "check_working_set", "format_bytes",
           "memory_budget"]

#: environment variable overriding the memory budget (bytes, "8G", "512M" or "75%")
MEMORY_BUDGET_ENV = "PRIVPUB_MEMORY_BUDGET"
#: fraction of the machine's (or container's) memory one allocation may take by default
DEFAULT_MEMORY_FRACTION = 0.5

_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def _physical_memory() -> int:
    """Physical memory of the machine, lowered to the cgroup limit of a container if smaller."""
    try:
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        total = 8 * 1024**3
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total


def memory_budget() -> int:
    """Bytes one allocation may take: ``$PRIVPUB_MEMORY_BUDGET`` or half the machine's memory.

    Raises
    ------
    ParameterError
        If ``PRIVPUB_MEMORY_BUDGET`` is set but malformed.

    Examples
    --------
    >>> import os
    >>> os.environ["PRIVPUB_MEMORY_BUDGET"] = "2G"
    >>> memory_budget()
    2147483648
    >>> del os.environ["PRIVPUB_MEMORY_BUDGET"]
    """
    text = os.environ.get(MEMORY_BUDGET_ENV, "").strip()
    if not text:
        return int(_physical_memory() * DEFAULT_MEMORY_FRACTION)
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)(?:e(\d+))?\s*(%|[BKMGTP]?)i?B?", text, flags=re.IGNORECASE)
    if m is None:
        raise ParameterError(
            f"{MEMORY_BUDGET_ENV} must be bytes, a size such as 512M or 8G, or a percentage such as 75%, "
            f"got {text!r}"
        )
    value = float(m.group(1)) * (10 ** int(m.group(2)) if m.group(2) else 1)
    unit = m.group(3).upper()
    if unit == "%":
        if not 0 < value <= 100:
            raise ParameterError(f"{MEMORY_BUDGET_ENV} as a percentage must be in (0, 100], got {text!r}")
        return int(_physical_memory() * value / 100)
    budget = int(value * _UNITS[unit])
    if budget <= 0:
        raise ParameterError(f"{MEMORY_BUDGET_ENV} must be > 0, got {text!r}")
    return budget


def format_bytes(n_bytes: float) -> str:
    """``n_bytes`` in decimal units (``"8.0 TB"``), as a user reads a size.

    Examples
    --------
    >>> format_bytes(8 * 10**12)
    '8.0 TB'
    >>> format_bytes(512)
    '512 B'
    """
    if not math.isfinite(n_bytes):
        return "an unbounded amount"
    for unit, size in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= size:
            return f"{n_bytes / size:.1f} {unit}"
    return f"{int(n_bytes)} B"


def _format_count(n: int) -> str:
    if n >= 10**6 and n == 10 ** round(math.log10(n)):
        return f"10^{round(math.log10(n))}"
    return f"{n:,}"


def _over_budget(n_items: float, per_item: float, fixed: float, what: str, unit: str,
                 budget: int | None) -> tuple[float, int, str | None]:
    """``(bytes, budget, None)`` within the budget, else ``(bytes, budget, the count in words)``;
    a negative or NaN ``n_items`` raises. Shared by :func:`check_allocation` and
    :func:`check_working_set`, which word their refusals differently."""
    n = n_items if isinstance(n_items, int) else float(n_items)
    if (isinstance(n, float) and math.isnan(n)) or n < 0:
        raise ParameterError(f"{what}: the number of {unit} must be >= 0, got {n_items!r}")
    limit = memory_budget() if budget is None else int(budget)
    total = fixed + n * per_item
    if total <= limit:
        return total, limit, None
    count = _format_count(n) if isinstance(n, int) else (f"{n:.3g}" if math.isfinite(n) else "unboundedly many")
    return total, limit, count


def check_allocation(n_items: float, itemsize: float, what: str, option: str | None = None, *,
                     unit: str = "items", budget: int | None = None) -> int:
    """Refuse an allocation of ``n_items * itemsize`` bytes that exceeds the memory budget.

    Call it with the sizes computed from the parameters, before allocating anything.

    Parameters
    ----------
    n_items : int or float
        Number of items the allocation would hold (Python ints do not overflow; a float such as
        ``inf`` or ``1e30`` is accepted for sizes that are themselves too large to represent).
    itemsize : float
        Bytes per item, including the temporaries the computation keeps per item.
    what : str
        What would be allocated, e.g. ``"the histogram"``; the message reads
        ``"<what> would have <n> <unit> (<bytes>)"``.
    option : str or None
        The option or parameter that lowers the size (``"--bins"``, ``"window"``).
    unit : str
        Name of the items (``"bins"``, ``"cells"``, ``"nodes"``).
    budget : int or None
        Bytes allowed (default: :func:`memory_budget`).

    Returns
    -------
    int
        The number of bytes, when within the budget.

    Raises
    ------
    ParameterError
        If the allocation would exceed the budget (or ``n_items`` is negative or NaN).

    Examples
    --------
    >>> check_allocation(1000, 8, "the histogram", "--bins", unit="bins", budget=10**6)
    8000
    >>> check_allocation(10**12, 8, "the histogram", "--bins", unit="bins", budget=10**9)
    Traceback (most recent call last):
    ...
    privpub.errors.ParameterError: the histogram would have 10^12 bins (8.0 TB), over the memory budget of 1.0 GB; lower --bins (or raise PRIVPUB_MEMORY_BUDGET)
    """
    total, limit, count = _over_budget(n_items, itemsize, 0.0, what, unit, budget)
    if count is None:
        return int(total)
    lower = f"; lower {option}" if option else ""
    raise ParameterError(
        f"{what} would have {count} {unit} ({format_bytes(total)}), over the memory budget of "
        f"{format_bytes(limit)}{lower} (or raise {MEMORY_BUDGET_ENV})"
    )


def check_working_set(n_items: float, bytes_per_item: float, what: str, option: str, *, fixed: float = 0.0,
                      unit: str = "items", budget: int | None = None) -> int:
    """Refuse a call whose peak memory, ``fixed + n_items * bytes_per_item`` bytes, exceeds the budget.

    Call it before the first allocation of the call, with ``bytes_per_item`` the peak bytes per
    input item of the whole computation (all arrays alive at once, temporaries included), as
    the publisher measured it.

    Parameters
    ----------
    n_items : int or float
        Size of the input that drives the memory (bins, users, rows, items).
    bytes_per_item : float
        Peak bytes of the call per item.
    what : str
        The call, e.g. ``"HPHP.publish"``; the message reads ``"<what> on <n> <unit> would need ..."``.
    option : str
        What to lower, naming the parameter (``"the number of bins of data"``, ``"domain_size"``).
    fixed : float
        Bytes that do not grow with ``n_items``.
    unit : str
        Name of the items.
    budget : int or None
        Bytes allowed (default: :func:`memory_budget`).

    Returns
    -------
    int
        The estimated peak, when within the budget.

    Raises
    ------
    ParameterError
        If the estimated peak exceeds the budget.

    Examples
    --------
    >>> check_working_set(10**6, 150, "HPHP.publish", "the number of bins of data", unit="bins", budget=10**9)
    150000000
    >>> check_working_set(10**8, 150, "HPHP.publish", "the number of bins of data", unit="bins", budget=10**9)
    Traceback (most recent call last):
    ...
    privpub.errors.ParameterError: HPHP.publish on 10^8 bins would need about 15.0 GB at its peak (150 bytes per bin), over the memory budget of 1.0 GB; lower the number of bins of data (or raise PRIVPUB_MEMORY_BUDGET)
    """
    total, limit, count = _over_budget(n_items, bytes_per_item, fixed, what, unit, budget)
    if count is None:
        return int(total)
    per = unit[:-1] if unit.endswith("s") else unit
    raise ParameterError(
        f"{what} on {count} {unit} would need about {format_bytes(total)} at its peak "
        f"({bytes_per_item:g} bytes per {per}), over the memory budget of {format_bytes(limit)}; "
        f"lower {option} (or raise {MEMORY_BUDGET_ENV})"
    )
