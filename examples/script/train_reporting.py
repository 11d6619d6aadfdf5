"""The same training, reporting to Basht and keeping its state when told to pause.

Three lines make it a trial that ASHA can pause and resume: read the configuration
(`config()`), report each epoch (`report(...)`, which answers continue, stop or pause), and on
pause save the model into `checkpoint_dir()`; a resumed trial finds it in `resume_from()`. Run on
its own, outside Basht, `config()` is empty and `report` always answers continue.
"""

import pickle
import sys

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split

from basht.integrations import checkpoint_dir, config, report, resume_from

settings = {"lr": 0.01, "alpha": 1e-4, "epochs": 27, **config()}
X, y = load_digits(return_X_y=True)
X = X / 16.0
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0)
model = SGDClassifier(
    loss="log_loss",
    alpha=settings["alpha"],
    learning_rate="constant",
    eta0=settings["lr"],
    random_state=0,
)
rng, done = np.random.default_rng(0), 0
if resume_from() is not None:
    model, rng, done = pickle.loads((resume_from() / "state.pkl").read_bytes())
classes = np.unique(y)
for epoch in range(done + 1, int(settings["epochs"]) + 1):
    order = rng.permutation(len(X_train))
    for batch in np.array_split(order, 10):
        model.partial_fit(X_train[batch], y_train[batch], classes=classes)
    decision = report(step=epoch, accuracy=model.score(X_val, y_val))
    if decision == "pause":
        (checkpoint_dir() / "state.pkl").write_bytes(pickle.dumps((model, rng, epoch)))
        sys.exit(0)
    if decision == "stop":
        break
