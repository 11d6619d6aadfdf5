"""A training script that knows nothing of Basht: argparse in, one line of metrics per epoch out.

It fits a logistic regression on scikit-learn's digits by minibatch SGD, one epoch at a time, and
prints the validation accuracy after each. `regex.yaml` tunes it as it is: Basht fills in the
arguments and reads the printed lines with its `metrics` regular expression.

    python train.py --lr 0.05 --alpha 1e-4 --epochs 9
"""

import argparse

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--lr", type=float, default=0.01, help="initial learning rate")
parser.add_argument("--alpha", type=float, default=1e-4, help="L2 regularisation")
parser.add_argument("--epochs", type=int, default=9)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

X, y = load_digits(return_X_y=True)
X = X / 16.0
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0)
model = SGDClassifier(
    loss="log_loss",
    alpha=args.alpha,
    learning_rate="constant",
    eta0=args.lr,
    random_state=args.seed,
)
rng = np.random.default_rng(args.seed)
classes = np.unique(y)
for epoch in range(1, args.epochs + 1):
    order = rng.permutation(len(X_train))
    for batch in np.array_split(order, 10):
        model.partial_fit(X_train[batch], y_train[batch], classes=classes)
    accuracy = model.score(X_val, y_val)
    print(f"epoch {epoch}: val_accuracy={accuracy:.4f}", flush=True)
