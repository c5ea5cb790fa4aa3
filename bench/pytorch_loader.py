#!/usr/bin/python3
"""The peer: PyTorch's DataLoader over the same .stoke file, with the
torchvision transforms equivalent to Stoke's `rrc:224,flip` (u8 output), or
to another spec of rrc, flip and the pixel ops colorjitter, trivialaugment
and randaugment (--transform, Stoke's syntax).

    /usr/bin/python3 bench/pytorch_loader.py DATA.stoke [--workers N] [--batch B] [--images N]
        [--transform rrc:224,flip,colorjitter:0.4:0.4:0.4:0.1]

Reads records with python3-lmdb exactly as docs/FORMAT.md describes, decodes
with PIL, applies RandomResizedCrop(224), RandomHorizontalFlip() and
PILToTensor() (uint8 CHW, like Stoke's u8 output: no normalisation on the
CPU). Prints one JSON object: images, seconds, images_per_sec, workers, batch.
Needs Debian's python3-torch, python3-torchvision, python3-pil, python3-lmdb.
"""
import argparse
import io
import json
import struct
import time

import lmdb
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

HEADER = struct.Struct("<4sBBBBIIiIII")


class StokeDataset(Dataset):
    def __init__(self, path, transform):
        self.path = path
        self.transform = transform
        self.env = None
        env = self._open()
        with env.begin() as txn:
            meta = env.open_db(b"meta", txn=txn, create=False)
            self.count = int(bytes(txn.get(b"count", db=meta)))
        env.close()

    def _open(self):
        return lmdb.open(self.path, subdir=False, readonly=True, lock=False, max_dbs=2,
                         readahead=False)

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if self.env is None:  # one environment per worker process, opened there
            self.env = self._open()
            self.records = self.env.open_db(b"records", create=False)
        with self.env.begin(buffers=True) as txn:
            value = txn.get(struct.pack(">Q", i), db=self.records)
            _, _, _, _, _, _, _, label, nlen, plen, _ = HEADER.unpack_from(value)
            payload = bytes(value[32 + nlen:32 + nlen + plen])
        img = Image.open(io.BytesIO(payload)).convert("RGB")
        return self.transform(img), label


def torchvision_transforms(spec):
    """Stoke's spec tokens as torchvision transforms on PIL images."""
    out = []
    for token in spec.split(","):
        name, *args = token.split(":")
        nums = [float(a) for a in args]
        if name == "rrc":
            out.append(transforms.RandomResizedCrop(int(nums[0])))
        elif name == "flip":
            out.append(transforms.RandomHorizontalFlip(*nums))
        elif name == "colorjitter":
            out.append(transforms.ColorJitter(*nums))
        elif name == "trivialaugment":
            out.append(transforms.TrivialAugmentWide(*[int(n) for n in nums]))
        elif name == "randaugment":
            out.append(transforms.RandAugment(*[int(n) for n in nums]))
        else:
            raise SystemExit(f"pytorch_loader.py: no torchvision equivalent here for {token}")
    return transforms.Compose(out + [transforms.PILToTensor()])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--images", type=int, default=0, help="default: one epoch")
    ap.add_argument("--transform", default="rrc:224,flip")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tf = torchvision_transforms(args.transform)
    ds = StokeDataset(args.data, tf)
    loader = DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                        persistent_workers=args.workers > 0, prefetch_factor=2 if args.workers else None)
    wanted = args.images or len(ds)
    it = iter(loader)
    next(it)  # warm up: workers started, first batch out (not timed)
    n, t0 = 0, time.perf_counter()
    while n < wanted:
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        n += x.shape[0]
    secs = time.perf_counter() - t0
    print(json.dumps({"images": n, "seconds": round(secs, 3), "images_per_sec": round(n / secs, 1),
                      "workers": args.workers, "batch": args.batch, "transform": args.transform}))


if __name__ == "__main__":
    main()
