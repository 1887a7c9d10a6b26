"""Compares the masks and samples of draws_official.py and draws_ours.py (statistics and tests).

usage: python draws_compare.py LOGITS.npz OFFICIAL1.npz,OFFICIAL2.npz OURS1.npz,OURS2.npz OUT.json
Both sides masked the same records (file order); the samples came from the same logits.
Run from the checkout whose electra_tf drew our side (its commit is recorded).
"""
import datetime, json, os, platform, subprocess, sys
import numpy as np
from scipy import stats
MASK_ID, SPECIAL_IDS, MASK_PROB_KEEP = 103, (0, 101, 102, 103), 0.15
logits_npz = np.load(sys.argv[1])
counts, logits = logits_npz["counts"], logits_npz["logits"].astype(np.float64)
unigram_nll = -np.log(counts / counts.sum() + 1e-12)
rank = np.empty(len(counts), int); rank[np.argsort(-counts)] = np.arange(len(counts))
official = [np.load(f) for f in sys.argv[2].split(",")]
ours = [np.load(f) for f in sys.argv[3].split(",")]
records = official[0]["records"]


def mask_draws(runs):
  """Per-slot and per-position arrays of a side's replicates, records tiled."""
  positions = np.concatenate([d["positions"] for d in runs])
  used = np.concatenate([d["weights"] for d in runs]) > 0
  ids = np.concatenate([d["ids"] for d in runs])
  inputs = np.concatenate([d["input_ids"] for d in runs])
  originals = np.tile(records, (len(positions) // len(records), 1))
  assert (np.take_along_axis(originals, positions, 1)[used] == ids[used]).all()
  draws = np.zeros(originals.shape, int)  # how often each position was drawn
  rows = np.repeat(np.arange(len(originals)), positions.shape[1])
  np.add.at(draws, (rows[used.ravel()], positions.ravel()[used.ravel()]), 1)
  return positions, used, ids, inputs, originals, draws


def mask_stats(runs):
  positions, used, ids, inputs, originals, draws = mask_draws(runs)
  selected = draws > 0
  masked = selected & (inputs == MASK_ID)
  expected_masked = 1 - MASK_PROB_KEEP ** draws[selected]  # 0.85, 1 - 0.15^k when drawn k times
  single = draws == 1
  targets = ids[used]
  target_nll = np.where(used, unigram_nll[ids], 0).sum(1) / np.maximum(used.sum(1), 1)
  return {
      "sequences_masked": int(len(originals)), "used_slots": int(used.sum()),
      "used_slots_per_sequence_mean": float(used.sum(1).mean()),
      "distinct_positions_per_sequence_mean": float(selected.sum(1).mean()),
      "share_of_used_slots_repeating_a_position": float(1 - selected.sum() / used.sum()),
      "mask_share_of_selected_positions": float(masked.sum() / selected.sum()),
      "mask_share_expected_from_repeats": float(expected_masked.mean()),
      "mask_share_z": float((masked.sum() - expected_masked.sum()) /
                            np.sqrt((expected_masked * (1 - expected_masked)).sum())),
      "mask_share_of_positions_drawn_once": float((masked & single).sum() / single.sum()),
      "positions_changed_but_not_selected": int(((inputs != originals) & ~selected).sum()),
      "special_token_targets": int(np.isin(targets, SPECIAL_IDS).sum()),
      "target_unigram_nll_mean": float(unigram_nll[targets].mean()),
      "target_share_100_most_frequent": float((rank[targets] < 100).mean()),
      "target_share_1000_most_frequent": float((rank[targets] < 1000).mean()),
      "position_mean": float(positions[used].mean()),
  }, {"used": used.sum(1), "target_nll": target_nll.reshape(-1, len(records)).mean(0),
      "position_counts": np.bincount(positions[used], minlength=records.shape[1])}


def homogeneity(a, b):
  """Chi-square test that two count vectors come from one distribution."""
  table = np.stack([a, b]).astype(float); table = table[:, table.sum(0) > 0]
  expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
  chi2 = float(((table - expected) ** 2 / expected).sum()); dof = table.shape[1] - 1
  return {"chi2": chi2, "dof": int(dof), "p": float(stats.chi2.sf(chi2, dof))}


def mask_comparison(side_a, side_b):
  (_, a), (_, b) = side_a, side_b
  diff = b["target_nll"] - a["target_nll"]
  first_a, first_b = (x["used"].reshape(-1, len(records))[0] for x in (a, b))
  return {"used_slots_equal_per_sequence": bool((first_a == first_b).all()),
          "target_unigram_nll_paired_by_record": {
              "second_minus_first": float(diff.mean()),
              "se": float(diff.std(ddof=1) / np.sqrt(len(diff))), "records": int(len(diff))},
          "position_histogram_1_127": homogeneity(a["position_counts"][1:],
                                                  b["position_counts"][1:])}


probs = np.exp(logits - logits.max(1, keepdims=True)); probs /= probs.sum(1, keepdims=True)
rows = len(probs)
mass_bins = np.empty(probs.shape, int)  # per row, tokens in 20 bins of equal probability mass
for r in range(rows):
  order = np.argsort(-probs[r])
  mass_before = np.cumsum(probs[r][order]) - probs[r][order]
  mass_bins[r, order] = np.minimum((mass_before * 20).astype(int), 19)
bin_probs = np.stack([np.bincount(mass_bins[r], weights=probs[r], minlength=20)
                      for r in range(rows)])


def sample_stats(runs):
  s = np.concatenate([d["samples"].reshape(-1, rows) for d in runs])  # [draws, rows]
  logp = np.log(probs[np.arange(rows)[None], s])
  observed = np.stack([np.bincount(mass_bins[r, s[:, r]], minlength=20) for r in range(rows)])
  expected = bin_probs * len(s); ok = expected > 0
  chi2 = float((((observed - expected) ** 2)[ok] / expected[ok]).sum())
  dof = int(ok.sum() - rows)
  return {"samples": int(s.size), "neg_logp_of_sample_mean": float(-logp.mean()),
          "neg_logp_se": float(logp.std() / np.sqrt(logp.size)),
          "share_argmax_token": float((s == probs.argmax(1)[None]).mean()),
          "share_100_most_frequent": float((rank[s] < 100).mean()),
          "share_tokens_below_1e-6": float((probs[np.arange(rows)[None], s] < 1e-6).mean()),
          "distinct_tokens": int(len(np.unique(s))),
          "vs_exact_softmax_chi2_20_mass_bins_per_row": {
              "chi2": chi2, "dof": dof, "p": float(stats.chi2.sf(chi2, dof))}}, observed


official_masks, our_masks = mask_stats(official), mask_stats(ours)
official_by_seed = [mask_stats([d]) for d in official]
official_samples, our_samples = sample_stats(official), sample_stats(ours)
two_sample = [homogeneity(official_samples[1][r], our_samples[1][r]) for r in range(rows)]
chi2 = sum(t["chi2"] for t in two_sample); dof = sum(t["dof"] for t in two_sample)
result = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "machine": f"{os.cpu_count()}-core Intel Xeon ({platform.machine()}, shared with other jobs)",
    "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip(),
    "inputs": sys.argv[1:4],
    "masks": {"official": official_masks[0], "ours": our_masks[0],
              "official_vs_ours": mask_comparison(official_masks, our_masks),
              "official_seed1_vs_seed2": mask_comparison(*official_by_seed[:2])},
    "samples": {"exact_softmax": {
                    "entropy_mean": float(-(probs * np.log(probs)).sum(1).mean()),
                    "share_argmax_token": float(probs.max(1).mean()),
                    "share_100_most_frequent": float(probs[:, rank < 100].sum(1).mean()),
                    "share_tokens_below_1e-6": float(
                        np.where(probs < 1e-6, probs, 0).sum(1).mean())},
                "official_gumbel_max": official_samples[0], "ours_inverse_cdf": our_samples[0],
                "official_vs_ours_chi2_20_mass_bins_per_row": {
                    "chi2": chi2, "dof": dof, "p": float(stats.chi2.sf(chi2, dof))}}}
json.dump(result, open(sys.argv[4], "w"), indent=1)
print(json.dumps(result, indent=1))
