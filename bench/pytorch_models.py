"""PyTorch's training throughput for Stoke's models (bench/torch_models.py):
forward + backward + SGD step (momentum 0.9, weight decay 5e-4), random
inputs, the given batch and thread count, PyTorch's defaults otherwise.
Prints one line per model in bench_train's format, or JSON with --json.

Run with Debian's interpreter: /usr/bin/python3 bench/pytorch_models.py
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch_models  # noqa: E402


def bench(name, batch, seconds, device="cpu", size=None, channels=None):
    rgb = name not in ("mlp", "cnn", "resnet8")  # as bench_train
    ch, size0 = (3, 32) if rgb else (1, 28)
    ch, size = channels or ch, size or size0
    torch.manual_seed(1)
    m = torch_models.make(name, ch, 10, size).to(device)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = (torch.rand(batch, ch, size, size) * 2 - 1).to(device)
    y = (torch.arange(batch) % 10).to(device)
    steps, t0 = 0, None
    i = 0
    while True:
        if i == 3:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        loss.item()  # waits for the step, as bench_train does on a GPU
        if i >= 3:
            steps += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds and steps >= 3:
                break
        i += 1
    return steps * batch / elapsed, steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp,cnn,resnet8,resnet18")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--size", type=int, help="input side (as bench_train's --size)")
    ap.add_argument("--channels", type=int, help="input channels (as bench_train's --channels)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for name in a.models.split(","):
        ips, steps = bench(name, a.batch, a.seconds, a.device, a.size, a.channels)
        if a.json:
            print(json.dumps({"model": name, "batch": a.batch, "threads": a.threads,
                              "steps": steps, "images_per_sec": round(ips, 1)}))
        else:
            where = f"{a.threads} threads" if a.device == "cpu" else a.device
            print(f"pytorch {name:<9} batch {a.batch}, {where}: {ips:8.1f} images/s "
                  f"({steps} steps, torch {torch.__version__})")


if __name__ == "__main__":
    main()
