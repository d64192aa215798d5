"""Plug-in points: the core defines interfaces, outer layers register implementations.

Layers point inward only (``docs/architecture.md``): ``privpub.core``, ``privpub.ldp`` and the
parts never import ``privpub.service`` or ``privpub.spark``. Where an inner layer needs something
only an outer one can provide, it asks this registry:

* **session stores** by URL scheme: :meth:`privpub.core.Session.open` with
  ``"sqlite:///budget.db"`` asks for the store registered for ``"sqlite"`` (the service's
  database store, registered by ``privpub.service``);
* **frame backends**: an aggregation over a data-frame type the core does not know (a
  ``pyspark.sql.DataFrame``) is answered by the backend registered for it (``privpub.spark``).

An implementation registers when its package is imported. A package that an inner layer may
need before the user imports it is also declared as an entry point in the group
``privpub.plugins`` (see ``pyproject.toml``); the registry imports those entry points the first
time a lookup misses, skipping any whose optional extra is not installed (and naming that extra
in the error if nothing else answers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from privpub.errors import ParameterError

__all__ = [
    "FrameBackend",
    "SessionStoreFactory",
    "frame_backend",
    "register_frame_backend",
    "register_session_store",
    "require_operation",
    "session_store_factory",
]

ENTRY_POINT_GROUP = "privpub.plugins"


class SessionStoreFactory(Protocol):
    """``factory(url, total, measure=...)`` returns a :class:`privpub.core.SessionStore`.

    ``total`` is the total epsilon (a rho when ``measure="zcdp"``) of a new session; ``measure``
    None accepts a stored session's measure, a given one must match it.
    """

    def __call__(self, url: str, total_epsilon: float | None = None, *, measure: str | None = None) -> Any: ...


@runtime_checkable
class FrameBackend(Protocol):
    """Data-sized aggregations over a data-frame type the core does not hold in memory.

    A backend answers :meth:`accepts` for its frames; the parts call the operations they need
    (each optional: a part checks ``hasattr``):

    * ``ldp_aggregate(oracle, reports, epsilon)``: the support counts of stored local-DP reports
      (``OUE``/``SUE``/``OLH.aggregate``), equal to the in-memory result;
    * ``ldp_n_reports(reports)``: how many reports the frame holds;
    * ``decision_counts(attrs, schema, data)``: the counting backend of the decision publishers
      (a :class:`privpub.decision.aggregation.DecisionCounts`).
    """

    name: str

    def accepts(self, data: Any) -> bool: ...


_lock = threading.Lock()
_session_stores: dict[str, SessionStoreFactory] = {}
_frame_backends: list[FrameBackend] = []
_loaded = False
_load_errors: dict[str, str] = {}


def register_session_store(schemes: tuple[str, ...] | list[str], factory: SessionStoreFactory) -> None:
    """Register ``factory`` for database URLs whose scheme (before ``+driver``) is in ``schemes``."""
    with _lock:
        for scheme in schemes:
            _session_stores[str(scheme).lower()] = factory


def register_frame_backend(backend: FrameBackend) -> None:
    """Register a frame backend (a later registration of the same ``name`` replaces it)."""
    if not isinstance(backend, FrameBackend):
        raise ParameterError("a frame backend needs a name and an accepts(data) method", param="backend")
    with _lock:
        _frame_backends[:] = [b for b in _frame_backends if b.name != backend.name]
        _frame_backends.append(backend)


def _load_entry_points() -> None:
    """Import every ``privpub.plugins`` entry point once (their import registers them)."""
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
    from importlib import metadata  # here, not at import: it costs ~30 ms (issue 27, the client's import)

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except ImportError as exc:  # an optional extra that is not installed
            _load_errors[ep.name] = f"{type(exc).__name__}: {exc}"


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].split("+", 1)[0].lower()


def session_store_factory(url: str) -> SessionStoreFactory:
    """The factory registered for ``url``'s scheme, loading the plug-ins once if needed."""
    scheme = _scheme(url)
    if scheme not in _session_stores:
        _load_entry_points()
    factory = _session_stores.get(scheme)
    if factory is None:
        known = ", ".join(sorted(_session_stores)) or "none"
        hint = ""
        if "service" in _load_errors:
            hint = f"; the privpub[service] extra is not installed ({_load_errors['service']})"
        raise ParameterError(
            f"no session store handles {scheme!r} URLs (known: {known}){hint}", param="session"
        )
    return factory


def _in_memory(data: Any) -> bool:
    module = type(data).__module__.split(".", 1)[0]
    return module in {"builtins", "numpy", "pandas"}


def frame_backend(data: Any) -> FrameBackend | None:
    """The registered backend that accepts ``data``, or None for in-memory data."""
    if _in_memory(data):
        return None
    for backend in list(_frame_backends):
        if backend.accepts(data):
            return backend
    if not _loaded:
        _load_entry_points()
        for backend in list(_frame_backends):
            if backend.accepts(data):
                return backend
    return None


def require_operation(backend: FrameBackend, operation: str) -> Callable[..., Any]:
    """The backend's ``operation``, or a ParameterError naming what it cannot do."""
    fn: Callable[..., Any] | None = getattr(backend, operation, None)
    if fn is None:
        raise ParameterError(f"the {backend.name} backend cannot compute {operation}", param="data")
    return fn
