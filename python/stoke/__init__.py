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
`stoke info --json` as Python calls.
"""
from ._stoke import Array, Loader, StokeError, __version__, info, pack

__all__ = ["Array", "Loader", "StokeError", "info", "pack", "__version__"]
