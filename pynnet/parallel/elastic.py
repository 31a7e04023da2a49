"""Elastic model averaging (``--elastic true``): a job of K averaging ranks that loses a rank
(killed, its node pre-empted, hung) goes on with the others instead of ending.

Why torch.distributed and not MPI: a communicator cannot shrink in MPI without the ULFM
extension (MPIX_Comm_shrink), which mpich's pip wheel and most cluster MPIs do not ship; gloo
process groups are cheap objects built on a key-value store, so the survivors build a new one.
The store is hosted by the launcher (``pynnet-mpirun --elastic``), not by rank 0, so that any rank,
rank 0 included, may be the one lost; and the launcher starts the ranks itself, as its children,
so that one that dies takes no other with it (mpich's mpiexec ends them all, even with
``-disable-auto-cleanup``; a cluster's launcher must be told not to: ``srun --kill-on-bad-exit=0``).

What happens when a rank is lost (each step bounded in time):

1. The ranks in a collective notice: gloo fails at once on a closed connection, or the
   collective's time limit (``--comm-timeout``) passes; whoever notices raises an alert in the
   store, which the others see within a quarter of a second while they poll their collectives.
2. Every live rank writes that it is alive, and waits until all members have (no loss: a false
   alarm) or a grace period passes (10 s, or 3x the longest gap seen between two collectives of
   this job, at most the collective time limit): a rank that is computing between two averages
   reaches its next collective and answers within that. The first decision written into the
   store (compare-and-set) is every rank's: the new members. A rank left out (it hung, then woke
   up) ends with a message saying it was dropped.
3. The members build generation g+1's process group (ranks renumbered in job-rank order: the
   lowest survivor is the new rank 0, which writes the logs and checkpoints) and raise
   ``WorkersLost``; the job (pynnet.parallel.job) then reruns the training in the same
   processes, which resumes from the last checkpoint exactly as a rerun of the command would:
   the checkpoints of the averaging modes are taken right after an average, when every replica
   is the same model, so at most ``--checkpoint-every`` minibatches are trained again.
4. Data: each survivor finishes the epoch on the shard it started it with (its position in it is
   in the checkpoint), then on its share of the lost ranks' remaining utterances (those from the
   chunk each lost rank was in at the checkpoint: its chunk plan is recomputed from the seeds),
   logged; from the next epoch the training set is re-sharded over the survivors. The CV set is
   re-sharded at once, so every CV loss covers the whole CV set.

Collectives run on private copies of their tensors: an abandoned collective of a broken group
can never write into the model afterwards.
"""
from __future__ import annotations

import datetime
import json
import os
import time

import torch

from pynnet.io.errors import PynnetError, fail
from pynnet.nnet.data import FrameSet, log, plan_chunks, set_log_rank
from pynnet.nnet.train import WorkersLost
from pynnet.parallel.comm import DEFAULT_TIMEOUT, CommFailure, Communicator, _rank_env
from pynnet.parallel.sync import AverageSync, OneBitAverageSync, make_sync, rank_seed, shard_utterances

ELASTIC_GRACE = 10.0      # seconds the survivors wait at least for every member to answer
STORE_ENV = "PYNNET_ELASTIC_STORE"   # set by pynnet-mpirun --elastic: it hosts the store


class _Broken(Exception):
    """A collective of the process group failed (a peer closed its connection)."""


class _Pending:
    def __init__(self, work, copy_back: list[tuple[torch.Tensor, torch.Tensor]] = ()):
        self.work, self.copy_back = work, list(copy_back)


class ElasticCommunicator(Communicator):
    """The communicator of an elastic job: gloo process groups, one per generation of members,
    over the launcher's store. ``rank``/``size``: within the current members; ``world_rank``:
    the job rank (fixed); ``members``: the job ranks still in the job; ``lost``: what was lost."""
    backend = "torch"
    _alert_check_period = 0.25

    def __init__(self, timeout: float = DEFAULT_TIMEOUT):
        import torch.distributed as dist
        self.dist = dist
        env = _rank_env()
        if env is None:
            raise PynnetError("--elastic: no rank in the environment (start it with steps/nnet/train.sh --elastic "
                              "true, or pynnet-mpirun --elastic)")
        if not os.environ.get(STORE_ENV) or not os.environ.get("MASTER_ADDR") or not os.environ.get("MASTER_PORT"):
            raise PynnetError("--elastic needs the store of pynnet-mpirun --elastic (MASTER_ADDR, MASTER_PORT and "
                              f"{STORE_ENV} are not all set): start it with steps/nnet/train.sh --elastic true")
        rank, size = env
        super().__init__(rank, size, timeout)
        try:
            self.store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                                       timeout=datetime.timedelta(seconds=max(timeout, 30.0)))
        except Exception as e:  # noqa: BLE001 - the launcher's store is not there
            raise PynnetError(f"--elastic: cannot reach the launcher's store at {os.environ['MASTER_ADDR']}:"
                              f"{os.environ['MASTER_PORT']} ({e})") from None
        self.generation = 0
        self.lost: list[dict] = []     # one entry per loss: ranks, collective, time, members after
        self._abandoned: list = []     # broken groups (kept: their destructors could block)
        self._ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
        self._max_gap, self._last_end = 0.0, None
        self._group = self._new_group()

    # ------------------------------------------------------------ groups
    def _key(self, name: str) -> str:
        return f"pynnet/g{self.generation}/{name}"

    def _new_group(self):
        store = self.dist.PrefixStore(f"pynnet/g{self.generation}/pg/", self.store)
        try:
            return self.dist.ProcessGroupGloo(store, self.rank, self.size,
                                              datetime.timedelta(seconds=max(self.timeout * 4, 60.0)))
        except Exception as e:  # noqa: BLE001 - a member did not join
            raise CommFailure(f"the {self.size} ranks {self.members} could not form generation {self.generation} of "
                              f"the job ({e})") from None

    # ------------------------------------------------------------ backend primitives
    def _iallreduce(self, host, op):
        buf = host.clone()
        opts = self.dist.AllreduceOptions()
        opts.reduceOp = self._ops[op]
        return _Pending(self._group.allreduce([buf], opts), [(buf, host)])

    def _iallgather(self, host, out):
        return _Pending(self._group.allgather([list(out.unbind(0))], [host.clone()]))

    def _ialltoall(self, host, out):
        return _Pending(self._group.alltoall_base(out.view(-1), host.clone().reshape(-1), [], []))

    def _ibroadcast(self, host, root):
        buf = host.clone()
        opts = self.dist.BroadcastOptions()
        opts.rootRank = root
        return _Pending(self._group.broadcast([buf], opts), [(buf, host)])

    def _ibarrier(self):
        return _Pending(self._group.barrier())

    def _done(self, p: _Pending) -> bool:
        if not p.work.is_completed():
            return False
        try:
            p.work.wait()
        except Exception as e:  # noqa: BLE001 - gloo: a peer's connection closed
            raise _Broken(str(e)) from None
        for buf, dst in p.copy_back:
            dst.copy_(buf)
        return True

    def _run(self, what: str, start, *args, timeout: float | None = None) -> None:
        t0 = time.perf_counter()
        if self._last_end is not None:
            self._max_gap = max(self._max_gap, t0 - self._last_end)
        try:
            super()._run(what, start, *args, timeout=timeout)
        except _Broken:
            self._diagnose(what, self.timeout if timeout is None else timeout, told=False)
        except RuntimeError as e:   # (starting a collective on a group whose peers are gone)
            if "gloo" not in str(e).lower() and "connection" not in str(e).lower():
                raise
            self._diagnose(what, self.timeout if timeout is None else timeout, told=False)
        self._last_end = time.perf_counter()

    def _alerted(self) -> bool:
        try:
            return self.store.check([self._key("alert")])
        except Exception:  # noqa: BLE001 - the launcher's store is gone: the job is over
            raise CommFailure("the launcher's store is gone (pynnet-mpirun ended)") from None

    # ------------------------------------------------------------ losing a rank
    def _diagnose(self, what: str, limit: float, told: bool) -> None:
        """Agree with the other live ranks on who is left, build the next generation's group,
        raise WorkersLost (or CommFailure for a rank that was dropped)."""
        store, me, old = self.store, self.world_rank, list(self.members)
        try:
            store.set(self._key("alert"), "1")
            store.set(self._key(f"alive/{me}"), "1")
            grace = min(max(ELASTIC_GRACE, 3 * self._max_gap), max(limit, ELASTIC_GRACE))
            end = time.monotonic() + grace
            while True:
                alive = [r for r in old if store.check([self._key(f"alive/{r}")])]
                if len(alive) == len(old) or time.monotonic() > end or store.check([self._key("members")]):
                    break
                time.sleep(0.05)
            decided = store.compare_set(self._key("members"), "", json.dumps(alive))
            members = json.loads(decided if isinstance(decided, str) else decided.decode())
        except CommFailure:
            raise
        except Exception as e:  # noqa: BLE001 - the store (the launcher) is gone
            raise CommFailure(f"{what}: the collective failed and the launcher's store is gone ({e})") from None
        if me not in members:
            raise CommFailure(f"rank {me} was dropped from the job: it did not answer within {grace:.0f} s "
                              f"when {what} (collective #{self.seq}) failed; the job goes on with ranks "
                              f"{', '.join(map(str, members))}")
        lost = [r for r in old if r not in members]
        self._abandoned.append(self._group)
        self.generation += 1
        self.members, self.rank, self.size = members, members.index(me), len(members)
        self._group = self._new_group()
        self._last_end, self._max_gap = None, 0.0
        event = {"ranks": lost, "collective": what, "members": members,
                 "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        self.lost.append(event)
        raise WorkersLost(lost, what)

    def abort(self, code: int = 1) -> None:
        """Ends this rank only: the others go on without it."""
        super().abort(code)

    def close(self) -> None:
        """The end of a rank that lived through a loss: an abandoned group's threads may be waiting
        on a hung peer until gloo's own time limit (minutes): the process ends without joining them."""
        if self._abandoned:
            import sys
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    def _split(self, sub, groups, members) -> None:
        raise PynnetError("--elastic does not combine with --model-parallel")


class _Elastic:
    """What an averaging synchronizer does differently in an elastic job (mixed into
    AverageSync / OneBitAverageSync)."""
    comm: ElasticCommunicator

    def _init_elastic(self) -> None:
        self._events: list[dict] = []
        self._full = None          # the whole training and CV sets (re-sharded after a loss)
        self._current = None       # (shard index, shard count) of the trainer's training shard

    @property
    def members(self) -> list[int]:
        return self.comm.members

    def lost_events(self) -> list[dict]:
        return list(self._events)

    def shard(self, tr, cv, fingerprint, model):
        self._full = (tr, cv)
        self._current = (self.shard_index, self.shard_count)
        return super().shard(tr, cv, fingerprint, model)

    def _frames(self, utts: list[str]) -> FrameSet:
        tr = self._full[0]
        return FrameSet(tr.reader, tr.targets, utts, tr.frames, tr.lengths_from)

    def _shard_utts(self, index: int, count: int) -> list[str]:
        tr = self._full[0]
        return shard_utterances(tr.utts, tr.frames, count)[index]

    def extra_chunks(self, st: dict) -> list[list[str]]:
        if not st.get("adopted"):
            return []
        return plan_chunks(self._frames(st["adopted"]), st["epoch"], rank_seed(self._seed, *st["shard"]) + 1,
                           self._buffer_frames)

    def _plan(self, st: dict) -> list[list[str]]:
        """The chunks of the epoch of a rank's state ``st`` (its own shard's, then its adopted)."""
        index, count = st["shard"]
        own = plan_chunks(self._frames(self._shard_utts(index, count)), st["epoch"], rank_seed(self._seed, index, count),
                          self._buffer_frames)
        return own + self.extra_chunks(st)

    def resumed(self, obj: dict, st: dict) -> None:
        """Resuming, among fewer ranks than wrote the checkpoint, inside an epoch: the lost
        ranks' utterances from their current chunk on are shared out among the survivors."""
        members, ranks = obj.get("members"), obj.get("ranks")
        if not members or not ranks or st.get("done") or not (st.get("epoch_step") or st.get("chunk") or
                                                                st.get("batch")):
            return
        adopted = []
        for m in members:
            sm = ranks[members.index(m)]["state"]
            if m in self.members or sm.get("epoch") != st["epoch"] or "shard" not in sm:
                continue
            adopted += [u for chunk in self._plan(sm)[sm["chunk"]:] for u in chunk]
        if not adopted:
            return
        frames = self._full[0].frames
        mine = shard_utterances(sorted(set(adopted)), frames, self.size)[self.rank]
        st["adopted"] = sorted(set(st.get("adopted", [])) | set(mine))
        if self.is_writer:
            log(f"the lost ranks' {len(set(adopted))} remaining utterances of epoch {st['epoch']} "
                f"({sum(frames[u] for u in set(adopted))} frames) are shared out among the {self.size} survivors")

    def epoch_data(self, st: dict, seed: int):
        if "shard" not in st or not (st.get("epoch_step") or st.get("chunk") or st.get("batch")):
            st["shard"] = [self.rank, self.size]   # (an epoch's start: the current members' shards)
            st["adopted"] = []
        index, count = st["shard"]
        if (index, count) == self._current:
            return None
        tr = self._full[0]
        part = self._shard_utts(index, count)
        self._current = (index, count)
        if (index, count) != (self.rank, self.size):
            log(f"rank {self.comm.world_rank}: finishing epoch {st['epoch']} on its shard {index} of {count}")
        else:
            log(f"rank {self.rank} of {self.size}: epoch {st['epoch']} on {len(part)} training utterances "
                f"({sum(tr.frames[u] for u in part)} frames)")
        return self._frames(part), rank_seed(seed, index, count)

    def checkpoint_entry(self, members, written_by: int, path: str) -> int:
        if members is not None and len(members) == written_by and set(self.members) <= set(members):
            return members.index(self.comm.world_rank)
        if written_by == self.size:   # (a rerun of a job that had lost ranks, with that many)
            return self.rank
        who = f"the {written_by} ranks left of an elastic job (job ranks {members})" if members else \
            f"{written_by} workers"
        fail(f"checkpoint was written by {who}, this run has {self.size}: rerun with --num-workers {written_by} "
             "to resume, or remove it to start over", path)

    def regroup(self, e: WorkersLost) -> None:
        """After the communicator formed the smaller group: this rank's place in it."""
        self.rank, self.size = self.comm.rank, self.comm.size
        self.is_writer = self.rank == 0
        self.shard_index, self.shard_count = self.rank, self.size
        self.local_failure, self.updates_since_sync = None, 0
        set_log_rank(self.rank, self.comm.world_rank)   # (a new rank 0 logs the job from now on)
        event = {**self.comm.lost[-1], "epoch": e.epoch, "update": e.update}
        self._events.append(event)
        if self.is_writer:
            gone = ", ".join(map(str, e.ranks)) if e.ranks else "none (every rank answered)"
            where = f"epoch {e.epoch}, update {e.update}" if e.epoch is not None else "before the training"
            log(f"WARNING: lost rank(s) {gone} in {e.what} ({where}); going on with job ranks "
                f"{', '.join(map(str, self.members))} from the last checkpoint; the lost ranks' remaining "
                "utterances of this epoch are shared out among the survivors, the next epoch is re-sharded")


class ElasticAverageSync(_Elastic, AverageSync):
    pass


class ElasticOneBitAverageSync(_Elastic, OneBitAverageSync):
    pass


def make_elastic_sync(cfg, comm: ElasticCommunicator):
    """The synchronizer of an elastic job (``--sync average`` or ``average-1bit``)."""
    if cfg.sync not in ("average", "average-1bit"):
        raise PynnetError(f"--elastic works with --sync average or average-1bit, not {cfg.sync}")
    sync = make_sync(cfg, comm)
    cls = ElasticAverageSync if cfg.sync == "average" else ElasticOneBitAverageSync
    sync.__class__ = cls   # (the same object, with the elastic behaviour)
    sync._init_elastic()
    sync._seed, sync._buffer_frames = cfg.seed, cfg.buffer_frames
    return sync
