"""Stoke's loader in Python training loops.

    import stoke, torch
    with stoke.Loader("train.stoke", 128, transform="rrc:224,flip", workers=8) as loader:
        for epoch in range(10):
            loader.set_epoch(epoch)
            for images, labels in loader:            # stoke.Array views of the ring, no copy
                x = torch.from_dlpack(images)        # uint8 [N, H, W, C] (layout="NCHW": [N, C, H, W])
                y = torch.from_dlpack(labels)        # int64 [N]: F.cross_entropy(out, y)
                ...

A batch's ring buffer goes back to the loader when the last array or tensor
viewing it is gone; keep what you need past the next batches with .clone().
With device="cuda" the arrays are on the GPU (torch.from_dlpack gives CUDA
tensors, ordered with torch's current stream through DLPack's stream argument).

stoke.pack(src, out, ...) and stoke.info(path) are `stoke pack` and
`stoke info --json` as Python calls; stoke.train(data=..., model=..., ...)
is `stoke train`, stoke.evaluate(data=..., checkpoint=...) `stoke eval` and
stoke.export(checkpoint, ...) `stoke export`, stoke.predict(checkpoint,
inputs) `stoke predict` and stoke.tune(data=..., model=..., space=...)
`stoke tune`
(the same run folder and metrics; its settings by name with
'_' for '-'; on_epoch(metrics) after each epoch, True stops; Ctrl-C stops
after the current step):

    result = stoke.train(data="fm.stoke", val="fm-test.stoke", model="cnn", epochs=5,
                         lr=0.05, freeze=["conv1"], out="runs/cnn",
                         on_epoch=lambda m: m["val_top1"] > 92)
    result["val_top1"], result["best_epoch"], result["out"]
"""
import typing as _typing

from ._stoke import Array, Loader, StokeError, __version__, info, pack


def train(**settings: _typing.Any) -> _typing.Dict[str, _typing.Any]:
    """`stoke train` from Python: train(*, data, model, val=None, epochs=None,
    on_epoch=None, **settings) -> dict (stoke._stoke_run.train; README.md,
    "Use the loader from PyTorch"). Its module links the engine, so it is
    imported on the first call: `import stoke` and the Loader do not load
    the CPU math libraries."""
    from . import _stoke_run
    return _stoke_run.train(**settings)


def evaluate(**request: _typing.Any) -> _typing.Dict[str, _typing.Any]:
    """`stoke eval --json` from Python: evaluate(*, data, checkpoint,
    transform=None, batch=128, workers=0, device="cpu", ema=False,
    per_class=False) -> dict (stoke._stoke_run.evaluate)."""
    from . import _stoke_run
    return _stoke_run.evaluate(**request)


def export(checkpoint: _typing.Any, **options: _typing.Any) -> _typing.Dict[str, _typing.Any]:
    """`stoke export --json` from Python: export(checkpoint, *, out=None,
    format="onnx", opset=None, fold=True, input="f32-nchw", ema=False) -> dict
    (stoke._stoke_run.export)."""
    from . import _stoke_run
    return _stoke_run.export(checkpoint, **options)


def predict(checkpoint: _typing.Any, inputs: _typing.Any,
            **options: _typing.Any) -> _typing.List[_typing.Dict[str, _typing.Any]]:
    """`stoke predict --json` from Python: predict(checkpoint, inputs, *,
    transform=None, top_k=5, batch=128, workers=0) -> list, an item per image
    in input order: {path, top: [{class, index, probability}]} or {path,
    error} (stoke._stoke_run.predict)."""
    from . import _stoke_run
    return _stoke_run.predict(checkpoint, inputs, **options)


def tune(**settings: _typing.Any) -> _typing.Dict[str, _typing.Any]:
    """`stoke tune --json` from Python: tune(*, data, model, space, val=None,
    samples=None, scheduler=None, metric=None, epochs=None, concurrent=None,
    out=None, resume=False, on_trial=None, **settings) -> dict: --json's
    fields, "best" and "results" (every trial: trial, status, params,
    best_value, best_epoch, epochs, seconds, error, out, command);
    on_trial(trial) as each trial ends, True stops the sweep
    (stoke._stoke_run.tune)."""
    from . import _stoke_run
    return _stoke_run.tune(**settings)


__all__ = ["Array", "Loader", "StokeError", "evaluate", "export", "info", "pack", "predict", "train",
           "tune", "__version__"]
