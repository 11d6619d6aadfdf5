"""A tiny BERT, built from a config (nothing is downloaded), that finds the most frequent token of a
generated sequence: twelve tokens of ten kinds, one kind four times, the others at most twice.
Nothing here knows Basht.

`asha.yaml` tunes it with the ready workload `hf-trainer`; `train.py` is the same training as a
Trainer script of one's own, which `BashtCallback` turns into a Basht trial.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification

PAD, CLS, KINDS = 0, 1, 10  # token kind k is id 2 + k
LENGTH, MAJORITY = 12, 4


class Sequences(torch.utils.data.Dataset):
    """Token sequences and labels, as the Trainer's default collator stacks them."""

    def __init__(self, tokens: np.ndarray, labels: np.ndarray) -> None:
        self.tokens = torch.tensor(tokens, dtype=torch.long)
        self.labels = torch.tensor(labels, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.tokens[i], "labels": self.labels[i]}


def generate(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`n` sequences ([CLS] first) and their most frequent kind."""
    labels = rng.integers(0, KINDS, n)
    tokens = np.empty((n, 1 + LENGTH), dtype=np.int64)
    for i, label in enumerate(labels):
        others = rng.permutation([k for k in range(KINDS) if k != label])
        rest = np.concatenate([others, others])[: LENGTH - MAJORITY]  # each at most twice
        sequence = rng.permutation(np.concatenate([np.full(MAJORITY, label), rest]))
        tokens[i] = np.concatenate([[CLS], sequence + 2])
    return tokens, labels


@functools.lru_cache(maxsize=2)
def build_datasets(seed: int = 0, size: int = 3000) -> dict[str, Sequences]:
    """Train, validation and test (60/20/20), generated from `seed` (the experiment's)."""
    tokens, labels = generate(size, np.random.default_rng(seed))
    a, b = int(0.6 * size), int(0.8 * size)
    return {
        "train": Sequences(tokens[:a], labels[:a]),
        "validation": Sequences(tokens[a:b], labels[a:b]),
        "test": Sequences(tokens[b:], labels[b:]),
    }


def build_model(
    hidden_size: int = 32, num_layers: int = 2, num_heads: int = 2, dropout: float = 0.0
) -> BertForSequenceClassification:
    """A BERT of `num_layers` layers, `hidden_size` wide, classifying into the ten kinds."""
    config = BertConfig(
        vocab_size=2 + KINDS,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=2 * hidden_size,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=1 + LENGTH,
        num_labels=KINDS,
        pad_token_id=PAD,
    )
    return BertForSequenceClassification(config)


def compute_metrics(prediction: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    """Accuracy, for the Trainer's evaluate (reported as `eval_accuracy`)."""
    logits, labels = prediction
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}
