"""Writes root/usr/share/dictd/gcide.{index,dict.dz}: two GCIDE-style entries in
the dictd format (the index numbers offsets and lengths in dictd's base 64, the
data is gzip-compatible), as `tools/make_package_corpus.py` reads them.

    python tests/data/package_corpus/make_dictd_fixture.py
"""
import gzip
import os

ENTRIES = [
    ("Abate", 'Abate \\A*bate"\\, v. t. [OE. abaten, fr. OF. abatre.]\n'
              "   1. To lessen in force or intensity; to reduce the amount of.\n"
              "      [1913 Webster]\n\n"
              "            The fever of his ambition at length began to abate.\n"
              "                                                  --Macaulay.\n"
              "      [1913 Webster]\n"),
    ("Abbey", 'Abbey \\Ab"bey\\, n. [OE. abbeye.]\n'
              "   1. A monastery or society of persons secluded from the world; the church of such a house.\n"
              "      [1913 Webster]\n\n"
              "   Syn: {Monastery}; convent; cloister; priory.\n"
              "      [1913 Webster]\n"),
]
DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def dictd_digits(n: int) -> str:
  out = DIGITS[n % 64]
  while n >= 64:
    n //= 64
    out = DIGITS[n % 64] + out
  return out


def main():
  folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "root", "usr", "share", "dictd")
  os.makedirs(folder, exist_ok=True)
  data = b"00-database-info\nThis file was converted from the original database.\n"
  index = [("00-database-info", 0, len(data))]
  for word, text in ENTRIES:
    index.append((word, len(data), len(text.encode())))
    data += text.encode()
  index.append(("abate", index[1][1], index[1][2]))  # a second headword, same entry
  with open(os.path.join(folder, "gcide.dict.dz"), "wb") as raw:
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
      f.write(data)
  with open(os.path.join(folder, "gcide.index"), "w", encoding="utf-8") as f:
    for word, offset, length in sorted(index):
      f.write(f"{word}\t{dictd_digits(offset)}\t{dictd_digits(length)}\n")


if __name__ == "__main__":
  main()
