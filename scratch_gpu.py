"""Scratch (not committed): K = 128 rows of vla-speed for the fast level, and lm-throughput's training rows."""
import json, os, sys, time
import torch
from linattn.bench.contenders import CONTENDERS, SpeedConfig, inputs
from linattn.experiments.vla_speed import time_contender
from linattn.experiments import lm_throughput as lt
from linattn.experiments.lm_compare import RECIPES, compared_model
from linattn.models import DecoderLM

out = os.environ["OUT"]
t0 = time.time()
names = {"GDN (delta_rule)", "KLA (delta_rule)", "CCQ-GDN", "VLA triton", "GDN fast", "CCQ-GDN fast", "VLA fast", "softmax (SDPA)"}
config = SpeedConfig(Ts=(8192, 16384, 65536), head_dims=(128,), H=16, dtype="bfloat16", loop_max_T=1)
rows = []
for T in config.Ts:
    x = inputs(config, T, 128, "cuda")
    for c in CONTENDERS:
        if c.name in names:
            rows.append(time_contender(c, x, 128, config, "cuda"))
            print(rows[-1], round(time.time() - t0), flush=True)
            json.dump(rows, open(f"{out}/speed.json", "w"))
    del x
    torch.cuda.empty_cache()
cfg = lt.ThroughputConfig("short", (2048, 8192), 32768, 32768, (), 32)
train = []
for mixer in ("softmax", "gated_deltanet", "kla", "vla", "ccq-gated_deltanet", "gla", "mamba2"):
    torch.manual_seed(0)
    model = DecoderLM(compared_model(RECIPES["short"], mixer)).to("cuda")
    for T in cfg.lengths:
        train.append({"mixer": mixer, **lt._train_row(model, T, cfg, torch.device("cuda"))})
        print(train[-1], round(time.time() - t0), flush=True)
        json.dump(train, open(f"{out}/train.json", "w"))
    del model
    torch.cuda.empty_cache()
