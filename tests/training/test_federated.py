"""The federated loss mask: exactly the classes annotated in an image take part in its loss."""

from __future__ import annotations

import numpy as np
import torch
from torchvision.ops import sigmoid_focal_loss

from rf100vl_hf.training.federated import FILL, FederatedMask, federated_mask, mask_logits


def test_the_mask_keeps_exactly_each_images_annotated_classes() -> None:
    mask = federated_mask([[0, 2, 2], [1], []], num_classes=4)
    assert mask.tolist() == [[True, False, True, False], [False, True, False, False], [False] * 4]


def test_masked_logits_are_filled_and_kept_ones_are_bit_identical() -> None:
    logits = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(0))
    mask = torch.from_numpy(federated_mask([[0, 2], [1], []], 4))
    out = mask_logits(logits, mask)
    expanded = mask[:, None, :].expand_as(logits)
    assert torch.equal(out[expanded], logits[expanded])
    assert bool((out[~expanded] == FILL).all()) and int((~expanded).sum()) == 5 * (2 + 3 + 4)


def test_no_loss_reaches_a_masked_class_and_kept_classes_still_learn() -> None:
    logits = torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(1), requires_grad=True)
    mask = torch.from_numpy(federated_mask([[0], [2]], 3))
    targets = torch.zeros(2, 6, 3)
    targets[0, 0, 0] = targets[1, 0, 2] = 1
    sigmoid_focal_loss(mask_logits(logits, mask), targets, reduction="sum").backward()
    grad = logits.grad.abs()
    expanded = mask[:, None, :].expand_as(logits)
    assert float(grad[~expanded].max()) == 0.0
    assert bool((grad[expanded] > 0).all())


def test_the_hook_changes_exactly_the_masked_classes_of_a_head_and_nothing_once_cleared() -> None:
    head = torch.nn.Linear(8, 3)
    features = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(2))
    plain = head(features)
    federated = FederatedMask()
    (handle,) = federated.attach([head, head])  # one head under two names is hooked once
    federated.set([[1], [0, 2]], 3)
    masked = head(features)
    changed = (masked != plain).any(dim=1).numpy()
    assert changed.tolist() == [[True, False, True], [False, True, False]]
    federated.clear()
    assert torch.equal(head(features), plain)
    handle.remove()
    np.testing.assert_array_equal(head(features).detach().numpy(), plain.detach().numpy())
