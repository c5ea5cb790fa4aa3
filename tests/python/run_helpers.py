"""What the tests of stoke.train and stoke.tune share (test_train_python.py,
test_tune_python.py): the small dataset they train on and the CLI they are
compared with. Environment: STOKE (the binary), STOKE_FIXTURES."""
import os
import subprocess

import pytest

import stoke

STOKE = os.environ["STOKE"]
FIX = os.environ["STOKE_FIXTURES"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """50 random 28x28 images of 10 classes (the fixtures' IDX files)."""
    path = tmp_path_factory.mktemp("data") / "tiny.stoke"
    stoke.pack(f"{FIX}/idx", path, kind="idx")
    return str(path)


def cli(*args, ok=True):
    """`stoke ARGS`, which must succeed (or, ok=False, fail)."""
    r = subprocess.run([STOKE, *args], capture_output=True, text=True)
    assert (r.returncode == 0) == ok, r.stderr
    return r


def cli_error(*args):
    """The CLI's message, without its "stoke tune: " or "stoke: " prefix."""
    lines = cli(*args, ok=False).stderr.strip().splitlines()
    return next(l for l in lines if l.startswith("stoke")).split(": ", 1)[1]


def flags(settings):
    """Keywords as the CLI's flags: True a switch alone, a list the flag per
    item, a dict (a tune space) KEY=DIST per entry."""
    out = []
    for k, v in settings.items():
        name = "--" + k.replace("_", "-")
        if v is True:
            out.append(name)
        elif isinstance(v, list):
            for item in v:
                out += [name, item]
        elif isinstance(v, dict):
            for key, dist in v.items():
                out += [name, f"{key}={dist}"]
        else:
            out += [name, str(v)]
    return out
