"""XGBoost training as it is usually written, tuned by Basht through one callback.

`BashtCallback()` reports each round's validation metrics to Basht and ends training when Basht
says stop, or pause (it saves the booster first); `resume_model()` is the booster to go on from
when a paused trial is resumed. Run on its own, outside Basht, `config()` is empty, the callback
does nothing and the script trains all its rounds.
"""

import xgboost as xgb
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from basht.integrations import config
from basht.integrations.xgboost import BashtCallback, resume_model

params = {
    "objective": "multi:softprob",
    "num_class": 10,
    "eval_metric": ["mlogloss", "merror"],
    "eta": 0.3,
    "max_depth": 6,
    **config(),  # the trial's hyperparameters
}
X, y = load_digits(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
dtrain = xgb.DMatrix(X_train, label=y_train)
dval = xgb.DMatrix(X_val, label=y_val)
booster = xgb.train(
    params,
    dtrain,
    num_boost_round=135,  # Basht stops a trial at its budget, which is never more
    evals=[(dval, "val")],
    xgb_model=resume_model(),
    callbacks=[BashtCallback()],
    verbose_eval=False,
)
print(f"{booster.num_boosted_rounds()} rounds")
