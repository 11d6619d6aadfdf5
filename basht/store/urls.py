"""Store URLs: parsed and resolved as the store opens them, and shown without their password.

Apart from the repository, so that checking a URL (`basht validate`) costs SQLAlchemy's core,
not the store's ORM and schema.
"""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from basht.errors import StoreError

#: The driver a URL that names none gets, where SQLAlchemy's own default is not the one Basht
#: installs: `postgresql://` is psycopg 3 (the `postgres` extra), not psycopg2.
DEFAULT_DRIVERS = {"postgresql": "psycopg"}
#: The extra that installs a driver, named when the driver is missing.
DRIVER_EXTRAS = {"psycopg": "postgres"}


class StoreURLError(StoreError):
    """A store URL that does not parse, or whose database driver is not installed. `reason` is
    the message without its `store: ` prefix, for callers that put their own in front."""

    def __init__(self, reason: str):
        super().__init__(f"store: {reason}")
        self.reason = reason


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def shown_url(url: str) -> str:
    """`url` for messages: a password in it shows as ***."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return url


def resolve_url(url: str) -> URL:
    """`url` parsed as the store opens it, its dialect and driver imported (nothing connects, no
    file is made): a URL that names no driver gets the one in DEFAULT_DRIVERS for its database
    (`postgresql://` and `postgres://` become `postgresql+psycopg://`). Raises StoreURLError."""
    parsed: URL | None = None
    try:
        parsed = make_url(url)
        backend, _, driver = parsed.drivername.partition("+")
        backend = "postgresql" if backend == "postgres" else backend
        if not driver and backend in DEFAULT_DRIVERS:
            driver = DEFAULT_DRIVERS[backend]
        parsed = parsed.set(drivername=f"{backend}+{driver}" if driver else backend)
        dialect = parsed.get_dialect()
        import_dbapi = getattr(dialect, "import_dbapi", None)
        if callable(import_dbapi):
            import_dbapi()
    except (ArgumentError, ValueError) as err:
        raise StoreURLError(f"not a valid SQLAlchemy URL, got {url!r} ({one_line(err)})") from None
    except ImportError as err:
        extra = DRIVER_EXTRAS.get(parsed.get_driver_name()) if parsed is not None else None
        fix = f"; pip install 'basht[{extra}]'" if extra else ""
        raise StoreURLError(
            f"the database driver for {shown_url(url)!r} is not installed ({one_line(err)}){fix}"
        ) from None
    return parsed
