"""LightGBM training as it is usually written, tuned by Basht through one callback.

`BashtCallback()` reports each round's validation metrics to Basht and ends training when Basht
says stop, or pause (it saves the booster first); `resume_model()` is the booster to go on from
when a paused trial is resumed. Run on its own, outside Basht, `config()` is empty, the callback
does nothing and the script trains all its rounds.
"""

import lightgbm as lgb
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from basht.integrations import config
from basht.integrations.lightgbm import BashtCallback, resume_model

params = {
    "objective": "multiclass",
    "num_class": 10,
    "metric": ["multi_logloss", "multi_error"],
    "learning_rate": 0.1,
    "num_leaves": 31,
    "verbosity": -1,
    "deterministic": True,  # a resumed trial ends where one trained straight through does
    "force_col_wise": True,
    **config(),  # the trial's hyperparameters
}
X, y = load_digits(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
train_set = lgb.Dataset(X_train, y_train)
val_set = lgb.Dataset(X_val, y_val, reference=train_set)
booster = lgb.train(
    params,
    train_set,
    num_boost_round=135,  # Basht stops a trial at its budget, which is never more
    valid_sets=[val_set],
    valid_names=["val"],
    init_model=resume_model(),
    callbacks=[BashtCallback()],
)
print(f"{booster.current_iteration()} rounds")
