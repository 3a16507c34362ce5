"""Small models under torch.compile on Naiad's CPU backend, forward and backward: outputs and
every parameter's gradient equal eager PyTorch's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from small_models import MLP, Block, Classifier, ConvNet


MODELS = {
    "mlp": (lambda: MLP(48, 96, 10), lambda: (torch.randn(33, 48),)),
    "transformer_block": (lambda: Block(32), lambda: (torch.randn(2, 13, 32),)),
    "classifier": (lambda: Classifier(16), lambda: (torch.randint(0, 50, (9, 5)), torch.randint(0, 7, (9,)))),
    "convnet": (lambda: ConvNet(8), lambda: (torch.randn(4, 3, 11, 13),)),
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
    eager, compiled = MLP(48, 96, 10), MLP(48, 96, 10)
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
