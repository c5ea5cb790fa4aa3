"""The same hyperparameter search through `stoke tune` and through Ray Tune
with PyTorch's DataLoader, on the same machine, in one script: wall time to
finish and the best validation top-1 of each.

    scripts/make-ray-venv.sh && .venv-ray/bin/pip install torch torchvision  # PyPI
    .venv-ray/bin/python bench/tune_vs_ray.py /tmp/jpeg/set [--samples 8] [--epochs 4]

The data: the JPEG set from ../shared/data/make-jpeg-set.sh, its manifest
split 5:1 into training and validation (as bench/tune_shared_stream.sh),
packed for Stoke, read as files by PyTorch. The search: lr loguniform(1e-3,
0.3), momentum uniform(0.8, 0.99), weight decay 5e-4, --samples trials, ASHA
(grace 1, reduction 2, max_t --epochs), --concurrent trials at a time, val
top-1 maximised. The model and recipe on both sides: mlp (3x64x64 -> 256 ->
128 -> 10, bench/torch_models.py's MLP), batch 128 with the last partial
batch dropped, SGD with a per-step cosine decay to 0, RandomResizedCrop(64)
and a horizontal flip for training, Resize(73) + CenterCrop(64) for
validation. PyTorch side: each trial a torch.utils.data.DataLoader over PIL
decoding (torchvision's transforms, --workers worker processes per trial,
torch.set_num_threads(--threads)), Ray Tune 2.x's ASHAScheduler and
max_concurrent_trials; Ray is given the machine's cores.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_models  # noqa: E402


def split(set_dir):
    rows = open(os.path.join(set_dir, "manifest.csv")).read().splitlines()[1:]
    train, val = [], []
    for n, line in enumerate(rows, 1):
        f, c = line.split(",")[:2]
        (val if n % 6 == 0 else train).append((os.path.join(set_dir, f), int(c)))
    return train, val


class Files(Dataset):
    def __init__(self, items, tf):
        self.items, self.tf = items, tf

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        with Image.open(path) as im:
            return self.tf(im.convert("RGB")), label


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def torch_trial(config):
    from ray import train as ray_train

    a = config["args"]
    torch.set_num_threads(a["threads"])
    torch.manual_seed(0)
    tr, va = split(a["set"])
    train_tf = transforms.Compose([transforms.RandomResizedCrop(64), transforms.RandomHorizontalFlip(),
                                   transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    val_tf = transforms.Compose([transforms.Resize(73), transforms.CenterCrop(64),
                                 transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    tl = DataLoader(Files(tr, train_tf), batch_size=128, shuffle=True, drop_last=True,
                    num_workers=a["workers"], persistent_workers=a["workers"] > 0)
    vl = DataLoader(Files(va, val_tf), batch_size=128, num_workers=a["workers"],
                    persistent_workers=a["workers"] > 0)
    model = torch_models.MLP(3, 10, 64)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"],
                          weight_decay=5e-4)
    total = len(tl) * a["epochs"]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
    for _ in range(a["epochs"]):
        model.train()
        for x, y in tl:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            sched.step()
        model.eval()
        correct = n = 0
        with torch.no_grad():
            for x, y in vl:
                correct += (model(x).argmax(1) == y).sum().item()
                n += len(y)
        ray_train.report({"val_top1": 100.0 * correct / n})


def run_ray(a):
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    t0 = time.time()
    space = {"lr": tune.loguniform(1e-3, 0.3), "momentum": tune.uniform(0.8, 0.99),
             "args": {"set": a.set, "epochs": a.epochs, "workers": a.workers, "threads": a.threads}}
    tuner = tune.Tuner(
        tune.with_resources(torch_trial, {"cpu": os.cpu_count() / a.concurrent}),
        param_space=space,
        tune_config=tune.TuneConfig(metric="val_top1", mode="max", num_samples=a.samples,
                                    max_concurrent_trials=a.concurrent,
                                    scheduler=ASHAScheduler(max_t=a.epochs, grace_period=1,
                                                            reduction_factor=2)),
        run_config=ray.train.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0))
    res = tuner.fit()
    wall = time.time() - t0
    best = res.get_best_result(metric="val_top1", mode="max", scope="all")
    top = max(best.metrics_dataframe["val_top1"])
    ray.shutdown()
    return wall, top


def run_stoke(a, stoke):
    with tempfile.TemporaryDirectory() as w:
        tr, va = split(a.set)
        for name, items in (("train", tr), ("val", va)):
            with open(os.path.join(w, name + ".txt"), "w") as f:
                f.writelines("%s %d\n" % it for it in items)
            subprocess.run([stoke, "pack", "--from", "list", os.path.join(w, name + ".txt"),
                            os.path.join(w, name + ".stoke")], check=True, capture_output=True)
        t0 = time.time()
        out = subprocess.run(
            [stoke, "tune", "--data", os.path.join(w, "train.stoke"), "--val",
             os.path.join(w, "val.stoke"), "--model", "mlp", "--batch", "128", "--transform",
             "rrc:64,flip", "--epochs", str(a.epochs), "--space",
             "lr=loguniform(1e-3,0.3) momentum=uniform(0.8,0.99)", "--samples", str(a.samples),
             "--scheduler", "asha", "--reduction", "2", "--concurrent", str(a.concurrent),
             "--no-tensorboard", "--json", "--out", os.path.join(w, "sweep")],
            check=True, capture_output=True, text=True)
        wall = time.time() - t0
        return wall, json.loads(out.stdout)["best_val_top1"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("set")
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--concurrent", type=int, default=4)
    p.add_argument("--workers", type=int, default=1, help="DataLoader workers per Ray trial")
    p.add_argument("--threads", type=int, default=1, help="torch threads per Ray trial")
    p.add_argument("--stoke", default=os.path.join(HERE, "..", "build", "stoke"))
    a = p.parse_args()
    a.set = os.path.abspath(a.set)
    s_wall, s_top = run_stoke(a, a.stoke)
    r_wall, r_top = run_ray(a)
    print("search: %d samples, ASHA (grace 1, reduction 2, max_t %d), %d at a time, mlp at 64 px, "
          "rrc:64,flip; torch %s, Ray %s" % (a.samples, a.epochs, a.concurrent, torch.__version__,
                                             __import__("ray").__version__))
    print("  stoke tune:                 %7.1f s, best val top-1 %.2f%%" % (s_wall, s_top))
    print("  Ray Tune + DataLoader:      %7.1f s, best val top-1 %.2f%% (%d workers and %d torch "
          "threads per trial)" % (r_wall, r_top, a.workers, a.threads))
    print("  Stoke finishes %.2fx sooner" % (r_wall / s_wall))


if __name__ == "__main__":
    main()
