"""A small corpus in the crowd-enVent generation TSV format (the real corpus is not on this machine).

Three events per emotion plus `no-emotion` rows, with fragments, `because ...` and `when ...`
texts, full sentences that already name the feeling, quotes, an embedded tab, and extra
appraisal/demographic columns that the builder must ignore.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import yaml

from promptgen.empathy.narratives import EMOTIONS
from promptgen.empathy.synthetic import write_corpus_rows
from release_fixture import REPO

TEXTS = (
    "when I received dozens of job rejections",
    'because my friend lied to me about "the party"',
    "my dog died last week.\tIt was sudden",
)
HEADER = ["text_id", "emotion", "generated_text", "hidden_emo_text", "intensity", "suddenness", "age", "gender"]


def corpus_rows() -> list[list[str]]:
    rows = []
    n = 0
    for emotion in EMOTIONS:
        for j, text in enumerate(TEXTS):
            n += 1
            if emotion == "pride" and j == 2:
                text = "I felt so proud when my son graduated."
            rows.append([f"gen{n:05d}", emotion, text, text.replace(emotion, "[MASK]"), str(1 + n % 5), "3", "34", "f"])
    rows.append(["gen09001", "no-emotion", "I went to the shop.", "I went to the shop.", "1", "1", "20", "m"])
    rows.append(["gen09002", "no-emotion", "nothing happened", "nothing happened", "", "1", "20", "m"])
    return rows


def write_sources(root: Path, rows=None, header=None, as_zip: bool = False) -> Path:
    """A --sources folder holding the corpus as the extracted TSV or as the zip."""
    tsv = write_corpus_rows(root, corpus_rows() if rows is None else rows, header or HEADER)
    if as_zip:
        with zipfile.ZipFile(root / "crowd-envent" / "crowd-enVent2023.zip", "w") as zf:
            zf.write(tsv, "crowd-enVent2023/corpus/crowd-enVent_generation.tsv")
        tsv.unlink()
    return root


def write_recipe(path: Path, pin: Path | None = None) -> Path:
    recipe = yaml.safe_load((REPO / "builders" / "intergroup_empathy.yaml").read_text(encoding="utf-8"))
    if pin is not None:
        recipe["sources"][0]["sha256"] = hashlib.sha256(pin.read_bytes()).hexdigest()
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
