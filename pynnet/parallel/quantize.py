"""1-bit column quantization with error feedback (Seide et al. 2014; CNTK's ColumnQuantizer).

A matrix's values ``v`` (gradient or parameter delta + the residual carried from the last time)
are quantized per column with threshold 0: one bit per value (v >= 0), two reconstruction values
per column (the mean of its non-negative entries and the mean of its negative entries). The bits
are packed in the matrix's row-major order, 8 per byte (32 per word read as uint32), so no
transpose is needed.
Error feedback: ``residual = v - dequantize(quantize(v))`` is added to the next ``v``, so what the
reconstructions leave out is sent later instead of lost.

Wire format of one matrix (rows x cols): ceil(rows x cols / 8) bytes of bits (row-major, the
first value in the high bit), then 2 x cols float32 (the non-negative means, then the negative
means).
"""
from __future__ import annotations

import numpy as np
import torch


def payload_bytes(rows: int, cols: int) -> int:
    return (rows * cols + 7) // 8 + 2 * cols * 4


def quantize(v: torch.Tensor) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """``v`` (rows x cols, CPU float32) -> (bits, ceil(rows x cols / 8) uint8; recon 2 x cols; the
    dequantized matrix)."""
    pos = v >= 0
    rows = v.shape[0]
    # (column sums of the 0/1 bytes and of |v|: cheaper than masked sums over the bools)
    n_pos = pos.view(torch.uint8).sum(0, dtype=torch.int32).to(v.dtype)
    s_all = v.sum(0)
    s_pos = (v.abs().sum(0) + s_all) * 0.5
    mean_pos = s_pos / n_pos.clamp(min=1.0)
    mean_neg = (s_all - s_pos) / (rows - n_pos).clamp(min=1.0)
    recon = torch.stack([mean_pos, mean_neg])
    bits = np.packbits(pos.numpy().reshape(-1))
    return bits, recon, _expand(pos, recon)


def _expand(pos: torch.Tensor, recon: torch.Tensor) -> torch.Tensor:
    """Each value its column's reconstruction: the non-negative or the negative mean."""
    return torch.where(pos, recon[0], recon[1])


def dequantize(bits: np.ndarray, recon: torch.Tensor, rows: int) -> torch.Tensor:
    """The rows x cols matrix that ``bits`` and ``recon`` (2 x cols) encode."""
    cols = recon.shape[1]
    # (unpackbits gives 0/1 bytes: viewed as bools without a copy)
    pos = torch.from_numpy(np.unpackbits(bits, count=rows * cols).reshape(rows, cols)).view(torch.bool)
    return _expand(pos, recon)


class ErrorFeedbackQuantizer:
    """One matrix's quantizer with its residual: ``encode(g)`` quantizes g + residual, keeps what
    the quantization lost as the next residual and returns the payload bytes (the wire format)."""

    def __init__(self, rows: int, cols: int, error_feedback: bool = True):
        self.rows, self.cols, self.error_feedback = rows, cols, error_feedback
        self.residual = torch.zeros(rows, cols)
        self.nbytes = payload_bytes(rows, cols)

    def encode(self, g: torch.Tensor, out: np.ndarray) -> torch.Tensor:
        """Writes the payload into ``out`` (uint8, ``nbytes``); returns our own dequantized matrix."""
        v = g + self.residual if self.error_feedback else g.contiguous()
        bits, recon, deq = quantize(v)
        if self.error_feedback:
            torch.sub(v, deq, out=self.residual)
        nb = bits.size
        out[:nb] = bits.reshape(-1)
        out[nb:] = recon.numpy().reshape(-1).view(np.uint8)
        return deq

    def decode(self, payload: np.ndarray) -> torch.Tensor:
        nb = (self.rows * self.cols + 7) // 8
        bits = payload[:nb]
        recon = torch.from_numpy(payload[nb:].copy().view(np.float32).reshape(2, self.cols))
        return dequantize(bits, recon, self.rows)
