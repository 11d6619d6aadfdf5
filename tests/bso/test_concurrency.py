"""Several server processes on one SQLite file: 20 clients at once lose nothing, duplicate nothing."""

from __future__ import annotations

from tests.bso.support import check_hammered, hammer


def test_twenty_clients_report_into_one_job_through_two_workers(serve):
    server = serve("--workers", "2")
    seen = hammer(server.url, "crowd-1", clients=20, epochs=3)
    check_hammered(server.url, "crowd-1", seen)
