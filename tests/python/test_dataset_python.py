"""stoke.pack() and stoke.info() (python/src/dataset_functions.c): the same
library calls as `stoke pack` / `stoke info`, so the same bytes, the same
summaries and the same error messages; Ctrl-C during a pack leaves nothing.
Run by ctest with PYTHONPATH=BUILD/python, STOKE and STOKE_FIXTURES."""
import json
import os
import pathlib
import signal
import subprocess
import threading

import numpy as np
import pytest

import stoke

STOKE = os.environ["STOKE"]
FIX = os.environ["STOKE_FIXTURES"]


def cli(*args, ok=True):
    r = subprocess.run([STOKE, *args], capture_output=True, text=True)
    assert (r.returncode == 0) == ok, r.stderr
    return r


def cli_error(*args):
    """The CLI's message, without its "stoke: " prefix."""
    return cli(*args, ok=False).stderr.strip().splitlines()[-1].split(": ", 1)[1]


def without_timing(summary):
    return {k: v for k, v in summary.items() if k not in ("seconds", "images_per_sec")}


@pytest.mark.parametrize("src,kw,flags", [
    ("idx", dict(split="train"), ["--split", "train"]),
    ("good", dict(workers=3), ["--workers", "3"]),
    ("good", dict(shuffle=True, seed=5, max_side=16, quality=80),
     ["--shuffle", "--seed", "5", "--max-side", "16", "--quality", "80"]),
    ("good", dict(restart=0), ["--restart", "0"]),
    ("good", dict(restart=1, workers=2), ["--restart", "1", "--workers", "2"]),
    ("good", dict(store="raw", workers=2), ["--store", "raw", "--workers", "2"]),
])
def test_pack_writes_the_cli_bytes(tmp_path, src, kw, flags):
    ours = tmp_path / "py.stoke"
    summary = stoke.pack(pathlib.Path(FIX) / src, ours, **kw)  # os.PathLike accepted
    r = cli("pack", "--json", *flags, f"{FIX}/{src}", str(tmp_path / "cli.stoke"))
    assert ours.read_bytes() == (tmp_path / "cli.stoke").read_bytes()
    assert without_timing(summary) == without_timing(json.loads(r.stdout))
    assert summary["seconds"] > 0


def test_pack_shards_read_as_one_dataset(tmp_path):
    # shard_size as --shard-size: the shards and their list, byte for byte
    # the CLI's; a Loader over the list delivers what one file does
    summary = stoke.pack(f"{FIX}/good", tmp_path / "py.stoke", shard_size=1 << 20)
    cli("pack", "--shard-size", "1M", f"{FIX}/good", str(tmp_path / "cli.stoke"))
    assert summary["shards"] == 1
    assert ((tmp_path / "py-00000-of-00001.stoke").read_bytes()
            == (tmp_path / "cli-00000-of-00001.stoke").read_bytes())
    stoke.pack(f"{FIX}/good", tmp_path / "one.stoke")

    def images(path):
        return [np.from_dlpack(x).tobytes() for x, _ in stoke.Loader(str(path), 4, transform="center:16",
                                                                seed=1)]
    assert images(tmp_path / "py.shards") == images(tmp_path / "one.stoke")
    with pytest.raises(ValueError, match="shard_size"):
        stoke.pack(f"{FIX}/good", tmp_path / "x.stoke", shard_size=1000)


def test_info_is_stoke_info_json(tmp_path):
    path = str(tmp_path / "j.stoke")
    stoke.pack(f"{FIX}/good", path)
    ours = stoke.info(path)
    theirs = json.loads(cli("info", "--json", path).stdout)
    assert ours.keys() == theirs.keys()
    for k in ours:
        if k in ("mean", "std"):  # the CLI prints 6 decimals
            assert ours[k] == pytest.approx(theirs[k], abs=1e-6)
        else:
            assert ours[k] == theirs[k], k
    assert ours["records"] == 11 and ours["encoding"] == "jpeg"


def test_errors_carry_the_cli_messages(tmp_path):
    out = tmp_path / "out.stoke"
    bad = tmp_path / "bad"
    (bad / "a").mkdir(parents=True)
    (bad / "a" / "truncated.jpg").write_bytes(pathlib.Path(FIX, "bad", "truncated.jpg").read_bytes())
    cases = [
        (dict(src=str(tmp_path / "missing")), ["pack", str(tmp_path / "missing")]),
        (dict(src=str(bad)), ["pack", str(bad)]),
        (dict(src=f"{FIX}/idx", kind="cifar10"), ["pack", "--from", "cifar10", f"{FIX}/idx"]),
    ]
    for kw, args in cases:
        with pytest.raises(stoke.StokeError) as e:
            stoke.pack(out=out, **kw)
        assert str(e.value) == cli_error(*args, str(out)), kw
        assert not out.exists()
    with pytest.raises(stoke.StokeError, match="OUT is a folder"):
        stoke.pack(f"{FIX}/idx", tmp_path)
    with pytest.raises(stoke.StokeError, match="^split x: expected train or test"):
        stoke.pack(f"{FIX}/idx", out, split="x")
    with pytest.raises(stoke.StokeError, match="^store png: expected jpeg or raw"):
        stoke.pack(f"{FIX}/good", out, store="png")
    with pytest.raises(stoke.StokeError, match="^max_side with store raw"):
        stoke.pack(f"{FIX}/good", out, store="raw", max_side=16)
    # every integer in the CLI's range, never wrapped into another value
    for kw, text in [(dict(quality=0), "quality=0: expected an integer in 1..100"),
                     (dict(workers=-1), "workers=-1: expected an integer in 0..1024"),
                     (dict(max_pixels=-1), "max_pixels=-1: expected an integer in 1..9223372036854775807"),
                     (dict(seed=-1), "seed=-1: expected an integer in 0..9223372036854775807"),
                     (dict(seed=2**64), "seed=18446744073709551616: expected an integer in 0.."),
                     (dict(max_side=-1), "max_side=-1: expected an integer in 0..65500"),
                     (dict(restart=65), "restart=65: expected an integer in 0..64")]:
        with pytest.raises(ValueError) as e:
            stoke.pack(f"{FIX}/good", out, **kw)
        assert str(e.value).startswith(text), kw
        assert not out.exists()
    with pytest.raises(TypeError, match="quality='high': expected an integer"):
        stoke.pack(f"{FIX}/good", out, quality="high")
    damaged = tmp_path / "damaged.stoke"
    damaged.write_bytes(b"\0" * 100)
    for path in (damaged, tmp_path / "none.stoke"):
        with pytest.raises(stoke.StokeError) as e:
            stoke.info(path)
        assert str(e.value) == cli_error("info", str(path))
    assert list(tmp_path.glob("*.tmp*")) == []


def test_skip_bad_lists_what_it_skipped(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    for name in ("truncated.jpg", "text.jpg"):
        (src / "a" / name).write_bytes(pathlib.Path(FIX, "bad", name).read_bytes())
    (src / "a" / "good.jpg").write_bytes(pathlib.Path(FIX, "good", "cat", "cat_0.jpg").read_bytes())
    out = tmp_path / "s.stoke"
    summary = stoke.pack(src, out, skip_bad=True)
    assert summary["records"] == 1 and summary["skipped"] == 2
    listed = (tmp_path / "s.stoke.skipped.txt").read_text()
    assert "truncated.jpg" in listed and "text.jpg" in listed


def test_keyboard_interrupt_cancels_the_pack(tmp_path):
    # 2,000 links to one 1024x1024 photo-sized JPEG, one worker decoding each
    # to validate it: many seconds of work, interrupted after 0.2 s
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    big = tmp_path / "big.jpg"
    Image.fromarray(rng.integers(0, 255, (1024, 1024, 3), dtype=np.uint8)).save(big, quality=90)
    src = tmp_path / "many"
    (src / "c").mkdir(parents=True)
    for i in range(2000):
        os.link(big, src / "c" / f"{i}.jpg")
    out = tmp_path / "many.stoke"
    timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        stoke.pack(src, out, workers=1)
    timer.join()
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jpg", "many"]  # no temporary left
