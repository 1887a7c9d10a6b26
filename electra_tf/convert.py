"""`python -m electra_tf.convert`: the launcher of electra_tf/commands/convert.py.

The library: electra_tf/checkpoint_conversion.py.
"""

from electra_tf.commands import convert

if __name__ == "__main__":
  convert.run()
