"""Compares the official replay driver's outputs with our replay's.

usage: python docs/learning_study/residue/replay_compare.py --official=$D/official \
           --ours=$D/ours [--ours2=$D/ours_forced_lr] [--json=$D/compare.json]

Prints: the step-1 per-variable gradient agreement (worst 10 by relative norm
difference, and the summary by group), per-step loss differences at chosen steps, the
window means of both sides, per-group gradient-norm ratios by window, the lr of both
sides where they differ, the first step whose losses differ by more than float32 noise,
and the official fixture's runs (dropout 0.1) for context.
"""
import json
import sys
import os

import numpy as np
from absl import flags

FIXTURE = os.environ.get("FIX", "../shared/fixtures/official_trajectory")
flags.DEFINE_string("official", None, "replay_official.py's output folder")
flags.DEFINE_string("ours", None, "replay_ours.py's output folder")
flags.DEFINE_string("ours2", None, "a second replay of ours (e.g. forced lr)")
flags.DEFINE_string("json", None, "also write the summary here")
flags.mark_flags_as_required(["official", "ours"])
flags.FLAGS(sys.argv)
args = flags.FLAGS

GROUPS = ("shared_embeddings", "generator", "discriminator")


def group(name):
  if name.startswith("electra/embeddings/"):
    return "shared_embeddings"
  return "generator" if name.startswith("generator") else "discriminator"


summary = {}
off = json.load(open(os.path.join(args.official, "curves.json")))
go = dict(np.load(os.path.join(args.official, "grads_step1.npz")))


def grad_table(ours_dir, label):
  gu = dict(np.load(os.path.join(ours_dir, "grads_step1.npz")))
  assert set(go) == set(gu), set(go) ^ set(gu)
  rows = []
  for n in go:
    a, b = go[n].astype(np.float64), gu[n].astype(np.float64)
    rows.append((n, float(np.max(np.abs(a - b))), float(np.linalg.norm(b - a) /
                                                         max(np.linalg.norm(a), 1e-30)),
                 float(np.linalg.norm(a))))
  rows.sort(key=lambda r: -r[2])
  print(f"\n== step-1 gradients, {label}: worst 10 variables by ||g_ours-g_off||/||g_off||")
  print(f"{'variable':62} {'max|diff|':>10} {'rel':>10} {'||g_off||':>10}")
  for r in rows[:10]:
    print(f"{r[0]:62} {r[1]:10.3e} {r[2]:10.3e} {r[3]:10.3e}")
  per_group = {}
  for gname in GROUPS:
    sel = [n for n in go if group(n) == gname]
    a = np.concatenate([go[n].ravel() for n in sel]).astype(np.float64)
    b = np.concatenate([gu[n].ravel() for n in sel]).astype(np.float64)
    per_group[gname] = float(np.linalg.norm(b - a) / np.linalg.norm(a))
  a = np.concatenate([go[n].ravel() for n in go]).astype(np.float64)
  b = np.concatenate([gu[n].ravel() for n in go]).astype(np.float64)
  per_group["all"] = float(np.linalg.norm(b - a) / np.linalg.norm(a))
  print("relative norm difference by group:", {k: f"{v:.2e}" for k, v in per_group.items()})
  print("median relative difference over variables:", f"{np.median([r[2] for r in rows]):.2e}")
  return {"worst10": rows[:10], "by_group": per_group,
          "median_rel": float(np.median([r[2] for r in rows]))}


def curves_table(ours_dir, label):
  ours = json.load(open(os.path.join(ours_dir, "curves.json")))
  o, u = off["steps"], ours["steps"]
  n = min(len(o), len(u))
  out = {"label": label}
  print(f"\n== per-step, {label} (ours - official)")
  print(f"{'step':>5} {'mlm off':>10} {'mlm ours':>10} {'d mlm':>10} {'disc off':>9} "
        f"{'disc ours':>9} {'d disc':>10} {'lr off':>10} {'lr ours':>10} {'gn off':>9} {'gn ours':>9}")
  chosen = [s for s in (1, 2, 5, 10, 25, 50, 100, 150, 200) if s <= n]
  out["steps"] = {}
  for s in chosen:
    a, b = o[s - 1], u[s - 1]
    print(f"{s:5d} {a['mlm_loss']:10.6f} {b['mlm_loss']:10.6f} {b['mlm_loss']-a['mlm_loss']:+10.2e} "
          f"{a['disc_loss']:9.6f} {b['disc_loss']:9.6f} {b['disc_loss']-a['disc_loss']:+10.2e} "
          f"{a['lr']:10.4e} {b['lr']:10.4e} {a['grad_norm']:9.4f} {b['grad_norm']:9.4f}")
    out["steps"][s] = {"d_mlm": b["mlm_loss"] - a["mlm_loss"],
                       "d_disc": b["disc_loss"] - a["disc_loss"]}
  dm = np.array([u[i]["mlm_loss"] - o[i]["mlm_loss"] for i in range(n)])
  dd = np.array([u[i]["disc_loss"] - o[i]["disc_loss"] for i in range(n)])
  rel_gn = np.array([u[i]["grad_norm"] / o[i]["grad_norm"] - 1 for i in range(n)])
  lr_diff = [i + 1 for i in range(n) if abs(u[i]["lr"] - o[i]["lr"]) > 1e-6 * o[i]["lr"] + 1e-12]
  print(f"steps where lr differs (rel > 1e-6): {len(lr_diff)} of {n}; first few {lr_diff[:10]}")
  for thr in (1e-5, 1e-4, 1e-3, 1e-2):
    first = next((i + 1 for i in range(n) if abs(dm[i]) > thr or abs(dd[i]) > thr), None)
    print(f"first step with |d mlm| or |d disc| > {thr:g}: {first}")
    out[f"first_step_diff_gt_{thr:g}"] = first
  firstg = next((i + 1 for i in range(n) if abs(rel_gn[i]) > 1e-4), None)
  print(f"first step with |grad_norm ratio - 1| > 1e-4: {firstg}")
  out["first_step_gradnorm_rel_gt_1e-4"] = firstg
  # per-group first divergence
  for gname in GROUPS:
    r = np.array([u[i]["group_norms"][gname] / o[i]["group_norms"][gname] - 1 for i in range(n)])
    f = next((i + 1 for i in range(n) if abs(r[i]) > 1e-4), None)
    print(f"  group {gname:18} first |norm ratio-1| > 1e-4 at step {f}; max |ratio-1| steps 1-10 "
          f"{np.max(np.abs(r[:10])):.2e}")
    out[f"first_group_div_{gname}"] = f
  print(f"max |d mlm| steps 1-10 {np.max(np.abs(dm[:10])):.2e}, 1-50 {np.max(np.abs(dm[:50])):.2e}, "
        f"1-100 {np.max(np.abs(dm[:100])):.2e}, 1-{n} {np.max(np.abs(dm)):.2e}")
  out["max_abs_d_mlm"] = {"1-10": float(np.max(np.abs(dm[:10]))), "1-100": float(np.max(np.abs(dm[:100]))),
                          f"1-{n}": float(np.max(np.abs(dm)))}
  print(f"\n== windows, {label}")
  out["windows"] = {}
  for lo, hi in ((1, 100), (101, 200), (101, 150), (151, 200)):
    if hi > n:
      continue
    sl = slice(lo - 1, hi)
    row = {}
    for q in ("mlm_loss", "disc_loss", "grad_norm"):
      a = float(np.mean([x[q] for x in o[sl]]))
      b = float(np.mean([x[q] for x in u[sl]]))
      row[q] = (a, b, b - a)
    ratios = {g: float(np.mean([u[i]["group_norms"][g] for i in range(lo - 1, hi)]) /
                       np.mean([o[i]["group_norms"][g] for i in range(lo - 1, hi)]))
              for g in GROUPS}
    print(f"steps {lo}-{hi}: mlm off {row['mlm_loss'][0]:.4f} ours {row['mlm_loss'][1]:.4f} "
          f"(d {row['mlm_loss'][2]:+.4f}); disc off {row['disc_loss'][0]:.4f} ours "
          f"{row['disc_loss'][1]:.4f} (d {row['disc_loss'][2]:+.4f}); global gn ratio "
          f"{row['grad_norm'][1]/row['grad_norm'][0]:.4f}; group norm ratios (ours/off, window "
          f"means) " + ", ".join(f"{g} {v:.4f}" for g, v in ratios.items()))
    out["windows"][f"{lo}-{hi}"] = {**row, "group_norm_ratio": ratios}
  return out


summary["grads_ours"] = grad_table(args.ours, "ours")
summary["curves_ours"] = curves_table(args.ours, "ours (our lr schedule)")
if args.ours2:
  summary["grads_ours2"] = grad_table(args.ours2, os.path.basename(args.ours2))
  summary["curves_ours2"] = curves_table(args.ours2, os.path.basename(args.ours2))

fx = json.load(open(os.path.join(FIXTURE, "official_curves.json")))["runs"]
print("\n== context: the fixture's official runs (dropout 0.1, own data order) window means")
ctx = {}
for name, run in fx.items():
  st = run["steps"]
  ctx[name] = {w: float(np.mean([s["mlm_loss"] for s in st[lo - 1:hi]]))
               for w, (lo, hi) in {"1-100": (1, 100), "101-200": (101, 200)}.items()}
  print(f"{name}: mlm 1-100 {ctx[name]['1-100']:.4f}, 101-200 {ctx[name]['101-200']:.4f}")
o = off["steps"]
print(f"this official replay (dropout {off['args']['dropout']}, seed {off['args']['seed']}, "
      f"fixed file order): mlm 1-100 {np.mean([s['mlm_loss'] for s in o[:100]]):.4f}, "
      f"101-200 {np.mean([s['mlm_loss'] for s in o[100:200]]):.4f}")
summary["fixture_context"] = ctx
if args.json:
  json.dump(summary, open(args.json, "w"), indent=1)
