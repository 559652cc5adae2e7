"""A small intergroup-empathy `--sources` folder: the release's twelve TSVs and the optional crowd-enVent corpus.

The recipe reads the authors' release (`intergroup-empathy-release/data/crowd-enVent_<emotion>.tsv`);
the crowd-enVent corpus (`crowd-envent/corpus/crowd-enVent_generation.tsv`, or its zip) is an
optional extra that adds human intensity ratings. Three events per emotion: fragments, `because
...` and `when ...` texts, a full sentence that already names the feeling, quotes, an embedded tab;
the corpus adds `no-emotion` rows and appraisal/demographic columns the builder must ignore.
The real release is tested in tests/promptgen/empathy/test_release_prompts.py.
"""

from __future__ import annotations

import csv
import hashlib
import zipfile
from pathlib import Path

import yaml

from promptgen.empathy.narratives import EMOTIONS
from promptgen.empathy.release import RELEASE_EMOTIONS
from promptgen.empathy.synthetic import write_release_rows
from release_fixture import REPO

TEXTS = (
    "when I received dozens of job rejections",
    'because my friend lied to me about "the party"',
    "my dog died last week.\tIt was sudden",
)
HEADER = ["text_id", "emotion", "generated_text", "hidden_emo_text", "intensity", "suddenness", "age", "gender"]
CORPUS_FILE = Path("crowd-envent") / "corpus" / "crowd-enVent_generation.tsv"
TSV = CORPUS_FILE.name


def corpus_rows() -> list[list[str]]:
    """The crowd-enVent corpus's rows (the optional extra), one per event, plus two `no-emotion` rows."""
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


def release_rows() -> dict[str, list[list[str]]]:
    """The release's rows per emotion for the same events: T0 as typed, T1 and T2 in the release's shapes."""
    out: dict[str, list[list[str]]] = {e: [] for e in RELEASE_EMOTIONS}
    for text_id, emotion, text, *_ in corpus_rows():
        if emotion in out:
            out[emotion].append(
                [emotion, text_id, text, f"I felt {emotion} {text}", f"The person felt {emotion} {text}"]
            )
    return out


def release_order() -> list[str]:
    """The events' text ids in the release's order (emotions in `const.py` order, file order within)."""
    return [row[1] for emotion in RELEASE_EMOTIONS for row in release_rows()[emotion]]


def write_sources(
    root: Path,
    rows=None,
    header=None,
    as_zip: bool = False,
    *,
    corpus: bool = True,
    release: dict[str, list[list[str]]] | None = None,
) -> Path:
    """A --sources folder: the release's files (`release`, default `release_rows()`) and, unless
    `corpus=False`, the crowd-enVent corpus (`rows`, default `corpus_rows()`) as the TSV or the zip."""
    write_release_rows(root, release_rows() if release is None else release)
    if not corpus:
        return root
    tsv = root / CORPUS_FILE
    tsv.parent.mkdir(parents=True, exist_ok=True)
    with tsv.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(header or HEADER)
        writer.writerows(corpus_rows() if rows is None else rows)
    if as_zip:
        with zipfile.ZipFile(root / "crowd-envent" / "crowd-enVent2023.zip", "w") as zf:
            zf.write(tsv, "crowd-enVent2023/corpus/crowd-enVent_generation.tsv")
        tsv.unlink()
    return root


def write_recipe(path: Path, pin: Path | None = None, **parameters) -> Path:
    """The intergroup-empathy recipe with the release's sources unpinned (the fixture is not the release),
    the corpus pinned to `pin`'s hash when given, and `parameters` laid over the recipe's."""
    recipe = yaml.safe_load((REPO / "builders" / "intergroup_empathy.yaml").read_text(encoding="utf-8"))
    for source in recipe["sources"]:
        if source["id"] != "crowd-envent":
            source["sha256"] = None
        elif pin is not None:
            source["sha256"] = hashlib.sha256(pin.read_bytes()).hexdigest()
    recipe["parameters"].update(parameters)
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
