"""A throwaway PostgreSQL server for the store's tests (see `tests.postgres`), one per session,
and a fresh database on it for each test that asks for `postgres_store`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import Postgres, postgres_server


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    with postgres_server() as server:
        yield server


@pytest.fixture
def postgres_store(postgres: Postgres) -> str:
    """The URL of a new, empty database (`postgresql://postgres@127.0.0.1:PORT/store_N`)."""
    return postgres.create_database("store")
