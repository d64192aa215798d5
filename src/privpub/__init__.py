"""privpub: publishing data under differential privacy.

:class:`Session` caps the privacy budget across releases (every ``publish`` takes ``session=``);
:class:`PrivacyUnit` states whom a release protects (one record, or one person's bounded rows).

Subpackages: :mod:`privpub.core` (mechanisms, accountant and ledgers, sessions, domains), :mod:`privpub.ldp`
(local-DP frequency oracles), :mod:`privpub.metrics`, :mod:`privpub.datasets`, and one per
publishing task: :mod:`privpub.histogram`, :mod:`privpub.ldp_synth`, :mod:`privpub.spatial`,
:mod:`privpub.decision`, :mod:`privpub.stream`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privpub.core import lazy_exports
from privpub.errors import (
    BudgetExceededError,
    DataNotFoundError,
    DomainError,
    LedgerFrozenError,
    ParameterError,
    PrivacyWarning,
    PrivpubError,
)

if TYPE_CHECKING:
    from privpub.core import PrivacyUnit, Session

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "DataNotFoundError",
    "DomainError",
    "LedgerFrozenError",
    "ParameterError",
    "PrivacyUnit",
    "PrivacyWarning",
    "PrivpubError",
    "Session",
    "__version__",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
