"""WER scoring: Kaldi's compute-wer, align-text, wer_details and best_wer (via kaldialign)."""
from pynnet.score.wer import (MODES, SPECIAL_SYMBOL, WerStats, align_words, best_wer, compute_wer,
                              ops_lines, per_spk_lines, per_utt_lines, read_transcripts,
                              write_wer_details)

__all__ = ["MODES", "SPECIAL_SYMBOL", "WerStats", "align_words", "best_wer", "compute_wer",
           "ops_lines", "per_spk_lines", "per_utt_lines", "read_transcripts", "write_wer_details"]
