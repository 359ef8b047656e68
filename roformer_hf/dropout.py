"""RoFormer's dropout: `RoFormerDropout`, `nn.Dropout` whose random masks are cheap on the CPU, and the masks
themselves (`draw_keep_mask`), which blockwise attention (`attention_kernels.py`) draws for the attention
probabilities too.

torch's CPU dropout draws each element's mask from its mt19937 generator, one float at a time on one thread
(`bernoulli_`), then multiplies: 2-4% of a bf16 training step of the base model on the CPU measured, against under
1% for the masks drawn here (docs/benchmarks.md, the hidden dropout's masks). Here each element takes 16 random bits
from numpy's PCG64 (one 64-bit draw serves four elements), compared with a threshold by numpy straight into a byte
mask: a Bernoulli(1 - p) keep decision per element, independent across elements, for p rounded to a multiple of
1/65536 (0.1 becomes 0.100006); the kept elements are scaled by 1 / (1 - p) of that rounded p, so the expectation is
exact. The byte mask is what the backward pass keeps.

The generators are seeded from torch's global generator, so `torch.manual_seed` fixes the masks, and gradient
checkpointing, which replays torch's generator, replays them too.
"""

import numpy
import torch
from torch import nn

RANDOM_BITS = 16  # per element: the drop probability is a multiple of 1 / 2**16


def rounded_probability(probability: float) -> float:
    """The drop probability 16 random bits realise: `probability` rounded to a multiple of 1/65536."""
    return round(probability * 2**RANDOM_BITS) / 2**RANDOM_BITS


def kept_scale(probability: float) -> float:
    """1 / (1 - probability), the factor of kept elements (0 when all are dropped)."""
    return 1.0 / (1.0 - probability) if probability < 1 else 0.0


def random_seed() -> int:
    """A seed for numpy's generator, drawn from torch's global one (so `torch.manual_seed` and checkpointing rule)."""
    return int(torch.randint(2**62, (1,)))


def draw_keep_mask(numel: int, probability: float, seed: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """`numel` bytes, 0 with probability `probability` (a multiple of 1/65536) and 1 otherwise; the same for the same
    seed. Written into `out` (a uint8 tensor of at least `numel` elements) where given, so a caller can reuse one
    buffer."""
    random_bits = numpy.random.PCG64(seed).random_raw((numel + 3) // 4).view(numpy.int16)[:numel]
    kept = torch.empty(numel, dtype=torch.uint8) if out is None else out[:numel]
    threshold = round(probability * 2**RANDOM_BITS) - 2 ** (RANDOM_BITS - 1)  # dropped below it, as an int16
    numpy.greater_equal(random_bits, threshold, out=kept.numpy(), casting="unsafe")
    return kept


class _MaskedScale(torch.autograd.Function):
    """x * keep * scale, keeping only the byte mask for the backward pass (the gradient is masked the same way)."""

    @staticmethod
    def forward(ctx, hidden_states: torch.Tensor, probability: float, seed: int) -> torch.Tensor:
        keep = draw_keep_mask(hidden_states.numel(), probability, seed).view(hidden_states.shape)
        ctx.save_for_backward(keep)
        ctx.scale = kept_scale(probability)
        return torch.mul(hidden_states, keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return torch.mul(grad_output, keep).mul_(ctx.scale), None, None


class RoFormerDropout(nn.Dropout):
    """`nn.Dropout` (same arguments, no weights) whose masks are drawn as this module describes, when training on the
    CPU. Elsewhere (a GPU, under `torch.compile`, which cannot trace numpy's generator, or `inplace=True`) it is
    `nn.Dropout`."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        cheap = self.training and self.p > 0 and not self.inplace and hidden_states.device.type == "cpu"
        if not cheap or torch.compiler.is_compiling():
            return super().forward(hidden_states)
        return _MaskedScale.apply(hidden_states, rounded_probability(self.p), random_seed())


__all__ = ["RoFormerDropout", "draw_keep_mask", "kept_scale", "random_seed", "rounded_probability"]
