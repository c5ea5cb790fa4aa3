"""stoke.tune() (python/src/tune_function.c over tune/session.h): the same
library calls as `stoke tune`, so the same folder and the same trials.csv
and --json figures; flags by name with '_' for '-'; on_trial hears each
trial end and may stop the sweep, which resume=True continues; Ctrl-C stops
it; errors raise with the library's messages.
Run by ctest with PYTHONPATH=BUILD/python, STOKE and STOKE_FIXTURES."""
import csv
import json
import os
import signal
import threading

import pytest

import stoke
from run_helpers import flags, cli, cli_error, tiny  # noqa: F401 (tiny: a fixture)


SPACE = {"lr": "loguniform(1e-3,0.3)", "momentum": "uniform(0.8,0.99)"}
FIXED = dict(model="mlp", batch=8, workers=2, no_tensorboard=True, samples=4, epochs=3,
             scheduler="asha", reduction=2, concurrent=2, seed=5)


def trials(out):
    """trials.csv without its wall-time column."""
    with open(os.path.join(out, "trials.csv")) as f:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]


def test_tune_writes_the_cli_trials_and_figures(tiny, tmp_path):
    res = stoke.tune(data=tiny, val=tiny, space=SPACE, out=tmp_path / "py", **FIXED)
    r = cli("tune", "--data", tiny, "--val", tiny, "--out", str(tmp_path / "cli"), "--json",
            *flags(dict(space=SPACE, **FIXED)))
    cli_res = json.loads(r.stdout)
    assert trials(tmp_path / "py") == trials(tmp_path / "cli")
    for key in ("trials", "completed", "stopped", "early_stopped", "errors", "best_trial"):
        assert res[key] == cli_res[key], key
    assert res["best_val_top1"] == pytest.approx(cli_res["best_val_top1"], abs=1e-6)
    assert res["out"] == str(tmp_path / "py") and res["complete"] is True
    assert (res["metric"], res["mode"]) == ("val_top1", "max")
    # every trial as trials.csv has it, its values as numbers
    rows = trials(tmp_path / "py")
    assert [t["trial"] for t in res["results"]] == [row["trial"] for row in rows]
    for t, row in zip(res["results"], rows):
        assert t["status"] == row["status"]
        assert t["params"]["lr"] == pytest.approx(float(row["lr"]), rel=1e-12)
        assert isinstance(t["params"]["momentum"], float)
        assert t["epochs"] == int(row["epochs_run"])
        assert t["command"] == row["command"]
        assert os.path.isdir(t["out"])
    # the best trial as best.json names it
    with open(tmp_path / "py" / "best.json") as f:
        best = json.load(f)
    assert res["best"]["trial"] == best["trial"] == res["best_trial"]
    assert res["best"]["best_value"] == pytest.approx(best["metric"]["value"], abs=1e-6)
    assert (tmp_path / "py" / "best.safetensors").exists()


def test_on_trial_hears_each_end_and_stops_a_sweep_resume_continues(tiny, tmp_path):
    heard = []
    stoke.tune(data=tiny, space=SPACE, out=tmp_path / "whole", on_trial=heard.append, **FIXED)
    assert sorted(t["trial"] for t in heard) == ["0000", "0001", "0002", "0003"]
    assert all(t["status"] != "PENDING" for t in heard)
    # True after the first trial ends: the sweep stops, resumable
    res = stoke.tune(data=tiny, space=SPACE, out=tmp_path / "cut", on_trial=lambda t: True,
                     **FIXED)
    assert res["complete"] is False
    assert any(t["status"] == "PENDING" for t in res["results"])
    res = stoke.tune(resume=True, out=tmp_path / "cut")
    assert res["complete"] is True
    assert trials(tmp_path / "cut") == trials(tmp_path / "whole")


def test_an_exception_in_on_trial_stops_the_sweep_and_is_raised(tiny, tmp_path):
    def boom(t):
        raise RuntimeError("from on_trial")

    with pytest.raises(RuntimeError, match="from on_trial"):
        stoke.tune(data=tiny, space=SPACE, out=tmp_path / "s", on_trial=boom, **FIXED)
    assert (tmp_path / "s" / "trials.csv").exists()


def test_errors_are_the_cli_messages(tiny, tmp_path):
    bad_key = {"lr": "loguniform(1e-3,0.3)", "data": "choice(a,b)"}
    with pytest.raises(ValueError) as e:
        stoke.tune(data=tiny, model="mlp", space=bad_key, out=tmp_path / "a")
    assert str(e.value) == cli_error("tune", "--data", tiny, "--model", "mlp", "--space",
                                     "lr=loguniform(1e-3,0.3)", "--space", "data=choice(a,b)",
                                     "--out", str(tmp_path / "b"))
    with pytest.raises(ValueError, match=r"'sample': no such setting \(did you mean samples\?\)"):
        stoke.tune(data=tiny, model="mlp", space=SPACE, sample=3)
    with pytest.raises(ValueError, match="'json' is stoke tune's command line"):
        stoke.tune(data=tiny, model="mlp", space=SPACE, json=True)
    with pytest.raises(ValueError, match="expected an integer"):
        stoke.tune(data=tiny, model="mlp", space=SPACE, samples=0)
    # a folder already used is the library's error, and is left as it was
    used = tmp_path / "used"
    used.mkdir()
    (used / "mine.txt").write_text("keep")
    with pytest.raises(stoke.StokeError, match="already holds something"):
        stoke.tune(data=tiny, model="mlp", space=SPACE, out=used)
    assert os.listdir(used) == ["mine.txt"]
    with pytest.raises(ValueError, match="no such sweep"):
        stoke.tune(resume=True, out=tmp_path / "none")


def test_keyboard_interrupt_stops_the_sweep_and_resume_goes_on(tiny, tmp_path):
    # two trials of thousands of short epochs, interrupted after 1 s
    out = tmp_path / "s"
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        stoke.tune(data=tiny, model="mlp", batch=10, no_tensorboard=True, space=SPACE,
                   samples=2, epochs=100000, out=out)
    timer.join()
    assert [r["status"] for r in trials(out)] == ["PENDING", "PENDING"]
    res = stoke.tune(resume=True, out=out, stop_after=2)
    assert res["complete"] is False and res["trials"] == 2
