"""The exceptions and warnings privpub raises.

Every error a user can trigger is a :class:`PrivpubError`; the subclasses below also derive from
the matching built-in so that ``except ValueError`` keeps working::

    PrivpubError
    ├── ParameterError (ValueError)      a model parameter, epsilon, rng or shape is invalid
    ├── DomainError (ValueError)         data falls outside its declared public domain
    ├── BudgetExceededError              a ledger was asked to spend more than its budget
    ├── DataNotFoundError (FileNotFoundError)
    │                                    a dataset file is missing from the data directory
    └── LedgerFrozenError                a frozen (released) ledger was asked to spend

    PrivacyWarning (UserWarning)         a call leaks information or returns a non-private result

Messages name the argument, the rule and the offending value, e.g.
``"epsilon must be finite and > 0, got -1.0"``; the ``param`` attribute names the argument as
data (``"epsilon"``), so that outer layers can render it without parsing the message, and
``fix`` (when given) holds the arguments that would avoid the error (``{"clip": True}``), which
the message spells in Python (``; pass clip=True``) and the CLI as flags (``; pass --clip``).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "BudgetExceededError",
    "DataNotFoundError",
    "DomainError",
    "LedgerFrozenError",
    "ParameterError",
    "PrivacyWarning",
    "PrivpubError",
    "RetiredStateError",
]


class PrivpubError(Exception):
    """Base class of every error raised by privpub.

    ``param`` names the parameter (argument, field, option) the error is about, when there is
    one: the CLI renders it as its flag and the service as the JSON field, from this attribute,
    never by reading the message. ``fix`` maps parameters to values that avoid the error; the
    message (``str``) ends with them in Python terms, :attr:`reason` is the message without them.

    Examples
    --------
    >>> err = ParameterError("epsilon must be finite and > 0, got -1", param="epsilon")
    >>> err.param, str(err)
    ('epsilon', 'epsilon must be finite and > 0, got -1')
    >>> str(DomainError("points must lie inside the bounds", param="points", fix={"clip": True}))
    'points must lie inside the bounds; pass clip=True'
    """

    def __init__(self, *args: object, param: str | None = None, fix: Mapping[str, object] | None = None) -> None:
        super().__init__(*args)
        self.param = param
        self.fix: dict[str, object] = dict(fix or {})

    @property
    def reason(self) -> str:
        """The message without the :attr:`fix` suffix."""
        return super().__str__()

    def __str__(self) -> str:
        if not self.fix:
            return super().__str__()
        return f"{super().__str__()}; pass {', '.join(f'{k}={v!r}' for k, v in self.fix.items())}"


class ParameterError(PrivpubError, ValueError):
    """A parameter (epsilon, a model parameter, rng, a shape) is invalid."""


class DomainError(PrivpubError, ValueError):
    """Data lies outside its declared public domain (unknown category, out-of-range value, NaN)."""


class BudgetExceededError(PrivpubError):
    """A privacy ledger was asked to spend more epsilon than its budget holds."""


class LedgerFrozenError(PrivpubError):
    """A released (frozen) ledger cannot record further spending."""


class RetiredStateError(ParameterError):
    """A stored state was written by a privpub version whose mechanism had a privacy flaw.

    Such a state is never continued: continuing it would keep publishing with the flawed
    mechanism, or mix its releases with a fixed one. :attr:`method` is the publisher method,
    :attr:`reason` says what was wrong and what the operator can do (start a new stream; the
    answers already published stay as they were).
    """

    def __init__(self, *args: object, method: str = "", param: str | None = "state") -> None:
        super().__init__(*args, param=param)
        self.method = method


class DataNotFoundError(PrivpubError, FileNotFoundError):
    """A dataset file is missing; the message names the file and its public source."""


class PrivacyWarning(UserWarning):
    """Emitted when a call leaks private information or returns a non-private result."""
