"""Train torchvision's resnet18 in a plain PyTorch loop fed by Stoke's loader,
or, with --torch-loader, by PyTorch's DataLoader over the original folder:
the same model, optimiser, loss, batch, image size and thread counts, so the
two runs differ only in where the batches come from.

    # Stoke: decode + RandomResizedCrop + flip + normalise in 2 loader workers
    python3 examples/train_pytorch.py photos.stoke --steps 50 --batch 64 --size 64

    # the same loop on DataLoader(ImageFolder(photos/), 2 workers) + torchvision transforms
    python3 examples/train_pytorch.py photos.stoke --torch-loader photos/ --steps 50

    --json prints one object: images_per_sec (after --warmup steps), data_wait_pct
    (share of the timed loop spent waiting for the next batch), loss, steps, ...

Batches from stoke.Loader are DLPack views of its ring (no copy):
torch.from_dlpack(images) is a float32 [N, 3, S, S] tensor already
normalised with the dataset's mean/std (output="f32"); it stays valid while
it is referenced, and its ring slot goes back to the loader when it is freed.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F
import torchvision

import stoke


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="a .stoke file packed from a JPEG folder (stoke pack / stoke.pack)")
    ap.add_argument("--steps", type=int, default=50, help="timed training steps (default 50)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    ap.add_argument("--batch", type=int, default=64, help="images per step (default 64)")
    ap.add_argument("--size", type=int, default=64, help="RandomResizedCrop side (default 64)")
    ap.add_argument("--workers", type=int, default=2, help="loader workers (default 2)")
    ap.add_argument("--threads", type=int, default=2, help="torch compute threads (default 2)")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (default 0.1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-loader", metavar="IMAGE_FOLDER",
                    help="feed the loop with PyTorch's DataLoader over this folder instead")
    ap.add_argument("--synthetic", action="store_true",
                    help="no loader: one Stoke batch reused every step (the loop's compute "
                         "ceiling, to see how close each loader gets)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    return ap.parse_args()


def stoke_batches(args):
    """(images, labels) as torch tensors viewing Stoke's ring, forever."""
    loader = stoke.Loader(args.data, args.batch, transform=f"rrc:{args.size},flip",
                          workers=args.workers, seed=args.seed, drop_last=True, output="f32",
                          layout="NCHW")
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        for images, labels in loader:
            yield torch.from_dlpack(images), torch.from_dlpack(labels)  # labels int64
        epoch += 1


def synthetic_batches(args):
    """One batch from Stoke, cloned and given back every step: no loading at all."""
    x, y = next(stoke_batches(args))
    x, y = x.clone(), y.clone()
    while True:
        yield x, y


def torch_batches(args, mean, std):
    """The same from DataLoader + ImageFolder + torchvision transforms."""
    from torchvision import transforms as T
    tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(mean, std)])
    ds = torchvision.datasets.ImageFolder(args.torch_loader, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True,
                                     num_workers=args.workers, drop_last=True,
                                     persistent_workers=args.workers > 0,
                                     generator=torch.Generator().manual_seed(args.seed))
    while True:
        yield from dl


def main():
    args = parse()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    info = stoke.info(args.data)
    classes = len(info["classes"])
    mean, std = info.get("mean", [0.5] * 3), info.get("std", [0.25] * 3)
    if args.synthetic:
        batches, source = synthetic_batches(args), "none (one batch reused)"
    elif args.torch_loader:
        batches, source = torch_batches(args, mean, std), "torch.DataLoader"
    else:
        batches, source = stoke_batches(args), "stoke.Loader"

    model = torchvision.models.resnet18(num_classes=classes)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    model.train()
    wait = 0.0
    losses = []
    total = args.warmup + args.steps
    for step in range(total):
        if step == args.warmup:
            start, wait = time.perf_counter(), 0.0
        t0 = time.perf_counter()
        x, y = next(batches)
        wait += time.perf_counter() - t0
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        del x, y  # the ring slot goes back as soon as the step is done
        if not args.json and (step + 1) % 10 == 0:
            print(f"step {step + 1}/{total}: loss {losses[-1]:.4f}", file=sys.stderr)
    elapsed = time.perf_counter() - start
    result = {
        "loader": source,
        "torch": torch.__version__,
        "steps": args.steps,
        "batch": args.batch,
        "size": args.size,
        "workers": args.workers,
        "threads": args.threads,
        "images_per_sec": round(args.steps * args.batch / elapsed, 1),
        "data_wait_pct": round(100 * wait / elapsed, 2),
        "first_loss": round(losses[0], 4),
        "last_loss": round(losses[-1], 4),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['loader']} (torch {result['torch']}): {result['images_per_sec']} images/s, "
              f"waiting for data {result['data_wait_pct']}% of the time, loss "
              f"{result['first_loss']} -> {result['last_loss']}")


if __name__ == "__main__":
    try:
        main()
    except stoke.StokeError as e:  # the library's message names the file, record or setting
        sys.exit(f"train_pytorch.py: {e}")
