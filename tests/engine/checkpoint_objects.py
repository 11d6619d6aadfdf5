"""An object a crafted checkpoint holds: building it on load would be running the author's code."""

from __future__ import annotations


class Boom:
    built = False

    def __init__(self) -> None:
        self.payload = 1

    def __setstate__(self, state: object) -> None:
        type(self).built = True
