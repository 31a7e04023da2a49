"""Determinism (docs/DESIGN.md, "Determinism"): the same command with the same seed, worker count
and threads writes a byte-identical final.nnet, for one worker and for 2-rank jobs in the
averaging, 1-bit averaging and 1-bit SGD modes; another seed writes other bytes."""
import hashlib

import pytest
import torch

from test_parallel import ONE_BIT, _run, _train_cmd
from test_parallel import corpus  # noqa: F401 - the toy corpus fixture (one per module)

MODES = {"1worker": (1, ()), "average": (2, ("--sync", "average")),
         "average-1bit": (2, ("--sync", "average-1bit")), "1bit": (2, ONE_BIT)}


def _train(root, data, ali, name, k, *opts):
    exp = root / f"exp_det_{name}"
    r = _run(_train_cmd(exp, data, ali, "--max-epochs", "2", *opts, k=k))
    assert r.returncode == 0, r.stderr
    return exp / "final.nnet"


def _sha1(path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def _what_differs(a, b) -> str:
    """For the failure message: which parts of the two saved models differ."""
    x, y = (torch.load(p, map_location="cpu", weights_only=False) for p in (a, b))
    keys = [k for k in sorted(set(x) | set(y)) if k != "state_dict" and x.get(k) != y.get(k)]
    sd = x["state_dict"], y["state_dict"]
    keys += [f"state_dict[{k}]" for k in sd[0] if not torch.equal(sd[0][k], sd[1].get(k, torch.empty(0)))]
    return ", ".join(keys) or "nothing once loaded: the pickled bytes alone (object sharing, names)"


@pytest.mark.parametrize("mode", list(MODES))
def test_same_seed_same_bytes(corpus, mode):  # noqa: F811
    root, data, ali = corpus
    k, opts = MODES[mode]
    a, b = (_train(root, data, ali, f"{mode}_{run}", k, *opts) for run in ("a", "b"))
    assert _sha1(a) == _sha1(b), f"{mode}: final.nnet differs in {_what_differs(a, b)}"
    if mode == "1worker":
        # ... and the seed does matter (the test can fail)
        c = _train(root, data, ali, "1worker_seed", 1, "--seed", "778")
        assert _sha1(c) != _sha1(a)
