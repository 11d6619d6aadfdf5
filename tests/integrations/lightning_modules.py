"""A LightningModule for the tests, apart from them so that collecting them imports no Lightning."""

from __future__ import annotations

from typing import Any

import lightning as L


class FromConfig(L.LightningModule):
    """A module built by its own `from_config` (which gets the whole config)."""

    seen: dict[str, Any] = {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Any:
        FromConfig.seen = dict(config)
        from digits_lightning import DigitsClassifier

        return DigitsClassifier(lr=config["learning_rate"])
