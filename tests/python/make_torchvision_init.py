"""A torchvision model with seeded random weights, saved as a state dict in
safetensors (what `stoke train --init` takes), with an input and the logits
torchvision computes for it in eval mode: tests/init_logits loads the state
dict into Stoke's model of the same name and must give those logits within
1e-4 (tests/cli/test_torchvision_init.sh). Nothing is downloaded.

    make_torchvision_init.py MODEL SIZE OUT_DIR  -> OUT_DIR/MODEL-SIZE.{weights,io}.safetensors

The batch norm layers get random affine weights and running statistics
measured on random data (a few train-mode passes), so that the logits are
of order 1 and every tensor of the state dict matters; so do the layer
norms, ConvNeXt's layer scales (1e-6 at the start: the blocks would not
count), ViT's class token and head (zeros at the start).
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

name, size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(20261126)
m = torch_models.make(name, 3, 10, size)
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.weight.uniform_(0.5, 1.5)
            mod.bias.uniform_(-0.2, 0.2)
            mod.momentum = None  # running statistics: the average over the passes
        if isinstance(mod, torch.nn.LayerNorm):
            mod.weight.uniform_(0.5, 1.5)
            mod.bias.uniform_(-0.2, 0.2)
    for k, p in m.named_parameters():
        if k.endswith("layer_scale"):
            p.uniform_(0.2, 0.6)
        elif k == "class_token":
            p.normal_(0, 0.5)
        elif k.startswith("heads.head"):
            p.normal_(0, 0.05)
    m.train()
    for _ in range(3):
        m(torch.rand(8, 3, size, size) * 2 - 1)
    m.eval()
    x = torch.rand(4, 3, size, size) * 2 - 1
    logits = m(x)
state = {k: v.numpy() for k, v in m.state_dict().items()}
base = os.path.join(out, f"{name}-{size}")
st_io.save(base + ".weights.safetensors", state, {"format": "pt"})
st_io.save(base + ".io.safetensors", {"input": x.numpy(), "logits": logits.numpy()},
           {"model": name, "image_size": str(size)})
print(f"{name} at {size} px: {len(state)} tensors, logits up to {float(logits.abs().max()):.2f}")
