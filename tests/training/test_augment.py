"""Training-time augmentation: the authors' multi-scale sides come out of the scale range, a flip
or a resize moves the boxes with the pixels, one side is drawn per batch, the last epochs train
at the resolution, and an augmentation that does nothing draws nothing from the generator."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from rf100vl_hf.training.augment import Augmentation, flipped, resized, square_sides
from rf100vl_hf.training.recipe import Recipe
from rf100vl_hf.training.samples import Sample, normalized_targets


def _sample(width: int = 40, height: int = 20) -> Sample:
    """A white image with a red box at x 4..12, y 2..10."""
    pixels = np.full((height, width, 3), 255, dtype=np.uint8)
    pixels[2:10, 4:12] = (255, 0, 0)
    return Sample(Image.fromarray(pixels), np.array([[4.0, 2.0, 12.0, 10.0]]), np.array([1]))


@pytest.mark.parametrize(("resolution", "low", "high", "divisor", "expected"), [
    (560, 0.5, 1.5, 56, tuple(range(280, 841, 56))),  # RF-DETR base: compute_multi_scale_scales, expanded
    (640, 0.7, 1.4, 64, (448, 512, 576, 640, 704, 768, 832, 896)),  # LW-DETR: square_resize_div_64
    (640, 0.75, 1.25, 32, tuple(range(480, 801, 32))),  # D-FINE: generate_scales(640, ...)
    (640, 1.0, 1.0, 32, ()),  # no multi-scale: nothing to draw
])
def test_the_sides_are_the_authors_multi_scale_sides(resolution: int, low: float, high: float, divisor: int,
                                                     expected: tuple[int, ...]) -> None:
    assert square_sides(resolution, low, high, divisor) == expected


def test_a_range_without_a_multiple_of_the_divisor_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no multiple of 32 lies between 65.28 and 70.4 \(1.02 to 1.1 times the "
                                         r"resolution 64\)"):
        square_sides(64, 1.02, 1.1, 32)


def test_a_flip_and_a_resize_move_the_boxes_with_the_pixels() -> None:
    sample = _sample()
    turned = flipped(sample)
    red = np.argwhere(np.asarray(turned.image)[:, :, 1] == 0)  # the red pixels (no green)
    x0, y0, x1, y1 = turned.boxes[0]
    assert (x0, y0, x1, y1) == (28.0, 2.0, 36.0, 10.0)
    assert (red[:, 1].min(), red[:, 1].max() + 1, red[:, 0].min(), red[:, 0].max() + 1) == (28, 36, 2, 10)
    assert np.array_equal(turned.labels, sample.labels)
    bigger = resized(sample, 80)
    assert bigger.image.size == (80, 80) and np.allclose(bigger.boxes, [[8.0, 8.0, 24.0, 40.0]])
    np.testing.assert_allclose(normalized_targets(bigger)[0], normalized_targets(sample)[0], atol=1e-6)


def test_each_batch_gets_one_drawn_side_and_the_last_epochs_the_resolution() -> None:
    recipe = Recipe("r", epochs=4, batch_size=2, learning_rate=1e-3, min_scale=0.5, max_scale=1.5,
                    single_scale_epochs=1)
    augment = Augmentation.of(recipe, resolution=64, divisor=16)
    assert augment.sides == (32, 48, 64, 80, 96)
    torch.manual_seed(0)
    drawn = set()
    for _ in range(20):
        batch = augment([_sample(), _sample(30, 50)], epoch=3)
        assert batch[0].image.size == batch[1].image.size and batch[0].image.width == batch[0].image.height
        drawn.add(batch[0].image.width)
    assert drawn == set(augment.sides)  # every side turns up, one per batch
    assert {augment([_sample()], epoch=4)[0].image.size for _ in range(5)} == {(64, 64)}


def test_flips_turn_up_at_their_rate_and_are_repeatable() -> None:
    augment = Augmentation.of(Recipe("r", 1, 1, 1e-3, flip=0.5), resolution=64, divisor=16)
    torch.manual_seed(3)
    first = [augment([_sample()], epoch=1)[0].boxes[0, 0] for _ in range(200)]
    torch.manual_seed(3)
    again = [augment([_sample()], epoch=1)[0].boxes[0, 0] for _ in range(200)]
    assert first == again and 70 < sum(x == 28.0 for x in first) < 130


def test_an_augmentation_that_does_nothing_draws_nothing() -> None:
    augment = Augmentation.of(Recipe("r", 1, 1, 1e-3), resolution=64, divisor=16)
    assert not augment.active
    torch.manual_seed(5)
    state = torch.get_rng_state()
    batch = [_sample()]
    assert augment(batch, epoch=1) == batch and torch.equal(torch.get_rng_state(), state)


def test_multi_scale_needs_a_square_resolution() -> None:
    with pytest.raises(ValueError, match="this checkpoint's processor has none: set both to 1"):
        Augmentation.of(Recipe("r", 1, 1, 1e-3, min_scale=0.5), resolution=None, divisor=32)
    assert Augmentation.of(Recipe("r", 1, 1, 1e-3, flip=0.5), resolution=None, divisor=32).flip == 0.5
