#!/usr/bin/python3
"""A reader of Stoke dataset files written from docs/FORMAT.md alone, with
python3-lmdb, to prove the format document is enough. Used by the test suite:

    read_stoke.py folder DATA.stoke SRC_DIR       packed from an image folder
    read_stoke.py idx DATA.stoke IMAGES LABELS    packed from IDX files

Checks the count, every label, name, header field and CRC-32C, and compares
payloads with the source (byte-equal for baseline JPEGs stored as they are;
for JPEGs given restart markers, the same pixels by PIL's decode; pixel-equal
for IDX). Prints "ok ..." and exits 0, or raises.
"""
import gzip
import os
import struct
import sys

import lmdb

HEADER = struct.Struct("<4sBBBBIIiIII")  # 32 bytes, little-endian
ENC_JPEG, ENC_RAW = 1, 2

_table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    _table.append(c)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = (crc >> 8) ^ _table[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


def open_dataset(path):
    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=2)
    meta_db = env.open_db(b"meta", create=False)
    rec_db = env.open_db(b"records", create=False)
    with env.begin() as txn:
        pairs = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=meta_db)]
    meta = {k.decode(): v.decode() for k, v in pairs}
    assert meta["format"] == "stoke-dataset", meta.get("format")
    assert meta["version"] in ("1", "2"), meta["version"]
    if meta["version"] == "2":
        # The meta's checksum: CRC-32C over every other pair in key order,
        # each as key, a 0 byte, value, a 0 byte.
        crc = 0
        for k, v in pairs:
            if k != b"checksum":
                crc = crc32c(k + b"\0" + v + b"\0", crc)
        assert meta["checksum"] == f"{crc:08x}", (meta["checksum"], crc)
    return env, rec_db, meta


def records(env, rec_db, version):
    with env.begin() as txn:
        for i, (key, value) in enumerate(txn.cursor(db=rec_db)):
            assert key == struct.pack(">Q", i), (i, key)
            magic, ver, enc, ch, _, w, h, label, nlen, plen, crc = HEADER.unpack_from(value)
            assert magic == b"STKR" and ver == version, (i, magic, ver)
            assert len(value) == 32 + nlen + plen, i
            name = value[32:32 + nlen]
            payload = value[32 + nlen:]
            # Version 2: the CRC covers header bytes 0..27 too; version 1: name and payload.
            covered = bytes(value) if ver == 2 else bytes(name) + bytes(payload)
            if ver == 2:
                covered = covered[:28] + covered[32:]
            assert crc32c(covered) == crc, f"record {i}: CRC"
            yield i, enc, ch, w, h, label, name.decode("utf-8"), bytes(payload)


def jpeg_size(data):
    """(width, height) from the SOF marker of a baseline JPEG."""
    pos = 2
    while pos < len(data):
        marker, length = data[pos + 1], struct.unpack(">H", data[pos + 2:pos + 4])[0]
        if marker in (0xC0, 0xC1):
            h, w = struct.unpack(">HH", data[pos + 5:pos + 9])
            return w, h
        pos += 2 + length
    raise ValueError("no SOF0")


def check_folder(path, src):
    env, rec_db, meta = open_dataset(path)
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    assert meta["classes"].split("\n") == classes, (meta["classes"], classes)
    expected = {}
    for label, cls in enumerate(classes):
        for root, _, files in os.walk(os.path.join(src, cls)):
            for f in files:
                expected[os.path.relpath(os.path.join(root, f), src)] = label
    seen = 0
    same_bytes = same_pixels = 0
    for i, enc, ch, w, h, label, name, payload in records(env, rec_db, int(meta["version"])):
        assert enc == ENC_JPEG and name in expected, (i, name)
        assert label == expected[name], (name, label)
        assert payload[:2] == b"\xff\xd8"
        assert jpeg_size(payload) == (w, h), (name, jpeg_size(payload), w, h)
        with open(os.path.join(src, name), "rb") as f:
            original = f.read()
        if payload == original:
            same_bytes += 1
        elif b"\xff\xdd" in payload[:payload.find(b"\xff\xda")]:  # DRI: restart markers added
            same_pixels += pixels(payload) == pixels(original)
        seen += 1
    assert seen == int(meta["count"]) == len(expected), (seen, meta["count"], len(expected))
    assert same_bytes + same_pixels > 0
    print(f"ok {path}: {seen} records, {same_bytes} byte-identical to their source file, "
          f"{same_pixels} with restart markers and the same pixels")


def pixels(jpeg):
    import io
    from PIL import Image
    return Image.open(io.BytesIO(jpeg)).convert("RGB").tobytes()


def check_idx(path, images, labels):
    env, rec_db, meta = open_dataset(path)
    with gzip.open(images) as f:
        _, n, rows, cols = struct.unpack(">IIII", f.read(16))
        pixels = f.read()
    with gzip.open(labels) as f:
        f.read(8)
        lab = f.read()
    seen = 0
    for i, enc, ch, w, h, label, name, payload in records(env, rec_db, int(meta["version"])):
        assert enc == ENC_RAW and ch == 1 and (w, h) == (cols, rows)
        assert label == lab[i], (i, label, lab[i])
        assert name == f"{os.path.basename(images)}#{i}", name
        assert payload == pixels[i * rows * cols:(i + 1) * rows * cols], i
        seen += 1
    assert seen == n == int(meta["count"])
    print(f"ok {path}: {seen} records match {images}")


if __name__ == "__main__":
    if sys.argv[1] == "folder":
        check_folder(sys.argv[2], sys.argv[3])
    else:
        check_idx(sys.argv[2], sys.argv[3], sys.argv[4])
