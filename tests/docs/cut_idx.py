"""The first records of each Fashion-MNIST IDX file, as IDX files (gzip, the
same headers): TRAIN training and TEST test images (default 1,000 and 200).

    cut_idx.py SRC_DIR OUT_DIR [TRAIN TEST]
"""
import gzip
import os
import struct
import sys

src, out = sys.argv[1], sys.argv[2]
train, test = (int(a) for a in sys.argv[3:5]) if len(sys.argv) > 4 else (1000, 200)
os.makedirs(out, exist_ok=True)
for split, n in (("train", train), ("t10k", test)):
    for kind, item in (("images-idx3", 784), ("labels-idx1", 1)):
        name = f"{split}-{kind}-ubyte.gz"
        data = gzip.open(os.path.join(src, name)).read()
        head = 16 if item == 784 else 8
        header = bytearray(data[:head])
        struct.pack_into(">I", header, 4, n)
        gzip.open(os.path.join(out, name), "wb").write(bytes(header) + data[head:head + n * item])
