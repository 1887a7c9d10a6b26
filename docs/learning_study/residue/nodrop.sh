#!/bin/bash
# Issue 52 item 3: dropout off on both sides, seeds 1-3 a side, 400 steps from the
# official_trajectory fixture's step-0 weights. OURS: a checkout of this repo (the runs
# of dropout_off.json: 8bbd005); OFFICIAL: a directory with google-research/electra
# (8a46635) under electra/ and the fixture's driver (kept outside this repo, as the
# official code is), which merges $EXTRA_OVERRIDES into model_hparam_overrides.
FIX=${FIX:-../shared/fixtures/official_trajectory}
OUT=${OUT:-/tmp/residue}
EXTRA='{"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}'
mkdir -p $OUT
for seed in 1 2 3; do
  out=$OUT/nodrop_official_seed$seed.json
  [ -e $out ] || (cd $OFFICIAL && EXTRA_OVERRIDES="$EXTRA" python driver_extra.py $seed $out.tmp \
    > $OUT/nodrop_official_seed$seed.log 2>&1 && mv $out.tmp $out)
  md=$OUT/nodrop_ours/seed$seed
  if [ ! -e $md/ckpt-400.index ]; then
    hp=$(python -c "import json,sys; h=json.load(open('$FIX/hparams.json')); h['model_hparam_overrides'].update(json.loads(sys.argv[1])); h.update(seed=$seed, log_every=1, save_checkpoints_steps=400, iterations_per_loop=400); print(json.dumps(h))" "$EXTRA")
    (cd $OURS && TF_CPP_MIN_LOG_LEVEL=2 python run_pretraining.py \
      --pretrain_tfrecords="$FIX/data/pretrain_data.tfrecord*" \
      --vocab_file=$FIX/../../data/vocab/bert_uncased_vocab.txt \
      --init_checkpoint=$FIX/model.ckpt --model_dir=$md --hparams="$hp" --do_train \
      > $OUT/nodrop_ours_seed$seed.log 2>&1)
  fi
done
