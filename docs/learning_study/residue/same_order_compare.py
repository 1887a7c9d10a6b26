"""Window means, exact permutation tests and per-step mean curves: official vs ours, same
record order, each side its own randomness.

usage: D=<work dir> python docs/learning_study/residue/same_order_compare.py [--official=DIR,DIR,...] [--ours=DIR,DIR,...] \
           [--extra_official $D/official_dropout0.1] [--json out/results.json]
           [--ours_label ours]

Defaults: official out/official_s{1..5}, ours out/ours_s{1..5}, extra official
$D/official_dropout0.1 (seed 1234; $D/official_d01_rec is
the same seed with the same masks and samples, so it is not an independent run and is
left out).  Tests: exact two-sided permutation p of the difference of means (ours -
official), over all splits: C(10,5)=252 for 5 vs 5, C(11,5)=462 with the extra run.
"""
import datetime
import itertools
import json
import sys
import os
import subprocess

import numpy as np
from absl import flags

HERE = os.environ["D"]  # the runs: $D/out/<run>/curves.json
flags.DEFINE_list("official", [os.path.join(HERE, "out", f"official_s{s}") for s in range(1, 6)],
                  "official run folders, comma-separated")
flags.DEFINE_list("ours", [os.path.join(HERE, "out", f"ours_s{s}") for s in range(1, 6)],
                  "our run folders, comma-separated")
flags.DEFINE_list("extra_official", [os.path.join(HERE, "out", "official_dropout0.1")],
                  "official runs not independent of --official's, shown apart")
flags.DEFINE_string("json", os.path.join(HERE, "out", "results.json"), "the JSON written")
flags.DEFINE_string("ours_label", "ours", "our side's name in the tables")
flags.FLAGS(sys.argv)
args = flags.FLAGS

WINDOWS = {"1-100": (1, 100), "101-150": (101, 150), "151-200": (151, 200),
           "101-200": (101, 200)}
METRICS = ("mlm_loss", "disc_loss")


def load(d):
  c = json.load(open(os.path.join(d, "curves.json")))
  return {m: np.array([s[m] for s in c["steps"]], np.float64) for m in METRICS}, c["args"]


def window(x, lo, hi):
  return float(x[lo - 1:hi].mean())


def perm_p(a, b):
  """Exact two-sided p of mean(b) - mean(a) over all relabellings."""
  pooled = np.concatenate([a, b])
  n, k = len(pooled), len(b)
  obs = abs(b.mean() - a.mean())
  total = count = 0
  for idx in itertools.combinations(range(n), k):
    mask = np.zeros(n, bool)
    mask[list(idx)] = True
    d = abs(pooled[mask].mean() - pooled[~mask].mean())
    count += d >= obs - 1e-12
    total += 1
  return count / total, total


runs = {"official": [(d, *load(d)) for d in args.official],
        "extra_official": [(d, *load(d)) for d in args.extra_official],
        args.ours_label: [(d, *load(d)) for d in args.ours]}
result = {
    "what": "same record order (fixture file order, step k = records 32(k-1)..32k-1), "
            "each side its own masks/samples/dropout (0.1)",
    "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
    "machine": subprocess.run("lscpu | grep 'Model name' | sed 's/.*: *//'", shell=True,
                              capture_output=True, text=True).stdout.strip(),
    "electra_tf_commit": subprocess.run(["git", "rev-parse", "--short",
                                         "HEAD"], capture_output=True, text=True).stdout.strip(),
    "runs": {side: [{"dir": d, "seed": a.get("seed"),
                     "windows": {m: {w: window(c[m], *r) for w, r in WINDOWS.items()}
                                 for m in METRICS}} for d, c, a in rs]
             for side, rs in runs.items()},
    "tests": {}, "curves": {}}

ours = runs[args.ours_label]
lines = []
for m in METRICS:
  lines.append(f"\n== {m}: window means (per seed), mean [min, max]; {args.ours_label} - official; "
               f"exact permutation p (5v5 / with extra official)")
  for w, r in WINDOWS.items():
    off5 = np.array([window(c[m], *r) for _, c, _ in runs["official"]])
    offx = np.concatenate([off5, [window(c[m], *r) for _, c, _ in runs["extra_official"]]])
    our = np.array([window(c[m], *r) for _, c, _ in ours])
    p5, n5 = perm_p(off5, our)
    px, nx = perm_p(offx, our)
    result["tests"][f"{m} {w}"] = {
        "official_mean": off5.mean(), "official_range": [off5.min(), off5.max()],
        "official_with_extra_mean": offx.mean(),
        "ours_mean": our.mean(), "ours_range": [our.min(), our.max()],
        "diff": our.mean() - off5.mean(), "p_5v5": p5, "splits_5v5": n5,
        "diff_with_extra": our.mean() - offx.mean(), "p_with_extra": px, "splits_with_extra": nx}
    lines.append(f"{w:8} official {off5.mean():.4f} [{off5.min():.4f}, {off5.max():.4f}] "
                 f"({' '.join(f'{v:.4f}' for v in off5)}; extra "
                 f"{' '.join(f'{v:.4f}' for v in offx[len(off5):])})")
    lines.append(f"{'':8} {args.ours_label:8} {our.mean():.4f} [{our.min():.4f}, {our.max():.4f}] "
                 f"({' '.join(f'{v:.4f}' for v in our)})")
    lines.append(f"{'':8} diff {our.mean() - off5.mean():+.4f} p={p5:.3f} ({n5} splits); "
                 f"with extra {our.mean() - offx.mean():+.4f} p={px:.3f} ({nx} splits)")
for side, rs in runs.items():
  if rs:
    result["curves"][side] = {m: np.mean([c[m] for _, c, _ in rs], axis=0).round(6).tolist()
                              for m in METRICS}
text = "\n".join(lines)
print(text)
result["table"] = text
os.makedirs(os.path.dirname(args.json), exist_ok=True)
json.dump(result, open(args.json, "w"), indent=1, default=float)
print("wrote", args.json)
