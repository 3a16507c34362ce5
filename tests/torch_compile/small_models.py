"""Small models that torch.compile runs on Naiad: the suite's (test_models.py) and the
benchmark's (bench/torch_compile.py, at larger widths)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, width: int, hidden: int | None = None, out: int | None = None):
        super().__init__()
        hidden = hidden or 4 * width
        self.fc1, self.norm, self.fc2 = nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.Linear(hidden, out or width)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


class Block(nn.Module):
    """A pre-norm transformer block: causal attention (a softmax over scaled scores) and an MLP."""

    def __init__(self, width: int, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.RMSNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, -1)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / (c // self.heads) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        attention = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v
        x = x + self.out(attention.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.silu(self.up(self.norm2(x))))


class Classifier(nn.Module):
    """Mean of token embeddings, a linear head; the cross-entropy loss when labels are given,
    else the log-probabilities."""

    def __init__(self, width: int, vocabulary: int = 50, classes: int = 7):
        super().__init__()
        self.embed, self.head = nn.Embedding(vocabulary, width), nn.Linear(width, classes)

    def forward(self, ids, labels=None):
        logits = self.head(self.embed(ids).mean(1))
        return F.log_softmax(logits, -1) if labels is None else F.cross_entropy(logits, labels)


class ConvNet(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width)

    def forward(self, x):
        return F.adaptive_avg_pool2d(F.relu(self.norm(self.conv(x))), 1).flatten(1)
