"""Small models under torch.compile on Naiad's CPU backend, forward and backward: outputs and
every parameter's gradient equal eager PyTorch's."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(48, 96), nn.LayerNorm(96), nn.Linear(96, 10)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


class Block(nn.Module):
    """A pre-norm transformer block: attention (a softmax over scaled scores) and an MLP."""

    def __init__(self, width=32, heads=4):
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
    """An embedding bag, dropout-free, and a cross-entropy loss."""

    def __init__(self):
        super().__init__()
        self.embed, self.head = nn.Embedding(50, 16), nn.Linear(16, 7)

    def forward(self, ids, labels):
        return F.cross_entropy(self.head(self.embed(ids).mean(1)), labels)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)

    def forward(self, x):
        return F.adaptive_avg_pool2d(F.relu(self.norm(self.conv(x))), 1).flatten(1)


MODELS = {
    "mlp": (MLP, lambda: (torch.randn(33, 48),)),
    "transformer_block": (Block, lambda: (torch.randn(2, 13, 32),)),
    "classifier": (Classifier, lambda: (torch.randint(0, 50, (9, 5)), torch.randint(0, 7, (9,)))),
    "convnet": (ConvNet, lambda: (torch.randn(4, 3, 11, 13),)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_and_backward_match_eager(name):
    make, inputs = MODELS[name]
    torch.manual_seed(0)
    model, args = make(), inputs()
    want = model(*args)
    want.sum().backward()
    want_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    got = torch.compile(model)(*args)
    got.sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for (pname, p), g in zip(model.named_parameters(), want_grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5, msg=lambda m: f"grad of {pname}: {m}")


def test_a_training_step_matches_eager():
    """An optimizer step compiled with the model: the parameters after it equal eager's."""
    torch.manual_seed(0)
    eager, compiled = MLP(), MLP()
    compiled.load_state_dict(eager.state_dict())
    x, y = torch.randn(16, 48), torch.randint(0, 10, (16,))

    def step(model, optimizer):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    for model, wrap in ((eager, lambda f: f), (compiled, torch.compile)):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        run = wrap(step)
        for _ in range(2):
            run(model, optimizer)
    for (name, a), b in zip(compiled.named_parameters(), eager.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
