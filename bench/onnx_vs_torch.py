"""onnxruntime on Stoke's resnet18 ONNX file against onnxruntime on
torch.onnx.export's file of the same torchvision model with the same
weights: CPU throughput at batch 32 on 2 threads, in one process, the two
sessions timed in alternating rounds. Both files must give the same logits.

    scripts/make-ray-venv.sh        # the peers' venv: torch, torchvision, onnx, onnxruntime
    .venv-ray/bin/python bench/onnx_vs_torch.py [--size 224] [--batch 32] [--threads 2]

The weights: tests/export_resnet18 (a resnet18 at SIZE px after two SGD
steps), exported by `stoke export` as ONNX and as weights-only safetensors;
torchvision's resnet18 loads the latter strictly and torch.onnx.export
writes it (opset 17, eval mode, the batch dimension dynamic).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch
import torchvision
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("BUILD", os.path.join(HERE, "..", "build"))


def session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5, help="batches per round")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as w:
        subprocess.run([os.path.join(BUILD, "tests", "export_resnet18"), w, str(a.size)], check=True)
        ck = os.path.join(w, "resnet18.safetensors")
        stoke_onnx, weights = os.path.join(w, "stoke.onnx"), os.path.join(w, "w.safetensors")
        stoke = os.path.join(BUILD, "stoke")
        subprocess.run([stoke, "export", ck, "--out", stoke_onnx], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([stoke, "export", ck, "--format", "safetensors", "--out", weights],
                       check=True, stdout=subprocess.DEVNULL)
        model = torchvision.models.resnet18(num_classes=10)
        model.load_state_dict(load_file(weights), strict=True)
        model.eval()
        torch_onnx = os.path.join(w, "torch.onnx")
        x = torch.randn(a.batch, 3, a.size, a.size)
        torch.onnx.export(model, (x,), torch_onnx, opset_version=17, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          dynamo=False)
        sessions = {"stoke": session(stoke_onnx, a.threads), "torch.onnx.export": session(torch_onnx, a.threads)}
        xn = x.numpy()
        outs = {k: s.run(["logits"], {"input": xn})[0] for k, s in sessions.items()}  # warm up too
        diff = float(np.abs(outs["stoke"] - outs["torch.onnx.export"]).max())
        rates = {k: [] for k in sessions}
        for r in range(a.rounds):  # alternating, each first in every other round
            for k in sorted(sessions, reverse=r % 2 == 1):
                t0 = time.perf_counter()
                for _ in range(a.runs):
                    sessions[k].run(["logits"], {"input": xn})
                rates[k].append(a.runs * a.batch / (time.perf_counter() - t0))
        best = {k: max(v) for k, v in rates.items()}
        median = {k: float(np.median(v)) for k, v in rates.items()}
        sizes = {k: os.path.getsize(p) for k, p in (("stoke", stoke_onnx), ("torch.onnx.export", torch_onnx))}
    print(f"resnet18 at {a.size} px, batch {a.batch}, onnxruntime {ort.__version__} CPU, "
          f"{a.threads} threads (torch {torch.__version__}, torchvision {torchvision.__version__}); "
          f"logits agree within {diff:.1e}")
    for k in sessions:
        print(f"  {k:18s} {best[k]:7.1f} images/s best, {median[k]:7.1f} median of {a.rounds} rounds "
              f"of {a.runs} batches; file {sizes[k] / 1e6:.1f} MB")
    t = "torch.onnx.export"
    print(f"  Stoke's file: {best['stoke'] / best[t]:.3f}x (best), {median['stoke'] / median[t]:.3f}x "
          "(median) the throughput of torch's")
    if diff > 1e-3:
        sys.exit("FAIL: the two files disagree")


if __name__ == "__main__":
    main()
