"""Writes a small copy of a safetensors file as a fuzzing seed: every tensor keeps its name,
dtype and rank, with each dimension cut to at most 2 and its bytes the first of the original's,
so the header stays realistic while mutations mostly land in it.

usage: python3 small_safetensors.py IN OUT
"""
import json
import struct
import sys

SIZES = {"BF16": 2, "F16": 2, "F32": 4}


def main(src, dst):
    with open(src, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out_header, out_data = {}, b""
    for name, t in header.items():
        if name == "__metadata__":
            out_header[name] = t
            continue
        shape = [min(d, 2) for d in t["shape"]]
        count = 1
        for d in shape:
            count *= d
        begin = t["data_offsets"][0]
        chunk = data[begin:begin + count * SIZES[t["dtype"]]]
        out_header[name] = {"dtype": t["dtype"], "shape": shape,
                            "data_offsets": [len(out_data), len(out_data) + len(chunk)]}
        out_data += chunk
    text = json.dumps(out_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + out_data)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
