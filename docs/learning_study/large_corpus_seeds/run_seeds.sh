#!/usr/bin/env bash
# Pre-training seeds for the large-corpus study (issue 33): the pre-training run
# is the unit of analysis, so each objective is pre-trained again with seeds
# 1, 2, 3 (the committed study's runs are seed 0), at the study's smaller budget
# with its own schedule: ELECTRA --steps=2000 (learning rate annealed to 0 at
# step 2,000, as in the two probes) and the masked LM at equal FLOPs (3,280
# steps, its schedule ending there); each evaluated and fine-tuned where its
# schedule ends. Fine-tuning: the 100-label setting of the study (30 epochs,
# lr 3e-4), fine-tuning seeds nested in each pre-training run. Random
# initialisation is not fine-tuned again (--norandom_init): its runs do not
# depend on the pre-training seed and are the study's own (large_corpus/).
# The first pass gives every pre-training run 3 fine-tuning seeds, the second
# 5 (rerunning resumes; nothing is pre-trained twice). The seeds run side by
# side (the machine is shared: each gets its own share of it) once the first
# has built the TFRecords they all read.
#
# Every command of issue 33's replication is here (the probe and the
# full-label grid at the end).
#
# D holds the corpus (built first, as in ../large_corpus/run_study.sh):
#   python3 -m tools.make_package_corpus --output_dir=$D/corpus --install
set -e
cd "$(dirname "$0")/../../.."
D=${D:-/work/learn_runs}
SEEDS=${SEEDS:-1 2 3}
study() {  # study SEED FINETUNING_SEEDS
  local W=$D/seeds/seed$1
  mkdir -p "$W"
  # One copy of the TFRecords (they do not depend on the seed).
  if [ "$1" != "${SEEDS%% *}" ] && [ ! -e "$W/data" ]; then
    ln -s "$D/seeds/seed${SEEDS%% *}/data" "$W/data"
  fi
  python3 -m tools.research.learning_study --work_dir="$W" --corpus_dir=$D/corpus/train \
    --heldout_file=$D/corpus/heldout/heldout.txt --steps=2000 --eval_at=2000 \
    --finetune_at=2000 --tasks=sst,chunk --norandom_init \
    --hparams="{\"learning_rate\": 2e-4, \"num_warmup_steps\": 300, \"seed\": $1}" \
    --train_examples=100 --seeds="$2" --finetuning_name=labels100 \
    --finetuning_hparams='{"learning_rate": 3e-4, "num_train_epochs": 30.0}'
}
first=${SEEDS%% *}
pids=()
for seed in $SEEDS; do
  if [ "$seed" != "$first" ]; then
    while [ ! -e "$D/seeds/seed$first/data/heldout_tfrecords/.complete" ]; do sleep 30; done
  fi
  (study "$seed" 1,2,3 && study "$seed" 1,2,3,4,5) &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[ $status = 0 ] || exit $status
# Then, from the six runs where their schedules end: the representation probe
# (statistics and a linear probe per layer, three random initialisations
# beside them) and the full training sets (CoLA and chunking at the official
# 3 epochs, SST-2 at 1; learning rates 1e-4 to 3e-3, the first pass's
# 1e-4 to 1e-3 having been too low for random initialisation), each resumable
# on its own.
RUNS=$(for seed in $SEEDS; do printf '%s,' "$D/seeds/seed$seed"; done)
python3 -m tools.research.representation_probe --output_dir=$D/probe --study_dirs="${RUNS%,}"
python3 -m tools.research.full_label_study --work_dir=$D/full_labels --study_dirs="${RUNS%,}" \
  --tasks=cola,chunk,sst --num_train_epochs=cola:3,chunk:3,sst:1 \
  --learning_rates=1e-4,3e-4,1e-3,3e-3
