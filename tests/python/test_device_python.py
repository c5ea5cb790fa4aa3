"""stoke.Loader(device="cuda"): batches copied to the GPU by the copy engine
into a ring of device buffers (python/src/device_ring.h), exported with
DLPack's CUDA device type. Runs where the module has a CUDA backend and a
GPU answers: the STOKE_CUDA=EMULATE build (tests/cuda_host: device memory is
host memory, so the bytes are read back with ctypes) or a real GPU
(scripts/gpu-check.sh: read back through torch). Skipped elsewhere."""
import ctypes
import os
import subprocess

import pytest

import stoke

STOKE = os.environ["STOKE"]
FIX = os.environ["STOKE_FIXTURES"]
EMULATED = os.environ.get("STOKE_CUDA_EMULATED") == "ON"


def gpu_or_skip(path):
    try:
        stoke.Loader(path, 1, device="cuda").close()
    except stoke.StokeError as e:
        if EMULATED:  # the emulated GPU is always there
            raise
        pytest.skip(f"no GPU for the module: {e}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data") / "tiny.stoke")
    subprocess.run([STOKE, "pack", "--from", "idx", FIX + "/idx", path], check=True,
                   capture_output=True)
    gpu_or_skip(path)
    return path


def host_bytes(arr, nbytes):
    """The bytes an Array views, wherever they are."""
    if arr.__dlpack_device__()[0] == 1 or EMULATED:
        return ctypes.string_at(arr.data_ptr, nbytes)
    import torch
    return torch.from_dlpack(arr).cpu().contiguous().numpy().tobytes()


def plain(path, **kw):
    args = dict(transform="center:28", shuffle=False, workers=2)
    args.update(kw)
    return stoke.Loader(path, 8, **args)


def test_device_batches_equal_host_batches(tiny):
    for output, elem in (("u8", 1), ("f32", 4)):
        host = [(host_bytes(x, x.shape[0] * 784 * elem), host_bytes(y, 8 * y.shape[0]))
                for x, y in plain(tiny, output=output)]  # labels int64
        with plain(tiny, device="cuda", output=output) as loader:
            dev = []
            for x, y in loader:
                assert x.__dlpack_device__() == (2, 0) and y.__dlpack_device__() == (2, 0)
                assert y.dtype == "int64"
                dev.append((host_bytes(x, x.shape[0] * 784 * elem), host_bytes(y, 8 * y.shape[0])))
        assert len(dev) == len(host) == 7
        for k, (d, h) in enumerate(zip(dev, host)):
            n = len(d[0])
            assert d[0] == h[0][:n] and d[1] == h[1][:len(d[1])], (output, k)


def test_held_device_batch_is_not_overwritten(tiny):
    loader = plain(tiny, device="cuda", prefetch=3)
    it = iter(loader)
    x0, y0 = next(it)
    first = host_bytes(x0, 8 * 784)
    for _ in range(2):  # two more epochs through the two other buffers
        for x, y in loader:
            del x, y
    assert host_bytes(x0, 8 * 784) == first
    x1, _ = next(iter(loader))
    x2, _ = next(iter(loader))
    assert len({x0.data_ptr, x1.data_ptr, x2.data_ptr}) == 3
    with pytest.raises(stoke.StokeError, match="device buffers are held"):
        next(iter(loader))
    del x1
    assert next(iter(loader))[0].data_ptr != x0.data_ptr
    loader.close()  # with x0 and x2 alive: freed when they go
    del x0, x2


def test_dlpack_arguments_on_the_gpu(tiny):
    with plain(tiny, device="cuda") as loader:
        x, _ = next(iter(loader))
        assert "dltensor_versioned" in repr(x.__dlpack__(stream=2, max_version=(1, 0)))
        assert '"dltensor"' in repr(x.__dlpack__(stream=1))
        assert '"dltensor"' in repr(x.__dlpack__(stream=-1))
        with pytest.raises(ValueError, match="stream 0"):
            x.__dlpack__(stream=0)
        with pytest.raises(BufferError, match="GPU 0"):
            x.__dlpack__(dl_device=(1, 0))
        x.__dlpack__(dl_device=(2, 0))


def test_device_refusals(tiny):
    with pytest.raises(ValueError, match="'cpu', 'cuda' or 'cuda:N'"):
        stoke.Loader(tiny, 8, device="gpu")
    with pytest.raises(ValueError, match="prefetch=40"):
        stoke.Loader(tiny, 8, device="cuda", prefetch=40)
    with pytest.raises(stoke.StokeError, match="device=cuda:7: GPU 7"):
        stoke.Loader(tiny, 8, device="cuda:7")


@pytest.mark.skipif(EMULATED, reason="torch reads CUDA memory only on a real GPU")
def test_torch_takes_device_batches(tiny):
    import torch
    with plain(tiny, device="cuda") as loader:
        x, y = next(iter(loader))
        t = torch.from_dlpack(x)
        assert t.is_cuda and t.data_ptr() == x.data_ptr and t.shape == (8, 28, 28, 1)
        assert torch.from_dlpack(y).is_cuda
