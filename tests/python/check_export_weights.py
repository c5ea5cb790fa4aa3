"""`stoke export --format safetensors` of a resnet18 trained at 64 px loads
into torchvision's own resnet18 with load_state_dict(strict=True) through
safetensors' PyTorch loader, and gives the logits Stoke computed for the
same input within 1e-4; the file holds no optimizer state, keeps
num_batches_tracked as int64 and says "format": "pt".

    check_export_weights.py WEIGHTS IO_FILE   (IO_FILE: tests/export_resnet18 DIR 64)
"""
import json
import sys

import torch
import torchvision
from safetensors import safe_open
from safetensors.torch import load_file

weights, io_path = sys.argv[1], sys.argv[2]
with safe_open(weights, "pt") as f:
    meta = f.metadata()
assert meta["format"] == "pt", meta
assert meta["model"] == "resnet18" and meta["image_size"] == "64", meta
assert len(meta["source_sha256"]) == 64, meta
if "class_names" in meta:
    assert len(json.loads(meta["class_names"])) == int(meta["classes"]), meta
state = load_file(weights)
assert not any(k.startswith("optim.") for k in state), "optimizer state in a weights file"
counters = [k for k in state if k.endswith("num_batches_tracked")]
assert counters and all(state[k].dtype == torch.int64 for k in counters), counters
model = torchvision.models.resnet18(num_classes=int(meta["classes"]))
model.load_state_dict(state, strict=True)
model.eval()
io = load_file(io_path)
with torch.no_grad():
    logits = model(io["input"])
diff = float((logits - io["logits"]).abs().max())
scale = float(io["logits"].abs().max())
print(f"torchvision {torchvision.__version__} resnet18 from the exported weights vs Stoke: "
      f"max |logit difference| {diff:.2e} (logits up to {scale:.2f}), {len(state)} tensors "
      "loaded strictly")
if not diff <= 1e-4:
    print("FAIL: logits differ by more than 1e-4")
    sys.exit(1)
