"""The parallel-efficiency model of Seide et al. (ICASSP 2014, "On parallelizability of SGD for
speech DNNs"; Interspeech 2014, "1-bit SGD"; ../shared/REFERENCES.md sections 2-3): the time of one
minibatch split into compute, post-processing, model update and communication for data
parallelism, model parallelism, data x model hybrids and model averaging; the node count K at
which each is fastest; and the same costs for our own CPU training (``predict_bench``), from
constants that ``pynnet-parallel-model --calibrate`` measures (pynnet.parallel.calibrate).

Units: seconds, bytes, FLOP; one "pass" over the model is one read and one write of every
parameter (8 bytes per float32 parameter). docs/notes/parallel_model.md has the formulas and what
they give for the paper's cases.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field

from pynnet.io.errors import PynnetError, fail

FLOAT = 4   # bytes of one float32


# ---------------------------------------------------------------------------- the model's shape
@dataclass(frozen=True)
class ModelShape:
    """A feed-forward DNN: ``input`` -> ``hidden`` (sigmoid) -> ``output`` (softmax); every affine
    layer has a bias (in our trainer it is one more column of the weight matrix, inside the GEMM)."""
    input: int
    hidden: tuple[int, ...]
    output: int

    def __post_init__(self) -> None:
        dims = (self.input, *self.hidden, self.output)
        if not self.hidden or any(not isinstance(d, int) or d <= 0 for d in dims):
            raise PynnetError(f"model dimensions must be positive integers with at least one hidden layer, not "
                              f"{self.input} -> {list(self.hidden)} -> {self.output}")

    @property
    def layers(self) -> list[tuple[int, int]]:
        """(inputs, outputs) of every affine layer."""
        dims = (self.input, *self.hidden, self.output)
        return list(zip(dims[:-1], dims[1:]))

    @property
    def params(self) -> int:
        return sum((i + 1) * o for i, o in self.layers)

    @property
    def flops_per_frame(self) -> float:
        """The ~3 matrix products per layer and frame (Seide et al.: T_frm): forward x W^T, the
        weight gradient g^T x (2 (in + 1) out FLOP each: a multiply and an add per weight), and
        the error signal g W of every layer but the first (its input's error is not needed)."""
        f = 0.0
        for k, (i, o) in enumerate(self.layers):
            f += 2 * 2 * (i + 1) * o + (2 * i * o if k else 0)
        return f

    @property
    def elementwise_bytes_per_frame(self) -> float:
        """Memory traffic of the non-GEMM work per frame: the sigmoid in place and its derivative
        (read y, read/write the error signal) on every hidden unit, as many over the softmax
        output and its error signal: 3 passes per unit, each a read and a write of a float."""
        return 2 * FLOAT * (3 * sum(self.hidden) + 3 * self.output)

    @property
    def boundary_floats_per_frame(self) -> int:
        """Model parallelism: the values per frame that cross a layer boundary in one direction
        (the hidden layers' outputs; the input features are on every node, and the softmax needs
        only its normaliser, see ``_model_parallel_comm``)."""
        return sum(self.hidden)

    def describe(self) -> dict:
        return {"input": self.input, "hidden": list(self.hidden), "output": self.output, "params": self.params,
                "flops_per_frame": self.flops_per_frame}


def parse_hidden(spec: str) -> tuple[int, ...]:
    """``2048x7`` (7 layers of 2048), ``2048:1024:512`` or ``2048,1024``; a mix: ``2048x2:1024``."""
    out: list[int] = []
    for part in re.split(r"[:,]", spec.strip()):
        m = re.fullmatch(r"([0-9]+)(?:[xX*]([0-9]+))?", part.strip())
        if not m or int(m.group(1)) <= 0 or (m.group(2) is not None and int(m.group(2)) <= 0):
            raise PynnetError(f"--hidden '{spec}': expected sizes like 2048x7 or 2048:2048:1024")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return tuple(out)


# The Switchboard DNN of both papers: 429 inputs (11 frames x 39), 7 x 2048 sigmoid, 9304 senones.
SWB_46M = ModelShape(429, (2048,) * 7, 9304)


# ---------------------------------------------------------------------------- hardware and scheme
@dataclass(frozen=True)
class Hardware:
    """The constants of one node (GPU or CPU core) and its links.

    GEMM speed: ``flops`` x ``gemm_efficiency`` x n / (n + ``gemm_half_frames``) for a GEMM over n
    frames (small minibatches make thin matrices, which run below peak: Interspeech 2014 Table 1)."""
    name: str
    flops: float                   # peak GEMM FLOP/s of one node
    mem_bw: float                  # bytes/s of one node's memory (reads + writes)
    link_bw: float                 # bytes/s, per direction, of one node's link to the others (data parallel)
    latency: float                 # seconds per message
    gemm_efficiency: float = 1.0   # the fraction of ``flops`` large GEMMs of the DNN reach
    gemm_half_frames: float = 0.0  # frames per GEMM at which half of that is reached
    bus_bw: float = 0.0            # bytes/s of the bus the GPUs of one server share (model parallel); 0: link_bw

    def __post_init__(self) -> None:
        for k in ("flops", "mem_bw", "link_bw"):
            v = getattr(self, k)
            if not 0 < v < math.inf:
                raise PynnetError(f"hardware constant {k} must be positive, not {v}")
        for k in ("latency", "gemm_half_frames", "bus_bw"):
            v = getattr(self, k)
            if not 0 <= v < math.inf:
                raise PynnetError(f"hardware constant {k} must not be negative, not {v}")
        if not 0 < self.gemm_efficiency <= 1:
            raise PynnetError(f"hardware constant gemm_efficiency must be in (0, 1], not {self.gemm_efficiency}")

    @property
    def bus(self) -> float:
        return self.bus_bw or self.link_bw

    def gemm_seconds(self, flop: float, frames: float) -> float:
        """Seconds of ``flop`` of GEMMs over ``frames`` rows: the efficiency curve above."""
        eff = self.gemm_efficiency * frames / (frames + self.gemm_half_frames)
        return flop / (self.flops * eff)


@dataclass(frozen=True)
class Scheme:
    """How the training exchanges and post-processes: the compression factor Z of the exchanged
    gradients (32 for 1 bit: Interspeech 2014), double buffering, and the element-wise passes
    over the model (each a read and a write of every parameter) of its post-processing and update."""
    z: float = 1.0
    double_buffering: bool = True
    # Seide's C: post-processing of the aggregated gradient, done by each stripe's owner (1/K of
    # the model per node): AdaGrad (accumulate g^2, normalise: 3 passes) and momentum (1)
    post_passes: float = 4.0
    # the owner's re-quantisation of its stripe's update with error feedback (Z > 1 only)
    requantize_passes: float = 2.0
    # Seide's T_upd, the fixed cost every node pays in full: adding the update into its model
    # (read the update, read and write the model: 1.5 passes) ...
    update_passes: float = 1.5
    # ... and, when Z > 1, quantizing its whole gradient with error feedback before sending
    # (add the residual, column statistics, bits and new residual: 3 passes)
    quantize_passes: float = 3.0

    def __post_init__(self) -> None:
        if not 1 <= self.z < math.inf:
            raise PynnetError(f"the compression factor Z must be at least 1, not {self.z}")
        for k in ("post_passes", "requantize_passes", "update_passes", "quantize_passes"):
            if not 0 <= getattr(self, k) < math.inf:
                raise PynnetError(f"{k} must not be negative, not {getattr(self, k)}")


# ---------------------------------------------------------------------------- presets
# Interspeech 2014 Table 1: ms per minibatch on one K20X for N = 256 ... 8192 (the 46M DNN).
SEIDE2014_TABLE1_MS = {256: 59.0, 512: 89.0, 1024: 143.0, 2048: 260.0, 4096: 490.0, 8192: 955.0}
K20X_FLOPS = 3.95e12    # fp32 peak (REFERENCES.md section 3)
K20X_MEM_BW = 250e9
PCIE_BW = 6e9           # PCIe as the paper measured it, per direction
PCIE_LATENCY = 10e-6    # (a PCIe/MPI message; it only matters for model parallelism's per-layer exchanges)


def fit_gemm_curve(table_ms: dict[int, float], shape: ModelShape, flops: float, fixed_s: float) -> tuple[float, float]:
    """(gemm_efficiency, gemm_half_frames) from one node's measured time per minibatch: the table
    is ``fixed_s + (N + n_half) t_inf`` (a straight line in N, least squares) with ``t_inf`` =
    flops_per_frame / (flops x efficiency). For Table 1 the line fits every point within 3%."""
    slope, intercept = line_fit(list(table_ms), [ms / 1e3 - fixed_s for ms in table_ms.values()])
    return shape.flops_per_frame / (flops * slope), max(0.0, intercept / slope)


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through the points (slope 0 if the xs are equal)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0
    return slope, my - slope * mx


def _single_fixed_seconds(shape: ModelShape, mem_bw: float, scheme: Scheme = Scheme()) -> float:
    return (scheme.post_passes + scheme.update_passes) * 2 * FLOAT * shape.params / mem_bw


def _seide_k20x() -> Hardware:
    # The GEMM curve is fitted to the paper's own single-GPU times (Table 1), after taking off the
    # post-processing and update our pass counts give at 250 GB/s: the K20X's GEMMs on this DNN
    # reach ~60% of the 3.95 TFLOP/s peak, half of that at ~190 frames per GEMM. Nothing here is
    # fitted to the parallel claims: those are what the model then predicts.
    eff, half = fit_gemm_curve(SEIDE2014_TABLE1_MS, SWB_46M, K20X_FLOPS, _single_fixed_seconds(SWB_46M, K20X_MEM_BW))
    return Hardware("seide2014-k20x", K20X_FLOPS, K20X_MEM_BW, PCIE_BW, PCIE_LATENCY, round(eff, 4), round(half, 1))


PRESETS = {"seide2014-k20x": (_seide_k20x, SWB_46M)}


def preset(name: str) -> tuple[Hardware, ModelShape]:
    if name not in PRESETS:
        raise PynnetError(f"unknown preset '{name}' (known: {', '.join(sorted(PRESETS))})")
    make, shape = PRESETS[name]
    return make(), shape


# ---------------------------------------------------------------------------- the time split
@dataclass(frozen=True)
class Split:
    """One minibatch of ``minibatch`` frames on ``k_data`` x ``k_model`` nodes, in seconds.
    compute + post + update + comm_exposed == total; comm is the whole communication time, of
    which double buffering hides comm - comm_exposed."""
    k_data: int
    k_model: int
    minibatch: int
    compute: float
    post: float
    update: float
    comm: float
    comm_exposed: float
    total: float

    @property
    def k(self) -> int:
        return self.k_data * self.k_model

    @property
    def frames_per_s(self) -> float:
        return self.minibatch / self.total

    def as_dict(self) -> dict:
        d = asdict(self)
        d["frames_per_s"] = self.frames_per_s
        return d


def pass_seconds(shape: ModelShape, hw: Hardware) -> float:
    """Seide's T_post: one element-wise pass over the model (read + write every parameter)."""
    return 2 * FLOAT * shape.params / hw.mem_bw


def compute_seconds(shape: ModelShape, hw: Hardware, frames: float) -> float:
    """Forward + backward + gradient of ``frames`` frames on one node: the GEMMs at the efficiency
    of ``frames``-row matrices, and the element-wise work over memory bandwidth."""
    return (hw.gemm_seconds(frames * shape.flops_per_frame, frames)
            + frames * shape.elementwise_bytes_per_frame / hw.mem_bw)


def single(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int) -> Split:
    """One node: the whole minibatch at once (nothing to overlap, nothing quantized)."""
    _check_minibatch(minibatch)
    t = pass_seconds(shape, hw)
    comp = compute_seconds(shape, hw, minibatch)
    post, upd = scheme.post_passes * t, scheme.update_passes * t
    return Split(1, 1, minibatch, comp, post, upd, 0.0, 0.0, comp + post + upd)


def _model_parallel_comm(shape: ModelShape, hw: Hardware, frames: float, k_model: int) -> float:
    """The exchanges inside a model-parallel group of ``k_model`` nodes for ``frames`` frames:
    each layer's outputs are split k ways, so after every hidden layer each node all-gathers the
    others' stripes of the activations (forward), and before it each node reduce-scatters the
    partial error signals g W_stripe of the layer above (backward); each node receives
    (k-1)/k of every boundary's values per direction, and the k nodes share one bus, which so
    carries (k-1) x frames x boundary floats per direction. The softmax needs only the
    normaliser (an all-reduce of 2 floats per frame). Each collective pays a latency per ring step."""
    if k_model == 1:
        return 0.0
    floats = 2 * shape.boundary_floats_per_frame + 2
    collectives = 2 * len(shape.hidden) + 1
    return ((k_model - 1) * frames * floats * FLOAT / hw.bus
            + collectives * (k_model - 1) * hw.latency)


def _data_parallel_comm(shape: ModelShape, hw: Hardware, scheme: Scheme, k_data: int, k_model: int) -> float:
    """One gradient exchange among ``k_data`` replicas, per node: the striped all-reduce (each node
    owns 1/k of the columns: it sends k-1 stripes of its gradient and receives the k-1 others'
    (reduce-scatter), then sends its aggregated stripe and receives the others' (all-gather):
    2 (k-1)/k of the (1/k_model slice of the) model, compressed Z times, over the node's own link,
    and 2 (k-1) messages."""
    if k_data == 1:
        return 0.0
    floats = shape.params / k_model
    return (2 * (k_data - 1) / k_data * floats * FLOAT / scheme.z / hw.link_bw
            + 2 * (k_data - 1) * hw.latency)


def hybrid(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int, k_data: int, k_model: int) -> Split:
    """``k_data`` data-parallel replicas (each a server), each a model-parallel group of ``k_model``
    nodes on one shared bus (Seide's 4 x 2). Every replica computes minibatch / k_data frames,
    every member 1/k_model of every layer's outputs (so of every matrix product and of the model).

    Without double buffering everything runs in sequence. With it, the minibatch is computed as
    two halves and one half's exchanges run while the other half is computed (Interspeech 2014):
    a half takes max(node work, communication), and with k_data > 1 each half's gradient is
    exchanged and applied (the update twice per minibatch: the fixed cost becomes 2 T_upd)."""
    _check_minibatch(minibatch)
    if k_data < 1 or k_model < 1:
        raise PynnetError(f"node counts must be at least 1, not {k_data} x {k_model}")
    if k_data * k_model == 1:
        return single(shape, hw, scheme, minibatch)
    t = pass_seconds(shape, hw)
    parts = 2 if scheme.double_buffering else 1
    frames = minibatch / k_data / parts          # frames of one GEMM (one part on one replica)
    exchanges = parts if k_data > 1 else 1       # model updates per minibatch
    comp = parts * compute_seconds(shape, hw, frames) / k_model
    quant = k_data > 1 and scheme.z > 1
    # post-processing: the owner's stripe, 1/(k_data k_model) of the model per node
    post = exchanges * (scheme.post_passes + (scheme.requantize_passes if quant else 0.0)) * t / (k_data * k_model)
    # the fixed cost: every node updates (and quantizes) its whole 1/k_model slice
    upd = exchanges * (scheme.update_passes + (scheme.quantize_passes if quant else 0.0)) * t / k_model
    comm = (parts * _model_parallel_comm(shape, hw, frames, k_model)
            + exchanges * _data_parallel_comm(shape, hw, scheme, k_data, k_model))
    work = comp + post + upd
    total = max(work, comm) if scheme.double_buffering else work + comm
    return Split(k_data, k_model, minibatch, comp, post, upd, comm, total - work, total)


def data_parallel(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int, k: int) -> Split:
    """K nodes, each computing minibatch / K frames of every minibatch (synchronous SGD)."""
    return hybrid(shape, hw, scheme, minibatch, k, 1)


def model_parallel(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int, k: int) -> Split:
    """K nodes of one server, each computing 1/K of every layer's outputs for the whole minibatch."""
    return hybrid(shape, hw, scheme, minibatch, 1, k)


def model_averaging(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int, k: int, every: int) -> Split:
    """K nodes, each training its own minibatches of ``minibatch`` frames with local updates; every
    ``every`` minibatches the parameters are averaged (a striped all-reduce of the model,
    compressed Z times, and one pass to divide). Per local minibatch: the single node's time plus
    1/every of the average (synchronous, as our AverageSync: nothing overlaps it).
    ``minibatch`` of the Split is the K x minibatch frames the job trains per local minibatch."""
    if every < 1:
        raise PynnetError(f"the averaging period must be at least 1 minibatch, not {every}")
    one = single(shape, hw, scheme, minibatch)
    if k == 1:
        return one
    comm = _data_parallel_comm(shape, hw, scheme, k, 1) / every
    upd = one.update + (1 + (scheme.quantize_passes if scheme.z > 1 else 0.0)) * pass_seconds(shape, hw) / every
    total = one.compute + one.post + upd + comm
    return Split(k, 1, k * minibatch, one.compute, one.post, upd, comm, comm, total)


def _check_minibatch(n: int) -> None:
    if not isinstance(n, int) or n <= 0:
        raise PynnetError(f"the minibatch must be a positive number of frames, not {n}")


# ---------------------------------------------------------------------------- optimal K
def best_k(speed, max_k: int, tolerance: float = 0.01) -> int:
    """The smallest K in 1..max_k within ``tolerance`` of the highest speed(K): beyond it more
    nodes buy less than 1%."""
    if max_k < 1:
        raise PynnetError(f"--max-k must be at least 1, not {max_k}")
    speeds = {k: speed(k) for k in range(1, max_k + 1)}
    top = max(speeds.values())
    return min(k for k, s in speeds.items() if s >= (1 - tolerance) * top)


def seide_data_parallel_k(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int) -> float | None:
    """Seide et al.'s optimal node count for data parallelism, where a node's computation equals
    the communication (with double buffering, per half minibatch):

        K = ((N/2) T_frm + C T_post) / ((1/Z) T_comm_float - T_upd)

    T_frm: seconds per frame at the half minibatch one node computes (as one GPU measures it),
    C T_post: the owner's post-processing of the whole model, T_upd: the fixed cost (update and,
    for Z > 1, quantization of the whole gradient), T_comm_float = 2 x 4 x params / link_bw: the
    striped all-reduce's float traffic per node, which the paper takes as independent of K (the
    large-K limit of 2 (K-1)/K). Without double buffering N/2 becomes N. None when the
    communication falls below the fixed cost: then no K balances them, and the fixed cost bounds
    the speed-up (``data_parallel_bound``)."""
    _check_minibatch(minibatch)
    frames = minibatch / (2 if scheme.double_buffering else 1)
    t = pass_seconds(shape, hw)
    quant = scheme.z > 1
    num = compute_seconds(shape, hw, frames) + (scheme.post_passes + (scheme.requantize_passes if quant else 0)) * t
    t_upd = (scheme.update_passes + (scheme.quantize_passes if quant else 0)) * t
    t_comm = 2 * FLOAT * shape.params / hw.link_bw / scheme.z
    den = t_comm - t_upd
    return num / den if den > 0 else None


def data_parallel_bound(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int) -> float:
    """The speed-up over one node that the fixed costs allow with unlimited nodes (the limit of
    ``data_parallel``): per exchange (2 per minibatch with double buffering) a node still pays
    T_upd, the GEMMs' own fixed part (the n_half frames of the efficiency curve: its time for
    n frames is (n + n_half) t_inf) and, unless hidden, the communication."""
    one = single(shape, hw, scheme, minibatch)
    t = pass_seconds(shape, hw)
    quant = scheme.z > 1
    parts = 2 if scheme.double_buffering else 1
    t_upd = (scheme.update_passes + (scheme.quantize_passes if quant else 0)) * t
    t_gemm0 = hw.gemm_half_frames * shape.flops_per_frame / (hw.flops * hw.gemm_efficiency)
    t_comm = 2 * FLOAT * shape.params / hw.link_bw / scheme.z
    work = t_upd + t_gemm0
    floor = parts * (max(work, t_comm) if scheme.double_buffering else work + t_comm)
    return one.total / floor


def model_parallel_k(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int) -> float:
    """The continuous optimum of ``model_parallel`` (latency left out). The node work W (compute,
    post-processing and update of the whole model at the GEMM size of the split, which does not
    change with K) divides by K; the shared bus carries (K-1) c, c = the boundary traffic of the
    minibatch. Sequential, T = W/K + (K-1) c is least at K = sqrt(W/c); with double buffering,
    T = max(W/K, (K-1) c) is least where the two meet, K (K-1) = W/c."""
    _check_minibatch(minibatch)
    parts = 2 if scheme.double_buffering else 1
    frames = minibatch / parts
    t = pass_seconds(shape, hw)
    w = parts * compute_seconds(shape, hw, frames) + (scheme.post_passes + scheme.update_passes) * t
    c = minibatch * (2 * shape.boundary_floats_per_frame + 2) * FLOAT / hw.bus
    r = w / c
    return (1 + math.sqrt(1 + 4 * r)) / 2 if scheme.double_buffering else math.sqrt(r)


def averaging_period(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int, k: int,
                     share: float = 0.05) -> int:
    """The smallest averaging period (minibatches) at which the average takes at most ``share``
    of a local minibatch's time on K nodes."""
    if not 0 < share < 1:
        raise PynnetError(f"the communication share must be in (0, 1), not {share}")
    one = single(shape, hw, scheme, minibatch)
    avg = model_averaging(shape, hw, scheme, minibatch, k, 1)
    cost = avg.total - one.total        # the average itself (exchange + division), per average
    # cost/N <= share (one.total + cost/N)  <=>  N >= cost (1 - share) / (share one.total)
    return max(1, math.ceil(cost * (1 - share) / (share * one.total) - 1e-9))


def summary(shape: ModelShape, hw: Hardware, scheme: Scheme, minibatch: int, max_k: int = 8,
            average_every: int = 10) -> dict:
    """Everything ``pynnet-parallel-model --json`` prints."""
    if max_k < 1:
        raise PynnetError(f"--max-k must be at least 1, not {max_k}")
    one = single(shape, hw, scheme, minibatch)

    def rows(fn):
        return [fn(k) for k in range(1, max_k + 1)]

    dp = rows(lambda k: data_parallel(shape, hw, scheme, minibatch, k))
    mp = rows(lambda k: model_parallel(shape, hw, scheme, minibatch, k))
    av = rows(lambda k: model_averaging(shape, hw, scheme, minibatch, k, average_every))
    hy = [hybrid(shape, hw, scheme, minibatch, kd, km)
          for kd in range(1, max_k + 1) for km in range(1, max_k // kd + 1)]
    dp_best = best_k(lambda k: dp[k - 1].frames_per_s, max_k)
    mp_best = best_k(lambda k: mp[k - 1].frames_per_s, max_k)
    av_best = best_k(lambda k: av[k - 1].frames_per_s, max_k)
    top = max(s.frames_per_s for s in hy)
    hy_best = min((s for s in hy if s.frames_per_s >= 0.99 * top), key=lambda s: (s.k, s.k_model))
    seide = seide_data_parallel_k(shape, hw, scheme, minibatch)

    def speedup(s: Split) -> float:
        return s.frames_per_s / one.frames_per_s

    return {
        "hardware": asdict(hw), "scheme": asdict(scheme), "model": shape.describe(), "minibatch": minibatch,
        "max_k": max_k, "single": one.as_dict(),
        "data_parallel_optimal_k": seide,
        "data_parallel_fixed_cost_bound": data_parallel_bound(shape, hw, scheme, minibatch) if seide is None else None,
        "data_parallel_best_k": dp_best, "data_parallel_speedup": speedup(dp[dp_best - 1]),
        "model_parallel_optimal_k": model_parallel_k(shape, hw, scheme, minibatch),
        "model_parallel_best_k": mp_best, "model_parallel_speedup": speedup(mp[mp_best - 1]),
        "hybrid_best": {"k_data": hy_best.k_data, "k_model": hy_best.k_model, "speedup": speedup(hy_best)},
        "averaging_every": average_every, "averaging_best_k": av_best,
        "averaging_speedup": av[av_best - 1].frames_per_s / one.frames_per_s,
        "averaging_efficiency": av[av_best - 1].frames_per_s / one.frames_per_s / av_best,
        "averaging_every_for_5pct": averaging_period(shape, hw, scheme, minibatch, max(2, av_best)),
        "data_parallel": [dict(s.as_dict(), speedup=speedup(s)) for s in dp],
        "model_parallel": [dict(s.as_dict(), speedup=speedup(s)) for s in mp],
        "averaging": [dict(s.as_dict(), speedup=s.frames_per_s / one.frames_per_s) for s in av],
        "hybrid": [dict(s.as_dict(), speedup=speedup(s)) for s in hy],
    }


# ---------------------------------------------------------------------------- calibration files
HARDWARE_KEYS = ("flops", "mem_bw", "link_bw", "latency")


def hardware_from_calibration(cal: dict, path: str = "") -> Hardware:
    """The ``Hardware`` of one rank of a ``--calibrate`` file (or any JSON with the same keys)."""
    missing = [k for k in HARDWARE_KEYS if not isinstance(cal.get(k), (int, float))]
    if missing:
        fail(f"not a calibration file: no {', '.join(missing)}", path or None)
    try:
        return Hardware(str(cal.get("name", "calibrated")), float(cal["flops"]), float(cal["mem_bw"]),
                        float(cal["link_bw"]), float(cal["latency"]), float(cal.get("gemm_efficiency", 1.0)),
                        float(cal.get("gemm_half_frames", 0.0)), float(cal.get("bus_bw", 0.0)))
    except PynnetError as e:
        fail(str(e), path or None)


def load_calibration(path: str) -> dict:
    """A ``--calibrate`` file: one-line errors for a missing, unreadable or malformed one."""
    if not os.path.isfile(path):
        fail("no such hardware file (write one with pynnet-parallel-model --calibrate --out FILE)", path)
    try:
        with open(path, encoding="utf-8") as f:
            cal = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        fail(f"not a JSON calibration file ({e})", path)
    if not isinstance(cal, dict):
        fail("not a calibration file (a JSON object is expected)", path)
    hardware_from_calibration(cal, path)   # (checks it)
    return cal


def load_calibrations(spec: str) -> dict:
    """``--hardware A,B,...``: one calibration file, or the mean of several (a VM's speed drifts by
    10-20% within minutes: the calibrations taken before and after a bench bracket the machine
    the bench ran on)."""
    paths = [p for p in spec.split(",") if p]
    if not paths:
        fail(f"--hardware '{spec}': no calibration file named")
    cals = [load_calibration(p) for p in paths]
    return cals[0] if len(cals) == 1 else mean_calibration(cals)


def mean_calibration(cals: list[dict]) -> dict:
    """The mean of every number the calibrations share (nested dicts included; lists, strings and
    the rest from the first)."""
    def mean(vals: list):
        first = vals[0]
        if isinstance(first, bool) or not all(isinstance(v, type(first)) for v in vals) or \
                all(v == first for v in vals):
            return first
        if isinstance(first, (int, float)):
            return sum(vals) / len(vals)
        if isinstance(first, dict):
            return {k: mean([v[k] for v in vals]) if all(k in v for v in vals) else first[k] for k in first}
        return first
    return mean(cals)


# ---------------------------------------------------------------------------- our own training
# bench/parallel.py's model and NG-SGD's ranks (pynnet.nnet.ngsgd.NgConfig: rank_in 20, rank_out
# 80, the estimate refreshed every 4th minibatch)
NG_RANK_IN, NG_RANK_OUT, NG_UPDATE_PERIOD = 20, 80, 4
ADAGRAD_PASSES = 8.0    # optim.adagrad_delta + the add into the model: addcmul (1.5), add + rsqrt (2),
                        # mean (0.5), two scalings (2.5: read m), add_ into the weights (1.5)
BENCH_MODES = ("avg1", "avg10", "avg50", "allreduce", "avg1bit", "1bit", "1bit_db")


@dataclass(frozen=True)
class Rank:
    """What one rank of our CPU training gets, alone or with other ranks on the machine at once
    (the calibration's ``single`` / ``concurrent``)."""
    gemm_dnn_128: float     # FLOP/s of the DNN's products at 128 frames
    gemm_half_frames: float
    lowrank: dict = field(default_factory=dict)   # FLOP/s of NG-SGD's rank-r products, by r
    mem_bw: float = 1.0
    alloc_bw: float = 1.0   # bytes/s of first-touch writes to fresh tensors
    encode_vps: float = 1.0  # 1-bit quantizer: values/s encoded, decoded and added
    decode_vps: float = 1.0

    def gemm(self, flop: float, frames: float) -> float:
        # the measured curve F n / (n + n_half), through the DNN's rate at 128 frames
        rate = self.gemm_dnn_128 * (128 + self.gemm_half_frames) / 128 * frames / (frames + self.gemm_half_frames)
        return flop / rate

    def passes(self, p: float, values: float) -> float:
        return p * 2 * FLOAT * values / self.mem_bw


def _ranks_from_calibration(cal: dict) -> tuple[Rank, Rank]:
    try:
        s, c = cal["single"], cal["concurrent"]
        low = {int(r): float(v) for r, v in s["lowrank_flops"].items()}
        one = Rank(float(s["gemm_dnn_flops_128"]), float(s["gemm_half_frames"]), low, float(s["mem_bw"]),
                   float(s["alloc_bw"]), float(s["quantize_encode_values_per_s"]),
                   float(s["quantize_decode_values_per_s"]))
        ratio = float(c["gemm_dnn_flops_128"]) / one.gemm_dnn_128
        two = Rank(float(c["gemm_dnn_flops_128"]), one.gemm_half_frames, {r: v * ratio for r, v in low.items()},
                   float(c["mem_bw"]), float(c["alloc_bw"]), float(c["quantize_encode_values_per_s"]),
                   float(c["quantize_decode_values_per_s"]))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise PynnetError(f"the calibration file lacks the per-rank measurements ({e}): rerun --calibrate") from None
    return one, two


class _Ours:
    """The step costs of bench/parallel.py's training (pynnet.nnet.train's loop with the
    Synchronizers of pynnet.parallel.sync), one rank per core, on a calibrated machine. On one
    core per rank nothing overlaps: collectives, quantization and updates are CPU work that adds
    to the step (MPI through shared memory copies with the CPU too), so a step is the sum of its
    parts; a collective costs latency + bytes sent / bandwidth as the calibration fitted it."""

    def __init__(self, cal: dict, shape: ModelShape = SWB_46M):
        self.shape = shape
        self.alone, self.shared = _ranks_from_calibration(cal)
        self.latency, self.link_bw = float(cal["latency"]), float(cal["link_bw"])
        self.P = shape.params

    def rank(self, k: int) -> Rank:
        return self.alone if k == 1 else self.shared

    def mpi(self, nbytes: float) -> float:
        return self.latency + nbytes / self.link_bw

    def forward_backward(self, r: Rank, n: float, ngsgd: bool) -> float:
        """The GEMMs (the gradient's into a buffer or, fused, into the weights: the same FLOPs),
        the element-wise work, and NG-SGD's preconditioning of every layer's input and output
        derivative (per side: H = M R^T, P = M - H E R, every 4th minibatch Y = H^T M: 4.5 n D r
        FLOP, and a pass for the row norms)."""
        t = r.gemm(n * self.shape.flops_per_frame, n) + n * self.shape.elementwise_bytes_per_frame / r.mem_bw
        if ngsgd:
            for i, o in self.shape.layers:
                for dim, rank in ((i + 1, min(NG_RANK_IN, i)), (o, min(NG_RANK_OUT, o - 1))):
                    rate = r.lowrank[min(r.lowrank, key=lambda x: abs(x - rank))] if r.lowrank else r.gemm_dnn_128
                    t += (4 + 2 / NG_UPDATE_PERIOD) * n * dim * rank / rate + FLOAT * n * dim / r.mem_bw
        return t

    def step(self, mode: str, k: int, n: int) -> tuple[float, float]:
        """(seconds of one step on each rank, of which in exchanges) of ``mode`` on k ranks with
        ``n`` frames per rank (1-bit SGD: ``n`` is the global minibatch)."""
        P, r = self.P, self.rank(k)
        if mode == "single":
            return self.forward_backward(r, n, True), 0.0
        if mode == "single_adagrad":
            return self.forward_backward(r, n, False) + r.passes(ADAGRAD_PASSES, P), 0.0
        ring = 2 * (k - 1) / k
        if mode.startswith("avg") and mode[3:].isdigit():
            # AverageSync: every N steps one allreduce of the flat model (+ the failure flag), / K
            every = int(mode[3:])
            ex = self.mpi(ring * FLOAT * (P + 1))
            return self.forward_backward(r, n, True) + (ex + r.passes(1, P)) / every, ex / every
        if mode == "allreduce":
            # AllreduceSync: the (unfused) gradient allreduced and divided, then NG-SGD's add_
            ex = self.mpi(ring * FLOAT * P)
            return self.forward_backward(r, n, True) + ex + r.passes(1 + 1.5, P), ex
        if mode == "avg1bit":
            # OneBitAverageSync every 10: the change since the last average (read model and
            # reference into a fresh tensor), quantized, allgathered, the K payloads decoded into
            # a fresh sum, divided (1 pass), added to the reference (1.5) and copied into the model (1)
            ex = self.mpi((k - 1) * P / 8)
            work = (r.passes(1.0, P) + 2 * FLOAT * P / r.alloc_bw + P / r.encode_vps + k * P / r.decode_vps
                    + r.passes(1 + 1.5 + 1, P))
            return self.forward_backward(r, n, True) + (ex + work) / 10, ex / 10
        if mode in ("1bit", "1bit_db"):
            # OneBitSgdSync on a global minibatch of n: each rank computes n / K (n / 2K per half
            # with double buffering, each half's gradient exchanged); per exchange: its whole
            # gradient quantized, the alltoall of the stripes, the K stripes it owns decoded,
            # AdaGrad on them and their update quantized, the allgather, every stripe decoded
            # into the model. The exchange thread of double buffering shares the rank's core.
            parts = 2 if mode == "1bit_db" else 1
            local = n / (k * parts)
            comm = 2 * self.mpi((k - 1) / k * P / 8)
            ex = (comm + P / r.encode_vps + 2 * P / r.decode_vps + r.passes(ADAGRAD_PASSES - 1.5 + 0.5, P / k)
                  + P / k / r.encode_vps)
            return parts * (self.forward_backward(r, local, False) + ex), parts * ex
        raise PynnetError(f"unknown mode '{mode}'")


def predict_bench(cal: dict, minibatch: int = 128, minibatch_1bit: int = 1024, k: int = 2) -> dict:
    """bench/parallel.py's figures as the calibrated model predicts them: ``fps_k1`` (one rank,
    NG-SGD, ``minibatch``), ``speedup_<mode>`` (K ranks' frames/s over that), ``fps_<mode>``,
    ``comm_fraction_<mode>``, ``fps_k1_adagrad_mb_1bit`` (the base of 1-bit SGD) and
    ``speedup_independent`` (K ranks that never communicate)."""
    _check_minibatch(minibatch)
    _check_minibatch(minibatch_1bit)
    ours = _Ours(cal)
    base = minibatch / ours.step("single", 1, minibatch)[0]
    base_1bit = minibatch_1bit / ours.step("single_adagrad", 1, minibatch_1bit)[0]
    out = {"fps_k1": base, "fps_k1_adagrad_mb_1bit": base_1bit,
           "speedup_independent": k * minibatch / ours.step("single", k, minibatch)[0] / base,
           # (bench --only 1bit: the independent ranks train AdaGrad on half the 1-bit minibatch)
           "speedup_independent_adagrad": k * (minibatch_1bit // 2) / ours.step("single_adagrad", k,
                                                                                minibatch_1bit // 2)[0] / base_1bit}
    for mode in BENCH_MODES:
        if mode.startswith("1bit"):
            t, ex = ours.step(mode, k, minibatch_1bit)
            fps, ref = minibatch_1bit / t, base_1bit
        else:
            t, ex = ours.step(mode, k, minibatch)
            fps, ref = k * minibatch / t, base
        out[f"fps_{mode}"] = fps
        out[f"speedup_{mode}"] = fps / ref
        out[f"comm_fraction_{mode}"] = ex / t
    return out


def compare_bench(predicted: dict, measured: dict) -> list[dict]:
    """Predicted against measured per figure: rows {key, predicted, measured, error} with error =
    predicted / measured - 1 (comm fractions: the difference, as they are shares). The measured
    K=2 frames/s is speed-up x the base bench/parallel.py divided it by."""
    meas = dict(measured)
    only_1bit = "minibatch_1bit" not in meas and any(k.startswith("speedup_1bit") for k in meas)
    if only_1bit:   # (bench --only 1bit*: fps_k1 is the AdaGrad base at the 1-bit minibatch)
        meas["fps_k1_adagrad_mb_1bit"] = meas.pop("fps_k1", None)
        if "speedup_independent" in meas:
            meas["speedup_independent_adagrad"] = meas.pop("speedup_independent")
    for mode in BENCH_MODES:
        base = meas.get("fps_k1_adagrad_mb_1bit" if mode.startswith("1bit") else "fps_k1")
        if f"speedup_{mode}" in meas and isinstance(base, (int, float)):
            meas[f"fps_{mode}"] = meas[f"speedup_{mode}"] * base
    keys = ["fps_k1", "speedup_independent", "fps_k1_adagrad_mb_1bit", "speedup_independent_adagrad"]
    for mode in BENCH_MODES:
        keys += [f"fps_{mode}", f"speedup_{mode}", f"comm_fraction_{mode}"]
    rows = []
    for key in keys:
        m, p = meas.get(key), predicted.get(key)
        if not isinstance(m, (int, float)) or p is None or key == "comm_fraction_1bit_db":
            continue   # (1bit_db's measured share is the time waited, not the exchanges' own)
        share = key.startswith("comm_fraction")
        err = p - m if share else (p / m - 1 if m else math.inf)
        rows.append({"key": key, "predicted": p, "measured": float(m), "error": err, "share": share})
    return rows


def auto_average_every(cal: dict, shape: ModelShape, minibatch: int, k: int, share: float = 0.05,
                       onebit: bool = False) -> tuple[int, float]:
    """``--average-every auto``: the smallest averaging period N at which, on a machine with the
    calibration ``cal``, the averages of ``shape`` among ``k`` ranks (each with ``minibatch``
    frames per step, NG-SGD) take at most ``share`` of the step time; returns (N, the predicted
    share at N). The average's cost is _Ours' (``avg1`` / ``avg1bit`` at period 1: the exchange
    and its passes over the model); its share at N is (cost / N) / (step + cost / N)."""
    _check_minibatch(minibatch)
    if not 0 < share < 1:
        raise PynnetError(f"the communication share must be in (0, 1), not {share}")
    ours = _Ours(cal, shape)
    step = ours.step("single", k, minibatch)[0]
    if onebit:
        # (avg1bit is priced at period 10: its cost per average is ten times its per-step part)
        cost = 10 * (ours.step("avg1bit", k, minibatch)[0] - step)
    else:
        cost = ours.step("avg1", k, minibatch)[0] - step
    every = max(1, math.ceil(cost * (1 - share) / (share * step) - 1e-9))
    return every, (cost / every) / (step + cost / every)
