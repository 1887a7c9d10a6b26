"""Pre-trains ELECTRA (or a plain masked LM) on TFRecords.

    python run_pretraining.py --model_size=small --data_dir=DIR [--model_name=NAME]
    python run_pretraining.py --pretrain_tfrecords='a/*.tfrecord*,b/*' --vocab_file=V
    python run_pretraining.py          # the embedded default: a few CPU minutes

Hyperparameters take their official names in --hparams (a JSON string or a
.json file); the flags below that share a name with an hparam override it.
The official directory conventions hold: data_dir/pretrain_tfrecords/
pretrain_data.tfrecord*, data_dir/vocab.txt, data_dir/models/<model_name>.
Re-running the same command resumes from the latest checkpoint in model_dir.
The job: electra_tf/pretrain/job.py.
"""

from electra_tf.commands import pretrain

if __name__ == "__main__":
  pretrain.run()
