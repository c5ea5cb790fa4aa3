"""Read a `stoke train` run directory with TensorBoard's own event reader and
check that it holds exactly what the run wrote to steps.csv and metrics.csv,
the first batch as a PNG, and the configuration; then flip one byte of a copy
of the event file and check that TensorBoard's record reader reports data loss.

usage: check_tfevents.py RUNDIR BATCH MODEL [per-class]   (exit 0: all good; 1: a difference)
per-class: the run had --per-class: a confusion image and a per-class table each epoch.
"""
import csv
import glob
import io
import os
import shutil
import struct
import sys
import tempfile

from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
from PIL import Image

run, batch, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
per_class = sys.argv[4:] == ["per-class"]
problems = []


def f32(text):
    return struct.unpack("<f", struct.pack("<f", float(text)))[0]


acc = ea.EventAccumulator(run, size_guidance={ea.SCALARS: 0, ea.IMAGES: 0, ea.TENSORS: 0})
acc.Reload()
tags = acc.Tags()

# every step: the very float32 values of steps.csv (written with 9 digits)
with open(os.path.join(run, "steps.csv")) as f:
    steps = list(csv.DictReader(f))
for tag, column in (("train/loss", "loss"), ("train/lr", "lr"), ("train/grad_norm", "grad_norm")):
    got = {e.step: e.value for e in acc.Scalars(tag)} if tag in tags["scalars"] else {}
    want = {int(r["step"]): f32(r[column]) for r in steps if r.get(column)}
    if got != want:
        problems.append(f"{tag}: {sorted(got.items())[:3]}... against steps.csv {sorted(want.items())[:3]}...")

# every epoch: metrics.csv's figures (printed rounded: compared to that precision)
with open(os.path.join(run, "metrics.csv")) as f:
    epochs = list(csv.DictReader(f))
for tag, column, tol in (("epoch/train_loss", "train_loss", 1e-5), ("epoch/train_acc", "train_acc", 1e-3),
                         ("epoch/val_loss", "val_loss", 1e-5), ("epoch/val_top1", "val_top1", 1e-3),
                         ("epoch/val_top5", "val_top5", 1e-3), ("epoch/images_per_sec", "images_per_sec", 0.06),
                         ("epoch/stall_pct", "stall_pct", 0.006), ("memory/peak_rss_mb", "peak_rss_mb", 0.06)):
    want = {int(r["epoch"]): float(r[column]) for r in epochs if r[column] != ""}
    if not want:  # no validation set: no such tag either
        if tag in tags["scalars"]:
            problems.append(f"{tag} written without values in metrics.csv")
        continue
    got = {e.step: e.value for e in acc.Scalars(tag)}
    if sorted(got) != sorted(want) or any(abs(got[k] - want[k]) > tol * max(1, abs(want[k])) for k in want):
        problems.append(f"{tag}: {got} against metrics.csv {want}")
for tag in ("allocated_mb", "reserved_mb", "peak_mb"):
    if not any(t.endswith(tag) and t.startswith("memory/") for t in tags["scalars"]):
        problems.append(f"no memory/*_{tag} scalar")

# the first batch, as a PNG grid of min(batch, 64) images
images = acc.Images("train/first_batch") if "train/first_batch" in tags["images"] else []
if len(images) != 1:
    problems.append(f"{len(images)} first-batch images")
else:
    im = Image.open(io.BytesIO(images[0].encoded_image_string))
    im.load()
    if (im.width, im.height) != (images[0].width, images[0].height):
        problems.append(f"the PNG is {im.size}, the summary says {images[0].width}x{images[0].height}")
    lo, hi = im.convert("L").getextrema()
    if hi - lo < 32:
        problems.append(f"the first batch's picture is nearly blank ({lo}..{hi})")

# --per-class: each epoch's confusion matrix as an image, the figures as a table
if per_class:
    n_epochs = len(epochs)
    shots = acc.Images("eval/confusion") if "eval/confusion" in tags["images"] else []
    if [e.step for e in shots] != list(range(1, n_epochs + 1)):
        problems.append(f"eval/confusion at steps {[e.step for e in shots]}, {n_epochs} epochs")
    for e in shots:
        Image.open(io.BytesIO(e.encoded_image_string)).load()
    tables = acc.Tensors("eval/per_class") if "eval/per_class" in tags["tensors"] else []
    if len(tables) != n_epochs or not all(
            "| class | images | recall (top-1) | precision | F1 |" in t.tensor_proto.string_val[0].decode()
            for t in tables):
        problems.append(f"eval/per_class: {len(tables)} tables, {n_epochs} epochs")
elif "eval/confusion" in tags["images"]:
    problems.append("eval/confusion without --per-class")

# the configuration, as text
texts = acc.Tensors("config") if "config" in tags["tensors"] else []
config = texts[0].tensor_proto.string_val[0].decode() if texts else ""
if f"| model | {model} |" not in config or f"| batch per rank | {batch} |" not in config:
    problems.append(f"config text: {config[:200]!r}")

# a flipped byte: TensorBoard's record reader reports data loss
files = glob.glob(os.path.join(run, "*tfevents*"))
with tempfile.TemporaryDirectory() as tmp:
    bad = os.path.join(tmp, "events.out.tfevents.flipped")
    shutil.copy(files[0], bad)
    with open(bad, "r+b") as f:
        size = f.seek(0, 2)
        f.seek(size // 2)
        b = f.read(1)
        f.seek(size // 2)
        f.write(bytes([b[0] ^ 0x40]))
    reader = pywrap_tensorflow.PyRecordReader_New(bad)
    outcome = "read to the end"
    try:
        while True:
            reader.GetNext()
    except errors.DataLossError as e:
        outcome = "data loss"
    except errors.OutOfRangeError:
        pass
    if outcome != "data loss":
        problems.append(f"a flipped byte: the reader {outcome}")

for p in problems:
    print("check_tfevents:", p)
print(f"check_tfevents: {len(steps)} steps, {len(epochs)} epochs, {len(tags['scalars'])} scalar tags: "
      + ("ok" if not problems else f"{len(problems)} problem(s)"))
sys.exit(1 if problems else 0)
