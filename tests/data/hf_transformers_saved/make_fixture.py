"""An ELECTRA pair saved by transformers itself, and transformers' own outputs
on it: the reference of `python -m electra_tf.convert --from_hf` for folders
this project did not write (tests/test_hf.py; the tests need neither torch
nor transformers). Run once, where torch and transformers are installed
(neither is a requirement of the project); nothing is downloaded, the weights
are random:

    python tests/data/hf_transformers_saved/make_fixture.py

Writes beside this file (about 300 KB):
  discriminator/  ElectraForPreTraining.save_pretrained + the uncased
                  tokenizer's save_pretrained (tokenizer.json,
                  tokenizer_config.json; transformers 5 writes no vocab.txt)
  generator/      ElectraForMaskedLM.save_pretrained (transformers leaves the
                  output layer, tied to the word embeddings, out of
                  model.safetensors) + the same tokenizer
  cased_tokenizer/  the same vocab saved by a do_lower_case=False tokenizer
  reference.npz   input_ids, input_mask, segment_ids [3, 16] (fixed), and
                  transformers' disc_logits [3, 16] and gen_logits [3, 16, V]
                  on them (float32, eval mode)
  reference.json  the versions, machine and date; the texts and transformers'
                  token ids of them (uncased and cased tokenizers)

The two models share their embeddings (word, position, token type and their
LayerNorm), as the official pre-trainer and Google's released pairs do, so
that the pair is one this project can hold. Every weight is moved off its
initial value (LayerNorms included) so that a transposed or swapped tensor
cannot go unnoticed.
"""
import datetime
import json
import os
import platform
import shutil
import tempfile

import numpy as np
import tokenizers
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"
PUNCTUATION = list(".,!?'-:;()\"")
WORDS = ["the", "cat", "sat", "on", "mat", "a", "an", "of", "to", "and", "in", "it", "is",
         "was", "were", "token", "electra", "replace", "un", "##believ", "##able", "##ly",
         "##s", "##d", "##ed", "##ing", "##er", "cafe", "au", "lait", "kg", "naive", "hello",
         "world", "Hello", "World", "THE", "Cat", "The", "model", "pre", "##train"]
VOCAB = list(dict.fromkeys(  # one entry each, at its first place
    SPECIAL + list(LETTERS) + list(LETTERS.upper()) + list("0123456789") + PUNCTUATION
    + ["##" + c for c in LETTERS + LETTERS.upper() + "0123456789"] + WORDS))

# Texts whose ids both tokenizers must give alike ...
TEXTS = ["The cat sat on the mat.",
         "Unbelievably, ELECTRA tokens were replaced!",
         "Café au lait: 3.5 kg (naïve) \u2014 東京?",
         "  Hello\tWorld,  THE Cat\u00a0pretrains models.  "]
# ... and texts with a literal special token, which transformers keeps as one
# token where BERT's tokenizer (and this project's) splits it.
SPECIAL_TEXTS = ["a [MASK] sat on the mat", "[CLS] the cat [SEP]"]

EMBEDDING, HIDDEN, LAYERS, HEADS, INTERMEDIATE = 32, 48, 2, 2, 96
GEN_HIDDEN = 12  # 1/4 of the discriminator; heads and width by the official rule
MAX_POSITIONS, BATCH, LENGTH = 32, 3, 16


def config(architecture, hidden, heads, intermediate):
  return transformers.ElectraConfig(
      vocab_size=len(VOCAB), embedding_size=EMBEDDING, hidden_size=hidden,
      num_hidden_layers=LAYERS, num_attention_heads=heads, intermediate_size=intermediate,
      max_position_embeddings=MAX_POSITIONS, hidden_act="gelu", layer_norm_eps=1e-12,
      architectures=[architecture])


def main():
  torch.manual_seed(0)
  disc = transformers.ElectraForPreTraining(
      config("ElectraForPreTraining", HIDDEN, HEADS, INTERMEDIATE)).eval()
  gen = transformers.ElectraForMaskedLM(
      config("ElectraForMaskedLM", GEN_HIDDEN, max(1, GEN_HIDDEN // 64), 4 * GEN_HIDDEN)).eval()
  with torch.no_grad():
    for model in (disc, gen):
      for param in model.parameters():
        param.add_(torch.randn_like(param) * 0.1)
    for name, param in gen.electra.embeddings.named_parameters():
      param.copy_(dict(disc.electra.embeddings.named_parameters())[name])
  assert gen.generator_lm_head.weight is gen.electra.embeddings.word_embeddings.weight

  with tempfile.TemporaryDirectory() as tmp:
    vocab_file = os.path.join(tmp, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
      f.writelines(token + "\n" for token in VOCAB)
    tokenizer = transformers.ElectraTokenizerFast(vocab=vocab_file, do_lower_case=True)
    cased = transformers.ElectraTokenizerFast(vocab=vocab_file, do_lower_case=False)
  assert tokenizer.vocab_size == len(VOCAB) == cased.vocab_size

  for name in ("discriminator", "generator", "cased_tokenizer"):
    shutil.rmtree(os.path.join(HERE, name), ignore_errors=True)
  disc.save_pretrained(os.path.join(HERE, "discriminator"))
  gen.save_pretrained(os.path.join(HERE, "generator"))
  for name in ("discriminator", "generator"):
    tokenizer.save_pretrained(os.path.join(HERE, name))
  cased.save_pretrained(os.path.join(HERE, "cased_tokenizer"))

  rng = np.random.default_rng(0)
  input_ids = rng.integers(5, len(VOCAB), size=[BATCH, LENGTH])
  input_ids[:, 0] = VOCAB.index("[CLS]")
  input_mask = np.ones([BATCH, LENGTH], np.int64)
  input_mask[1, 11:] = 0  # padded rows
  input_mask[2, 6:] = 0
  input_ids[input_mask == 0] = 0
  segment_ids = np.zeros([BATCH, LENGTH], np.int64)
  segment_ids[0, 8:] = 1
  segment_ids[2, 3:6] = 1
  as_torch = lambda a: torch.tensor(a, dtype=torch.long)
  with torch.no_grad():
    inputs = dict(input_ids=as_torch(input_ids), attention_mask=as_torch(input_mask),
                  token_type_ids=as_torch(segment_ids))
    disc_logits = disc(**inputs).logits.numpy()
    gen_logits = gen(**inputs).logits.numpy()
  np.savez_compressed(os.path.join(HERE, "reference.npz"),
                      input_ids=input_ids.astype(np.int32),
                      input_mask=input_mask.astype(np.int32),
                      segment_ids=segment_ids.astype(np.int32),
                      disc_logits=disc_logits.astype(np.float32),
                      gen_logits=gen_logits.astype(np.float32))

  ids = lambda tok, texts: [tok(text)["input_ids"] for text in texts]
  with open(os.path.join(HERE, "reference.json"), "w", encoding="utf-8") as f:
    json.dump({
        "transformers": transformers.__version__, "torch": torch.__version__,
        "tokenizers": tokenizers.__version__, "python": platform.python_version(),
        "machine": f"{platform.machine()} {platform.processor() or platform.platform()}",
        "date": datetime.date.today().isoformat(),
        "texts": TEXTS, "uncased_ids": ids(tokenizer, TEXTS), "cased_ids": ids(cased, TEXTS),
        "special_texts": SPECIAL_TEXTS,
        "special_uncased_ids": ids(tokenizer, SPECIAL_TEXTS),
    }, f, indent=1, ensure_ascii=False)
    f.write("\n")


if __name__ == "__main__":
  main()
