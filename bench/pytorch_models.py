"""PyTorch's training throughput for Stoke's models (bench/torch_models.py):
forward + backward + SGD step (momentum 0.9, weight decay 5e-4), random
inputs, the given batch and thread count, PyTorch's defaults otherwise.
Prints one line per model in bench_train's format, or JSON with --json.

--amp: the forward and loss under torch.autocast, as PyTorch's AMP recipes
do: bf16 on the CPU (no loss scaling), f16 with a GradScaler on a GPU.
--flops: also the floating-point operations of one training step per image
(torch.utils.flop_counter, PyTorch 2.x: matmuls and convolutions, forward
and backward), so images/s can be read as GFLOP/s.

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


def step_flops(m, x, y):
    """FLOPs of one forward + backward, per image (None before PyTorch 2)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    with FlopCounterMode(display=False) as fc:
        torch.nn.functional.cross_entropy(m(x), y).backward()
    m.zero_grad(set_to_none=True)
    return fc.get_total_flops() / x.shape[0]


def bench(name, batch, seconds, device="cpu", size=None, channels=None, amp=False, flops=False):
    rgb = name not in ("mlp", "cnn", "resnet8")  # as bench_train
    ch, size0 = (3, 32) if rgb else (1, 28)
    ch, size = channels or ch, size or size0
    torch.manual_seed(1)
    m = torch_models.make(name, ch, 10, size).to(device)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = (torch.rand(batch, ch, size, size) * 2 - 1).to(device)
    y = (torch.arange(batch) % 10).to(device)
    per_image = step_flops(m, x, y) if flops else None
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    scaler = torch.amp.GradScaler(device) if amp and device != "cpu" else None
    steps, t0 = 0, None
    i = 0
    while True:
        if i == 3:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=dtype, enabled=amp):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        loss.item()  # waits for the step, as bench_train does on a GPU
        if i >= 3:
            steps += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds and steps >= 3:
                break
        i += 1
    return steps * batch / elapsed, steps, per_image


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
    ap.add_argument("--amp", action="store_true", help="autocast: bf16 on the CPU, f16 on a GPU")
    ap.add_argument("--flops", action="store_true", help="also FLOPs per image and GFLOP/s")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for name in a.models.split(","):
        ips, steps, per_image = bench(name, a.batch, a.seconds, a.device, a.size, a.channels,
                                      a.amp, a.flops)
        if a.json:
            out = {"model": name, "batch": a.batch, "threads": a.threads, "amp": a.amp,
                   "steps": steps, "images_per_sec": round(ips, 1)}
            if per_image:
                out["flops_per_image"] = per_image
            print(json.dumps(out))
        else:
            where = f"{a.threads} threads" if a.device == "cpu" else a.device
            if a.amp:
                where += " amp bf16" if a.device == "cpu" else " amp f16"
            extra = (f", {per_image / 1e6:.1f} MFLOP/image, {per_image * ips / 1e9:.1f} GFLOP/s"
                     if per_image else "")
            print(f"pytorch {name:<9} batch {a.batch}, {where}: {ips:8.1f} images/s "
                  f"({steps} steps, torch {torch.__version__}{extra})")


if __name__ == "__main__":
    main()
