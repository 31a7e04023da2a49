"""Online natural-gradient preconditioning (Povey, Zhang & Khudanpur 2014; Kaldi nnet2/nnet3
``OnlineNaturalGradient``), applied per affine layer to the input and output-derivative matrices.

The Fisher matrix of the rows of a minibatch matrix M (N x D) is kept as a low-rank-plus-identity
estimate ``F = R^T diag(d) R + rho I`` (R: rank x D with orthonormal rows) and smoothed as
``G = F + (alpha/D) tr(F) I``. Preconditioning returns ``P = M - M W^T W`` with ``W = E^(1/2) R``,
``e_i = 1/(beta/d_i + 1)``, ``beta = rho (1 + alpha) + (alpha/D) sum(d)``; this equals
``beta M G^-1`` exactly (Woodbury), and the caller scales it by ``gamma = ||M||_F / ||P||_F`` so the
step size is unchanged. The estimate is refreshed from the *unpreconditioned* M (before the new
parameters are used, so a minibatch never preconditions itself) every ``update_period`` minibatches
(and on each of the first 10).

Everything large is a GEMM against the rank x D matrix; the rank x rank algebra is done in float64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

_EPS = 1e-10      # Kaldi epsilon_: floor on rho and d
_DELTA = 5e-4     # Kaldi delta_ (nnet2 and nnet3 constructors; a comment in nnet2's header
                  # says 1e-5): floor on rho and d relative to the largest sqrt(c)
_NUM_INITIAL_UPDATES = 10
_NUM_INIT_ITERS = 3


@dataclass
class NgConfig:
    """Kaldi nnet2's steps/nnet2/train_pnorm_fast.sh settings for AffineComponentPreconditionedOnline
    (the component's own defaults differ: rank_in 30, update_period 1, max_change 0.1)."""
    rank_in: int = 20
    rank_out: int = 80
    alpha: float = 4.0
    update_period: int = 4
    num_samples_history: float = 2000.0
    max_change_per_sample: float = 0.075


class OnlineNaturalGradient:
    """The preconditioner of one side (input or output derivative) of one affine layer."""

    def __init__(self, rank: int, alpha: float = 4.0, update_period: int = 4,
                 num_samples_history: float = 2000.0, seed: int = 0):
        self.rank_req = rank
        self.alpha = alpha
        self.update_period = update_period
        self.num_samples_history = num_samples_history
        self.seed = seed
        self.t = 0                       # minibatches seen
        self.rank = 0
        self.R: torch.Tensor | None = None  # rank x D, orthonormal rows (working dtype)
        self.d: torch.Tensor | None = None  # rank, float64
        self.rho = _EPS
        self._consts: tuple[torch.Tensor, torch.Tensor] | None = None  # see _estimate_consts
        self._scratch: tuple[torch.Tensor, torch.Tensor] | None = None  # see _scratch_rows

    # ---- state (for exact resume) ----
    def state_dict(self) -> dict:
        return {"t": self.t, "rank": self.rank, "R": self.R, "d": self.d, "rho": self.rho,
                "seed": self.seed, "rank_req": self.rank_req}

    def load_state_dict(self, s: dict) -> None:
        self.t, self.rank, self.R, self.d, self.rho = s["t"], s["rank"], s["R"], s["d"], s["rho"]
        self.seed, self.rank_req = s["seed"], s["rank_req"]
        self._consts = self._scratch = None

    def to(self, device) -> "OnlineNaturalGradient":
        if self.R is not None:
            self.R = self.R.to(device)
        self._consts = self._scratch = None
        return self

    # ---- the smoothed Fisher estimate, explicitly (tests and diagnostics only: D x D) ----
    def fisher(self) -> torch.Tensor:
        """F = R^T diag(d) R + rho I in float64."""
        R = self.R.double().cpu()
        return R.t() @ (self.d[:, None] * R) + self.rho * torch.eye(R.shape[1], dtype=torch.float64)

    def beta(self, dim: int) -> float:
        return self.rho * (1.0 + self.alpha) + self.alpha / dim * float(self.d.sum())

    def eta(self, n: int) -> float:
        return min(0.9, 1.0 - math.exp(-n / self.num_samples_history))

    # ---- initialisation: random orthonormal start, then a few updates on the first minibatch ----
    def _init(self, M: torch.Tensor) -> None:
        N, D = M.shape
        self.rank = max(0, min(self.rank_req, D - 1))
        if self.rank == 0:
            return
        g = torch.Generator().manual_seed(self.seed)
        R = torch.randn(self.rank, D, generator=g, dtype=torch.float64)
        self.R = _orthonormal_rows(R).to(device=M.device, dtype=M.dtype)
        self.d = torch.full((self.rank,), _EPS, dtype=torch.float64)
        self.rho = _EPS
        self._consts = self._scratch = None
        for _ in range(1 if N <= self.rank else _NUM_INIT_ITERS):
            H_R = M @ self.R.t()
            self._update(M, H_R, float(torch.linalg.vector_norm(M, dtype=torch.float64) ** 2))

    def _updating(self) -> bool:
        return (self.t <= _NUM_INITIAL_UPDATES
                or (self.t - _NUM_INITIAL_UPDATES) % self.update_period == 0)

    def precondition(self, M: torch.Tensor, inplace: bool = False) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Return (P, gamma, row_norms_sq of gamma*P). With ``inplace`` P overwrites M (the caller's
        scratch buffer), otherwise P is a new tensor and M is left alone.

        The preconditioned direction is ``gamma * P``; gamma is returned separately so callers can
        fold it into the alpha of the GEMM that consumes P (no extra pass over the matrix).
        """
        if self.t == 0:
            self._init(M)
        self.t += 1
        m_rows = torch.linalg.vector_norm(M, dim=1).double().square_()   # one pass, no temporary
        tr_MM = float(m_rows.sum())
        if self.rank == 0:
            return (M if inplace else M.clone()), 1.0, m_rows
        N, D = M.shape
        e_work, w = self._estimate_consts(M)
        H_R, Hd = self._scratch_rows(M)
        torch.mm(M, self.R.t(), out=H_R)                     # N x rank (projection onto R)
        # the estimate's update reads the unpreconditioned M: take what it needs first
        Y = self._y(M, H_R) if self._updating() else None
        # ||p_i||^2 = ||m_i||^2 - 2 h_i.h_i + sum_j e_j h_ij^2 with h = H_R E^(1/2)  (R orthonormal),
        # i.e. ||m_i||^2 - sum_j (2 e_j - e_j^2) H_R_ij^2, in float64
        p_rows = m_rows - Hd.copy_(H_R).mul_(Hd).mul_(w).sum(1)
        # P = M - (H_R E) R, i.e. M - H W with H = M W^T, W = E^(1/2) R
        HE = H_R.mul_(e_work)
        P = M.addmm_(HE, self.R, alpha=-1.0) if inplace else torch.addmm(M, HE, self.R, alpha=-1.0)
        tr_PP = float(p_rows.sum())
        if not (tr_PP > 1e-4 * tr_MM):  # cancellation too severe: compute it directly
            p_rows = torch.linalg.vector_norm(P, dim=1).double().square_()
            tr_PP = float(p_rows.sum())
        p_rows = p_rows.clamp_min(0.0)
        gamma = 1.0 if tr_PP <= 0.0 else math.sqrt(tr_MM / tr_PP)
        if Y is not None:
            self._finish_update(Y, N, D, tr_MM)
        return P, gamma, p_rows * (gamma * gamma)

    def _estimate_consts(self, M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(e in M's dtype, 2e - e^2 in float64), on M's device: they change only with the estimate
        (every update_period minibatches), so they are computed once per estimate."""
        c = self._consts
        if c is None or c[0].dtype != M.dtype or c[0].device != M.device:
            e = 1.0 / (self.beta(M.shape[1]) / self.d + 1.0)  # float64, rank
            c = self._consts = (e.to(device=M.device, dtype=M.dtype), (2.0 * e - e * e).to(M.device))
        return c

    def _scratch_rows(self, M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reused N x rank buffers (working dtype, float64): fresh ones per minibatch would be
        allocated and page-faulted every call (glibc serves large blocks by mmap)."""
        N, s = M.shape[0], self._scratch
        if s is None or s[0].shape[0] < N or s[0].dtype != M.dtype or s[0].device != M.device:
            s = self._scratch = (M.new_empty(N, self.rank), M.new_empty(N, self.rank, dtype=torch.float64))
        return s[0][:N], s[1][:N]

    def _update(self, M: torch.Tensor, H_R: torch.Tensor, tr_MM: float) -> None:
        """One step of the online estimate from the minibatch M (REFERENCES.md section 4)."""
        self._finish_update(self._y(M, H_R), M.shape[0], M.shape[1], tr_MM)

    def _y(self, M: torch.Tensor, H_R: torch.Tensor) -> torch.Tensor:
        """Y = eta R S_t + (1 - eta)(diag(d) + rho I) R,  S_t = M^T M / N  (H_R = M R^T)."""
        N = M.shape[0]
        eta = self.eta(N)
        coef = ((1.0 - eta) * (self.d + self.rho)).to(device=M.device, dtype=M.dtype)
        return torch.addmm(coef[:, None] * self.R, H_R.t(), M, alpha=eta / N)

    def _finish_update(self, Y: torch.Tensor, N: int, D: int, tr_MM: float) -> None:
        r = self.rank
        eta = self.eta(N)
        tr_S = tr_MM / N
        YYt = (Y @ Y.t()).double()            # rank x rank; the small algebra in float64
        c, U = torch.linalg.eigh(YYt.cpu())
        # Kaldi's floor on C, relative to the data's scale: C is in squared units of d and rho, so
        # an absolute floor (1e-10) would clip small-valued matrices (hidden layers' output
        # derivatives: d ~ 1e-5) and turn R's rows non-orthonormal. Flooring forces a re-orth.
        c_floor = (self.rho * (1.0 - eta)) ** 2
        floored = bool((c < c_floor).any())
        c = c.clamp_min(c_floor)
        sqrt_c = c.sqrt()
        rho = (eta * tr_S + (1.0 - eta) * (D * self.rho + float(self.d.sum())) - float(sqrt_c.sum())) / (D - r)
        floor = max(_EPS, _DELTA * float(sqrt_c.max()))
        rho = max(rho, floor)
        d = (sqrt_c - rho).clamp_min(floor)
        # R' = C^(-1/2) U^T Y  (orthonormal rows in exact arithmetic)
        T = (U / sqrt_c[None, :]).t().to(device=Y.device, dtype=Y.dtype)
        R = T @ Y
        # R is orthonormal up to the GEMM's rounding amplified by T's range (1/sqrt(c)): checked
        # at every refresh (an r x D x r GEMM; G is reused by the re-orthonormalization)
        G = R @ R.t()
        error = float((G - torch.eye(r, dtype=G.dtype, device=G.device)).abs().max())
        if floored or float(c.max() / c.min()) > 1e6 or error > 1e-4:
            R = _reorthonormalized(R, G, error)
        self.R, self.d, self.rho = R, d, rho
        self._consts = None


def _reorthonormalized(R: torch.Tensor, G: torch.Tensor, error: float) -> torch.Tensor:
    """R's rows made orthonormal again, given G = R R^T and error = max |G - I|. Nearly
    orthonormal (the usual case): R <- L^-1 R with G = L L^T (Cholesky in float64), one r x r x D
    GEMM in the working dtype, accurate to its rounding because L^-1 is close to I. Otherwise
    Gram-Schmidt in float64."""
    if error < 1e-2:
        try:
            L = torch.linalg.cholesky(G.double().cpu())
            L_inv = torch.linalg.solve_triangular(L, torch.eye(L.shape[0], dtype=L.dtype), upper=False)
            return L_inv.to(device=R.device, dtype=R.dtype) @ R
        except RuntimeError:
            pass
    return _orthonormal_rows(R.cpu()).to(device=R.device, dtype=R.dtype)   # float64 on the CPU, as above


def _orthonormal_rows(A: torch.Tensor) -> torch.Tensor:
    """Rows orthonormalised (Gram-Schmidt via Cholesky of A A^T; QR as a fallback)."""
    A = A.double()
    try:
        L = torch.linalg.cholesky(A @ A.t())
        return torch.linalg.solve_triangular(L, A, upper=False)
    except RuntimeError:
        Q, _ = torch.linalg.qr(A.t())
        return Q.t().contiguous()
