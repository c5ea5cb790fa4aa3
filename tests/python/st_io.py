"""Minimal safetensors reading and writing with NumPy (Debian has no
python3-safetensors): 8-byte little-endian header length, JSON header,
raw little-endian data. Used by the fixture script and the PyTorch checks."""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64,
           "U8": np.uint8, "F64": np.float64}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def load(path):
    """Returns (tensors: dict name -> ndarray, metadata: dict)."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    meta = header.pop("__metadata__", {})
    data = blob[8 + hlen:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        arr = np.frombuffer(data[b:end], dtype=_DTYPES[e["dtype"]]).reshape(e["shape"])
        out[name] = arr.copy()
    return out, meta


def save(path, tensors, metadata=None):
    header, chunks, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, arr in tensors.items():
        arr = np.array(arr, order="C", copy=False)  # keeps 0-d shapes (ascontiguousarray does not)
        raw = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
