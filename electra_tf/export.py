"""`python -m electra_tf.export`: the launcher of electra_tf/commands/export.py.

The library: electra_tf/saved_model.py.
"""

from electra_tf.commands import export

if __name__ == "__main__":
  export.run()
