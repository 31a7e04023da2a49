"""1-bit column quantization with error feedback (Seide et al. 2014; CNTK's ColumnQuantizer).

A matrix's values ``v`` (gradient or parameter delta + the residual carried from the last time)
are quantized per column with threshold 0: one bit per value (v >= 0), two reconstruction values
per column (the mean of its non-negative entries and the mean of its negative entries). The bits
are packed 8 per byte (32 per word when read as uint32: the columns are padded to whole bytes).
Error feedback: ``residual = v - dequantize(quantize(v))`` is added to the next ``v``, so what the
reconstructions leave out is sent later instead of lost.

Wire format of one matrix (rows x cols): cols x ceil(rows/8) bytes of bits, then 2 x cols float32
(the non-negative means, then the negative means).
"""
from __future__ import annotations

import numpy as np
import torch


def payload_bytes(rows: int, cols: int) -> int:
    return cols * ((rows + 7) // 8) + 2 * cols * 4


def quantize(v: torch.Tensor) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """``v`` (rows x cols, CPU float32) -> (bits cols x ceil(rows/8) uint8, recon 2 x cols, the
    dequantized matrix)."""
    pos = v >= 0
    n_pos = pos.sum(0, dtype=torch.float32)
    s_pos = torch.where(pos, v, 0.0).sum(0)
    s_all = v.sum(0)
    rows = v.shape[0]
    mean_pos = s_pos / n_pos.clamp(min=1.0)
    mean_neg = (s_all - s_pos) / (rows - n_pos).clamp(min=1.0)
    recon = torch.stack([mean_pos, mean_neg])
    bits = np.packbits(pos.t().contiguous().numpy(), axis=1)
    deq = torch.where(pos, mean_pos, mean_neg)
    return bits, recon, deq


def dequantize(bits: np.ndarray, recon: torch.Tensor, rows: int) -> torch.Tensor:
    """The rows x cols matrix that ``bits`` (cols x ceil(rows/8)) and ``recon`` (2 x cols) encode."""
    pos = torch.from_numpy(np.unpackbits(bits, axis=1, count=rows)).t().bool()
    return torch.where(pos, recon[0], recon[1])


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
        nb = self.cols * ((self.rows + 7) // 8)
        bits = payload[:nb].reshape(self.cols, -1)
        recon = torch.from_numpy(payload[nb:].copy().view(np.float32).reshape(2, self.cols))
        return dequantize(bits, recon, self.rows)
