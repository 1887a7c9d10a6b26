"""Fine-tunes ELECTRA on GLUE, SQuAD 1.1/2.0, MRQA and chunking (official recipe).

    python run_finetuning.py --data_dir=DIR --task_names=rte[,sst,...] \
        [--model_size=small] [--init_checkpoint=PATH] [--model_dir=DIR] \
        [--hparams=JSON] [--strategy=auto] [--do_train] [--do_eval] \
        [--export_dir=DIR]

Raw data follow the official layout DIR/finetuning_data/<task>/; the vocab is
DIR/models/<model_name>/vocab.txt or DIR/vocab.txt (or --vocab_file).
--init_checkpoint is a project checkpoint (a pre-training model_dir or a
ckpt prefix, or a Google checkpoint converted by `python -m
electra_tf.convert`) or an official TF1 checkpoint; without it the encoder
starts from DIR/models/<model_name>, which must hold one (as official);
--init_checkpoint=none fine-tunes from random initialisation.  --hparams takes the official configure_finetuning.py
names (a JSON object or a .json file); the flags that share a name with an
hparam override it.  Several tasks train jointly, as official.  Results go to
MODEL_DIR/results/ (test-set files of write_test_outputs to
MODEL_DIR/test_predictions/) and a table of them is printed at the end;
rerunning the same command resumes.  The job: electra_tf/finetune/job.py.
"""

from electra_tf.commands import finetune

if __name__ == "__main__":
  finetune.run()
