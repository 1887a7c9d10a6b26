"""curves.png from TensorBoard scalars, and the discriminator's verdicts as text."""

import numpy as np
import tensorflow as tf

from electra_tf import curves
from electra_tf.pretrain import verdicts


def _write_scalars(directory, values_by_step):
  with tf.summary.create_file_writer(str(directory)).as_default():
    for step, values in values_by_step:
      for tag, value in values.items():
        tf.summary.scalar(tag, value, step=step)


def test_scalars_read_back_and_a_resumed_run_keeps_the_last_value(tmp_path):
  _write_scalars(tmp_path / "train", [(1, {"loss": 5.0, "lr": 0.1}), (2, {"loss": 4.0})])
  # A resumed run appends: step 2 logged again, then step 3.
  _write_scalars(tmp_path / "train", [(2, {"loss": 3.5}), (3, {"loss": 3.0})])
  scalars = curves.read_scalars(str(tmp_path / "train"))
  assert scalars["loss"] == {1: 5.0, 2: 3.5, 3: 3.0}
  assert scalars["lr"] == {1: np.float32(0.1)}
  assert curves.read_scalars(str(tmp_path / "absent")) == {}
  means = curves.window_means(scalars["loss"], [range(1, 3), range(3, 5), range(5, 7)])
  assert means == {"1-2": 4.25, "3-4": 3.0, "5-6": None}


def test_plot_run_writes_a_png_of_training_and_eval_scalars(tmp_path):
  _write_scalars(tmp_path / "train", [(s, {"loss": 10.0 / s, "mlm_loss": 9.0 / s,
                                           "disc_loss": 0.5, "lr": 1e-3}) for s in range(1, 30)])
  _write_scalars(tmp_path / "eval", [(10, {"disc_auc_real_tokens": 0.6, "disc_recall": 0.1}),
                                     (29, {"disc_auc_real_tokens": 0.8, "disc_recall": 0.3}),
                                     (29, {"rte/accuracy": 55.0})])
  path = curves.plot_run(str(tmp_path), title="a run")
  assert path == str(tmp_path / "results" / "curves.png")
  data = (tmp_path / "results" / "curves.png").read_bytes()
  assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
  width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
  assert width > 1000 and height > 500  # 3 columns, more than one row of panels
  assert [p.name for p in (tmp_path / "results").iterdir()] == ["curves.png"]


def test_verdicts_mark_replacements_catches_misses_and_false_alarms():
  inv_vocab = {0: "[PAD]", 1: "[CLS]", 2: "[SEP]", 3: "[MASK]", 4: "the", 5: "cat",
               6: "dog", 7: "sat", 8: "on", 9: "mat", 10: "a", 11: "##s"}
  # [CLS] the cat sat on the mat ##s [SEP] [PAD]; slots at 2 (cat), 5 (the), 3 (sat).
  # Unmarked pieces join ("sat ##s" would read "sats"); a marked one stays apart.
  original = np.array([[1, 4, 5, 7, 8, 4, 9, 11, 2, 0]])
  masked = original.copy()
  masked[0, [2, 5, 3]] = 3
  batch = {"input_ids": masked, "input_mask": (original > 0).astype(np.int32),
           "masked_lm_positions": np.array([[2, 5, 3]]),
           "masked_lm_ids": np.array([[5, 4, 7]])}
  corrupted = original.copy()
  corrupted[0, 2], corrupted[0, 5] = 6, 10  # cat->dog, the->a; "sat" sampled back
  labels = (corrupted != original).astype(np.int32)
  preds = np.zeros_like(labels)
  preds[0, [2, 6]] = 1  # catches cat->dog, misses the->a, flags "mat" wrongly
  outputs = {"corrupted_ids": corrupted, "disc_labels": labels, "disc_preds": preds}
  assert verdicts.render(outputs, batch, 0, inv_vocab) == (
      "[CLS] the [cat->dog]* sat on [the->a] mat* ##s [SEP]")


def test_each_panel_has_one_scale_losses_apart_from_rates():
  train = {"loss": {1: 20.0}, "mlm_loss": {1: 8.0}, "lr": {1: 1e-4}}
  evaluation = {"disc_auc": {400: 0.88}, "loss": {400: 23.8},
                "disc_auc_real_tokens": {100: 0.7, 400: 0.8},
                "rte/accuracy": {5: 55.0}, "rte/loss": {5: 0.66}}
  titles = {title: [tag for tag, _ in series]
            for title, series, _ in curves.curve_panels(train, evaluation)}
  assert titles == {
      "training loss": ["loss"], "generator (masked LM) loss": ["mlm_loss"],
      "learning rate": ["lr"], "eval: discriminator": ["disc_auc_real_tokens"],
      "eval: other": ["disc_auc"], "eval: other (losses)": ["loss"],
      "eval: rte": ["rte/accuracy"], "eval: rte (losses)": ["rte/loss"]}
