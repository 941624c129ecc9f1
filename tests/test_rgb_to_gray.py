from __future__ import annotations

import _example_log
import pytest
import torch
from _helpers import DEVICES
from _property_checks import (
    assert_rejected,
    assert_result_layout,
)
from _strategies import (
    apply_layout,
    integer_values,
    layouts,
    seeds,
    sizes,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.rgb_to_gray import reference
from opspecs.rgb_to_gray import reference as rgb_to_gray_reference

import wheelops


def random_image(shape: tuple[int, ...], device: str, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8).to(device)


def all_colors() -> torch.Tensor:
    """Every one of the 2**24 RGB colours, as a [4096, 4096, 3] image."""
    v = torch.arange(256, dtype=torch.uint8)
    r, g, b = torch.meshgrid(v, v, v, indexing="ij")
    return torch.stack([r, g, b], dim=-1).reshape(4096, 4096, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_every_color_is_correctly_rounded(device):
    img = all_colors().to(device)
    out = wheelops.rgb_to_gray(img)
    assert out.shape == (4096, 4096) and out.dtype == torch.uint8 and out.is_contiguous()
    assert torch.equal(out.cpu(), reference(img.cpu()))


def test_ties_occur_and_round_half_to_even():
    img = all_colors()
    rgb = img.to(torch.int64)
    n = 299 * rgb[..., 0] + 587 * rgb[..., 1] + 114 * rgb[..., 2]
    ties = n % 1000 == 500
    assert ties.sum() > 10_000  # not a corner case: tens of thousands of colours tie
    out = wheelops.rgb_to_gray(img)[ties].to(torch.int64)
    assert torch.all(out % 2 == 0)
    assert torch.all(torch.abs(out * 1000 - n[ties]) == 500)
    # Both directions happen: 72.5 -> 72 (down) and 21.5 -> 22 (up).
    pixels = torch.tensor([[[1, 123, 0], [0, 4, 168]]], dtype=torch.uint8)
    assert wheelops.rgb_to_gray(pixels).tolist() == [[72, 22]]
    assert reference(pixels).tolist() == [[72, 22]]


@pytest.mark.parametrize("device", DEVICES)
def test_gray_levels_stay_exact(device):
    levels = torch.arange(256, dtype=torch.uint8).repeat_interleave(3).view(1, 256, 3)
    assert torch.equal(
        wheelops.rgb_to_gray(levels.to(device)).cpu(),
        torch.arange(256).view(1, 256).to(torch.uint8),
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 3),
        (1, 15, 3),
        (1, 16, 3),
        (1, 17, 3),
        (7, 33, 3),
        (5, 31, 3),
        (2, 3, 5, 3),
        (3, 16, 16, 3),
        (4, 9, 7, 3),
        (1, 64, 48, 3),
    ],
)
def test_shapes_and_odd_widths(shape, device):
    img = random_image(shape, device, seed=sum(shape))
    out = wheelops.rgb_to_gray(img)
    assert out.shape == shape[:-1]
    assert torch.equal(out.cpu(), reference(img.cpu()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(0, 5, 3), (5, 0, 3), (0, 4, 4, 3), (2, 0, 4, 3)])
def test_empty_images(shape, device):
    out = wheelops.rgb_to_gray(torch.empty(shape, dtype=torch.uint8, device=device))
    assert out.shape == shape[:-1] and out.dtype == torch.uint8


def strided_images(img: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same [N, H, W, 3] pixels laid out in other ways."""
    n, h, w, c = img.shape
    flat = torch.zeros(img.numel() + 1, dtype=img.dtype, device=img.device)
    flat[1:] = img.reshape(-1)
    wide = torch.zeros(n, h, w + 5, c, dtype=img.dtype, device=img.device)
    wide[:, :, 2 : w + 2] = img
    rgba = torch.zeros(n, h, w, 4, dtype=img.dtype, device=img.device)
    rgba[..., :3] = img
    planar_flat = torch.zeros(img.numel() + 1, dtype=img.dtype, device=img.device)
    planar_flat[1:] = img.permute(0, 3, 1, 2).reshape(-1)
    spaced = torch.zeros(n, h * w * 3 + 16, dtype=img.dtype, device=img.device)
    spaced[:, : h * w * 3] = img.reshape(n, -1)
    return {
        "offset_by_one_byte": flat[1:].view(n, h, w, c),  # contiguous, misaligned
        "planar_nchw": img.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1),
        "planar_misaligned": planar_flat[1:].view(n, c, h, w).permute(0, 2, 3, 1),
        "column_slice": wide[:, :, 2 : w + 2],
        "rgb_of_rgba": rgba[..., :3],
        "images_apart": spaced[:, : h * w * 3].view(n, h, w, c),
        "bgr_flipped_twice": img.flip(-1).flip(-1),
        "transposed_hw": img.transpose(1, 2).contiguous().transpose(1, 2),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(2, 16, 32, 3), (3, 5, 7, 3), (1, 4, 16, 3)])
def test_non_contiguous_and_misaligned_views(shape, device):
    img = random_image(shape, device, seed=3)
    expected = reference(img.cpu())
    for name, view in strided_images(img).items():
        assert torch.equal(view.cpu(), img.cpu()), name
        assert torch.equal(wheelops.rgb_to_gray(view).cpu(), expected), name
        assert torch.equal(wheelops.rgb_to_gray(view[0]).cpu(), expected[0]), name


@pytest.mark.parametrize("device", DEVICES)
def test_expanded_images(device):
    pixel = torch.tensor([10, 200, 30], dtype=torch.uint8, device=device)
    img = pixel.expand(4, 5, 3)
    assert torch.equal(wheelops.rgb_to_gray(img).cpu(), reference(img.cpu()))
    gray = torch.tensor([[7], [9]], dtype=torch.uint8, device=device).expand(2, 3).unsqueeze(0)
    img = gray.unsqueeze(-1).expand(1, 2, 3, 3)
    assert torch.equal(wheelops.rgb_to_gray(img).cpu(), gray.cpu())


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for shape in [(5, 7, 3), (2, 16, 16, 3), (0, 3, 3)]:
        img = random_image(shape, device)
        torch.library.opcheck(torch.ops.wheelops.rgb_to_gray.default, (img,))


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    torch._dynamo.reset()
    fn = torch.compile(lambda img: wheelops.rgb_to_gray(img).float() / 255, fullgraph=True)
    img = random_image((2, 9, 20, 3), device)
    torch.testing.assert_close(fn(img), reference(img).float() / 255)


@pytest.mark.gpu
def test_4096_square_and_batched_on_gpu():
    img = random_image((4096, 4096, 3), "cuda", seed=1)
    assert torch.equal(wheelops.rgb_to_gray(img).cpu(), reference(img.cpu()))
    batch = random_image((8, 1080, 1920, 3), "cuda", seed=2)
    assert torch.equal(wheelops.rgb_to_gray(batch).cpu(), reference(batch.cpu()))
    planar = batch.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1)
    assert torch.equal(wheelops.rgb_to_gray(planar).cpu(), reference(batch.cpu()))
    del img, batch, planar
    torch.cuda.empty_cache()


@pytest.mark.gpu
def test_side_stream():
    img = random_image((3, 512, 500, 3), "cuda", seed=4)
    expected = reference(img.cpu())
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = wheelops.rgb_to_gray(img)
    torch.cuda.current_stream().wait_stream(stream)
    assert torch.equal(out.cpu(), expected)


# ---------------------------------------------------------------------------
# Properties (hypothesis; the profile in tests/conftest.py sets how many examples)


# An image's layouts: every generic one (permuted covers planar NCHW, sliced
# on the last dim covers RGB of RGBX), and the channels of an RGBA image.
RGBA = "rgb_of_rgba"


def image_layout(img: torch.Tensor, kind: str) -> torch.Tensor:
    if kind != RGBA:
        return img
    rgba = torch.full((*img.shape[:-1], 4), 77, dtype=img.dtype, device=img.device)
    rgba[..., :3] = img
    return rgba[..., :3]


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_rgb_to_gray(device: str, data: st.DataObject) -> None:
    draw = data.draw
    batch = draw(st.lists(sizes(6), max_size=1), label="batch")
    height_width = draw(st.tuples(sizes(64), sizes(64)), label="height, width")
    shape = (*batch, *height_width, 3)
    img = integer_values(shape, torch.uint8, 256, device, draw(seeds))
    img = apply_layout(img, draw(layouts(shape)))
    img = image_layout(img, draw(st.sampled_from(["as laid out", RGBA])))
    _example_log.record("rgb_to_gray", device)

    out = wheelops.rgb_to_gray(img)
    assert_result_layout(out, shape[:-1], torch.uint8)
    assert torch.equal(out.cpu(), rgb_to_gray_reference(img.cpu()))


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_rgb_to_gray_rejects_bad_images(device: str, data: st.DataObject) -> None:
    draw = data.draw
    shape = draw(
        st.lists(sizes(5), max_size=5)
        .map(tuple)
        .filter(lambda s: len(s) not in (3, 4) or s[-1] != 3)
    )
    dtype = draw(st.sampled_from([torch.int8, torch.int16, torch.float32, torch.uint16]))
    _example_log.record("rgb_to_gray", device)
    assert_rejected(
        lambda: wheelops.rgb_to_gray(torch.zeros(shape, dtype=torch.uint8, device=device)),
        "rgb_to_gray",
        "img",
    )
    good = torch.zeros(2, 2, 3, dtype=dtype, device=device)
    assert_rejected(lambda: wheelops.rgb_to_gray(good), "rgb_to_gray", "img")
