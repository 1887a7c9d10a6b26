"""Part-of-speech tagging (`pos`), the worked example of docs/finetuning.md."""

from electra_tf.finetune.tagging.tagging_tasks import TaggingTask


class POS(TaggingTask):
  """A part-of-speech tag per word: the second field of CoNLL-2000 and
  CoNLL-2003 lines (`WORD POS ...`), learned as it is, scored by accuracy;
  sentences cut and served as TaggingTask packs them."""
  help = "part-of-speech tagging (CoNLL files, tags in the second field; accuracy)"
  tag_field = 1

  def __init__(self, config, tokenizer):
    super().__init__(config, "pos", tokenizer)
