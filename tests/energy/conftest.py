"""Fixtures of the energy tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.energy.em_api import ElectricityMapsStub


@pytest.fixture
def api() -> Iterator[ElectricityMapsStub]:
    server = ElectricityMapsStub()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()
