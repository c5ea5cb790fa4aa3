"""stoke.train() (python/src/run_functions.c over run/run.h): the same library
calls as `stoke train`, so the same run folder, the same metrics.csv and the
same figures as --json; settings by name with '_' for '-'; on_epoch hears
each epoch and may stop the run; Ctrl-C stops it, keeping the last epoch's
checkpoint; errors raise with the library's messages.
Run by ctest with PYTHONPATH=BUILD/python, STOKE and STOKE_FIXTURES."""
import csv
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

import stoke
from run_helpers import flags, STOKE, cli, cli_error, tiny  # noqa: F401 (tiny: a fixture)


def rows(run):
    """metrics.csv's columns that do not depend on timing (epoch .. val_top5)."""
    with open(os.path.join(run, "metrics.csv")) as f:
        return [r[:8] for r in csv.reader(f)]


SETTINGS = dict(model="cnn", epochs=2, batch=10, lr=0.02, optimizer="adamw",
                transform="pad:2,crop:28,flip", seed=3, freeze=["conv1"], min_lr=0.001,
                label_smoothing=0.1, no_tensorboard=True, workers=2)


def test_import_stoke_loads_no_math_library():
    # stoke.train's module links the engine; `import stoke` does not load it
    code = ("import stoke, sys; assert 'stoke._stoke_run' not in sys.modules; "
            "maps = open('/proc/self/maps').read(); assert 'libdnnl' not in maps, 'dnnl loaded'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_train_writes_the_cli_metrics_and_figures(tiny, tmp_path):
    seen = []
    res = stoke.train(data=tiny, val=tiny, out=str(tmp_path / "py"), on_epoch=seen.append,
                      **SETTINGS)
    r = cli("train", "--data", tiny, "--val", tiny, "--out", str(tmp_path / "cli"), "--json",
            *flags(SETTINGS))
    assert rows(tmp_path / "py") == rows(tmp_path / "cli")
    assert len(rows(tmp_path / "py")) == 3  # the header and two epochs
    cli_res = json.loads(r.stdout)
    for key in ("params", "params_trainable", "epochs", "ranks", "stopped_epoch", "best_epoch",
                "monitor", "stop_reason"):
        assert res[key] == cli_res[key], key
    for key in ("val_top1", "val_top5", "val_loss", "best_value"):
        assert res[key] == pytest.approx(cli_res[key], abs=1e-4), key
    assert res["out"] == str(tmp_path / "py")
    assert res["stop_reason"] == "finished" and res["epochs"] == 2
    # on_epoch's metrics are the rows metrics.csv holds
    assert [m["epoch"] for m in seen] == [1, 2]
    table = rows(tmp_path / "py")
    for m, row in zip(seen, table[1:]):
        assert m["step"] == int(row[1])
        assert m["train_loss"] == pytest.approx(float(row[3]), abs=1e-4)
        assert m["val_top1"] == pytest.approx(float(row[6]), abs=1e-3)
    # the same checkpoints: eval reads the Python run's as the CLI's
    assert (tmp_path / "py" / "last.safetensors").exists()
    assert (tmp_path / "py" / "best.safetensors").exists()


def test_on_epoch_stops_the_run(tiny, tmp_path):
    res = stoke.train(data=tiny, model="mlp", epochs=5, batch=10, no_tensorboard=True,
                      out=str(tmp_path / "r"), on_epoch=lambda m: m["epoch"] == 2)
    assert res["stop_reason"] == "callback"
    assert res["epochs"] == 2 and res["stopped_epoch"] == 2
    assert len(rows(tmp_path / "r")) == 3


def test_an_exception_in_on_epoch_is_raised(tiny, tmp_path):
    def boom(m):
        raise ArithmeticError("from the callback")

    with pytest.raises(ArithmeticError, match="from the callback"):
        stoke.train(data=tiny, model="mlp", epochs=3, batch=10, no_tensorboard=True,
                    out=str(tmp_path / "r"), on_epoch=boom)
    assert len(rows(tmp_path / "r")) == 2  # the epoch it heard of was recorded


def test_resume_continues_a_python_run(tiny, tmp_path):
    out = str(tmp_path / "r")
    common = dict(data=tiny, model="mlp", batch=10, no_tensorboard=True, out=out)
    stoke.train(epochs=3, stop_after=1, **common)
    res = stoke.train(epochs=3, resume=True, **common)
    assert res["epochs"] == 3
    stoke.train(epochs=3, out=str(tmp_path / "whole"), **{k: v for k, v in common.items()
                                                            if k != "out"})
    assert rows(out) == rows(tmp_path / "whole")
    # timm's names: resume=PATH names the run; batch_size is batch
    cut = tmp_path / "cut"
    stoke.train(data=tiny, model="mlp", batch_size=10, no_tensorboard=True, epochs=3,
                stop_after=1, out=str(cut))
    res = stoke.train(data=tiny, model="mlp", batch_size=10, no_tensorboard=True, epochs=3,
                      resume=str(cut / "last.safetensors"))
    assert res["out"] == str(cut) and rows(cut) == rows(tmp_path / "whole")


def test_errors_are_the_librarys(tiny, tmp_path):
    with pytest.raises(ValueError, match=r"'batch_sise': no such setting \(did you mean batch"):
        stoke.train(data=tiny, model="mlp", batch_sise=4)
    with pytest.raises(ValueError, match="'json' is stoke train's command line"):
        stoke.train(data=tiny, model="mlp", json=True)
    msg = cli_error("train", "--data", tiny, "--model", "mlp", "--batch", "0")
    with pytest.raises(ValueError, match="^" + msg.replace(".", r"\.") + "$"):
        stoke.train(data=tiny, model="mlp", batch=0)
    with pytest.raises(ValueError, match="--model cnnn: unknown \\(did you mean cnn"):
        stoke.train(data=tiny, model="cnnn")
    with pytest.raises(ValueError, match="--data TRAIN.stoke is required"):
        stoke.train(model="mlp")
    with pytest.raises(TypeError):
        stoke.train(tiny, "mlp")  # keywords only
    from stoke import _stoke_run
    with pytest.raises(TypeError, match="keyword arguments only"):
        _stoke_run.train(tiny, "mlp")
    with pytest.raises(TypeError, match="lr: expected a str, int, float, bool or path"):
        stoke.train(data=tiny, model="mlp", lr=[0.1])
    missing = str(tmp_path / "missing.stoke")
    msg = cli_error("train", "--data", missing, "--model", "mlp", "--out", str(tmp_path / "c"))
    with pytest.raises(stoke.StokeError, match="^" + msg.replace(".", r"\.") + "$"):
        stoke.train(data=missing, model="mlp", out=str(tmp_path / "p"))
    # a used run folder is refused, and left as it was
    out = tmp_path / "used"
    stoke.train(data=tiny, model="mlp", epochs=1, batch=10, no_tensorboard=True, out=str(out))
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(stoke.StokeError, match="already holds a run"):
        stoke.train(data=tiny, model="mlp", epochs=1, batch=10, out=str(out))
    assert sorted(p.name for p in out.iterdir()) == before


def test_keyboard_interrupt_stops_the_run(tiny, tmp_path):
    # thousands of short epochs, interrupted after 1 s: the run stops after
    # the step it is in; the last completed epoch's checkpoint is kept
    out = tmp_path / "r"
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        stoke.train(data=tiny, model="mlp", epochs=100000, batch=10, no_tensorboard=True,
                    out=str(out))
    timer.join()
    done = len(rows(out)) - 1
    assert 0 < done < 100000
    assert (out / "last.safetensors").exists()
    res = stoke.train(data=tiny, model="mlp", epochs=done + 1, batch=10, no_tensorboard=True,
                      out=str(out), resume=True)
    assert res["epochs"] == done + 1


def test_evaluate_gives_the_cli_figures(tiny, tmp_path):
    out = tmp_path / "r"
    stoke.train(data=tiny, val=tiny, model="cnn", epochs=1, batch=10, no_tensorboard=True,
                out=str(out))
    ckpt = str(out / "last.safetensors")
    res = stoke.evaluate(data=tiny, checkpoint=ckpt, batch=10, per_class=True)
    r = cli("eval", "--data", tiny, "--checkpoint", ckpt, "--batch", "10", "--json",
            "--per-class")
    cli_res = json.loads(r.stdout)
    assert res["images"] == cli_res["images"] == 50
    for key in ("val_loss", "val_top1", "val_top5"):
        assert res[key] == pytest.approx(cli_res[key], abs=1e-4), key
    assert res["confusion"] == cli_res["confusion"]
    assert len(res["classes"]) == 10 and sum(map(sum, res["confusion"])) == 50
    assert res["transform"] == "center:28"
    # the run's last epoch line: the same batches give the same figures
    last = rows(out)[-1]
    assert res["val_top1"] == pytest.approx(float(last[6]), abs=1e-3)
    # errors: the library's messages
    msg = cli_error("eval", "--data", tiny, "--checkpoint", str(tmp_path / "none.safetensors"))
    with pytest.raises(stoke.StokeError, match="^" + msg.replace(".", r"\.") + "$"):
        stoke.evaluate(data=tiny, checkpoint=str(tmp_path / "none.safetensors"))
    with pytest.raises(ValueError, match="batch=0: expected an integer in 1..65536"):
        stoke.evaluate(data=tiny, checkpoint=ckpt, batch=0)
    with pytest.raises(stoke.StokeError, match="gives 24 px images; the model was trained on 28"):
        stoke.evaluate(data=tiny, checkpoint=ckpt, transform="center:24")


def test_export_writes_the_cli_files(tiny, tmp_path):
    out = tmp_path / "r"
    stoke.train(data=tiny, model="cnn", epochs=1, batch=10, no_tensorboard=True, out=str(out))
    ckpt = str(out / "last.safetensors")
    for fmt, kw, flags_ in [("onnx", {}, []),
                            ("onnx", dict(fold=False, input="u8-nhwc", opset=13),
                             ["--no-fold", "--input", "u8-nhwc", "--opset", "13"]),
                            ("safetensors", {}, [])]:
        ours = tmp_path / f"py.{fmt}"
        res = stoke.export(ckpt, out=ours, format=fmt, **kw)
        r = cli("export", ckpt, "--format", fmt, "--out", str(tmp_path / f"cli.{fmt}"), "--json",
                *flags_)
        cli_res = json.loads(r.stdout)
        assert ours.read_bytes() == (tmp_path / f"cli.{fmt}").read_bytes()
        assert res["out"] == str(ours)
        for key in ("format", "tensors", "bytes", "source_sha256"):
            assert res[key] == cli_res[key], key
    # beside the checkpoint by default
    assert stoke.export(ckpt)["out"] == str(out / "last.onnx")
    with pytest.raises(stoke.StokeError, match="is the checkpoint itself"):
        stoke.export(ckpt, out=ckpt)
    with pytest.raises(ValueError, match="format=tflite: expected onnx or safetensors"):
        stoke.export(ckpt, format="tflite")
    with pytest.raises(ValueError, match="opset=12: expected an integer in 13..17"):
        stoke.export(ckpt, opset=12)


def test_predict_gives_the_cli_lines(tiny, tmp_path):
    out = tmp_path / "r"
    stoke.train(data=tiny, model="mlp", epochs=1, batch=10, no_tensorboard=True, out=str(out))
    ckpt = str(out / "last.safetensors")
    missing = str(tmp_path / "missing.jpg")
    ours = stoke.predict(ckpt, [tiny, missing], top_k=3, workers=2)
    r = cli("predict", ckpt, tiny, missing, "--top-k", "3", "--json", "--workers", "2")
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    assert len(ours) == 51 and len(lines) == 50  # the missing file: an error item
    assert ours[-1]["path"] == missing and "error" in ours[-1]
    assert missing in r.stderr  # the CLI names it on stderr
    for a, b in zip(ours, lines):
        assert a["path"] == b["path"]
        assert [t["index"] for t in a["top"]] == [t["index"] for t in b["top"]]
        assert [t["class"] for t in a["top"]] == [t["class"] for t in b["top"]]
        for ta, tb in zip(a["top"], b["top"]):
            assert ta["probability"] == pytest.approx(tb["probability"], abs=1e-6)
    assert ours[0]["path"] == tiny + "#0"
    one = stoke.predict(ckpt, tiny + "#7", top_k=1)  # one input, not a list
    assert [i["path"] for i in one] == [tiny + "#7"]
    assert one[0]["top"][0]["index"] == ours[7]["top"][0]["index"]
    # (a batch of one: the same figures up to the GEMM's summation order)
    assert one[0]["top"][0]["probability"] == pytest.approx(ours[7]["top"][0]["probability"],
                                                            abs=1e-5)
    msg = cli_error("predict", ckpt, tiny, "--transform", "center:20")
    with pytest.raises(stoke.StokeError, match="^" + msg.replace(".", r"\.") + "$"):
        stoke.predict(ckpt, tiny, transform="center:20")
    with pytest.raises(ValueError, match="top_k=0: expected an integer in 1..1000"):
        stoke.predict(ckpt, tiny, top_k=0)
