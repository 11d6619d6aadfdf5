"""A user's own LightGBM or XGBoost training script with Basht's callback, for the tests.

`python boosting_script.py lightgbm|xgboost OUT.json` trains up to 40 rounds on breast cancer,
from `resume_model()` when the trial is resumed, and writes what its booster holds to OUT.json:
the rounds, the callback's last decision and the validation predictions.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

ROUNDS = 40


def _split() -> list[Any]:
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def train_lightgbm() -> tuple[int, str, list[float]]:
    import lightgbm as lgb

    from basht.integrations.lightgbm import BashtCallback, resume_model

    X_train, X_val, y_train, y_val = _split()
    params = {
        "objective": "binary",
        "metric": ["binary_logloss", "binary_error"],
        "num_leaves": 7,
        "learning_rate": 0.1,
        "verbosity": -1,
        "deterministic": True,
        "force_col_wise": True,
        "num_threads": 1,
        "seed": 0,
    }
    train_set = lgb.Dataset(X_train, y_train)
    val_set = lgb.Dataset(X_val, y_val, reference=train_set)
    callback = BashtCallback()
    booster = lgb.train(
        params,
        train_set,
        num_boost_round=ROUNDS,
        valid_sets=[train_set, val_set],
        valid_names=["train", "val"],
        init_model=resume_model(),
        callbacks=[callback],
    )
    predictions = booster.predict(X_val, num_iteration=-1)
    return booster.current_iteration(), str(callback.decision), predictions.tolist()


def train_xgboost() -> tuple[int, str, list[float]]:
    import xgboost as xgb

    from basht.integrations.xgboost import BashtCallback, resume_model

    X_train, X_val, y_train, y_val = _split()
    params = {
        "objective": "binary:logistic",
        "eval_metric": ["logloss", "error"],
        "max_depth": 3,
        "eta": 0.1,
        "nthread": 1,
        "seed": 0,
    }
    dtrain = xgb.DMatrix(X_train, label=y_train)
    dval = xgb.DMatrix(X_val, label=y_val)
    callback = BashtCallback()
    booster = xgb.train(
        params,
        dtrain,
        num_boost_round=ROUNDS,
        evals=[(dtrain, "train"), (dval, "val")],
        xgb_model=resume_model(),
        callbacks=[callback],
        verbose_eval=False,
    )
    predictions = booster.predict(dval)
    return booster.num_boosted_rounds(), str(callback.decision), predictions.tolist()


if __name__ == "__main__":
    library, out = sys.argv[1], sys.argv[2]
    rounds, decision, predictions = {"lightgbm": train_lightgbm, "xgboost": train_xgboost}[
        library
    ]()
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"rounds": rounds, "decision": decision, "predictions": predictions}, f)
