"""Ways into Basht for training code that already exists: a reporter any script can call, and
callbacks for the frameworks people train with (Lightning, the Hugging Face Trainer, LightGBM,
XGBoost), each importing its framework only when used.

`from basht.integrations import report` costs nothing beyond the standard library: a script that
is tuned by Basht imports it, and so does the same script run on its own, where `report` does
nothing and always answers `continue`.
"""

from __future__ import annotations

from basht.integrations.reporter import (
    Decision,
    checkpoint_dir,
    config,
    in_trial,
    report,
    resume_from,
)

__all__ = ["Decision", "checkpoint_dir", "config", "in_trial", "report", "resume_from"]
