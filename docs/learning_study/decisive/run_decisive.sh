#!/usr/bin/env bash
# Issue 52's decisive experiment, pre-registered in docs/learning.md ("The decisive
# experiment"): 12 pre-training runs an objective (seeds 11-22, none run before) at the
# large-corpus seeds' recipe, ELECTRA 2,000 steps against the masked LM at equal
# official FLOPs (3,280 steps), each scored on chunking with 100 labels (10 fine-tuning
# seeds) and on the full training set (the 4-rate rule of tools/research/full_label_study.py).
# Resumable: rerun the same command; each step skips what is done. One run at a time:
# seed by seed, both objectives, their 100-label fine-tuning, then the full-label grid
# over every seed done so far.
# ARITHMETIC_ARM=1 adds, to every seed, the masked LM matched on arithmetic (2,168 steps:
# its steps cost ELECTRA's with the embedding lookups not counted), its fine-tuning and its
# full-label grid; finished work is skipped, and a seed that has it keeps it on reruns.
#
# D holds the corpus, built first (apt-get update beforehand):
#   python3 -m tools.make_package_corpus --output_dir=$D/corpus --install
set -e
cd "$(dirname "$0")/../../.."
D=${D:-/work/learn_runs}
SEEDS=${SEEDS:-11 12 13 14 15 16 17 18 19 20 21 22}
first=${SEEDS%% *}
arm=""
[ "${ARITHMETIC_ARM:-0}" = 1 ] && arm=--arithmetic_masked_lm
done_dirs=""
for seed in $SEEDS; do
  W=$D/decisive/seed$seed
  mkdir -p "$W"
  # One copy of the TFRecords (they do not depend on the seed).
  if [ "$seed" != "$first" ] && [ ! -e "$W/data" ]; then
    ln -s "$D/decisive/seed$first/data" "$W/data"
  fi
  python3 -m tools.research.learning_study --work_dir="$W" --corpus_dir=$D/corpus/train \
    --heldout_file=$D/corpus/heldout/heldout.txt --steps=2000 --eval_at=2000 \
    --finetune_at=2000 --tasks=chunk --norandom_init \
    --hparams="{\"learning_rate\": 2e-4, \"num_warmup_steps\": 300, \"seed\": $seed}" \
    --train_examples=100 --seeds=1,2,3,4,5,6,7,8,9,10 --finetuning_name=labels100 \
    --finetuning_hparams='{"learning_rate": 3e-4, "num_train_epochs": 30.0}' \
    $arm
  done_dirs="$done_dirs,$W"
  python3 -m tools.research.full_label_study --work_dir=$D/decisive/full_labels \
    --study_dirs="${done_dirs#,}" --tasks=chunk --num_train_epochs=chunk:3 \
    --learning_rates=1e-4,3e-4,1e-3,3e-3 --random_init_seeds=
done
