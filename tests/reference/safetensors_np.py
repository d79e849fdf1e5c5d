"""Read-only safetensors access in numpy, written from the file format alone.

A checkpoint folder holds model.safetensors, or shards listed by
model.safetensors.index.json.  Tensors are memory-mapped; `get` returns the
raw stored array, `f64` widens float tensors (F64, F32, F16, BF16) to float64.
"""
import json
import os
import struct

import numpy as np

# safetensors dtype -> numpy dtype of the stored bytes (bf16 as its bits).
_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


class FormatError(ValueError):
    """A malformed file; the message names the file and tensor."""


def bf16_to_f64(bits):
    """bf16 bit patterns (uint16) -> float64, exactly."""
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


class File:
    """One .safetensors file: header parsed and checked, data memory-mapped."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise FormatError(f"{path}: shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise FormatError(f"{path}: header length {n} exceeds the file")
            try:
                header = json.loads(f.read(n))
            except ValueError as e:
                raise FormatError(f"{path}: header is not JSON: {e}") from None
        self.metadata = header.pop("__metadata__", {})
        self._base = 8 + n
        self._data = np.memmap(path, dtype=np.uint8, mode="r") if size > self._base else None
        self.tensors = {}
        for name, info in header.items():
            dt = info.get("dtype")
            if dt not in _DTYPES:
                raise FormatError(f"{path}: tensor {name}: unknown dtype {dt}")
            shape = tuple(info["shape"])
            begin, end = info["data_offsets"]
            npdt = np.dtype(_DTYPES[dt])
            count = int(np.prod(shape, dtype=np.int64))
            if not 0 <= begin <= end <= size - self._base or end - begin != count * npdt.itemsize:
                raise FormatError(f"{path}: tensor {name}: offsets {begin}..{end} "
                                  f"do not fit shape {shape} {dt}")
            self.tensors[name] = (dt, shape, begin, end)

    def get(self, name):
        dt, shape, begin, end = self.tensors[name]
        if begin == end:
            return np.zeros(shape, dtype=_DTYPES[dt])
        raw = self._data[self._base + begin:self._base + end]
        return raw.view(_DTYPES[dt]).reshape(shape)


class Checkpoint:
    """A checkpoint folder: one file, or shards named by the index."""

    def __init__(self, folder):
        self.folder = folder
        index = os.path.join(folder, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            files = {fn: File(os.path.join(folder, fn)) for fn in sorted(set(weight_map.values()))}
            self._where = {}
            for name, fn in weight_map.items():
                if name not in files[fn].tensors:
                    raise FormatError(f"{index}: {name} is not in {fn}")
                self._where[name] = files[fn]
        else:
            single = File(os.path.join(folder, "model.safetensors"))
            self._where = {name: single for name in single.tensors}

    def names(self):
        return self._where.keys()

    def has(self, name):
        return name in self._where

    def dtype(self, name):
        return self._where[name].tensors[name][0]

    def get(self, name):
        """The stored array (bf16 as uint16 bits)."""
        if name not in self._where:
            raise KeyError(f"{self.folder}: tensor {name} not found")
        return self._where[name].get(name)

    def f64(self, name):
        """A float tensor widened to float64."""
        raw = self.get(name)
        if self.dtype(name) == "BF16":
            return bf16_to_f64(raw)
        if raw.dtype.kind != "f":
            raise FormatError(f"{self.folder}: tensor {name} is {self.dtype(name)}, not float")
        return raw.astype(np.float64)
