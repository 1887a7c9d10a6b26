"""transformers' own outputs for the official_debug checkpoint exported by
`python -m electra_tf.convert --to_hf` (run once, where torch and transformers
are installed; neither is a requirement of the project). Export with the
project's environment, then run this in one with torch (TensorFlow and torch
in one process can crash):

    python -m electra_tf.convert --to_hf=/tmp/hf_debug \
        --checkpoint=../shared/fixtures/official_debug/model.ckpt \
        --hparams="$(python -c 'import json; print(json.dumps(json.load(open(
            "../shared/fixtures/official_debug/config.json"))["hparams"]))')" \
        --vocab_file=../shared/data/vocab/bert_uncased_vocab.txt
    python tests/data/hf_official_debug/make_fixture.py /tmp/hf_debug \
        ../shared/fixtures/official_debug

Writes beside this file:
  names.json   transformers' state-dict names and shapes of the two models
               (ElectraForPreTraining, ElectraForMaskedLM) of that config
  fixture.npz  disc_logits [4, 32] of ElectraForPreTraining on the official
               fixture's discriminator_input_ids; gen_logits_head [4, 4, 1024]
               (the first 1024 vocab columns) and gen_logsumexp [4, 4] (over
               all 30522) of ElectraForMaskedLM at the masked positions of
               generator_input_ids
  fixture.json the versions, and the max |difference| of the logits that the
               tanh gelu ("gelu_new") would give against the exact one
"""
import json
import os
import sys

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB_COLUMNS = 1024


def outputs(folder, fixture, hidden_act=None):
  kwargs = {"hidden_act": hidden_act} if hidden_act else {}
  disc = transformers.ElectraForPreTraining.from_pretrained(f"{folder}/discriminator", **kwargs)
  gen = transformers.ElectraForMaskedLM.from_pretrained(f"{folder}/generator", **kwargs)
  disc.eval()
  gen.eval()
  tensor = lambda key: torch.tensor(fixture[key], dtype=torch.long)
  with torch.no_grad():
    disc_logits = disc(input_ids=tensor("discriminator_input_ids"),
                       attention_mask=tensor("input_mask"),
                       token_type_ids=tensor("segment_ids")).logits.numpy()
    gen_all = gen(input_ids=tensor("generator_input_ids"), attention_mask=tensor("input_mask"),
                  token_type_ids=tensor("segment_ids")).logits.numpy()
  positions = fixture["masked_lm_positions"]
  gen_logits = np.take_along_axis(gen_all, positions[:, :, None], axis=1)  # [4, 4, V]
  return disc, gen, disc_logits, gen_logits


def main():
  folder, official = sys.argv[1:]
  fixture = np.load(os.path.join(official, "fixture.npz"))
  disc, gen, disc_logits, gen_logits = outputs(folder, fixture)
  _, _, tanh_disc, tanh_gen = outputs(folder, fixture, "gelu_new")
  names = {name: {key: list(value.shape) for key, value in model.state_dict().items()}
           for name, model in (("ElectraForPreTraining", disc), ("ElectraForMaskedLM", gen))}
  json.dump(names, open(os.path.join(HERE, "names.json"), "w"), indent=1)
  lse = np.log(np.exp(gen_logits - gen_logits.max(-1, keepdims=True)).sum(-1)) + gen_logits.max(-1)
  np.savez_compressed(os.path.join(HERE, "fixture.npz"), disc_logits=disc_logits.astype(np.float32),
                      gen_logits_head=gen_logits[..., :VOCAB_COLUMNS].astype(np.float32),
                      gen_logsumexp=lse.astype(np.float32))
  json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
             "inputs": "official_debug fixture.npz (discriminator_input_ids, generator_input_ids, "
                       "input_mask, segment_ids, masked_lm_positions)",
             "gelu_new_max_abs_diff": {
                 "disc_logits": float(np.abs(tanh_disc - disc_logits).max()),
                 "gen_logits": float(np.abs(tanh_gen - gen_logits).max())}},
            open(os.path.join(HERE, "fixture.json"), "w"), indent=1)


if __name__ == "__main__":
  main()
