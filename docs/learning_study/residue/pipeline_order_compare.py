"""Our normal input pipeline (same_order_ours.py --pipeline, seeds 1-8): per-seed window
means, split by whether the seed's file order reads one file twice in lockstep
(order_record.py: out/order_ours.json, dup_in_batch_frac > 0.01), against the official
fixture's shuffled runs (official_curves.json).

usage: D=<work dir> python docs/learning_study/residue/pipeline_order_compare.py [--json out/pipeline_results.json]
"""
import itertools, json, os, sys

from absl import flags
import numpy as np
HERE = os.environ["D"]  # the runs: $D/out/<run>/curves.json
flags.DEFINE_string("json", os.path.join(HERE, "out", "pipeline_results.json"), "the JSON written")
flags.FLAGS(sys.argv)
args = flags.FLAGS
W = {"1-100": (1, 100), "101-150": (101, 150), "151-200": (151, 200), "101-200": (101, 200)}
order = json.load(open(os.path.join(HERE, "out", "order_ours.json")))["per_seed"]
fixture = json.load(open(os.path.join(os.environ.get("FIX", "../shared/fixtures/official_trajectory"), "official_curves.json")))["runs"]


def win(steps, m, lo, hi):
  return float(np.mean([s[m] for s in steps[lo - 1:hi]]))


def perm_p(a, b):
  pooled = np.concatenate([a, b]); n, k = len(pooled), len(b); obs = abs(b.mean() - a.mean())
  c = t = 0
  for idx in itertools.combinations(range(n), k):
    m = np.zeros(n, bool); m[list(idx)] = True
    c += abs(pooled[m].mean() - pooled[~m].mean()) >= obs - 1e-12; t += 1
  return c / t, t


runs = {}
for s in range(1, 9):
  d = os.path.join(HERE, "out", f"pipeline_ours_s{s}", "curves.json")
  if os.path.exists(d):
    runs[s] = json.load(open(d))["steps"]
res = {"per_seed": {}, "fixture_official": {}, "tests": {}}
for s, st in runs.items():
  res["per_seed"][s] = {"lockstep_duplicate_file": order[str(s)]["dup_in_batch_frac"] > 0.01,
                        "dup_in_batch_frac": order[str(s)]["dup_in_batch_frac"],
                        **{f"{m} {w}": win(st, m, *r) for m in ("mlm_loss", "disc_loss")
                           for w, r in W.items()}}
for k, r in fixture.items():
  res["fixture_official"][k] = {f"{m} {w}": win(r["steps"], m, *rr)
                                for m in ("mlm_loss", "disc_loss") for w, rr in W.items()}
for m in ("mlm_loss", "disc_loss"):
  print(f"== {m}")
  for w in W:
    key = f"{m} {w}"
    dup = np.array([v[key] for v in res["per_seed"].values() if v["lockstep_duplicate_file"]])
    nod = np.array([v[key] for v in res["per_seed"].values() if not v["lockstep_duplicate_file"]])
    off = np.array([v[key] for v in res["fixture_official"].values()])
    p, n = perm_p(nod, dup)
    p2, n2 = perm_p(off, nod)
    p3, n3 = perm_p(off, np.concatenate([dup, nod]))
    res["tests"][key] = {"dup_seeds": dup.tolist(), "nodup_seeds": nod.tolist(),
                         "fixture_official": off.tolist(), "dup_minus_nodup": dup.mean() - nod.mean(),
                         "p_dup_vs_nodup": p, "splits": n,
                         "nodup_minus_official": nod.mean() - off.mean(), "p_nodup_vs_official": p2,
                         "all_minus_official": np.concatenate([dup, nod]).mean() - off.mean(),
                         "p_all_vs_official": p3}
    print(f"{w:8} dup-file seeds {dup.mean():.4f} ({' '.join(f'{x:.4f}' for x in dup)}) | "
          f"others {nod.mean():.4f} ({' '.join(f'{x:.4f}' for x in nod)}) | "
          f"official fixture {off.mean():.4f} ({' '.join(f'{x:.4f}' for x in off)})")
    print(f"{'':8} dup-others {dup.mean() - nod.mean():+.4f} p={p:.3f} ({n}); others-official "
          f"{nod.mean() - off.mean():+.4f} p={p2:.3f} ({n2}); all-official "
          f"{np.concatenate([dup, nod]).mean() - off.mean():+.4f} p={p3:.3f} ({n3})")
json.dump(res, open(args.json, "w"), indent=1, default=float)
print("wrote", args.json)
