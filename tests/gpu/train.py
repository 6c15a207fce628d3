"""A small deterministic PyTorch training loop for scripts/gpu-check.sh.

Runs STEPS steps of a conv + MLP model on synthetic data with fixed seeds and
deterministic algorithms, and prints each step's loss as an exact hex float,
so that runs with msched off, um and msched can be compared line for line.
A Triton kernel (the parameters' sum of squares) runs every step when Triton
is importable, so its launches go through the hook too. The last line gives
the median step time over the second half of the steps.

Usage: python3 train.py [STEPS] [WIDTH]
"""
import os
import statistics
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

try:
    import triton
    import triton.language as tl

    @triton.jit
    def _sum_squares(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr + pid, tl.sum(x * x, axis=0))

    def sum_squares(t):
        flat = t.detach().reshape(-1).contiguous()
        blocks = triton.cdiv(flat.numel(), 1024)
        out = torch.empty(blocks, device=flat.device, dtype=flat.dtype)
        _sum_squares[(blocks,)](flat, out, flat.numel(), BLOCK=1024)
        return out.sum()
except ImportError:
    triton = None

    def sum_squares(t):
        return (t.detach() ** 2).sum()


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(16 * 32 * 32, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev).manual_seed(1)
    x_all = torch.randn(8, 128, 3, 32, 32, device=dev, generator=gen)
    y_all = torch.randint(0, 10, (8, 128), device=dev, generator=gen)
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        x, y = x_all[step % 8], y_all[step % 8]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        norm = sum_squares(model[3].weight)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        print(f"step {step} loss {loss.item().hex()} norm {norm.item().hex()}")
    half = times[len(times) // 2:]
    print(f"median step {statistics.median(half) * 1e3:.3f} ms over steps {len(times) - len(half)}-{len(times) - 1}; "
          f"triton {'yes' if triton else 'no'}; torch {torch.__version__}; "
          f"allocated {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
