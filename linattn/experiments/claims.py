"""Every claim of the three papers that we test (docs/papers.md states them), each read under one or more protocols:
`CLAIMS`. How a reading becomes a verdict is `linattn.experiments.verdicts`'s; the rules are
`linattn.experiments.rules`'."""

from __future__ import annotations

from linattn.experiments import paper, rules
from linattn.experiments.verdicts import Claim, Judge, Reading

PAPER_VLA = "the paper's recipe (3,000 steps of 64, lr 3e-4)"
FAIR_VLA = "fair: lr swept, up to 5,000 steps of 256, stop at 0.995"
CAPACITY, CAPACITY_FAIR = "vla-mqar-capacity/paper", "vla-mqar-capacity/fair"
LONG_SOFTMAX = "linattn run vla-mqar-capacity --protocol long --mixers softmax,softmax-conv --seeds 3 --device cuda"
STATE_NORM = "vla-state-norm/default"
AUTHORS_INIT = "untrained, the authors' init (every linear layer N(0, 0.02²)), seeds 0–2"
DEFAULT_INIT = "untrained, PyTorch's default init, seeds 0–2"
VLA_SPEED, KLA_SPEED = "vla-speed/default-cuda", "kla-speed/default-cuda"
SPEED_RUN = "one GPU (its table names it), bf16, B = 1, H = 16, T to 64K"
KLA_DECODE = "linattn run kla-speed --device cuda --force"  # with the decode step's GPU busy time, Mamba-2 beside
KLA_PAPER = "the paper's stated recipe (lr 1e-3 warmup + cosine, ≤ 10k steps, early stop, last weights)"
KLA_AUTHORS = "the authors' code: constant lr 1e-3, the best validation checkpoint tested"
KLA_FAIR = "fair: the paper's recipe, lr chosen per mixer on validation"
SCALE = "the paper's 0.4B-parameter models on 1B tokens are beyond the scale trained here"
CCQ_SCALE = "the paper's 500M / 1.3B-parameter models are beyond the scale trained here"
LM = "byte-level LM on the Python manual (373 KB), trained at 512, best-validation weights"
LM_LARGER = "a training corpus the models do not overfit (not in the repository)"
# lm-compare's short protocol, and how far it is from each paper's scale
SHORT = "lm-compare short: 36M-parameter BPE LMs, 10M tokens of Python sources, trained at 2K, best-validation weights"
SHORT_KLA = SHORT + " (1/11 of the paper's parameters, 1/100 of its tokens)"
SHORT_CCQ = SHORT + " (1/14 – 1/36 of the paper's parameters)"
LM_DECODE = "lm-compare short's models (36M parameters), one token a row after 32K, batch 1, bf16, one GPU"


def _accuracies(x: int, mixers: tuple[str, ...] = ("kla", "gated_deltanet", "mamba2")) -> str:
    """The KLA paper's MQAR accuracies at `x` as fractions (the report's unit), in the order of our row for it."""
    names = {"kla": "KLA", "gated_deltanet": "GDN", "mamba2": "Mamba-2"}
    return " / ".join(f"{names[m]} {paper.KLA_MQAR[m][x]:.3f}" for m in mixers if x in paper.KLA_MQAR[m])


def _r(protocol: str, results: str | None, judge: Judge | None = None, **kw) -> Reading:
    return Reading(protocol, results, judge, **kw)


VLA_CLAIMS = (
    Claim("VLA", "VLA recalls every pair on MQAR up to n = 24", "Table (MQAR capacity)", "1.000 at every n", (
        _r(PAPER_VLA, CAPACITY, rules.vla_solves),
        _r(FAIR_VLA, CAPACITY_FAIR, rules.vla_solves),
    )),
    Claim("VLA", "softmax attention fails MQAR (the paper's budget)", "Table (MQAR capacity)",
          rules.mqar_row("softmax"), (
        _r(PAPER_VLA, CAPACITY, rules.baseline_matches("softmax")),
    )),
    Claim("VLA", "softmax recalls 0.26 of the pairs at n = 24 (the paper's text)", "MQAR capacity, its text",
          f"{paper.VLA_MQAR_TEXT['softmax'][24]:.2f} at n = 24", (
        _r(PAPER_VLA, CAPACITY, rules.text_figure("softmax")),
    )),
    Claim("VLA", "softmax fails because attention cannot do it in this model", "Table (MQAR capacity), its reading",
          "0.074 at n = 24", (
        _r("long: up to 20,000 steps of 64, constant lr 3e-4 / 1e-3, stop at 0.995 (steps to solve)",
           "vla-mqar-capacity/long", rules.softmax_cannot(long_budget=True), needs=LONG_SOFTMAX),
        _r(FAIR_VLA, CAPACITY_FAIR, rules.softmax_cannot(long_budget=False)),
    )),
    Claim("VLA", "linear attention fails MQAR (the paper's budget)", "Table (MQAR capacity)",
          rules.mqar_row("linear"), (
        _r(PAPER_VLA, CAPACITY, rules.baseline_matches("linear")),
        _r(FAIR_VLA, CAPACITY_FAIR, rules.baseline_matches("linear"), decides=False),
    )),
    Claim("VLA", "DeltaNet collapses as n grows", "Table (MQAR capacity)", rules.mqar_row("deltanet"), (
        _r(PAPER_VLA, CAPACITY, rules.deltanet_collapses),
        _r(FAIR_VLA, CAPACITY_FAIR, rules.deltanet_collapses),
    )),
    Claim("VLA", "VLA keeps recall at long context (n = 8, T to 512)", "MQAR long context", "1.000 … 0.982 at 512", (
        _r("the authors' task: every token after the pairs a query (n_q = T − 17), 2,000 steps",
           "vla-mqar-length-queries/paper", rules.long_context),
        _r("ours: filler between the pairs and SEP (every query ≥ T − 25 tokens from its key), 2,000 steps",
           "vla-mqar-length/paper", rules.long_context),
        _r("the paper's text: filler after the queries, which see what they see at T = 25 (no distance tested)",
           "vla-mqar-length-after/paper", rules.long_context, decides=False),
    )),
    Claim("VLA", "at long context softmax and linear attention stay ≈ 0.15, DeltaNet ≈ 0.01", "MQAR long context",
          "softmax / linear ≈ 0.15, DeltaNet ≈ 0.01", (
        _r("the authors' task: every token after the pairs a query", "vla-mqar-length-queries/paper",
           rules.long_baselines),
        _r("ours: filler between the pairs and SEP", "vla-mqar-length/paper", rules.long_baselines),
        _r("the paper's text: filler after the queries (no distance tested)", "vla-mqar-length-after/paper",
           rules.long_baselines, decides=False),
    )),
    Claim("VLA", "exact recall while n < d_h, graceful degradation beyond, better than linear attention (d_h = 16)",
          "capacity and overload", "0.620 at n = d_h", (
        _r(PAPER_VLA, "vla-mqar-overload-dh16/paper", rules.overload),
        _r(FAIR_VLA, "vla-mqar-overload-dh16/fair", rules.overload),
    )),
    Claim("VLA", "the same at d_h = 32", "capacity and overload", "0.620 at n = d_h", (
        _r(PAPER_VLA, "vla-mqar-overload/paper", rules.overload),
        _r(FAIR_VLA, "vla-mqar-overload/fair", rules.overload),
    )),
    Claim("VLA", "every mixer copies 31 tokens", "Copy", "1.000 for all", (
        _r("a real copy (each target the next token), the paper's budget (1,500 steps of 32, lr 3e-4)",
           "vla-copy/paper", rules.copies(converged=False)),
        _r("a real copy, fair: lr swept, up to 3,000 steps of 256", "vla-copy/fair", rules.copies(converged=True)),
        _r("the authors' task: each copied token its own target (an identity task, not a copy)",
           "vla-copy-identity/paper", rules.copies(converged=False), decides=False),
    )),
    Claim("VLA", "untrained last-layer ‖S_T‖_F at T = 1000: linear / DeltaNet / VLA", "state norm",
          "1634 / 1.2 / 14.5", (
        _r(AUTHORS_INIT, STATE_NORM, rules.state_norms("authors")),
        _r(DEFAULT_INIT, STATE_NORM, rules.state_norms("default"), decides=False),
    )),
    Claim("VLA", "VLA's state is 109× smaller than linear attention's", "state norm", "109×", (
        _r(AUTHORS_INIT, STATE_NORM, rules.state_norm_ratio("authors")),
        _r(DEFAULT_INIT, STATE_NORM, rules.state_norm_ratio("default"), decides=False),
    )),
    Claim("VLA", "VLA's state norm is below 15 at T = 1000", "state norm", "< 15 at T = 1000", (
        _r(AUTHORS_INIT, STATE_NORM, rules.vla_below_15("authors")),
        _r(DEFAULT_INIT, STATE_NORM, rules.vla_below_15("default"), decides=False),
    )),
    Claim("VLA", "Proposition 1: VLA's state norm converges to a plateau", "Proposition 1", "plateau", (
        _r(AUTHORS_INIT + ", to 100K tokens", STATE_NORM, rules.plateau("authors")),
        _r(DEFAULT_INIT + ", to 100K tokens", STATE_NORM, rules.plateau("default"), decides=False),
    )),
    Claim("VLA", "Proposition 2: ‖I − α̂_t k̂_tᵀ‖₂ = 1", "Proposition 2", "exactly 1", (
        _r("untrained TinyLMs (3 seeds) and one trained on MQAR (n = 8)", "vla-jacobian/default", rules.unit_jacobian),
    )),
    Claim("VLA", "without normalising α the Jacobian products explode", "Jacobian",
          "~1e32 after 25 steps at d_h = 96", (
        _r("untrained TinyLM widened to d_h = 96", "vla-jacobian/default", rules.unnormalised_growth),
    )),
    Claim("VLA", "with ‖J_t‖ = 1, gradients reach early tokens over long sequences", "Proposition 2, its reading",
          "no vanishing", (
        _r("untrained TinyLMs, float64, seeds 0–2, T 16 – 4096", "vla-gradient-flow/default", rules.gradient_flow),
    )),
    Claim("VLA", "chunked VLA is 14× faster than sequential Python", "speed", "14×", (
        _r(SPEED_RUN, VLA_SPEED, rules.chunk_speedup),
    )),
    Claim("VLA", "VLA crosses below softmax attention at ≈ 43K tokens", "speed (extrapolated, T4)", "≈ 43K", (
        _r(SPEED_RUN, VLA_SPEED, rules.softmax_crossover),
    )),
    Claim("VLA", "the Sherman–Morrison gate costs ≈ 5× the operations of linear attention", "implementation", "≈ 5×", (
        _r(SPEED_RUN + ", linear attention beside VLA", VLA_SPEED, rules.op_overhead),
        _r(SPEED_RUN + ", against GDN (the run's reference)", VLA_SPEED, rules.over_gdn, decides=False),
    )),
)  # fmt: skip

KLA_CLAIMS = (
    Claim("KLA", "KLA extrapolates best on MQAR at 8× the training length", "MQAR, T = 2048",
          _accuracies(2048), (
        _r(KLA_AUTHORS, "kla-mqar/authors", rules.kla_extrapolates),
        _r(KLA_PAPER, "kla-mqar/paper", rules.kla_extrapolates),
        _r(KLA_FAIR, "kla-mqar/fair", rules.kla_extrapolates),
    )),
    Claim("KLA", "in distribution KLA ≈ GDN on MQAR", "MQAR, T = 256", _accuracies(256, ("gated_deltanet", "kla")), (
        _r(KLA_AUTHORS, "kla-mqar/authors", rules.kla_matches_gdn),
        _r(KLA_PAPER, "kla-mqar/paper", rules.kla_matches_gdn),
        _r(KLA_FAIR, "kla-mqar/fair", rules.kla_matches_gdn),
    )),
    Claim("KLA", "KLA solves S-NIAH at every length; Mamba-2 does not", "S-NIAH proxy, 1K–8K",
          "KLA 1.000 / GDN ≈ 0.985 / Mamba-2 ≈ 0.000", (
        _r(KLA_PAPER, "kla-sniah/paper", rules.kla_solves_sniah),
        _r(KLA_FAIR, "kla-sniah/fair", rules.kla_solves_sniah),
    )),
    Claim("KLA", "KLA is competitive or better on the stack task (state tracking)", "synthetic tasks",
          "competitive or better", (
        _r(KLA_PAPER + "; our stack task (the paper gives no format)", "kla-stack/paper", rules.state_tracking),
    )),
    Claim("KLA", "KLA is competitive or better on palindromes (reversal)", "synthetic tasks",
          "competitive or better", (
        _r(KLA_PAPER + "; our reversed copy (the paper gives no format)", "kla-palindrome/paper", rules.state_tracking),
    )),
    Claim("KLA", "without key normalisation MQAR collapses", "ablation",
          f"{paper.KLA_ABLATION['gated_deltanet-raw_keys'][256]:.4f}", (
        _r(KLA_PAPER, "kla-ablation/paper", rules.raw_keys_collapse),
    )),
    Claim("KLA", "the Kaczmarz step is an orthogonal projection, an exact line search and a normalised gradient step",
          "derivation", "all three at η = 1, ε = 0", (
        _r("float64, 1,000 random (S̃, k, v), our op's write", "kaczmarz-properties/default", rules.kaczmarz),
    )),
    Claim("KLA", "KLA's perplexity beats GDN's at 0.4B / 1B tokens", "language modelling", "8.09 vs 8.50", (
        _r("0.4B parameters, 1B SlimPajama tokens", None, reason=SCALE),
    )),
    Claim("KLA", "the same at our scale: KLA's test loss below GDN's", "language modelling", "8.09 vs 8.50 (0.4B)", (
        _r(SHORT_KLA, "lm-compare/short", rules.kla_lower_loss),
        _r(LM, "kla-lm/paper", rules.kla_lower_loss, needs=LM_LARGER),
    )),
    Claim("KLA", "KLA's perplexity beats DeltaNet's, GLA's, Longhorn's and Mamba-2's", "language modelling",
          "KLA 8.09; DeltaNet 8.26, GLA 8.42, Longhorn 8.79, Mamba-2 9.41", (
        _r("0.4B parameters, 1B SlimPajama tokens", None, reason=SCALE),
        _r(SHORT_KLA, "lm-compare/short", rules.kla_lowest_loss, decides=False),
    )),
    Claim("KLA", "KLA keeps the lowest perplexity from 1K to 65K context, 3.7 – 4.1 below GDN", "length extrapolation",
          "3.7 – 4.1 PPL below GDN", (
        _r("0.4B parameters, contexts to 65K", None, reason=SCALE),
        _r(SHORT_KLA + ", tested to 16K", "lm-compare/short", rules.kla_lm_extrapolation, decides=False),
        _r(LM + ", tested to 4,096", "kla-lm/paper", rules.kla_lm_extrapolation, decides=False, needs=LM_LARGER),
    )),
    Claim("KLA", "prefill latency KLA ≈ GDN", "efficiency, 131K", "1220 vs 1227 ms", (
        _r("one layer, d 1024 in 8 heads, bf16, one GPU", KLA_SPEED, rules.kla_prefill),
    )),
    Claim("KLA", "decode 2.1× GDN at 32K", "efficiency", "3.54 vs 1.65 tokens/s (2.1×)", (
        _r("one layer, one token after 32K, bf16, one GPU", KLA_SPEED, rules.decode_against("GDN", 2.1),
           needs=KLA_DECODE),
        _r(LM_DECODE, "lm-throughput/default-cuda", rules.model_decode_against("GDN", 2.1), decides=False),
    )),
    Claim("KLA", "decode 1.7× Mamba-2 at 32K", "efficiency", "1.7×", (
        _r("one layer, one token after 32K, bf16, one GPU, Mamba-2 beside", KLA_SPEED,
           rules.decode_against("Mamba-2", 1.7), needs=KLA_DECODE),
        _r(LM_DECODE, "lm-throughput/default-cuda", rules.model_decode_against("Mamba-2", 1.7), decides=False),
    )),
)  # fmt: skip

CCQ_CLAIMS = (
    Claim("CCQ", "CCQ-GLA improves perplexity and downstream scores at 500M / 1.3B", "headline results",
          "WikiText PPL 16.92, LAMBADA accuracy 0.478, LongBench 15.77", (
        _r("500M / 1.3B parameters on FineWeb-Edu", None, reason=CCQ_SCALE),
    )),
    Claim("CCQ", "CCQ lifts S-NIAH-1 at 4K by 49 points over GLA", "headline results", "+49.0 points", (
        _r(SHORT_CCQ + ": RULER's passkey in real text at 4K, the paper's setting", "lm-compare/short",
           rules.ccq_lifts_passkey),
        _r("the KLA paper's S-NIAH recipe with a long budget: up to 20,000 steps at a constant lr 1e-3, stop at 0.99 "
           "(GLA, as fla builds it, given the steps to learn it; the steps to solve shown)", "ccq-sniah/long",
           rules.ccq_lifts_sniah("gla", steps=True),
           needs="linattn run ccq-sniah --protocol long --mixers gla,ccq-gla --seeds 3 --device cuda"),
        _r("the KLA paper's S-NIAH recipe, GLA as fla builds it (no short convolution)", "ccq-sniah/paper",
           rules.ccq_lifts_sniah("gla")),
        _r("the same, lr chosen per mixer on validation (so that GLA may learn it)", "ccq-sniah/fair",
           rules.ccq_lifts_sniah("gla"),
           needs="linattn run ccq-sniah --protocol fair --mixers gla,ccq-gla --seeds 3 --device cuda"),
        _r("the same recipe, GLA with a short convolution", "ccq-sniah/paper", rules.ccq_lifts_sniah("gla-conv")),
    )),
    Claim("CCQ", "a transformer trained at 4K scores 0.000 at 8K; the CCQ variants keep substantial accuracy",
          "headline results", "0.000 at 8K", (
        _r("the S-NIAH recipe, trained at 1K: softmax attention with rotary positions (the paper's Transformer++)",
           "ccq-sniah/paper", rules.transformer_beyond("softmax-rope"),
           needs="linattn run ccq-sniah --mixers softmax-rope --seeds 3 --device cuda"),
        _r("the same, softmax attention with no position embeddings", "ccq-sniah/paper",
           rules.transformer_beyond("softmax"), decides=False,
           needs="linattn run ccq-sniah --mixers softmax --seeds 3 --device cuda"),
    )),
    Claim("CCQ", "CCQ improves its base's length extrapolation", "headline results",
          "better beyond the training length", (
        _r("MQAR as kla-mqar (trained at 256, tested to 2048), the paper's stated recipe", "ccq-mqar/paper",
           rules.ccq_extrapolates),
    )),
    Claim("CCQ", "CCQ lowers perplexity from 4K to 20K context", "headline results", "lower PPL, 4K–20K", (
        _r(SHORT_CCQ + ", tested at 4K – 16K", "lm-compare/short", rules.ccq_lowers_loss),
        _r(LM + ", tested to 4,096", "ccq-lm-length/paper", rules.ccq_lowers_loss, needs=LM_LARGER),
    )),
    Claim("CCQ", "at 20K the CCQ variants' perplexity is 1 – 2.5 below their bases'", "length extrapolation",
          "1 – 2.5 PPL", (
        _r("1.3B parameters, six long-document corpora at 20K", None, reason=CCQ_SCALE),
    )),
    Claim("CCQ", "the covariance read costs little", "mechanism", "a small extra cost", (
        _r(SPEED_RUN + ", CCQ on GDN against GDN", VLA_SPEED, rules.ccq_cost),
    )),
)  # fmt: skip

CLAIMS = VLA_CLAIMS + KLA_CLAIMS + CCQ_CLAIMS
