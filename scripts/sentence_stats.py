"""Sentence lengths of the project's prose: README.md and docs/*.md, printed as JSON.

Only prose counts: fenced code blocks, tables, headings, HTML comments and link-only lines are left
out. A paragraph or list item is cut into sentences at `.`, `!` or `?` followed by a space; common
abbreviations (`e.g.`, `i.e.`, `vs.`, ...) do not end a sentence. A sentence's length is its
whitespace-separated words, an inline code span counting as one word.

    .venv/bin/python scripts/sentence_stats.py [--root DIR] [FILE ...]

Without files it reads README.md and docs/*.md under --root (default: the repository). To measure
another commit, export its files first: `git archive HEAD README.md docs | tar -x -C DIR`.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: abbreviations whose full stop ends no sentence
ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "etc.", "cf.", "et al.", "Mr.", "Ms.", "Dr.", "No.", "approx.")
_PLACEHOLDER = "\x00"
#: an abbreviation's full stop while sentences are cut
_DOT = "\x01"
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')*_]*\s+")


def prose_blocks(text: str) -> list[str]:
    """The paragraphs and list items of a Markdown text, each joined into one line."""
    blocks: list[str] = []
    current: list[str] = []
    fenced = False

    def close() -> None:
        if current:
            blocks.append(" ".join(current))
            current.clear()

    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```") or line.startswith("~~~"):
            close()
            fenced = not fenced
            continue
        if fenced or not line or line.startswith(("#", "|", "<")):
            close()
            continue
        if re.match(r"^([-*+]|\d+\.)\s+", line):  # a list item starts a block of its own
            close()
            line = re.sub(r"^([-*+]|\d+\.)\s+", "", line)
        current.append(line)
    close()
    return blocks


def sentences(block: str) -> list[str]:
    """A block's sentences (a span of code or a link's address never splits one)."""
    spans: list[str] = []

    def hide(match: re.Match[str]) -> str:
        spans.append(match.group(0))
        return f"{_PLACEHOLDER}{len(spans) - 1}{_PLACEHOLDER}"

    text = _CODE_SPAN.sub(hide, _LINK.sub(r"\1", block))
    for abbreviation in ABBREVIATIONS:
        text = text.replace(abbreviation, abbreviation.replace(".", _DOT))
    parts = [part.replace(_DOT, ".") for part in _SENTENCE_END.split(text)]
    return [part for part in (p.strip() for p in parts) if re.search(r"\w", part)]


def word_count(sentence: str) -> int:
    return len(sentence.split())


def stats(files: list[Path], root: Path) -> dict[str, object]:
    lengths: list[int] = []
    per_file: dict[str, dict[str, float]] = {}
    for path in files:
        counts = [word_count(s) for block in prose_blocks(path.read_text(encoding="utf-8")) for s in sentences(block)]
        lengths += counts
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        per_file[name] = {"sentences": len(counts), "median_words": statistics.median(counts) if counts else 0}
    return {
        "files": len(files),
        "sentences": len(lengths),
        "median_words": statistics.median(lengths) if lengths else 0,
        "mean_words": round(statistics.fmean(lengths), 1) if lengths else 0,
        "share_over_20": round(sum(n > 20 for n in lengths) / len(lengths), 3) if lengths else 0,
        "longest": max(lengths, default=0),
        "per_file": per_file,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md and docs/*.md)")
    parser.add_argument("--root", type=Path, default=REPO, help="the folder holding README.md and docs/")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    files = [f.resolve() for f in args.files] or [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    print(json.dumps(stats([f for f in files if f.is_file()], root), indent=2))


if __name__ == "__main__":
    main()
