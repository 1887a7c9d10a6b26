#!/usr/bin/env bash
# The large-corpus study: the 6,000-step study's settings over the package corpus.
set -e
cd "$(dirname "$0")/../../.."
H='{"learning_rate": 2e-4, "num_warmup_steps": 300}'
D=/work/data26
python3 -m tools.learning_study --work_dir=$D/study --corpus_dir=$D/corpus/train \
  --heldout_file=$D/corpus/heldout/heldout.txt --steps=6000 \
  --eval_at=500,1000,2000,3000,4000,6000 --tasks=chunk,sst --hparams="$H" \
  --finetune_at=2000,6000 --train_examples=1000 --seeds=1,2,3 \
  --finetuning_hparams='{"learning_rate": 3e-4, "num_train_epochs": 10.0}'
python3 -m tools.learning_study --work_dir=$D/study --corpus_dir=$D/corpus/train \
  --heldout_file=$D/corpus/heldout/heldout.txt --steps=6000 \
  --eval_at=500,1000,2000,3000,4000,6000 --tasks=chunk,sst --hparams="$H" \
  --finetune_at=6000 --train_examples=100 --seeds=1,2,3,4,5,6,7,8,9,10 \
  --finetuning_hparams='{"learning_rate": 3e-4, "num_train_epochs": 30.0}' \
  --finetuning_name=labels100
