"""A pre-training corpus from the English documentation that Debian packages install.

    python -m tools.make_package_corpus --output_dir=/data/package_corpus --install

reads each package of --packages (installing the missing ones with apt-get when
--install is given), turns its pages into running text and writes the corpus
format that data_prep/build_vocab.py and build_tfrecords.py read: one sentence a
line, a blank line between documents, one file a package (`train/<package>.txt`),
`heldout/heldout.txt` with --heldout_percent of the documents of every package
(chosen by a hash of the document's name, so a rebuild holds out the same ones),
and `report.json` (documents, sentences, words, bytes and WordPiece tokens a
package, train and held-out). The output folder must not exist yet; it is
written under a temporary name and renamed at the end.

What counts as text (the choices, so that a reader can weigh the corpus):
- HTML (Sphinx, DocBook, mdBook pages): paragraphs, list items, definitions,
  headings and quotations; code blocks (<pre>), tables, navigation, sidebars,
  headers, footers, scripts and styles are dropped; inline code is kept as the
  words of the sentence it stands in.
- POD (Perl): ordinary paragraphs and headings, formatting codes reduced to
  their text (L<text|target> -> text, E<gt> -> >); verbatim (indented)
  paragraphs, i.e. code, are dropped.
- The dictd dictionary (GCIDE): each entry's definitions and quotations, with
  pronunciations, etymologies in brackets, source marks and citations removed;
  consecutive entries are grouped into pages of about --page_words words, so
  that a document fills pre-training examples as a printed page would.
- WordNet: each synset's gloss (definition and quoted examples), grouped into
  pages of consecutive synsets of one lexicographer file, as above.
A paragraph keeps only if it has at least --min_words words and is mostly
letters (code and tables of numbers are not prose); a paragraph already seen
anywhere in the corpus (copyright footers, pages that several manuals share) is
dropped, and so is a document left with nothing.
"""

from __future__ import annotations

import base64
import dataclasses
import fnmatch
import glob
import gzip
import hashlib
import html
import html.parser
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Iterable, Iterator, List, Sequence, Tuple

from absl import flags

from electra_tf import cli
from electra_tf.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Source:
  """Where a package's pages lie (globs under --root) and how to read them."""
  reader: str  # "html", "pod", "dictd" or "wordnet"
  globs: Tuple[str, ...]
  exclude: Tuple[str, ...] = ()  # fnmatch patterns on the path


_RUST_BOOKS = ("book", "reference", "nomicon", "rust-by-example", "edition-guide",
               "embedded-book", "rustc", "rustdoc")
# The packages this tool knows; the API references of rust-doc (std, core, ...)
# are left out: generated signatures, not prose.
PACKAGES: Dict[str, Source] = {
    "python3.11-doc": Source("html", ("usr/share/doc/python3.11/html/**/*.html",),
                             ("*/_sources/*", "*/genindex*", "*/py-modindex.html",
                              "*/search.html", "*/_static/*")),
    "perl-doc": Source("pod", ("usr/share/perl/5.*/pod/*.pod",)),
    "postgresql-doc-15": Source("html", ("usr/share/doc/postgresql-doc-15/html/*.html",),
                                ("*/bookindex.html",)),
    "debian-reference-en": Source("html", ("usr/share/debian-reference/*.en.html",)),
    "rust-doc": Source("html", tuple(f"usr/share/doc/rust-doc/html/{book}/**/*.html"
                                     for book in _RUST_BOOKS),
                       ("*/print.html", "*/toc.html", "*/404.html")),
    "linux-doc-6.1": Source("html", ("usr/share/doc/linux-doc-6.1/html/**/*.html",),
                            ("*/_sources/*", "*/genindex*", "*/search.html", "*/_static/*")),
    "git-doc": Source("html", ("usr/share/doc/git-doc/**/*.html",)),
    "python-django-doc": Source("html", ("usr/share/doc/python-django-doc/html/**/*.html",),
                                ("*/_sources/*", "*/genindex*", "*/py-modindex.html",
                                 "*/search.html", "*/_static/*", "*/_modules/*")),
    "gimp-help-en": Source("html", ("usr/share/gimp/2.0/help/en/*.html",)),
    "sqlite3-doc": Source("html", ("usr/share/doc/sqlite3/**/*.html",)),
    "nodejs-doc": Source("html", ("usr/share/doc/nodejs/api/*.html",), ("*/all.html",)),
    "octave-doc": Source("html", ("usr/share/doc/octave/**/*.html",)),
    "dict-gcide": Source("dictd", ("usr/share/dictd/gcide.index",)),
    "wordnet-base": Source("wordnet", tuple(f"usr/share/wordnet/data.{pos}"
                                            for pos in ("noun", "verb", "adj", "adv"))),
}
DEFAULT_PACKAGES = ",".join(PACKAGES)

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_list("packages", DEFAULT_PACKAGES.split(","),
                    f"Debian packages to read (known: {DEFAULT_PACKAGES}).")
  flags.DEFINE_string("output_dir", None, "New folder for the corpus files and report.json.")
  flags.DEFINE_string("vocab_file", str(pathlib.Path(__file__).resolve().parent.parent.parent
                                        / "shared" / "data" / "vocab" / "bert_uncased_vocab.txt"),
                      "WordPiece vocab the report counts tokens with.")
  flags.DEFINE_boolean("do_lower_case", True, "Lower-case before counting tokens.")
  flags.DEFINE_boolean("install", False, "apt-get install the packages that are missing.")
  flags.DEFINE_string("root", "/", "Folder the packages' files are under (tests use a fixture).")
  flags.DEFINE_integer("heldout_percent", 1, "Percent of each package's documents held out.")
  flags.DEFINE_integer("min_words", 4, "Fewest words a kept paragraph has.")
  flags.DEFINE_integer("page_words", 500, "Words a dictionary / WordNet page holds.")


# ------------------------------------------------------------------ text
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"\S+")


def split_sentences(paragraph: str) -> List[str]:
  """One paragraph (whitespace already folded) -> its sentences."""
  return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def is_prose(paragraph: str, min_words: int) -> bool:
  """At least min_words words, and at least 60% of the characters are letters."""
  if len(_WORD.findall(paragraph)) < min_words:
    return False
  non_space = sum(not c.isspace() for c in paragraph)
  return sum(c.isalpha() for c in paragraph) >= 0.6 * non_space


def fold(text: str) -> str:
  return " ".join(text.split())


# ------------------------------------------------------------------ readers
# Each reader yields documents: (name, [paragraph, ...]).
Document = Tuple[str, List[str]]

_HTML_BLOCKS = {"p", "li", "dd", "dt", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
                "div", "section", "article", "ul", "ol", "dl", "br", "caption", "figcaption"}
_HTML_SKIPPED_TAGS = {"pre", "table", "script", "style", "nav", "header", "footer", "head",
                      "noscript", "svg", "form", "button", "select"}
_HTML_SKIPPED_CLASSES = ("sphinxsidebar", "related", "footer", "navheader", "navfooter",
                         "toc", "sidebar", "menu-bar", "nav-chapters", "nav-wrapper",
                         "highlight", "literal-block", "programlisting", "screen",
                         "synopsis", "headerlink")


class _HtmlText(html.parser.HTMLParser):
  """Collects the paragraphs of an HTML page outside the skipped elements."""

  def __init__(self):
    super().__init__(convert_charrefs=True)
    self.paragraphs: List[str] = []
    self._buffer: List[str] = []
    self._skip_tag = None  # the tag that opened the skipped element
    self._skip_depth = 0   # how many of that tag are open inside it

  def _flush(self):
    text = fold("".join(self._buffer)).replace("\u00b6", "").strip()
    if text:
      self.paragraphs.append(text)
    self._buffer = []

  def handle_starttag(self, tag, attrs):
    if self._skip_tag is not None:
      self._skip_depth += tag == self._skip_tag
      return
    classes = dict(attrs).get("class") or ""
    if tag in _HTML_SKIPPED_TAGS or any(c in classes.split() for c in _HTML_SKIPPED_CLASSES):
      if tag in ("br", "img", "hr", "meta", "link", "input"):
        return
      self._flush()
      self._skip_tag, self._skip_depth = tag, 1
    elif tag in _HTML_BLOCKS:
      self._flush()

  def handle_endtag(self, tag):
    if self._skip_tag is not None:
      self._skip_depth -= tag == self._skip_tag
      if self._skip_depth == 0:
        self._skip_tag = None
      return
    if tag in _HTML_BLOCKS:
      self._flush()

  def handle_data(self, data):
    if self._skip_tag is None:
      self._buffer.append(data)

  def close(self):
    super().close()
    self._flush()


def html_paragraphs(text: str) -> List[str]:
  parser = _HtmlText()
  parser.feed(text)
  parser.close()
  return parser.paragraphs


def _pod_inline(text: str) -> str:
  """Formatting codes -> their text: L<text|target> -> text, E<gt> -> >, B<x> -> x."""
  escapes = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}
  text = re.sub(r"E<(\w+)>", lambda m: escapes.get(m.group(1), ""), text)
  text = re.sub(r"[ZX]<[^>]*>", "", text)
  # L<text|target>: keep the text; L<name/"section">: keep the name and section.
  text = re.sub(r"L<([^|>]*)\|[^>]*>", r"\1", text)
  for _ in range(4):  # nested codes, innermost first
    text = re.sub(r"[A-Z]<<+\s+(.*?)\s+>>+", r"\1", text)
    text = re.sub(r"[A-Z]<([^<>]*)>", r"\1", text)
  return text


def pod_paragraphs(text: str) -> List[str]:
  paragraphs = []
  in_pod, in_begin = True, False
  for block in re.split(r"\n\s*\n", text):
    if not block.strip():
      continue
    if block.startswith("="):
      command, _, rest = block[1:].partition(" ")
      command = command.strip()
      if command == "cut":
        in_pod = False
      elif command in ("begin", "for"):
        in_begin = command == "begin"
      elif command == "end":
        in_begin = False
      else:
        in_pod = True
        if command.startswith("head") or command == "item":
          rest = rest.strip().lstrip("*").strip()
          if rest:
            paragraphs.append(fold(_pod_inline(rest)))
      continue
    if not in_pod or in_begin or block[0] in " \t":  # verbatim paragraph: code
      continue
    paragraphs.append(fold(_pod_inline(block)))
  return paragraphs


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def dictd_number(digits: str) -> int:
  """A dictd index number (base 64, most significant digit first)."""
  value = 0
  for digit in digits:
    value = value * 64 + _B64.index(digit)
  return value


_GCIDE_PARAGRAPH_START = re.compile(r"^\s*(\d+\.|Syn:|Note:|Defn:)")


def _gcide_entry(entry: str) -> List[str]:
  """One GCIDE entry -> its definitions and quotations, markup removed."""
  entry = re.sub(r"\[[^\]]*\]", "", entry)       # etymology, [1913 Webster], [Obs.]
  entry = re.sub(r"\\[^\\\n]*\\", "", entry)   # pronunciation \A*buse"\
  blocks, block = [], []
  for line in entry.split("\n")[1:]:              # the first line is the headword's
    if not line.strip() or _GCIDE_PARAGRAPH_START.match(line):
      blocks.append(block)
      block = []
    block.append(line)
  blocks.append(block)
  paragraphs = []
  for lines in blocks:
    text = fold(" ".join(lines))
    text = re.sub(r"--\s*[A-Z][\w. ]*$", "", text).strip()  # citation --Macaulay.
    text = re.sub(r"^(\d+\.|Syn:|Note:|Defn:)\s*", "", text.replace("{", "").replace("}", ""))
    if text:
      paragraphs.append(text)
  return paragraphs


def _pages(named_paragraphs: Iterable[Tuple[str, List[str]]], page_words: int
           ) -> Iterator[Document]:
  """Consecutive entries -> pages of about page_words words."""
  page, words, first = [], 0, None
  for name, paragraphs in named_paragraphs:
    first = first or name
    page.extend(paragraphs)
    words += sum(len(p.split()) for p in paragraphs)
    if words >= page_words:
      yield first, page
      page, words, first = [], 0, None
  if page:
    yield first, page


def dictd_documents(index_path: str, page_words: int) -> Iterator[Document]:
  """A dictd index + its .dict.dz (gzip-compatible) -> pages of entries."""
  dict_path = index_path[:-len(".index")] + ".dict.dz"
  with gzip.open(dict_path) as f:
    data = f.read()
  seen = set()
  entries = []
  with open(index_path, encoding="utf-8") as f:
    for line in f:
      fields = line.rstrip("\n").split("\t")
      if len(fields) != 3 or fields[0].startswith("00-"):  # the database's own info
        continue
      offset, length = dictd_number(fields[1]), dictd_number(fields[2])
      if offset not in seen:
        seen.add(offset)
        entries.append((offset, length, fields[0]))
  entries.sort()
  return _pages(((f"{os.path.basename(index_path)}:{word}",
                  _gcide_entry(data[offset:offset + length].decode("utf-8", "replace")))
                 for offset, length, word in entries), page_words)


def wordnet_documents(data_path: str, page_words: int) -> Iterator[Document]:
  """WordNet data.<pos> -> pages of glosses, one lexicographer file at a time."""
  by_lexfile: Dict[str, List[Tuple[str, List[str]]]] = {}
  with open(data_path, encoding="utf-8", errors="replace") as f:
    for line in f:
      if line.startswith(" ") or "|" not in line:  # the licence header
        continue
      fields, gloss = line.split("|", 1)
      offset, lexfile = fields.split()[:2]
      parts = [p.strip().strip('"').strip() for p in gloss.split(";")]
      sentences = [p[0].upper() + p[1:] + ("" if p.endswith((".", "!", "?")) else ".")
                   for p in parts if p]
      by_lexfile.setdefault(lexfile, []).append(
          (f"{os.path.basename(data_path)}:{offset}", [" ".join(sentences)]))
  for lexfile in sorted(by_lexfile):
    yield from _pages(by_lexfile[lexfile], page_words)


def _file_documents(paths: Sequence[str], extract: Callable[[str], List[str]]
                    ) -> Iterator[Document]:
  for path in paths:
    with open(path, encoding="utf-8", errors="replace") as f:
      yield path, extract(f.read())


def package_files(source: Source, root: str) -> List[str]:
  paths = []
  for pattern in source.globs:
    paths.extend(p for p in glob.glob(os.path.join(root, pattern), recursive=True)
                 if os.path.isfile(p)
                 and not any(fnmatch.fnmatch(p, x) for x in source.exclude))
  return sorted(set(paths))


def read_package(name: str, root: str, page_words: int) -> Iterator[Document]:
  """The raw documents of one package (before filtering and deduplication)."""
  source = PACKAGES[name]
  paths = package_files(source, root)
  if not paths:
    raise ConfigError(f"--packages: {name} has no files under --root={root} "
                      f"(looked for {', '.join(source.globs)}); install it or pass --install")
  if source.reader == "html":
    return _file_documents(paths, html_paragraphs)
  if source.reader == "pod":
    return _file_documents(paths, pod_paragraphs)
  if source.reader == "dictd":
    return (doc for path in paths for doc in dictd_documents(path, page_words))
  return (doc for path in paths for doc in wordnet_documents(path, page_words))


# ------------------------------------------------------------------ corpus
class Deduplicator:
  """Drops paragraphs seen before anywhere in the corpus (boilerplate, shared pages)."""

  def __init__(self):
    self._seen = set()

  def new(self, paragraph: str) -> bool:
    key = hashlib.blake2b(paragraph.lower().encode(), digest_size=12).digest()
    if key in self._seen:
      return False
    self._seen.add(key)
    return True


def is_heldout(name: str, percent: int) -> bool:
  return int(hashlib.md5(name.encode()).hexdigest(), 16) % 100 < percent


def clean_document(paragraphs: List[str], dedup: Deduplicator, min_words: int
                   ) -> List[str]:
  """The document's sentences, one a line: prose paragraphs not seen before."""
  lines = []
  for paragraph in paragraphs:
    paragraph = fold(html.unescape(paragraph))
    if is_prose(paragraph, min_words) and dedup.new(paragraph):
      lines.extend(split_sentences(paragraph))
  return lines


def _empty_counts() -> Dict[str, int]:
  return {"documents": 0, "sentences": 0, "words": 0, "bytes": 0, "tokens": 0}


def write_corpus(packages: Sequence[str], root: str, out_dir: str, heldout_percent: int,
                 min_words: int, page_words: int,
                 count_tokens: Callable[[List[str]], int]
                 ) -> Dict[str, Dict[str, Dict[str, int]]]:
  """Writes out_dir/train/<package>.txt and out_dir/heldout/heldout.txt; returns
  {package: {"train" | "heldout": counts}}."""
  dedup = Deduplicator()
  report = {}
  for part in ("train", "heldout"):
    os.makedirs(os.path.join(out_dir, part))
  with open(os.path.join(out_dir, "heldout", "heldout.txt"), "w", encoding="utf-8") as heldout:
    for package in packages:
      counts = {"train": _empty_counts(), "heldout": _empty_counts()}
      with open(os.path.join(out_dir, "train", f"{package}.txt"), "w",
                encoding="utf-8") as train:
        for name, paragraphs in read_package(package, root, page_words):
          lines = clean_document(paragraphs, dedup, min_words)
          if not lines:
            continue
          part = "heldout" if is_heldout(name, heldout_percent) else "train"
          text = "\n".join(lines) + "\n\n"
          (heldout if part == "heldout" else train).write(text)
          c = counts[part]
          c["documents"] += 1
          c["sentences"] += len(lines)
          c["words"] += sum(len(line.split()) for line in lines)
          c["bytes"] += len(text.encode("utf-8"))
          c["tokens"] += count_tokens(lines)
      report[package] = counts
      print(f"{package}: {counts['train']['documents']} documents, "
            f"{counts['train']['tokens']:,} tokens (+{counts['heldout']['documents']} "
            f"documents, {counts['heldout']['tokens']:,} tokens held out)", flush=True)
  return report


def install_missing(packages: Sequence[str]) -> None:
  missing = [p for p in packages
             if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
  if missing:
    print(f"apt-get install {' '.join(missing)}", flush=True)
    subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True,
                   stdout=subprocess.DEVNULL)


def main() -> int:
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  if not FLAGS.output_dir:
    raise ConfigError("--output_dir is required")
  unknown = [p for p in FLAGS.packages if p not in PACKAGES]
  if unknown:
    raise ConfigError(f"--packages: unknown {', '.join(unknown)} (known: {DEFAULT_PACKAGES})")
  if os.path.exists(FLAGS.output_dir):
    raise ConfigError(f"--output_dir: {FLAGS.output_dir} exists; name a new folder")
  if not 0 <= FLAGS.heldout_percent < 100:
    raise ConfigError("--heldout_percent: must be in [0, 100)")
  tokenizer = tokenization.FastTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
  if FLAGS.install:
    install_missing(FLAGS.packages)
  parent = os.path.dirname(os.path.abspath(FLAGS.output_dir))
  os.makedirs(parent, exist_ok=True)
  tmp_dir = tempfile.mkdtemp(prefix=".partial-", dir=parent)
  try:
    report = write_corpus(FLAGS.packages, FLAGS.root, tmp_dir, FLAGS.heldout_percent,
                          FLAGS.min_words, FLAGS.page_words,
                          lambda lines: sum(map(len, tokenizer.tokenize_to_ids(lines))))
    totals = {part: {k: sum(r[part][k] for r in report.values())
                     for k in _empty_counts()} for part in ("train", "heldout")}
    with open(os.path.join(tmp_dir, "report.json"), "w", encoding="utf-8") as f:
      json.dump({"packages": report, "total": totals,
                 "settings": {"vocab_file": FLAGS.vocab_file,
                              "heldout_percent": FLAGS.heldout_percent,
                              "min_words": FLAGS.min_words,
                              "page_words": FLAGS.page_words}}, f, indent=1)
    os.rename(tmp_dir, FLAGS.output_dir)
  except BaseException:
    shutil.rmtree(tmp_dir, ignore_errors=True)
    raise
  print(f"total: {totals['train']['documents']:,} documents, "
        f"{totals['train']['tokens']:,} WordPiece tokens, {totals['train']['bytes']:,} "
        f"bytes for training; {totals['heldout']['tokens']:,} tokens held out "
        f"-> {FLAGS.output_dir}", flush=True)
  return 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "make_package_corpus.py")
