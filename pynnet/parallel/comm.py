"""The communicator of parallel training: a handful of collectives, each with a time limit.

Backends: MPI through mpi4py (the default; any MPI mpi4py was built with: mpich's pip wheel here,
a cluster's own MPI under ``srun --mpi=pmi2``) and torch.distributed (gloo on CPUs; NCCL is what a
GPU cluster uses, since a pip MPI is not CUDA-aware). One worker needs neither and imports neither.

Every collective is started non-blocking and polled until it completes or its time limit passes,
so a rank that died or hangs never makes the others wait forever (the most common complaint
about CNTK's and Horovod's parallel training). On a time-out the waiting ranks find out which
ranks are missing over a side channel (MPI: a duplicate communicator; torch: its key-value
store): a rank that times out tells the others; a rank still polling answers; whoever has not
answered after a short grace is named. The lowest rank that answered raises the ``CommFailure``
that is printed; the others raise a quiet one (``collective``), and the job is aborted.

Bytes are counted per rank with the usual algorithm volumes (ring allreduce 2(K-1)/K of the
buffer, allgather and alltoall (K-1)/K of the gathered buffer), for the benchmark's bytes/frame.
"""
from __future__ import annotations

import copy
import datetime
import os
import pickle
import sys
import time

import numpy as np
import torch

from pynnet.io.errors import PynnetError

DEFAULT_TIMEOUT = 45.0   # seconds a collective may wait; + GRACE + abort stays within a minute
GRACE = 3.0              # seconds the waiting ranks take to find out which ranks are missing
_ALERT_TAG = 7707


class CommFailure(PynnetError):
    """A collective did not complete (a rank died or hangs). ``collective``: every live rank
    raises it; only the lowest live rank's is printed."""

    def __init__(self, msg: str, collective: bool = False):
        super().__init__(msg)
        self.collective = collective


def _rank_env() -> tuple[int, int] | None:
    """(rank, size) from the launcher's environment: pynnet-mpirun's own (elastic, local), mpiexec
    (hydra, Open MPI), srun, torchrun."""
    for r, n in (("PYNNET_RANK", "PYNNET_SIZE"), ("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                 ("SLURM_PROCID", "SLURM_NTASKS"), ("RANK", "WORLD_SIZE")):
        if os.environ.get(r, "").isdigit() and os.environ.get(n, "").isdigit():
            return int(os.environ[r]), int(os.environ[n])
    return None


def launched_size() -> int:
    """How many ranks the launcher started (1 when run without one)."""
    env = _rank_env()
    return env[1] if env else 1


class Communicator:
    """Collectives over the ranks of one job. Tensors are torch tensors (any device: a backend
    that cannot use device memory copies through the CPU); results are written in place unless
    the method returns a new tensor."""
    backend = "none"
    device_memory = False   # True: the backend takes device (GPU) tensors as they are (NCCL)

    def __init__(self, rank: int, size: int, timeout: float = DEFAULT_TIMEOUT):
        self.rank, self.size, self.timeout = rank, size, timeout
        # the whole job (a sub-communicator of ``split`` keeps the job's: failures name job ranks)
        self.world_rank, self.world_size = rank, size
        self.members = list(range(size))   # the job ranks of this communicator's ranks
        self.seq = 0                 # collectives started (the same count on every rank)
        self.bytes_sent = 0          # per rank, by the algorithms' volumes
        self.seconds = 0.0           # time spent inside collectives (waiting included)
        self.failure_note = ""       # appended to a failure message (the trainer: last checkpoint)

    # ---------------------------------------------------------------- collectives
    def allreduce(self, t: torch.Tensor, op: str = "sum", what: str = "allreduce") -> torch.Tensor:
        """In place; op sum | mean | max | min."""
        if op not in ("sum", "mean", "max", "min"):
            raise ValueError(op)
        self.bytes_sent += int(2 * (self.size - 1) * t.numel() * t.element_size() / self.size)
        with _Staged(t, self.device_memory) as host:
            self._run(what, self._iallreduce, host, "sum" if op == "mean" else op)
        if op == "mean":
            t.div_(self.size)
        return t

    def allgather(self, t: torch.Tensor, what: str = "allgather") -> torch.Tensor:
        """A new (size, *t.shape) tensor: rank r's ``t`` in row r."""
        self.bytes_sent += (self.size - 1) * t.numel() * t.element_size()
        with _Staged(t, self.device_memory) as host:
            out = torch.empty((self.size, *t.shape), dtype=t.dtype, device=host.device)
            self._run(what, self._iallgather, host.contiguous(), out)
        return out.to(t.device)

    def alltoall(self, t: torch.Tensor, what: str = "alltoall") -> torch.Tensor:
        """``t`` (size, ...): row j goes to rank j; returns (size, ...) with rank i's row i for us."""
        if t.shape[0] != self.size:
            raise ValueError(f"alltoall needs {self.size} rows, not {t.shape[0]}")
        self.bytes_sent += int((self.size - 1) * t.numel() * t.element_size() / self.size)
        with _Staged(t, self.device_memory) as host:
            out = torch.empty(t.shape, dtype=t.dtype, device=host.device)
            self._run(what, self._ialltoall, host.contiguous(), out)
        return out.to(t.device)

    def broadcast(self, t: torch.Tensor, root: int = 0, what: str = "broadcast") -> torch.Tensor:
        """In place: root's ``t`` everywhere."""
        if self.rank == root:
            self.bytes_sent += (self.size - 1) * t.numel() * t.element_size()
        with _Staged(t, self.device_memory) as host:
            self._run(what, self._ibroadcast, host, root)
        return t

    def barrier(self, what: str = "barrier", timeout: float | None = None) -> None:
        self._run(what, self._ibarrier, timeout=timeout)

    def allgather_object(self, obj, what: str = "allgather") -> list:
        """Every rank's (picklable) ``obj``, in rank order, on every rank."""
        data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
        sizes = self.allgather(torch.tensor([len(data)], dtype=torch.int64), what).view(-1).tolist()
        padded = torch.zeros(max(sizes), dtype=torch.uint8)
        padded[:len(data)] = torch.from_numpy(data.copy())
        rows = self.allgather(padded, what)
        return [pickle.loads(rows[r, :sizes[r]].numpy().tobytes()) for r in range(self.size)]

    def gather_object(self, obj, root: int = 0, what: str = "gather") -> list | None:
        """Every rank's ``obj`` on ``root`` (None elsewhere): checkpoints of per-rank state."""
        # (through allgather: these are rare and small next to a minibatch's compute)
        objs = self.allgather_object(obj, what)
        return objs if self.rank == root else None

    def abort(self, code: int = 1) -> None:
        """End the whole job now (every rank)."""
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def close(self) -> None:
        pass

    def split(self, groups: list[list[int]]) -> "Communicator":
        """The communicator of the group (of job ranks, in ``groups``) that holds this rank;
        every rank of the job must call it with the same groups. Its collectives run among the
        group only; a failure is still found and named over the whole job's side channel."""
        flat = sorted(r for g in groups for r in g)
        if flat != list(range(self.world_size)):
            raise ValueError(f"groups {groups} do not partition the {self.world_size} ranks")
        members = next(g for g in groups if self.world_rank in g)
        sub = copy.copy(self)
        sub.rank, sub.size, sub.members = members.index(self.world_rank), len(members), list(members)
        sub.seq, sub.bytes_sent, sub.seconds = 0, 0, 0.0
        self._split(sub, groups, members)
        return sub

    def _split(self, sub: "Communicator", groups: list[list[int]], members: list[int]) -> None:
        raise NotImplementedError

    # ---------------------------------------------------------------- polling with a time limit
    def _run(self, what: str, start, *args, timeout: float | None = None) -> None:
        self.seq += 1
        t0 = time.perf_counter()
        handle = start(*args)
        limit = self.timeout if timeout is None else timeout
        sleep, next_alert_check = 0.0, t0
        try:
            while not self._done(handle):
                now = time.perf_counter()
                if now >= next_alert_check:
                    if self._alerted():
                        self._diagnose(what, limit, told=True)
                    next_alert_check = now + self._alert_check_period
                if now - t0 > limit:
                    self._diagnose(what, limit, told=False)
                # back off from spinning to 1 ms sleeps: a waiting rank must not take the core
                # another rank computes on, and must not add much latency
                sleep = min(0.001, sleep * 2 + 1e-5)
                time.sleep(sleep)
        finally:
            self.seconds += time.perf_counter() - t0

    _alert_check_period = 0.0   # seconds between checks of the side channel while polling

    def _diagnose(self, what: str, limit: float, told: bool) -> None:
        """Find the missing ranks with the other waiting ranks and raise CommFailure."""
        self._announce()
        alive = {self.world_rank} | self._collect_answers(GRACE)
        missing = [r for r in range(self.world_size) if r not in alive]
        ranks = ", ".join(map(str, missing)) if missing else "?"
        who = (f"rank {ranks} did not" if len(missing) == 1 else f"ranks {ranks} did not") if missing else \
            "the ranks did not all"
        msg = (f"{who} reach {what} (collective #{self.seq}) within {limit:.0f} s: dead or hung"
               + (f"; {self.failure_note}" if self.failure_note else ""))
        raise CommFailure(msg, collective=self.world_rank != min(alive))

    # backend primitives: start a collective (return a handle), poll it, the side channel
    def _done(self, handle) -> bool:
        return True

    def _alerted(self) -> bool:
        return False

    def _announce(self) -> None:
        pass

    def _collect_answers(self, grace: float) -> set[int]:
        return set()


class _Staged:
    """A CPU tensor for a backend that works on host memory: the tensor itself, or a copy of a
    device tensor that is copied back on exit."""

    def __init__(self, t: torch.Tensor, device_memory: bool = False):
        self.t, self.device_memory = t, device_memory

    def __enter__(self) -> torch.Tensor:
        self.host = self.t if self.t.device.type == "cpu" or self.device_memory else self.t.cpu()
        return self.host

    def __exit__(self, *exc) -> None:
        if self.host is not self.t and exc[0] is None:
            self.t.copy_(self.host)


# ---------------------------------------------------------------- MPI
class MpiCommunicator(Communicator):
    backend = "mpi"
    _alert_check_period = 0.05

    def __init__(self, timeout: float = DEFAULT_TIMEOUT):
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        super().__init__(self.comm.Get_rank(), self.comm.Get_size(), timeout)
        self.side = self.comm.Dup()   # the side channel of failure diagnosis
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
        self._answered: set[int] = set()
        self._announced = False

    @staticmethod
    def _np(t: torch.Tensor) -> np.ndarray:
        return t.detach().numpy()

    def _iallreduce(self, host, op):
        return self.comm.Iallreduce(self.MPI.IN_PLACE, self._np(host), op=self._ops[op])

    def _iallgather(self, host, out):
        return self.comm.Iallgather(self._np(host), self._np(out))

    def _ialltoall(self, host, out):
        return self.comm.Ialltoall(self._np(host), self._np(out))

    def _ibroadcast(self, host, root):
        return self.comm.Ibcast(self._np(host), root=root)

    def _ibarrier(self):
        return self.comm.Ibarrier()

    def _done(self, req) -> bool:
        return bool(req.Test())

    def _alerted(self) -> bool:
        return bool(self.side.Iprobe(source=self.MPI.ANY_SOURCE, tag=_ALERT_TAG))

    def _announce(self) -> None:
        if self._announced:
            return
        self._announced = True
        msg = np.array([self.world_rank, self.seq], dtype=np.int64)
        self._sends = [self.side.Isend(msg, dest=r, tag=_ALERT_TAG) for r in range(self.world_size)
                       if r != self.world_rank]

    def _collect_answers(self, grace: float) -> set[int]:
        end = time.perf_counter() + grace
        buf = np.zeros(2, dtype=np.int64)
        while time.perf_counter() < end:
            while self.side.Iprobe(source=self.MPI.ANY_SOURCE, tag=_ALERT_TAG):
                self.side.Recv(buf, source=self.MPI.ANY_SOURCE, tag=_ALERT_TAG)
                self._answered.add(int(buf[0]))
            time.sleep(0.01)
        return set(self._answered)

    def abort(self, code: int = 1) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.comm.Abort(code)

    def _split(self, sub, groups, members) -> None:
        color = next(i for i, g in enumerate(groups) if self.world_rank in g)
        sub.comm = self.comm.Split(color, members.index(self.world_rank))   # (side: the job's)


# ---------------------------------------------------------------- torch.distributed
class TorchCommunicator(Communicator):
    """torch.distributed (gloo here; nccl for GPU clusters). Rank and size from the launcher's
    environment; the rendezvous at MASTER_ADDR:MASTER_PORT (steps/nnet/train.sh sets both)."""
    backend = "torch"
    _alert_check_period = 0.5   # (a store look-up is a TCP round trip)

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, device: str = "cpu"):
        import torch.distributed as dist
        self.dist = dist
        env = _rank_env()
        if env is None:
            raise PynnetError("--comm-backend torch: no rank in the environment (start it with mpiexec, srun or torchrun)")
        rank, size = env
        for v in ("MASTER_ADDR", "MASTER_PORT"):
            if not os.environ.get(v):
                raise PynnetError(f"--comm-backend torch: {v} is not set (steps/nnet/train.sh sets it)")
        backend = "nccl" if device.startswith("cuda") else "gloo"
        self.device_memory = backend == "nccl"
        # the process group's own limit only backs up ours (a collective that hangs in C++)
        dist.init_process_group(backend, rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=max(timeout * 4, 60)))
        super().__init__(rank, size, timeout)
        # NCCL takes only GPU tensors: the statistics and pickled objects (CPU) go through gloo
        self.cpu_group = dist.new_group(backend="gloo") if backend == "nccl" else None
        self.device_group = None   # (the default group)
        self.store = dist.distributed_c10d._get_default_store()
        self._ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}

    def _group(self, t: torch.Tensor):
        return self.cpu_group if t.device.type == "cpu" else self.device_group

    def _split(self, sub, groups, members) -> None:
        # (new_group is collective: every rank creates every group, in the same order)
        for g in groups:
            cpu = self.dist.new_group(ranks=g, backend="gloo")
            dev = self.dist.new_group(ranks=g) if self.device_memory else cpu
            if g is members:
                sub.cpu_group, sub.device_group = cpu, dev

    def _iallreduce(self, host, op):
        return self.dist.all_reduce(host, op=self._ops[op], group=self._group(host), async_op=True)

    def _iallgather(self, host, out):
        return self.dist.all_gather_into_tensor(out.view(-1), host.reshape(-1), group=self._group(host),
                                                async_op=True)

    def _ialltoall(self, host, out):
        return self.dist.all_to_all_single(out.view(-1), host.reshape(-1), group=self._group(host), async_op=True)

    def _ibroadcast(self, host, root):
        return self.dist.broadcast(host, src=self.members[root], group=self._group(host), async_op=True)

    def _ibarrier(self):
        return self.dist.barrier(group=self.cpu_group, async_op=True)

    def _done(self, work) -> bool:
        return bool(work.is_completed())

    def _alerted(self) -> bool:
        try:
            return self.store.check(["pynnet/alert"])
        except Exception:  # noqa: BLE001 - the store's host (rank 0) is gone: that is an alert too
            return True

    def _announce(self) -> None:
        try:
            self.store.set(f"pynnet/alive/{self.world_rank}", str(self.seq))
            self.store.set("pynnet/alert", str(self.seq))
        except Exception:  # noqa: BLE001 - rank 0 (the store) is gone; nobody can be asked
            pass

    def _collect_answers(self, grace: float) -> set[int]:
        time.sleep(grace)
        alive = set()
        for r in range(self.world_size):
            try:
                if self.store.check([f"pynnet/alive/{r}"]):
                    alive.add(r)
            except Exception:  # noqa: BLE001
                pass
        return alive

    def close(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


def make_communicator(backend: str = "mpi", timeout: float = DEFAULT_TIMEOUT, device: str = "cpu") -> Communicator:
    """The communicator of this process's job: ``mpi`` or ``torch``."""
    if backend not in ("mpi", "torch"):
        raise PynnetError(f"unknown --comm-backend '{backend}' (mpi, torch)")
    if backend == "mpi":
        try:
            return MpiCommunicator(timeout)
        except ImportError as e:
            raise PynnetError(f"--comm-backend mpi: cannot import mpi4py ({e}); run tools/install.sh") from None
    return TorchCommunicator(timeout, device)
