"""The batch size optimizer's errors, all BashtErrors so the CLI prints them as one line."""

from __future__ import annotations

from basht.errors import BashtError


class BSOError(BashtError):
    """Bad configuration or input for the batch size optimizer (server, client or simulator)."""


class BSOServerError(BSOError):
    """The BSO server answered with an error status; carries the status and the server's message."""

    def __init__(self, status_code: int, message: str, route: str = "") -> None:
        self.status_code = status_code
        self.message = message
        where = f" on {route}" if route else ""
        super().__init__(f"BSO server returned {status_code}{where}: {message}")


class TrainFailError(BSOError):
    """This training run did not reach the target (early-stopped or out of epochs).

    The server has recorded the batch size's cost; relaunch the job and the next run gets another
    batch size. Zeus raises `ZeusBSOTrainFailError` at the same point.
    """


class BSOOrderError(BSOError):
    """A client method was called out of order (e.g. `on_evaluate` before `get_batch_size`)."""
