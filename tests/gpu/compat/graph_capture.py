"""graph_capture: CUDA graphs captured in every capture_error_mode and by make_graphed_callables."""

import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch  # noqa: E402

REPLAYS = 50


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 16)
    ).cuda()


def inputs(count):
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(32, 64, generator=generator).cuda() for _ in range(count)]


def capture_and_replay(model, batches, mode):
    """Captures one forward pass in `mode`, replays it over `batches`: the sum of the outputs."""
    static_input = torch.zeros(32, 64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):  # warm-up on a side stream, as capture wants
            model(static_input)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph, capture_error_mode=mode):
        static_output = model(static_input)
    total = torch.zeros((), dtype=torch.float64, device="cuda")
    for batch in batches:
        static_input.copy_(batch)
        graph.replay()
        total += static_output.double().sum()
    return total.item()


def graphed_training(batches):
    """A few training steps through make_graphed_callables (forward and backward captured)."""
    model = make_model()
    graphed = torch.cuda.make_graphed_callables(model, (torch.zeros(32, 64, device="cuda"),))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for batch in batches[:5]:
        optimizer.zero_grad()
        loss = graphed(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(f"{loss.item():.4f}")
    return losses


def main():
    torch.use_deterministic_algorithms(True)
    model = make_model()
    batches = inputs(REPLAYS)
    for mode in ("global", "thread_local", "relaxed"):
        total = capture_and_replay(model, batches, mode)
        print(f"capture_error_mode={mode}: {REPLAYS} replays, sum of outputs {total:.3f}")
    print(f"make_graphed_callables training losses: {' '.join(graphed_training(batches))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
