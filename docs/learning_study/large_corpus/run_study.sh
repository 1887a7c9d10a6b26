#!/usr/bin/env bash
# The large-corpus study: the 6,000-step study's settings over the package corpus.
# D holds the corpus, made first with (apt-get update beforehand):
#   python3 -m tools.make_package_corpus --output_dir=$D/corpus --install
set -e
cd "$(dirname "$0")/../../.."
H='{"learning_rate": 2e-4, "num_warmup_steps": 300}'
D=${D:-/work/data26}
python3 -m tools.research.learning_study --work_dir=$D/study --corpus_dir=$D/corpus/train \
  --heldout_file=$D/corpus/heldout/heldout.txt --steps=6000 \
  --eval_at=500,1000,2000,3000,4000,6000 --tasks=chunk,sst --hparams="$H" \
  --finetune_at=2000,6000 --train_examples=1000 --seeds=1,2,3 \
  --finetuning_hparams='{"learning_rate": 3e-4, "num_train_epochs": 10.0}'
python3 -m tools.research.learning_study --work_dir=$D/study --corpus_dir=$D/corpus/train \
  --heldout_file=$D/corpus/heldout/heldout.txt --steps=6000 \
  --eval_at=500,1000,2000,3000,4000,6000 --tasks=chunk,sst --hparams="$H" \
  --finetune_at=2000,6000 --train_examples=100 --seeds=1,2,3,4,5,6,7,8,9,10 \
  --finetuning_hparams='{"learning_rate": 3e-4, "num_train_epochs": 30.0}' \
  --finetuning_name=labels100
# The recipe's own levers, one setting each, ELECTRA only, to step 2,000 (compare with the
# main run's step-2,000 checkpoint): a lower discriminator weight, a wider generator.
for probe in '{"disc_weight": 10.0}:disc_weight_10' '{"generator_hidden_size": 0.5}:generator_half'; do
  extra=${probe%:*}; name=${probe##*:}
  P=$(python3 -c "import json, sys; print(json.dumps({**json.loads(sys.argv[1]), **json.loads(sys.argv[2])}))" "$H" "$extra")
  PROBE=(--work_dir=$D/probe_$name --corpus_dir=$D/corpus/train
         --heldout_file=$D/corpus/heldout/heldout.txt --steps=2000
         --eval_at=500,1000,2000 --tasks=chunk,sst --hparams="$P" --masked_lm=false
         --finetune_at=2000)
  python3 -m tools.research.learning_study "${PROBE[@]}" --train_examples=1000 --seeds=1,2,3 \
    --finetuning_hparams='{"learning_rate": 3e-4, "num_train_epochs": 10.0}'
  python3 -m tools.research.learning_study "${PROBE[@]}" --train_examples=100 \
    --seeds=1,2,3,4,5,6,7,8,9,10 --finetuning_name=labels100 \
    --finetuning_hparams='{"learning_rate": 3e-4, "num_train_epochs": 30.0}'
done
