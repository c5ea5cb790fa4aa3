"""`stoke export --format onnx` files are valid ONNX (onnx.checker with
full_check: the graph's types and shapes inferred) and onnxruntime computes
Stoke's logits from them, on batch 1 and batch 3, within 1e-4 (max |logit
difference|); metadata_props say what the model needs.

    check_onnx.py MODEL.onnx IO.safetensors [MODEL.onnx IO.safetensors ...]

IO (tests/forward_io): pixels (u8 NHWC), input (f32 NCHW, normalised) and
Stoke's eval-mode logits. A model's "input" metadata says which it takes.
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
from safetensors.numpy import load_file

worst = 0.0
args = sys.argv[1:]
assert args and len(args) % 2 == 0, __doc__
for path, io_path in zip(args[::2], args[1::2]):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    for k in ("model", "classes", "image_size", "in_channels", "input", "source_sha256",
              "stoke_version"):
        assert k in meta, (path, k, meta)
    trained = "input_mean" in meta  # (tests/export_resnet18's checkpoint was not trained by stoke)
    assert not trained or ("input_std" in meta and "val_transform" in meta), meta
    if "class_names" in meta:
        assert len(json.loads(meta["class_names"])) == int(meta["classes"]), meta
    opset = model.opset_import[0].version
    assert (model.ir_version, opset) in ((8, 17), (7, 13)), (model.ir_version, opset)
    batch = model.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    assert batch == "batch", batch
    io = load_file(io_path)
    x = io["pixels"] if meta["input"] == "u8-nhwc" else io["input"]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    diffs = []
    for n in (1, 3):
        (logits,) = sess.run(["logits"], {"input": x[:n]})
        diffs.append(float(np.abs(logits - io["logits"][:n]).max()))
    scale = float(np.abs(io["logits"]).max())
    print(f"{path}: {meta['model']} opset {opset}, input {meta['input']}, {len(model.graph.node)} "
          f"nodes: max |logit difference| batch 1 {diffs[0]:.1e}, batch 3 {diffs[1]:.1e} "
          f"(logits up to {scale:.2f})")
    worst = max(worst, *diffs)
if not worst <= 1e-4:
    print(f"FAIL: onnxruntime and Stoke differ by {worst:.2e} > 1e-4")
    sys.exit(1)
print(f"all within 1e-4 (worst {worst:.1e})")
