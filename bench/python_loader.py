"""stoke.Loader iterated from Python against `stoke bench` with the same
settings, in one run (issue 17's target: >= 0.95x).

usage: PYTHONPATH=BUILD/python /usr/bin/python3 bench/python_loader.py BUILD/stoke DATA.stoke
           [--batch 256] [--workers 2] [--transform rrc:64,flip] [--epochs 3] [--json]
Each Python batch is taken as torch tensors (torch.from_dlpack of images and
labels), as a training loop would; `stoke bench` combines per-sample CRCs.
"""
import argparse
import json
import subprocess
import time

import torch

import stoke

ap = argparse.ArgumentParser()
ap.add_argument("stoke")
ap.add_argument("data")
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--transform", default="rrc:64,flip")
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--json", action="store_true")
a = ap.parse_args()

bench = json.loads(subprocess.run(
    [a.stoke, "bench", a.data, "--batch", str(a.batch), "--workers", str(a.workers),
     "--transform", a.transform, "--epochs", str(a.epochs), "--no-checksum", "--json"],
    check=True, capture_output=True, text=True).stdout)

loader = stoke.Loader(a.data, a.batch, transform=a.transform, workers=a.workers, drop_last=False)
for x, y in loader:  # warm-up epoch (as `stoke bench --warmup` primes the ring)
    pass
del x, y
images, t0 = 0, time.perf_counter()
for e in range(a.epochs):
    loader.set_epoch(e)
    for x, y in loader:
        xt, yt = torch.from_dlpack(x), torch.from_dlpack(y)
        images += xt.shape[0]
secs = time.perf_counter() - t0
py = images / secs
res = {"stoke_bench_images_per_sec": round(bench["images_per_sec"], 1),
       "python_images_per_sec": round(py, 1),
       "ratio": round(py / bench["images_per_sec"], 3)}
print(json.dumps(res) if a.json else
      f"stoke bench {res['stoke_bench_images_per_sec']} images/s, Python stoke.Loader "
      f"{res['python_images_per_sec']} images/s: {res['ratio']}x")
