"""The Fashion-MNIST recipes of `stoke train` in PyTorch, for a side-by-side
comparison of accuracy and training throughput (bench/train_targets.sh).

Same model (bench/torch_models.py: layers, names, torch.nn initialisation),
batch 128 with the last partial batch dropped, SGD with the same momentum,
Nesterov flag, weight decay and learning rate, the same per-step cosine decay
to 0 (or a constant rate), the same augmentation (RandomCrop(28, padding=P)
and RandomHorizontalFlip, applied to whole batches with tensor ops so Python
per-sample overhead does not slow PyTorch down), normalised with the training
set's mean and std, torch.set_num_threads(THREADS). Evaluation on the test
set after the last epoch in eval mode.

    /usr/bin/python3 bench/pytorch_train.py --model resnet8 --epochs 5 --lr 0.05 \
        --nesterov --wd 5e-4 --pad 2 [--schedule cosine|constant] [--json]

--optimizer adamw uses torch.optim.AdamW (betas 0.9/0.999, eps 1e-8, --wd
decoupled), as `stoke train --optimizer adamw`.

--model fashion_net is the module of the user's own that the ONNX import is
measured with (tests/fixtures/make_onnx_fixtures.py's FashionNet); --state
FILE.safetensors starts any model from that state dict (strictly), e.g. the
weights its ONNX export holds (bench/onnx_targets.sh).
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

SRC = "/usr/share/datasets/fashion-mnist"


def idx(name, src=SRC):
    with gzip.open(os.path.join(src, name)) as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def augment(x, pad, fill, gen):
    """x: [N, 1, 28, 28], normalised. RandomCrop(28, padding=pad) and
    RandomHorizontalFlip on a whole batch: samples that share a crop offset are
    cut out together. The padding is black (pixel 0, i.e. `fill` after
    normalisation), as torchvision pads the image before Normalize."""
    n = x.shape[0]
    xp = F.pad(x, (pad, pad, pad, pad), value=fill)
    ox = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    oy = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    out = torch.empty_like(x)
    for dy in range(2 * pad + 1):
        for dx in range(2 * pad + 1):
            sel = (oy == dy) & (ox == dx)
            if sel.any():
                out[sel] = xp[sel, :, dy:dy + 28, dx:dx + 28]
    flip = torch.rand(n, generator=gen) < 0.5
    return torch.where(flip[:, None, None, None], out.flip(3), out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--wd", type=float, default=0.0)
    ap.add_argument("--pad", type=int, default=0, help="0: no augmentation")
    ap.add_argument("--schedule", default="cosine", choices=["cosine", "constant"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--state", help="start from this state dict (safetensors)")
    ap.add_argument("--data-dir", default=SRC,
                    help="the IDX files (default: Debian's dataset-fashion-mnist)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    xtr = torch.from_numpy(idx("train-images-idx3-ubyte.gz", a.data_dir).copy()).float().div_(255)[:, None]
    ytr = torch.from_numpy(idx("train-labels-idx1-ubyte.gz", a.data_dir).astype(np.int64))
    xte = torch.from_numpy(idx("t10k-images-idx3-ubyte.gz", a.data_dir).copy()).float().div_(255)[:, None]
    yte = torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz", a.data_dir).astype(np.int64))
    mean, std = xtr.mean().item(), xtr.std().item()
    xtr = (xtr - mean) / std
    xte = (xte - mean) / std
    if a.model == "fashion_net":
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "tests", "fixtures"))
        from make_onnx_fixtures import FashionNet
        model = FashionNet()
    else:
        model = torch_models.make(a.model, 1, 10, 28)
    if a.state:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                        "python"))
        import st_io
        state, _ = st_io.load(a.state)
        model.load_state_dict({k: torch.tensor(v) for k, v in state.items()}, strict=True)
    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.wd)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                              nesterov=a.nesterov, weight_decay=a.wd)
    steps_per_epoch = xtr.shape[0] // a.batch
    total = steps_per_epoch * a.epochs
    step = 0
    train_time = 0.0
    for epoch in range(a.epochs):
        model.train()
        perm = torch.randperm(xtr.shape[0], generator=gen)
        t0 = time.perf_counter()
        for i in range(steps_per_epoch):
            idx_b = perm[i * a.batch:(i + 1) * a.batch]
            x = xtr[idx_b]
            if a.pad:
                x = augment(x, a.pad, -mean / std, gen)
            lr = a.lr * 0.5 * (1 + math.cos(math.pi * step / total)) if a.schedule == "cosine" else a.lr
            for g in opt.param_groups:
                g["lr"] = lr
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), ytr[idx_b])
            loss.backward()
            opt.step()
            step += 1
        train_time += time.perf_counter() - t0
        print(f"pytorch {a.model} epoch {epoch + 1}: loss {loss.item():.4f}", file=sys.stderr)
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, xte.shape[0], 500):
            correct += (model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item()
    top1 = 100.0 * correct / xte.shape[0]
    ips = steps_per_epoch * a.batch * a.epochs / train_time
    if a.json:
        print(json.dumps({"model": a.model, "val_top1": round(top1, 2),
                          "train_images_per_sec": round(ips, 1)}))
    else:
        print(f"pytorch {a.model}: test top-1 {top1:.2f}%, {ips:.0f} images/s (training only)")


if __name__ == "__main__":
    main()
