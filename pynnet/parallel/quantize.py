"""1-bit column quantization with error feedback (Seide et al. 2014; CNTK's ColumnQuantizer).

A matrix's values ``v`` (gradient or parameter delta + the residual carried from the last time)
are quantized per column with threshold 0: one bit per value (v >= 0), two reconstruction values
per column (the mean of its non-negative entries and the mean of its negative entries). The bits
are packed in the matrix's row-major order, 32 per word (the words' bytes in order, the first
value in the high bit of the first byte), so no transpose is needed.
Error feedback: ``residual = v - dequantize(quantize(v))`` is added to the next ``v``, so what the
reconstructions leave out is sent later instead of lost.

Wire format of one matrix (rows x cols): 4 x ceil(rows x cols / 32) bytes of bits, then 2 x cols
float32 (the non-negative means, then the negative means).

Speed: ``ErrorFeedbackQuantizer`` works in preallocated buffers (a fresh 16 MB tensor per call
costs more in page faults than the arithmetic) with about ten passes over the matrix, each a
vectorised torch op; ``quantize``/``dequantize`` are the plain reference the tests compare with.
"""
from __future__ import annotations

import numpy as np
import torch


def bit_bytes(rows: int, cols: int) -> int:
    """Bytes of the packed bits of a rows x cols matrix: whole 32-bit words."""
    return 4 * ((rows * cols + 31) // 32)


def payload_bytes(rows: int, cols: int) -> int:
    return bit_bytes(rows, cols) + 2 * cols * 4


def quantize(v: torch.Tensor) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """Reference: ``v`` (rows x cols, CPU) -> (bits as in the wire format; recon 2 x cols; the
    dequantized matrix)."""
    pos = v >= 0
    rows, cols = v.shape
    n_pos = pos.sum(0).to(v.dtype)
    mean_pos = torch.where(pos, v, 0).sum(0) / n_pos.clamp(min=1.0)
    mean_neg = torch.where(pos, 0, v).sum(0) / (rows - n_pos).clamp(min=1.0)
    recon = torch.stack([mean_pos, mean_neg])
    bits = np.zeros(bit_bytes(rows, cols), dtype=np.uint8)
    packed = np.packbits(pos.numpy().reshape(-1))
    bits[:packed.size] = packed
    return bits, recon, torch.where(pos, recon[0], recon[1])


def dequantize(bits: np.ndarray, recon: torch.Tensor, rows: int) -> torch.Tensor:
    """Reference: the rows x cols matrix that ``bits`` and ``recon`` (2 x cols) encode."""
    cols = recon.shape[1]
    pos = torch.from_numpy(np.unpackbits(bits, count=rows * cols).reshape(rows, cols)).bool()
    return torch.where(pos, recon[0], recon[1])


_SHIFTS = (7, 6, 5, 4, 3, 2, 1, 0)


def _pack(mask: torch.Tensor, out: torch.Tensor) -> None:
    """The bools of ``mask`` (any shape, contiguous) into ``out`` (uint8), 8 per byte, the first
    in the high bit (numpy's packbits on the CPU; the same bits in torch on a GPU)."""
    if mask.device.type != "cpu":
        return _pack_torch(mask, out)
    packed = np.packbits(mask.numpy().reshape(-1))
    out[:packed.size] = torch.from_numpy(packed)


def _pack_torch(mask: torch.Tensor, out: torch.Tensor) -> None:
    n = mask.numel()
    flat = mask.reshape(-1)
    whole = n // 8 * 8
    w = torch.tensor([1 << s for s in _SHIFTS], dtype=torch.uint8, device=mask.device)
    out[:whole // 8] = (flat[:whole].view(-1, 8).to(torch.uint8) * w).sum(1, dtype=torch.uint8)
    if whole < n:
        tail = torch.zeros(8, dtype=torch.uint8, device=mask.device)
        tail[:n - whole] = flat[whole:].to(torch.uint8)
        out[whole // 8] = (tail * w).sum(dtype=torch.uint8)


def _unpack(bits: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` 0/1 bytes from packed ``bits`` (uint8 tensor)."""
    if bits.device.type != "cpu":
        return _unpack_torch(bits, n)
    return torch.from_numpy(np.unpackbits(bits.numpy(), count=n))


def _unpack_torch(bits: torch.Tensor, n: int) -> torch.Tensor:
    s = torch.tensor(_SHIFTS, dtype=torch.uint8, device=bits.device)
    return ((bits[:(n + 7) // 8].unsqueeze(1) >> s) & 1).reshape(-1)[:n]


class ErrorFeedbackQuantizer:
    """One matrix's quantizer with its residual: ``encode(g, out)`` quantizes g + residual into the
    payload ``out`` and keeps what the quantization lost as the next residual; ``decode_add``
    adds a payload's matrix to an accumulator. Every rank decodes the same bits to the same
    floats, which keeps replicas identical."""

    def __init__(self, rows: int, cols: int, error_feedback: bool = True, device: str | torch.device = "cpu"):
        self.rows, self.cols, self.error_feedback = rows, cols, error_feedback
        self.residual = torch.zeros(rows, cols, device=device)
        self.nbits = bit_bytes(rows, cols)
        self.nbytes = payload_bytes(rows, cols)
        # v, without error feedback (with it, v is formed in the residual's buffer)
        self._work = None if error_feedback else torch.empty(rows, cols, device=device)
        self._buf = torch.empty(rows, cols, device=device)       # max(v, 0), then the 0/1 mask as floats
        self._mask = torch.empty(rows, cols, dtype=torch.bool, device=device)

    def encode(self, g: torch.Tensor, out: torch.Tensor) -> None:
        """Writes the payload of ``g`` (rows x cols, any strides) into ``out`` (uint8, ``nbytes``)."""
        if self.error_feedback:
            v = self.residual.add_(g)      # v = g + residual, in the residual's buffer
        else:
            v = self._work.copy_(g)
        mask, f = self._mask, self._buf
        torch.ge(v, 0, out=mask)
        s_pos = torch.clamp_min(v, 0, out=f).sum(0)     # (zeros add nothing to either mean)
        s_neg = v.sum(0).sub_(s_pos)
        f.copy_(mask)                                   # 0/1 floats
        n_pos = f.sum(0)
        mean_pos = s_pos.div_(n_pos.clamp(min=1.0))
        mean_neg = s_neg.div_((self.rows - n_pos).clamp_(min=1.0))
        recon = torch.stack([mean_pos, mean_neg])
        if self.error_feedback:
            # residual = v - (mean_neg + (mean_pos - mean_neg) x mask)
            v.sub_(mean_neg).addcmul_(f, mean_pos - mean_neg, value=-1.0)
        out[self.nbits - 4:self.nbits].zero_()          # (the last word's unused bits)
        _pack(mask, out)
        out[self.nbits:self.nbytes] = recon.reshape(-1).view(torch.uint8)

    def recon(self, payload: torch.Tensor) -> torch.Tensor:
        return payload[self.nbits:self.nbytes].clone().view(torch.float32).view(2, self.cols)

    def decode_add(self, payload: torch.Tensor, acc: torch.Tensor, scratch: torch.Tensor | None = None) -> torch.Tensor:
        """``acc`` (rows x cols, any strides) += the matrix ``payload`` encodes; returns ``acc``.
        ``scratch``: a rows x cols float buffer to use (default: this quantizer's own)."""
        recon = self.recon(payload)
        bits01 = _unpack(payload[:self.nbits], self.rows * self.cols).view(self.rows, self.cols)
        f = (self._buf if scratch is None else scratch).copy_(bits01)
        acc.add_(recon[1]).addcmul_(f, recon[0] - recon[1])
        return acc

    def decode(self, payload: torch.Tensor) -> torch.Tensor:
        return self.decode_add(payload, torch.zeros(self.rows, self.cols, device=self.residual.device))
