"""Host launcher of the chunked forward of the two-key gated delta rule: four stages, launched in order.

    S_t = exp(g_t) (I − β_t w_t k_tᵀ) S_{t-1} + β_t w_t v_tᵀ,      o_t = scale · S_tᵀ q_t

1. `cumsum.py`  G = chunk-local cumsum of g                                       [B, T, H]
2. `wy.py`      T = (I + strict_tril(diag(β)(K Wᵀ ⊙ D)))⁻¹, Ũ = T β V, K̃ = T β Γ K  per chunk, in parallel
3. `state.py`   U_c = Ũ_c − K̃_c h_c, h_{c+1} = Γ_C h_c + (W ⊙ Γ_C/Γ)ᵀ U_c          sequential over chunks
4. `output.py`  O = scale · (diag(Γ) Q h_c + tril(Q Wᵀ ⊙ D) U_c)                   per chunk, in parallel

(the chunkwise form of `chunk.py`, docs/design.md §2.2, with chunks of 64 tokens).

KLA (`kaczmarz_eps` a number): the step is `β = η / (‖k‖² + ε)` with `η = beta`; stage 2 sums `‖k‖²` from the key
rows it loads and stores `r = 1 / (‖k‖² + ε)` (`[B, T, H]` float32) for the backward. No other stage reads β.

Without the erase term (`erase=False`: `S_t = exp(g_t) S_{t-1} + k_t v_tᵀ`, linear attention and scalar-decay GLA,
docs/design.md §2.1) the pseudo-values are the values, `U = V` (`T = I`, `K̃ = 0`): stage 2 is skipped, stage 3 runs with
`ERASE` off (reads `V`, stores no `U`), and stage 4 reads `V` as `U`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linattn.ops.delta_rule.triton.cumsum import chunk_cumsum
from linattn.ops.delta_rule.triton.output import output_fwd
from linattn.ops.delta_rule.triton.precision import forward_precision
from linattn.ops.delta_rule.triton.state import state_fwd
from linattn.ops.delta_rule.triton.wy import wy_fwd
from linattn.ops.utils.inputs import INPUT_DTYPES
from linattn.ops.utils.layout import ChunkLayout, chunk_layout

MAX_HEAD_DIM = 256
# The value dim is only ever split into blocks, so its bound is not structural: one more than the head dim lets
# normalised linear attention (one more value column of ones) run at V = 256.
MAX_VALUE_DIM = MAX_HEAD_DIM + 1


@dataclass(frozen=True)
class ForwardSaved:
    """What the forward computed that the backward reuses (the inputs themselves are saved by the caller).

    The backward recomputes the rest from these in one cheap pass: `Ũ = T β V` and `K̃ = T β Γ K` (two matmuls per
    chunk), then the chunk-start states `h` and pseudo-values `U` by re-running stage 3, rather than keeping
    `h` (`[B, NT, H, K, V]` float32, 4× the size of `q` at K = V = 128 in bfloat16) alive between the passes.
    """

    G: torch.Tensor | None  # [B, T, H] float32 chunk-local cumsum of g, None without g
    T_inv: torch.Tensor | None  # [B, T, H, BT] float32: row t of its chunk's (I + A)⁻¹; None without the erase term
    layout: ChunkLayout  # the chunk grid (cu_seqlens, chunk indices and offsets)
    inv_sq_norm: torch.Tensor | None = None  # [B, T, H] float32 r = 1 / (‖k‖² + ε) of KLA's step; None otherwise


def _fail(message: str) -> ValueError:
    return ValueError(f"delta_rule_fwd: {message}")


def _check(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    g: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    cu_seqlens: torch.Tensor | None,
    erase: bool,
    kaczmarz_eps: float | None,
) -> None:
    """The launcher's own assumptions; shapes are the public API's job (`delta_rule` validates them). The messages
    are formatted only on failure: a call's host time is part of a short sequence's cost."""
    if not erase and not (w is None and beta is None):
        raise _fail("without the erase term there is one key (w None) and no beta")
    if not erase and kaczmarz_eps is not None:
        raise _fail("the Kaczmarz step (kaczmarz_eps) needs the erase term")
    tokens = {"q": q, "k": k, "v": v, "w": w}
    for name, x in {**tokens, "beta": beta, "g": g, "initial_state": initial_state}.items():
        if x is None:
            continue
        if not x.is_contiguous():
            raise _fail(f"{name} must be contiguous (call .contiguous() first)")
        if not x.is_floating_point():
            raise _fail(f"{name} must be a floating-point tensor, got {x.dtype}")
        if x.device != q.device:
            raise _fail(f"{name} is on {x.device}, expected {q.device} (as q)")
    for name, x in tokens.items():
        if x is not None and x.dtype not in INPUT_DTYPES:
            raise _fail(f"{name} must be float32, bfloat16 or float16, got {x.dtype}")
    K, V = k.shape[-1], v.shape[-1]
    if K > MAX_HEAD_DIM:
        raise _fail(f"head dims up to {MAX_HEAD_DIM} only, got K={K}")
    if V > MAX_VALUE_DIM:
        raise _fail(f"value dim up to {MAX_VALUE_DIM} only (256 + a normaliser column), got V={V}")
    if cu_seqlens is not None and cu_seqlens.is_floating_point():
        raise _fail(f"cu_seqlens must be an integer tensor, got {cu_seqlens.dtype}")


def delta_rule_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    g: torch.Tensor | None,
    scale: float,
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    cu_seqlens: torch.Tensor | None,
    *,
    erase: bool = True,
    out_dtype: torch.dtype | None = None,
    kaczmarz_eps: float | None = None,
    fast: bool = False,
    derived_output: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None, ForwardSaved]:
    """The chunked forward: `(o, final_state, saved)`.

    Args (validated by `delta_rule`; here only contiguity, dtypes, device and head dims are asserted):
        q, k: `[B, T, H, K]`; v: `[B, T, H, V]`; w: `[B, T, H, K]` or None (w = k); each float32, bfloat16 or
            float16 (they may differ: VLA passes float32 `k̂`, `α̂` beside a bfloat16 model's `q`, `v`; products of
            raw inputs then take the float32 precision), contiguous, `K, V ≤ 256` (any size: blocks are padded
            inside the kernels).
        beta: `[B, T, H]` or None (1).  g: log-decay `[B, T, H]` or None (0).  Any float dtype.
        scale: output scale.
        initial_state: `[N, H, K, V]` any float dtype, or None (zeros).
        output_final_state: also return the final state.
        cu_seqlens: `[N + 1]` integer offsets of packed sequences (`B == 1`), or None.
        erase: False drops the erase term, `S_t = exp(g_t) S_{t-1} + k_t v_tᵀ` (then `w` and `beta` must be None).
        out_dtype: dtype of `o`, default v's.
        kaczmarz_eps: a number `ε`: KLA's step `β = beta / (‖k‖² + ε)` (`beta` None meaning 1), of the erase key `k`.
        fast: the `precision="fast"` level: for bfloat16 tokens, intermediates (`T`, `Ũ`, `K̃`, `h`, `U`) stored in
            bfloat16 and multiplied on its tensor cores (`utils.precision.fast_precision`); other dtypes as exact.
        derived_output: `o` (in a wider `out_dtype`) is only an intermediate of an output the caller rounds to v's
            dtype (normalised linear attention's division): the precision follows v's dtype, not `out_dtype`.
    Returns:
        `o: [B, T, H, V]` in `out_dtype`; the final state `[N, H, K, V]` float32 (None unless requested); and
        `ForwardSaved` for the backward. States and accumulation are float32 (the stored intermediates bfloat16 at
        the fast level); products as `precision.py` says.
    """
    _check(q, k, v, w, beta, g, initial_state, cu_seqlens, erase, kaczmarz_eps)
    B, T = q.shape[:2]
    w = k if w is None else w
    layout = chunk_layout(B, T, cu_seqlens, q.device)
    G = None if g is None else chunk_cumsum(g, layout)
    out_dtype = out_dtype or v.dtype
    p = forward_precision(q, k, v, w, v.dtype if derived_output else out_dtype, output_final_state, fast)
    if erase:
        T_inv, u_tilde, k_tilde, inv_sq_norm = wy_fwd(k, v, w, beta, G, layout, kaczmarz_eps, p.rows, p.store)
    else:
        # T = I, K̃ = 0: stage 3 reads the values as Ũ and the pseudo-values are the values
        T_inv, u_tilde, k_tilde, inv_sq_norm = None, v, None, None
    h, U, final_state = state_fwd(k_tilde, u_tilde, w, G, initial_state, output_final_state, layout, p.state, p.store)
    o = output_fwd(q, w, G, h, v if U is None else U, scale, layout, out_dtype, p.output)
    return o, final_state, ForwardSaved(G=G, T_inv=T_inv, layout=layout, inv_sq_norm=inv_sq_norm)
