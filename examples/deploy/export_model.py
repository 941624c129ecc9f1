"""Export a model that calls every wheelops op, and package it for deployment.

    python examples/deploy/export_model.py OUT_DIR [--device cpu|cuda]

Writes into OUT_DIR:
    model.pt2          the AOTInductor package (torch._inductor.aoti_compile_and_package)
    program.pt2        the exported program (torch.export.save), for Python and re-packaging
    inputs.pt          the example inputs            } as (tensor, view) pairs: see
    expected.pt        the eager model's outputs     } `save_for_cpp`

and checks, before it returns, that the exported program and the package loaded back in
Python (aoti_load_package) give the eager outputs. main.cpp checks the same package from C++.
Run as a script (not `python -m`): it must import the installed wheelops, never a checkout's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn

import wheelops

FEATURES = 64
LLTM_INPUT = 8


class EveryOp(nn.Module):
    """Each wheelops op once, in an order whose shapes fit; lltm and the image ops on the side."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)

        def parameter(*shape: int, scale: float = 0.1, offset: float = 0.0) -> nn.Parameter:
            return nn.Parameter(offset + scale * torch.randn(*shape, generator=generator))

        self.bias = parameter(FEATURES)
        self.norm = wheelops.nn.LayerNorm(FEATURES)
        self.rms_weight = parameter(FEATURES, offset=1.0)
        self.lltm_weights = parameter(3 * FEATURES, FEATURES + LLTM_INPUT)
        self.lltm_bias = parameter(3 * FEATURES)

    def forward(self, x, y, lltm_input, old_h, old_cell, image, volume):
        a = wheelops.add(x, y)
        a = wheelops.relu_scale(a, 0.5)
        a = wheelops.bias_gelu(a, self.bias)
        a = self.norm(a)
        a = wheelops.rms_norm(a, self.rms_weight)
        a = wheelops.softmax(a)
        a = wheelops.silu_and_mul(torch.cat([a, x], dim=-1))
        new_h, new_cell = wheelops.lltm(
            lltm_input, self.lltm_weights, self.lltm_bias, old_h, old_cell
        )
        gray = wheelops.rgb_to_gray(image)
        normalized = wheelops.normalize_volume(volume, 4095.0)
        return a, new_h, new_cell, gray, normalized


def example_inputs(device: str, batch: int = 8) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1)
    inputs = (
        torch.randn(batch, FEATURES, generator=g),
        torch.randn(batch, FEATURES, generator=g),
        torch.randn(batch, LLTM_INPUT, generator=g),
        torch.randn(batch, FEATURES, generator=g),
        torch.randn(batch, FEATURES, generator=g),
        torch.randint(0, 256, (batch, 32, 3), generator=g, dtype=torch.uint8),
        torch.randint(0, 4096, (batch, 32), generator=g, dtype=torch.int32).to(torch.uint16),
    )
    return tuple(t.to(device) for t in inputs)


def same(outputs, expected, what: str) -> None:
    for index, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        torch.testing.assert_close(got, want, msg=lambda m, i=index: f"{what}, output {i}: {m}")


def save_for_cpp(tensors: tuple[torch.Tensor, ...], path: Path) -> None:
    """torch.save of (tensor, view) pairs that LibTorch's torch::pickle_load reads: it cannot
    rebuild a uint16 tensor, so those travel as their int16 bits, with "uint16" to view back."""
    pairs = tuple(
        (t.cpu().view(torch.int16), "uint16") if t.dtype == torch.uint16 else (t.cpu(), "")
        for t in tensors
    )
    torch.save(pairs, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = EveryOp().to(args.device).eval()
    inputs = example_inputs(args.device)
    with torch.no_grad():
        expected = model(*inputs)
        program = torch.export.export(model, inputs)
        same(program.module()(*inputs), expected, "exported program")
        torch.export.save(program, args.out / "program.pt2")
        package = torch._inductor.aoti_compile_and_package(
            program, package_path=str(args.out / "model.pt2")
        )
        same(torch._inductor.aoti_load_package(package)(*inputs), expected, "AOTI package")
    save_for_cpp(inputs, args.out / "inputs.pt")
    save_for_cpp(expected, args.out / "expected.pt")
    print(f"wrote {package} ({args.device}); Python runs it with the eager outputs")


if __name__ == "__main__":
    main()
