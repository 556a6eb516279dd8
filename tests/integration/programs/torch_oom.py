# A few training steps with backward passes, then a batch that grows until PyTorch's capped
# caching allocator refuses it with torch.OutOfMemoryError: for
# tests/integration/python_observer_test.cc, on the fake torch (fake_torch/ on PYTHONPATH,
# FAKE_TORCH_ENGINE naming libfake_autograd_engine.so, the fake libcudart on LD_LIBRARY_PATH).
# Modes:
#   caught      the error is caught (the cap: a quarter of the device, no driver call fails)
#   uncaught    the error ends the program (exit 1 with its traceback)
#   thread      the error ends a thread; the program goes on
#   uncapped    no cap: the driver refuses the request; caught
#   exceptions  100000 ordinary exceptions raised and caught first; then as caught
# Prints "allocating N bytes" before each allocation of the growing batch.
import sys
import threading

import torch

MIB = 1 << 20

# `import torch` initialises no CUDA, under gpumem's observer too.
print("CUDA initialised by import:", torch._C._cuda_isInitialized())


def train(steps):
    weights = torch.zeros(256, 256, requires_grad=True)
    for _ in range(steps):
        batch = torch.zeros(64, 256)
        loss = (batch @ weights).sum()
        loss.backward()  # line: backward
    (gradient,) = torch.autograd.grad((batch @ weights).sum(), weights)  # line: grad
    return weights, gradient


def grow(kept):
    size = 64 * MIB
    while True:
        print("allocating %d bytes" % size, flush=True)
        kept.append(torch.empty(size // 4))  # line: grow
        size *= 2


def out_of_memory():
    kept = []
    grow(kept)


def raise_and_catch(count):
    for value in range(count):
        try:
            raise ValueError(value)
        except ValueError:
            pass


def main(mode):
    if mode != "uncapped":
        torch.cuda.set_per_process_memory_fraction(0.25)
    model = train(3)
    if mode == "exceptions":
        raise_and_catch(100000)
    if mode == "uncaught":
        out_of_memory()
    if mode == "thread":
        worker = threading.Thread(target=out_of_memory)
        worker.start()
        worker.join()
        return 0
    try:
        out_of_memory()
    except torch.OutOfMemoryError as error:
        print("caught torch.OutOfMemoryError:", str(error).split(". ")[1])
    del model
    return 0


sys.exit(main(sys.argv[1]))
