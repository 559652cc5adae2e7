#!/usr/bin/env bash
# What users get from a checkout, for comparing two versions of the code (e.g. before and after a
# restructuring): the three datasets built, 40 items of two configs scored with SmolLM2, an import of the
# empathy authors' files (scripts/write_authors_outputs.py), and the demo.
#
#   bash scripts/capture_outputs.sh OUT [SOURCES]       # run from the checkout to capture
#   python scripts/compare_outputs.py OUT_BEFORE OUT_AFTER
#
# SOURCES defaults to ../shared/sources. The empathy corpus is the demo's synthetic one (written once
# into OUT/synthetic-sources with the recipe that pins it, or copied there by hand to compare two
# checkouts on the same corpus).
set -euo pipefail
OUT=$(realpath -m "$1"); SOURCES=$(realpath "${2:-../shared/sources}")
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1 HF_DATASETS_CACHE="$OUT/hf-datasets-cache"
P="$PY -m probes.cli"
mkdir -p "$OUT"
if [ ! -f "$OUT/synthetic-sources/recipe.yaml" ]; then
  $PY -c "import sys; from pathlib import Path; from promptgen.empathy.synthetic import write_synthetic_corpus; write_synthetic_corpus(Path(sys.argv[1]), events_per_emotion=4)" "$OUT/synthetic-sources"
fi
$P build talent-or-luck --sources "$SOURCES" --out "$OUT/datasets" -q
$P build trust-game --sources "$SOURCES" --out "$OUT/datasets" -q
$P build "$OUT/synthetic-sources/recipe.yaml" --sources "$OUT/synthetic-sources" --out "$OUT/datasets" --max-events 24 -q
MODEL=$($PY -c "from runners.testmodel import ensure_smollm2; print(ensure_smollm2()[1])")
$P run "$OUT/datasets/talent-or-luck" --config single_actor --model "$MODEL" --model-name smol --limit 40 --out "$OUT/results" -q
$P run "$OUT/datasets/intergroup-empathy-events24" --config religion_P0S0T0 --model "$MODEL" --model-name smol --no-chat --limit 40 --out "$OUT/results" -q
$PY scripts/write_authors_outputs.py "$OUT/datasets/intergroup-empathy-events24" "$OUT/authors-outputs"
$P import "$OUT/authors-outputs" --format empathy-authors --prompts "$OUT/datasets/intergroup-empathy-events24" --model-name org/authors-model --out "$OUT/imported" >/dev/null
$P demo --sources "$SOURCES" --out "$OUT/demo"
