"""The order swap: the official code fed our pipeline's record order vs the official
pipeline's order (replay_official.py --records, seeds 1-4), against our own runs on our order
(same_order_ours.py --pipeline, seeds 1-8; seeds 1-4 read exactly the orders given to the
official code) and the fixture's official runs.

usage: D=<work dir> python docs/learning_study/residue/order_swap_compare.py [--json out/swap_results.json]
"""
import itertools, json, os, sys

from absl import flags
import numpy as np
HERE = os.environ["D"]  # the runs: $D/out/<run>/curves.json
flags.DEFINE_string("json", os.path.join(HERE, "out", "swap_results.json"), "the JSON written")
flags.FLAGS(sys.argv)
args = flags.FLAGS
W = {"1-100": (1, 100), "101-150": (101, 150), "151-200": (151, 200), "101-200": (101, 200)}
M = ("mlm_loss", "disc_loss")


def steps_of(path):
  return json.load(open(path))["steps"]


def win(st, m, lo, hi):
  return float(np.mean([s[m] for s in st[lo - 1:hi]]))


def perm_p(a, b):
  pooled = np.concatenate([a, b]); n, k = len(pooled), len(b); obs = abs(b.mean() - a.mean())
  c = t = 0
  for idx in itertools.combinations(range(n), k):
    m = np.zeros(n, bool); m[list(idx)] = True
    c += abs(pooled[m].mean() - pooled[~m].mean()) >= obs - 1e-12; t += 1
  return c / t, t


groups = {
    "official_code_our_order": [steps_of(os.path.join(HERE, "out", f"official_on_ours_order_s{s}", "curves.json")) for s in range(1, 5)],
    "official_code_official_order": [steps_of(os.path.join(HERE, "out", f"official_on_official_order_s{s}", "curves.json")) for s in range(1, 5)],
    "our_code_our_order": [steps_of(os.path.join(HERE, "out", f"pipeline_ours_s{s}", "curves.json")) for s in range(1, 9)],
    "fixture_official": [r["steps"] for r in json.load(open(
        os.path.join(os.environ.get("FIX", "../shared/fixtures/official_trajectory"), "official_curves.json")))["runs"].values()],
}
res = {"windows": {g: [{f"{m} {w}": win(st, m, *r) for m in M for w, r in W.items()} for st in sts]
                   for g, sts in groups.items()}, "tests": {}}
pairs = [("official_code_our_order", "official_code_official_order"),
         ("official_code_our_order", "our_code_our_order"),
         ("official_code_official_order", "fixture_official"),
         ("our_code_our_order", "fixture_official"),
         ("official_code_our_order", "fixture_official")]
for m in M:
  print(f"== {m}")
  for w in W:
    key = f"{m} {w}"
    vals = {g: np.array([x[key] for x in res["windows"][g]]) for g in groups}
    print(f"{w}: " + " | ".join(f"{g} {v.mean():.4f} [{v.min():.4f},{v.max():.4f}]" for g, v in vals.items()))
    for a, b in pairs:
      p, n = perm_p(vals[b], vals[a])
      res["tests"][f"{key}: {a} - {b}"] = {"diff": vals[a].mean() - vals[b].mean(), "p": p, "splits": n}
      print(f"    {a} - {b}: {vals[a].mean() - vals[b].mean():+.4f} p={p:.3f} ({n})")
json.dump(res, open(args.json, "w"), indent=1, default=float)
print("wrote", args.json)
