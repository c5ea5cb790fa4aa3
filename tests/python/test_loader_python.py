"""The `stoke` Python package (python/): the loader's batches in Python,
viewed without a copy through DLPack, their lifetime, resume, sharding,
errors and memory. Run by ctest with PYTHONPATH=BUILD/python, STOKE (the
binary, to pack fixtures and to compare with `stoke peek`) and
STOKE_FIXTURES."""
import gc
import os
import signal
import subprocess
import threading
import sys

import numpy as np
import pytest
import torch

import stoke

STOKE = os.environ["STOKE"]
FIX = os.environ["STOKE_FIXTURES"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """50 random 28x28 gray images, 10 classes (tests/fixtures/idx)."""
    path = str(tmp_path_factory.mktemp("data") / "tiny.stoke")
    subprocess.run([STOKE, "pack", "--from", "idx", FIX + "/idx", path], check=True,
                   capture_output=True)
    return path


@pytest.fixture(scope="module")
def jpeg(tmp_path_factory):
    """11 JPEGs in 3 classes (tests/fixtures/good)."""
    path = str(tmp_path_factory.mktemp("data") / "jpeg.stoke")
    subprocess.run([STOKE, "pack", FIX + "/good", path], check=True, capture_output=True)
    return path


def plain(path, **kw):
    """In file order, deterministic pixels."""
    args = dict(transform="center:28", shuffle=False, workers=2)
    args.update(kw)
    return stoke.Loader(path, 8, **args)


def test_zero_copy_views(tiny):
    with plain(tiny) as loader:
        images, labels = next(iter(loader))
        t = torch.from_dlpack(images)
        a = np.from_dlpack(images)
        assert t.shape == (8, 28, 28, 1) and t.dtype == torch.uint8
        assert t.data_ptr() == images.data_ptr == a.ctypes.data  # the ring itself
        y = torch.from_dlpack(labels)
        assert y.dtype == torch.int64 and labels.dtype == "int64"  # PyTorch's label type
        out = torch.zeros(8, 10, requires_grad=True)
        torch.nn.functional.cross_entropy(out, y).backward()  # takes them as they are
        t[0, 0, 0, 0] = 123  # one memory: a write through one view shows in the other
        assert a[0, 0, 0, 0] == 123
        nchw = torch.from_dlpack(plain(tiny, layout="NCHW").__iter__().__next__()[0])
        assert nchw.shape == (8, 1, 28, 28)


def test_versioned_and_legacy_capsules(tiny):
    with plain(tiny) as loader:
        images, _ = next(iter(loader))
        assert "dltensor_versioned" in repr(images.__dlpack__(max_version=(1, 0)))
        assert '"dltensor"' in repr(images.__dlpack__())
        assert images.__dlpack_device__() == (1, 0)
        with pytest.raises(BufferError):
            images.__dlpack__(copy=True)


def read_pgm(path):
    with open(path, "rb") as f:
        data = f.read()
    parts = data.split(maxsplit=4)
    w, h = int(parts[1]), int(parts[2])
    return np.frombuffer(parts[4][: w * h], dtype=np.uint8).reshape(h, w)


def test_values_equal_stoke_peek(tiny, tmp_path):
    with plain(tiny) as loader:
        first = [torch.from_dlpack(x).clone() for x, _ in loader][:2]
    for k in (0, 3, 9):
        out = str(tmp_path / f"{k}.pgm")
        subprocess.run([STOKE, "peek", "--index", str(k), "--transform", "center:28", "--out",
                        out, tiny], check=True, capture_output=True)
        want = read_pgm(out)
        got = first[k // 8][k % 8, :, :, 0].numpy()
        assert np.array_equal(got, want), k


def test_held_batch_is_not_overwritten_and_comes_back(jpeg):
    loader = stoke.Loader(jpeg, 2, transform="rrc:32,flip", workers=2, prefetch=3)
    x0, y0 = next(iter(loader))
    kept = torch.from_dlpack(x0)
    copy = kept.clone()
    del x0, y0
    for epoch in range(3):  # 3 more epochs through the other 2 buffers
        loader.set_epoch(epoch + 1)
        for x, y in loader:
            pass
        del x, y
    assert torch.equal(kept, copy)  # the view still holds its batch
    del kept
    gc.collect()
    loader.set_epoch(0)
    it = iter(loader)
    held = [next(it) for _ in range(3)]  # every buffer of the ring
    with pytest.raises(stoke.StokeError, match="ring buffers are held"):
        next(it)
    del held[0]  # one goes back
    assert next(it)[0].shape[0] == 2
    loader.close()


def test_resume_from_state_dict(tiny):
    a = stoke.Loader(tiny, 8, workers=2, seed=5)  # shuffled, augmented
    a.set_epoch(2)
    it = iter(a)
    for _ in range(3):
        next(it)
    state = a.state_dict()
    assert state == {"seed": 5, "epoch": 2, "cursor": 3}
    rest_a = [(torch.from_dlpack(x).clone(), torch.from_dlpack(y).clone()) for x, y in it]
    b = stoke.Loader(tiny, 8, workers=1, seed=5)
    b.load_state_dict(state)
    rest_b = [(torch.from_dlpack(x).clone(), torch.from_dlpack(y).clone()) for x, y in b]
    assert len(rest_a) == len(rest_b) == 4
    for (xa, ya), (xb, yb) in zip(rest_a, rest_b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    with pytest.raises(stoke.StokeError, match="seed"):
        b.load_state_dict({"seed": 6, "epoch": 0, "cursor": 0})


def samples(loader):
    return sorted(bytes(np.from_dlpack(x)[j]) for x, _ in loader
                  for j in range(x.shape[0]))


def test_rank_shards_partition_an_epoch(tiny):
    whole = samples(stoke.Loader(tiny, 5, transform="center:28", seed=3))
    parts = [samples(stoke.Loader(tiny, 5, transform="center:28", seed=3, rank=r, world_size=2))
             for r in range(2)]
    assert len(parts[0]) == len(parts[1]) == 25
    assert sorted(parts[0] + parts[1]) == whole


def test_read_orders(tiny):
    # every order delivers every record once an epoch; block and random are
    # functions of the seed; sequential is the file's order
    def ordered(loader):
        return [bytes(np.from_dlpack(x)[j]) for x, _ in loader for j in range(x.shape[0])]

    seq = ordered(stoke.Loader(tiny, 5, transform="center:28", order="sequential"))
    assert seq == ordered(stoke.Loader(tiny, 5, transform="center:28", shuffle=False))
    for order in ("random", "block"):
        a = ordered(stoke.Loader(tiny, 5, transform="center:28", seed=3, order=order))
        b = ordered(stoke.Loader(tiny, 5, transform="center:28", seed=3, order=order))
        assert a == b and a != seq and sorted(a) == sorted(seq), order
    with pytest.raises(ValueError, match="order=spiral"):
        stoke.Loader(tiny, 5, order="spiral")
    # the static cache and the block parameters: the same records, in the
    # same order as without the cache; their ranges are the CLI's
    cached = ordered(stoke.Loader(tiny, 5, transform="center:28", seed=3, order="block",
                                  cache_mb=1, block_mib=1, block_window=2))
    assert cached == ordered(stoke.Loader(tiny, 5, transform="center:28", seed=3, order="block",
                                          block_mib=1, block_window=2))
    assert sorted(cached) == sorted(seq)
    # cache_mib is the CLI's name (--cache-mib); cache_mb, the former one, still works
    assert cached == ordered(stoke.Loader(tiny, 5, transform="center:28", seed=3, order="block",
                                          cache_mib=1, block_mib=1, block_window=2))
    with pytest.raises(TypeError, match="cache_mib and cache_mb are one setting"):
        stoke.Loader(tiny, 5, cache_mib=1, cache_mb=1)
    for bad in ({"cache_mb": -1}, {"cache_mib": -1}, {"block_mib": 0}, {"block_window": 1025}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            stoke.Loader(tiny, 5, **bad)


def test_memory_limit_typo_is_refused(tiny, monkeypatch):
    # STOKE_MEMORY_LIMIT_MB that is not a number: refused as the CLI refuses it
    monkeypatch.setenv("STOKE_MEMORY_LIMIT_MB", "abc")
    with pytest.raises(stoke.StokeError, match="STOKE_MEMORY_LIMIT_MB=abc: expected a number"):
        stoke.Loader(tiny, 5)


def cli_message(*args):
    r = subprocess.run([STOKE, "bench", *args], capture_output=True, text=True)
    assert r.returncode != 0
    return r.stderr.strip().splitlines()[0].split(": ", 1)[1]  # after "stoke: " / "stoke bench: "


def test_errors_carry_the_cli_messages(tiny, tmp_path):
    missing = str(tmp_path / "missing.stoke")
    with pytest.raises(stoke.StokeError) as e:
        stoke.Loader(missing, 8)
    assert str(e.value) == cli_message(missing)
    with pytest.raises(stoke.StokeError) as e:
        stoke.Loader(tiny, 8, transform="rrc:0")
    assert str(e.value) == cli_message("--transform", "rrc:0", tiny)
    with pytest.raises(ValueError, match="layout"):
        stoke.Loader(tiny, 8, layout="HWNC")
    # batch transforms are stoke train's, not the loader's: refused, not ignored
    with pytest.raises(ValueError, match="erase, mixup and cutmix are batch transforms"):
        stoke.Loader(tiny, 8, transform="pad:4,crop:28,mixup:0.2")
    # pixel ops run in the loader
    loader = stoke.Loader(tiny, 8, transform="pad:4,crop:28,randomrotation:10,autocontrast")
    assert next(iter(loader))[0].shape[0] == 8
    loader.close()
    loader = plain(tiny)
    loader.close()
    with pytest.raises(ValueError, match="closed"):
        iter(loader)


def test_arguments_in_the_library_ranges(tiny):
    cases = [(dict(seed=2**64), "seed=18446744073709551616: expected an integer in 0..9223372036854775807"),
             (dict(seed=-1), "seed=-1: expected an integer in 0..9223372036854775807"),
             (dict(world_size=0), "world_size=0: expected an integer in 1..65536"),
             (dict(world_size=-3), "world_size=-3: expected an integer in 1..65536"),
             (dict(world_size=2, rank=2), "rank=2: expected an integer in 0..1"),
             (dict(workers=-5), "workers=-5: expected an integer in 0..1024"),
             (dict(prefetch=0), "prefetch=0: expected an integer in 1..64")]
    for kw, text in cases:
        with pytest.raises(ValueError) as e:
            stoke.Loader(tiny, 8, **kw)
        assert str(e.value) == text, kw
    for batch in (0, -1, 2**70):
        with pytest.raises(ValueError, match=f"batch_size={batch}: expected an integer in 1..65536"):
            stoke.Loader(tiny, batch)
    with pytest.raises(TypeError, match="expected an integer"):
        stoke.Loader(tiny, 8, seed=1.5)
    # a size meant for another dataset: refused before anything is allocated
    with pytest.raises(stoke.StokeError) as e:
        stoke.Loader(tiny, 8, transform="rrc:16384")
    assert "makes 16384x16384 images from images of at most 28x28 (more than 8 times the side)" \
        in str(e.value)
    # 8 times is fine (MNIST at 224 px for an ImageNet model)
    with stoke.Loader(tiny, 2, transform="resize:224,center:224", workers=1) as l:
        assert next(iter(l))[0].shape == (2, 224, 224, 1)


def test_array_and_dlpack_arguments(tiny):
    with pytest.raises(TypeError, match="cannot be created directly"):
        stoke.Array()
    with plain(tiny) as loader:
        images, _ = next(iter(loader))
        for kw in (dict(max_version="x"), dict(dl_device="cpu")):
            with pytest.raises(TypeError, match="expected a"):
                images.__dlpack__(**kw)
        del images, _


@pytest.mark.parametrize("delay", [0, 0.001, 0.02])
def test_close_from_another_thread_while_next_runs(jpeg, delay):
    # one worker decoding 128-px crops: next() waits, or starts an epoch
    for _ in range(4):
        loader = stoke.Loader(jpeg, 11, transform="rrc:128,flip", workers=1, prefetch=2)
        seen = []

        def consume():
            try:
                for _ in range(50):
                    for x, y in loader:
                        del x, y
            except ValueError as e:
                seen.append(str(e))

        t = threading.Thread(target=consume)
        t.start()
        threading.Event().wait(delay)
        loader.close()  # waits for the other thread to leave the loader
        t.join(30)
        assert not t.is_alive()
        assert seen and "closed" in seen[0]
        with pytest.raises(ValueError, match="closed"):
            next(iter(loader))


def test_two_threads_cannot_consume_at_once(jpeg):
    loader = stoke.Loader(jpeg, 11, transform="rrc:128,flip", workers=1, prefetch=2)
    errors = []

    def consume():
        try:
            for _ in range(20):
                for x, y in loader:
                    del x, y
        except RuntimeError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=consume) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors and "another thread is using this loader" in errors[0]
    loader.close()


def test_a_forked_child_gets_an_error_not_a_hang(tiny):
    import multiprocessing as mp
    loader = plain(tiny)
    next(iter(loader))
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child():
        try:
            next(iter(loader))
            q.put("no error")
        except stoke.StokeError as e:
            q.put(str(e))
        loader.close()  # a no-op here: the parent's threads are not in this process

    p = ctx.Process(target=child)
    p.start()
    p.join(30)
    assert p.exitcode == 0, "the child hung or crashed"
    msg = q.get(timeout=5)
    assert "a forked child" in msg and "open a new Loader in the child" in msg
    assert sum(x.shape[0] for x, _ in loader) == 50 - 8  # the parent goes on with its pass
    loader.close()


def test_python_conventions():
    import inspect
    assert str(inspect.signature(stoke.pack)).startswith("(src, out, *, labels=None, kind=None")
    assert str(inspect.signature(stoke.info)) == "(path, /)"
    assert str(inspect.signature(stoke.Loader)).startswith("(path, batch_size, *, transform=None")
    assert str(inspect.signature(stoke.Loader.set_epoch)) == "(self, epoch, /)"
    assert str(inspect.signature(stoke.Array.__dlpack__)).startswith("(self, /, *, stream=None")
    assert stoke.__version__ == "0.1.0"
    pkg = os.path.dirname(stoke.__file__)
    for f in ("py.typed", "_stoke.pyi"):
        assert os.path.exists(os.path.join(pkg, f)), f


def test_close_with_live_batches(tiny):
    loader = plain(tiny)
    x, _ = next(iter(loader))
    t = torch.from_dlpack(x)
    loader.close()  # the ring stays while t views it
    assert t.sum().item() >= 0
    del x, t, _
    gc.collect()


def test_keyboard_interrupt_while_waiting(jpeg):
    # one worker decoding 128-px crops: next() waits for most of each batch
    loader = stoke.Loader(jpeg, 11, transform="rrc:128,flip", workers=1, prefetch=2)
    timer = threading.Timer(0.02, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in range(200):  # about 4 s without the interrupt
            for x, y in loader:
                pass
    timer.join()
    assert sum(x.shape[0] for x, _ in loader) >= 0  # still usable after
    loader.close()


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(os.environ.get("STOKE_SANITIZE", "") != "",
                    reason="ASan's quarantine keeps freed memory: RSS says nothing there")
def test_no_leak_over_epochs(jpeg):
    loader = stoke.Loader(jpeg, 2, transform="rrc:32,flip", workers=2)
    def epoch():
        for x, y in loader:
            torch.from_dlpack(x).float().mean()
            np.from_dlpack(y).sum()
    for _ in range(2):
        epoch()
    gc.collect()
    before = rss_mb()
    for _ in range(10):
        epoch()
    gc.collect()
    assert rss_mb() - before < 2.0, (before, rss_mb())
    loader.close()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """A corrupt JPEG packed without validation after two good ones (sorted names): the
    record's CRC is right, its decode is not (record 2, a/corrupt.jpg)."""
    d = tmp_path_factory.mktemp("damaged")
    (d / "src" / "a").mkdir(parents=True)
    for name, src in (("corrupt.jpg", "bad/corrupt.jpg"), ("cat_0.jpg", "good/cat/cat_0.jpg"),
                      ("cat_1.jpg", "good/cat/cat_1.jpg")):
        (d / "src" / "a" / name).write_bytes(open(os.path.join(FIX, src), "rb").read())
    path = str(d / "damaged.stoke")
    subprocess.run([STOKE, "pack", "--no-validate", str(d / "src"), path], check=True,
                   capture_output=True)
    return path


def warnings_of(text):
    return [line for line in text.splitlines() if "warning" in line]


def test_bad_record_skipped_with_the_cli_warning(damaged, capfd):
    loader = stoke.Loader(damaged, 3, transform="center:16", shuffle=False, workers=1)
    images, labels = next(iter(loader))
    assert images.shape[0] == 3  # the bad record replaced, the batch full
    assert loader.stats["bad_records"] == 1
    del images, labels
    loader.close()
    ours = warnings_of(capfd.readouterr().err)
    r = subprocess.run([STOKE, "bench", "--batch", "3", "--transform", "center:16", "--workers",
                        "1", "--epochs", "1", damaged], capture_output=True, text=True)
    assert ours and set(ours) == set(warnings_of(r.stderr))  # bench may run more passes
    assert "record 2 (a/corrupt.jpg)" in ours[0]


def test_bad_record_raises_with_on_bad_error(damaged):
    loader = stoke.Loader(damaged, 3, transform="center:16", shuffle=False, workers=1,
                          on_bad="error")
    with pytest.raises(stoke.StokeError, match=r"record 2 \(a/corrupt.jpg\): bad JPEG"):
        next(iter(loader))
    with pytest.raises(ValueError, match="on_bad"):
        stoke.Loader(damaged, 3, on_bad="ignore")


def test_flipped_byte_in_a_record(jpeg, tmp_path):
    data = bytearray(open(jpeg, "rb").read())
    at = data.find(b"\xff\xd8\xff", 8192) + 200  # inside the first JPEG record's bytes
    data[at] ^= 0xFF
    path = tmp_path / "flipped.stoke"
    path.write_bytes(bytes(data))
    with stoke.Loader(path, 11, transform="center:16", shuffle=False, on_bad="error") as loader:
        with pytest.raises(stoke.StokeError, match="CRC mismatch"):
            next(iter(loader))
