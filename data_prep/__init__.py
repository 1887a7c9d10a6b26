"""Data preparation: TFRecord and vocab builders, masking inspection."""
