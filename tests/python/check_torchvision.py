"""A Stoke resnet18 checkpoint loads into torchvision's resnet18 (CIFAR stem:
conv1 3x3 stride 1, no max-pool, as bench/torch_models.py builds it) with
load_state_dict(strict=True), and gives the logits Stoke computed for the
same input within 1e-3.

    check_torchvision.py CHECKPOINT IO_FILE    (written by tests/export_resnet18)
"""
import os
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
import st_io  # noqa: E402
import torch_models  # noqa: E402

tensors, meta = st_io.load(sys.argv[1])
io, _ = st_io.load(sys.argv[2])
assert meta["model"] == "resnet18", meta
state = {k: torch.from_numpy(v) for k, v in tensors.items() if not k.startswith("optim.")}
model = torch_models.resnet18(3, int(meta["classes"]), int(meta["image_size"]))
missing_unexpected = model.load_state_dict(state, strict=True)
model.eval()
with torch.no_grad():
    logits = model(torch.from_numpy(io["input"])).numpy()
diff = float(np.abs(logits - io["logits"]).max())
scale = float(np.abs(io["logits"]).max())
print(f"torchvision resnet18 vs Stoke: max |logit difference| {diff:.2e} (logits up to {scale:.2f}), "
      f"{len(state)} tensors loaded strictly")
if not diff <= 1e-3:
    print("FAIL: logits differ by more than 1e-3")
    sys.exit(1)
