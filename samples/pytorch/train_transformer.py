"""train_transformer: a small deterministic transformer encoder trained as a language model on
random tokens.

Usage: python3 train_transformer.py [STEPS] [--batch N] [--sequence N] [--memory-limit BYTES]
                                   [--amp] [--seconds S]
       (default 10 steps of batch 16, sequences of 128 tokens; needs a CUDA device)

--amp runs the forward pass and the loss under torch.autocast("cuda", dtype=torch.bfloat16)
(mixed precision; the JSON line then says "amp": true). --seconds S trains until S seconds have
passed instead of for STEPS steps (the JSON line's "steps" is then the number run).

Fixed seed and shapes, AdamW (its state appears at the first step), math attention kernels: two
runs ask for the same tensors. The last line of output is one JSON object with PyTorch's own
memory figures and, when --memory-limit capped the allocator and it ran out, where.
"""

import contextlib
import sys

import torch
import torch.nn.functional as F

from harness import option, train_main

VOCAB = 4096
MODEL = 256
HEADS = 4
LAYERS = 2
BATCH = 16
SEQUENCE = 128


def mixed_precision(amp):
    """bfloat16 autocast with --amp; without it nothing, so the run is the one without the flag."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if amp else contextlib.nullcontext()


def make_training(device, batch=BATCH, sequence=SEQUENCE, amp=False):
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(VOCAB, MODEL).to(device)
    layer = torch.nn.TransformerEncoderLayer(MODEL, HEADS, dim_feedforward=4 * MODEL, dropout=0.0,
                                             batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False).to(device)
    head = torch.nn.Linear(MODEL, VOCAB).to(device)
    params = list(embedding.parameters()) + list(encoder.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(sequence, device=device)

    def train_step(step):
        generator = torch.Generator().manual_seed(step)
        tokens = torch.randint(0, VOCAB, (batch, sequence + 1), generator=generator).to(device)
        optimizer.zero_grad(set_to_none=True)
        with mixed_precision(amp):
            hidden = encoder(embedding(tokens[:, :-1]), mask=mask, is_causal=True)
            loss = F.cross_entropy(head(hidden).reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()

    return train_step


def math_attention():
    """The attention kernels the runs use (deterministic)."""
    return torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH)


def main():
    batch = option(sys.argv, "--batch", BATCH, int)
    sequence = option(sys.argv, "--sequence", SEQUENCE, int)
    amp = {"amp": True} if "--amp" in sys.argv else {}  # the JSON line without --amp as before
    return train_main(lambda device: make_training(device, batch, sequence, bool(amp)), __file__,
                      math_attention(), batch=batch, sequence=sequence, **amp)


if __name__ == "__main__":
    sys.exit(main())
