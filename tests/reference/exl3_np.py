"""An independent EXL3 (exllamav3 trellis) decoder in numpy, from spec exl3.md 2-4.

    Linear(ckpt, prefix).weight() -> float64 [out, in] in the original basis:
        W = diag(suh) . Had128 . What . Had128 . diag(svh), transposed to HF order

`What` (the decoded k x n tile matrix) is bit-exact fp16; everything after it
is float64.  States are read by slicing the tile's bit stream directly, not by
the 32-bit word-window trick the kernels use, so the two can check each other.
"""
import numpy as np

CB_3INST, CB_MCG, CB_MUL1 = 0, 1, 2


def tc_perm():
    """perm[t] = r*16 + c: the tile element at trellis position t (spec 4.2)."""
    perm = np.empty(256, dtype=np.int64)
    for lane in range(32):
        r0, c0 = 2 * (lane % 4), lane // 4
        for j in range(8):
            r = (r0, r0 + 1, r0 + 8, r0 + 9)[j % 4]
            c = c0 + (8 if j >= 4 else 0)
            perm[8 * lane + j] = 16 * r + c
    return perm


def _halves(x):
    """uint32 -> (low, high) 16-bit halves as float64 via fp16."""
    lo = (x & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    hi = (x >> 16).astype(np.uint16).view(np.float16).astype(np.float64)
    return lo, hi


def codebook(states, cb):
    """16-bit trellis states -> fp16 weights (spec 4.4), returned as float16."""
    s = np.asarray(states, dtype=np.uint64) & 0xFFFF
    m32 = np.uint64(0xFFFFFFFF)
    if cb == CB_MUL1:
        x = (s * np.uint64(0x83DCD12D)) & m32
        bs = sum((x >> np.uint64(8 * i)) & np.uint64(0xFF) for i in range(4))
        # (1024 + bs) * half(0x1EEE) + half(0xC931) is exact in float64:
        # one rounding to fp16, as the fused fp16 multiply-add does.
        w = (1024.0 + bs.astype(np.float64)) * 0.00676727294921875 - 10.3828125
        return w.astype(np.float16)
    if cb == CB_3INST:
        x = (s * np.uint64(89226354) + np.uint64(64248484)) & m32
    elif cb == CB_MCG:
        x = (s * np.uint64(0xCBAC1FED)) & m32
    else:
        raise ValueError(f"unknown codebook {cb}")
    x = (x & np.uint64(0x8FFF8FFF)) ^ np.uint64(0x3B603B60)
    lo, hi = _halves(x)
    # Both halves lie in [0.125, 2): their float64 sum is exact; one rounding.
    return (lo + hi).astype(np.float16)


def stream_bits(tiles):
    """[..., 16K] int16 tiles -> [..., 256K] stream bits (spec 4.3 word layout)."""
    u16 = tiles.view(np.uint16).astype(np.uint32)
    words = u16[..., 0::2] | (u16[..., 1::2] << 16)
    # Big-endian bytes of each uint32 put bit 31 first: stream order.
    return np.unpackbits(words.astype(">u4").view(np.uint8), axis=-1)


def tile_states(tiles, K):
    """[..., 16K] int16 tiles -> [..., 256] 16-bit states (tail-biting windows)."""
    bits = stream_bits(tiles)
    nbits = 256 * K
    t = np.arange(256)[:, None]
    p = np.arange(16)[None, :]
    idx = ((t + 1) * K - 16 + p) % nbits          # window ending at symbol t
    window = bits[..., idx].astype(np.uint32)     # [..., 256, 16], MSB first
    return (window << (15 - np.arange(16, dtype=np.uint32))).sum(axis=-1)


def hadamard128():
    """Normalized 128-point Sylvester Hadamard: H[i,j] = (-1)^popcount(i&j)/sqrt(128)."""
    i = np.arange(128)
    pop = np.vectorize(lambda v: bin(v).count("1"))(i[:, None] & i[None, :])
    return np.where(pop % 2 == 0, 1.0, -1.0) / np.sqrt(128.0)


def _unpack_signs(bits16, n):
    """Legacy su/sv: bit i of word w is the sign of element 16w+i (1 = negative)."""
    u = bits16.view(np.uint16).astype(np.uint32)
    b = (u[:, None] >> np.arange(16, dtype=np.uint32)[None, :]) & 1
    return np.where(b.reshape(-1)[:n] == 1, -1.0, 1.0)


def decode_what(trellis, cb):
    """trellis [k/16, n/16, 16K] -> What [k, n] float16 (bit exact)."""
    kt, nt, words = trellis.shape
    if words % 16 or not 1 <= words // 16 <= 8:
        raise ValueError(f"trellis last dim {words} is not 16*K with K in 1..8")
    K = words // 16
    perm = tc_perm()
    out = np.empty((kt, nt, 256), dtype=np.float16)
    for i in range(kt):                           # a slab at a time bounds memory
        vals = codebook(tile_states(trellis[i], K), cb)
        out[i][:, perm] = vals
    # [kt, nt, r, c] -> [kt, r, nt, c] -> [k, n]
    return out.reshape(kt, nt, 16, 16).transpose(0, 2, 1, 3).reshape(kt * 16, nt * 16)


def is_exl3(ckpt, prefix):
    return ckpt.has(prefix + ".trellis")


class Linear:
    """One EXL3 linear: y = x W^T with W [out, in] (padded to multiples of 128)."""

    def __init__(self, ckpt, prefix):
        self.prefix = prefix
        self.trellis = ckpt.get(prefix + ".trellis")
        self.k, self.n = self.trellis.shape[0] * 16, self.trellis.shape[1] * 16
        has_mcg, has_mul1 = ckpt.has(prefix + ".mcg"), ckpt.has(prefix + ".mul1")
        if has_mcg and has_mul1:
            raise ValueError(f"{prefix}: both mcg and mul1 markers")
        self.cb = CB_MCG if has_mcg else CB_MUL1 if has_mul1 else CB_3INST
        if ckpt.has(prefix + ".suh"):
            self.su = ckpt.f64(prefix + ".suh")
            self.sv = ckpt.f64(prefix + ".svh")
        else:
            self.su = _unpack_signs(ckpt.get(prefix + ".su"), self.k)
            self.sv = _unpack_signs(ckpt.get(prefix + ".sv"), self.n)
        if self.su.shape != (self.k,) or self.sv.shape != (self.n,) or self.k % 128 or self.n % 128:
            raise ValueError(f"{prefix}: suh {self.su.shape} / svh {self.sv.shape} do not "
                             f"match trellis {self.trellis.shape}")
        if ckpt.has(prefix + ".bias"):
            raise ValueError(f"{prefix}: biased linears do not occur in Ling-3")

    def weight(self):
        """float64 [out, in]: diag(suh) H What H diag(svh), transposed."""
        k, n, h = self.k, self.n, hadamard128()
        w = decode_what(self.trellis, self.cb).astype(np.float64)
        w = np.einsum("ij,bjn->bin", h, w.reshape(k // 128, 128, n)).reshape(k, n)
        w *= self.su[:, None]
        w = np.einsum("kbj,jn->kbn", w.reshape(k, n // 128, 128), h).reshape(k, n)
        w *= self.sv[None, :]
        return w.T

    def forward(self, x):
        """The factored order of spec 3: Had(x*suh) . What -> Had -> *svh."""
        k, n, h = self.k, self.n, hadamard128()
        x2 = ((x * self.su).reshape(-1, k // 128, 128) @ h).reshape(-1, k)
        y1 = x2 @ decode_what(self.trellis, self.cb).astype(np.float64)
        y2 = (y1.reshape(-1, n // 128, 128) @ h).reshape(-1, n)
        return (y2 * self.sv).reshape(x.shape[:-1] + (n,))
