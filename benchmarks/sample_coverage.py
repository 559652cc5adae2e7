"""Benchmark: are the sampling intervals of the headline numbers honest? Coverage on the release's real units.

docs/DESIGN.md section 9: every headline number carries a 95% cluster-bootstrap interval over the
sampled units (`analysis.precision`), finite-population corrected. This checks it where it is
used, on the real events and templates:

- **Empathy δ.** The seven religion configs (one per setting of the paper; `--configs`) are
  built from the release's narratives (all 6,050 events). A simulated model answers every item:
  intensity = 50 + perceiver and experiencer effects + an in-group effect that varies by event
  (4 + N(0, 3)) + an event effect (N(0, 12)) + noise (N(0, 10)), rounded to an integer on the
  item's scale (0..100, or 0..10 on the 10-scale setting). Its answers are written in the empathy
  authors' TSV layout (`batch_pred_emotion.py`'s idx, system_prompt, user_input, response; their
  file names) and brought in with one `probes import --format empathy-authors`, then loaded with
  the analysis's own `collect`, so the real load, parse and analysis path runs. The full-set δ is
  the project's (`compute_cells`, `compute_gap`). Then 200 samples of each size (150, 600, 2,400
  events) are drawn as `probes run --sample n --sample-seed k` draws them (`promptgen.sample_order`,
  seeds 0..199: the first n events of seed k's order, stratified by emotion; nested, and the same
  events in every config), each analysed on the loaded rows restricted to the sample's events
  (`analysis.empathy.precision.gap_precision`, the analysis's own call), and the share of
  intervals holding the full-set δ is counted per config.
- **Attribution d.** The designed configs are built (`release_configs: false`, as the tests'
  `built_designed`); on `single_actor` a simulated model gives each item cause probabilities
  (softmax of cause logits with an identity effect on the internal causes, a per-template effect
  and noise), and the analysis's `compute_items` turns them into d. Samples of 10%, 25% and 50% of the
  templates (domain x scenario x outcome, every identity kept; `--template-fractions`), stratified
  by outcome, are drawn the same way and the mean d of each dimension, identity and outcome is
  checked for coverage (`analysis.attribution.precision.mean_d_precision`).

A 95% interval should hold the full-set value in 93-97% of the samples at each size (`pooled`: the
seven configs' 1,400 intervals of a size together, with the binomial's exact interval; one
config's 200 samples have a binomial 95% range of about 92-98%, so an exactly 95% interval misses
93-97% in about one cell in five), and the half-width shrink about as sqrt((1 - n/N) / n). Run::

    PYTHONPATH=src python benchmarks/sample_coverage.py --sources ../shared/sources \\
        --out benchmarks/results/sample_coverage.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.stats import binomtest

from analysis import precision
from analysis.attribution.precision import mean_d_precision
from analysis.attribution.tables import compute_items
from analysis.empathy import tables as emp
from analysis.empathy.precision import gap_precision
from analysis.pipeline import collect
from analysis.precision import RESAMPLES, run_samples
from promptgen.build import build
from promptgen.empathy.prompts import AUTHORS_VARIATIONS, SETTINGS
from promptgen.sample_order import sample_order
from runners.prompts import load_prompt_config

REPO = Path(__file__).resolve().parents[1]
SIZES = (150, 600, 2400)
SAMPLES = 200
TARGET = (0.93, 0.97)
#: our setting -> the authors' variation name (their file names)
VARIATIONS = {setting: variation for variation, setting in AUTHORS_VARIATIONS.items()}
#: the religion configs, one per setting of the paper
RELIGION = tuple(f"religion_{setting}" for setting in SETTINGS)


def stratified_draw(units: pd.Series, strata: pd.Series, n: int, rng: np.random.Generator) -> np.ndarray:
    """n units without replacement, each stratum's share kept (largest remainders), as the sampler draws."""
    frame = pd.DataFrame({"unit": units.to_numpy(), "stratum": strata.to_numpy()}).drop_duplicates("unit")
    share = frame["stratum"].value_counts().sort_index() * n / len(frame)
    take = np.floor(share).astype(int)
    take[(share - take).sort_values(ascending=False).index[: n - take.sum()]] += 1
    return np.concatenate(
        [rng.choice(frame.loc[frame["stratum"] == s, "unit"].to_numpy(), k, replace=False) for s, k in take.items()]
    )


def coverage(truth: dict, draws: Sequence[dict], n: int, population: int) -> dict:
    """Share of intervals holding the full-set value, over every sample and every metric in it."""
    held, widths, estimates = [], [], []
    for found in draws:
        for key, got in found.items():
            held.append(got.low <= truth[key] <= got.high)
            widths.append(got.half_width)
            estimates.append(got.estimate - truth[key])
    return {
        "n": n,
        "population": population,
        "samples": len(draws),
        "intervals": len(held),
        "coverage": float(np.mean(held)),
        "mean_half_width": float(np.mean(widths)),
        "mean_error": float(np.mean(estimates)),
        "rmse": float(np.sqrt(np.mean(np.square(estimates)))),
        "fpc": math.sqrt(1 - n / population),
    }


def shrinkage(rows: list[dict]) -> list[dict]:
    """Each size's half-width against the first's, beside sqrt((1 - n/N)/n)'s ratio."""
    first = rows[0]
    expect = lambda r: math.sqrt((1 - r["n"] / r["population"]) / r["n"])  # noqa: E731
    return [
        {
            "n": r["n"],
            "half_width_ratio": r["mean_half_width"] / first["mean_half_width"],
            "expected_ratio": expect(r) / expect(first),
        }
        for r in rows
    ]


# ----------------------------------------------------------------------------- empathy


def authors_tsv(prompts: Path, config: str, folder: Path, rng: np.random.Generator) -> None:
    """The simulated model's answers to every item of `config`, as the authors' code writes them."""
    rows = load_prompt_config(str(prompts), config).dataset.to_pandas().sort_values("authors_index")
    events = rows["text_id"].unique()
    event = dict(zip(events, rng.normal(0, 12, len(events)), strict=True))
    ingroup = dict(zip(events, 4 + rng.normal(0, 3, len(events)), strict=True))
    people = sorted(set(rows["perceiver"]))
    perceiver = dict(zip(people, rng.normal(0, 3, len(people)), strict=True))
    experiencer = dict(zip(people, rng.normal(0, 3, len(people)), strict=True))
    same = (rows["perceiver"] == rows["experiencer"]) & (rows["perceiver"] != "a person")
    value = (
        50
        + rows["perceiver"].map(perceiver)
        + rows["experiencer"].map(experiencer)
        + same * rows["text_id"].map(ingroup)
        + rows["text_id"].map(event)
        + rng.normal(0, 10, len(rows))
    )
    top = rows["number_max"].to_numpy()  # 100, or 10 on the 10-scale setting: the answer on the item's own scale
    category, setting = config.split("_")
    stem = f"{category}_{VARIATIONS[setting]}"  # the authors' file name (`<group>_<variation>_batch-<k>.tsv`)
    pd.DataFrame(
        {
            "idx": rows["authors_index"].to_numpy(),
            "system_prompt": [m[0]["content"] for m in rows["messages"]],
            "user_input": [m[1]["content"] for m in rows["messages"]],
            "response": np.clip(np.rint(value * top / 100), 0, top).astype(int).astype(str),
        }
    ).to_csv(folder / f"{stem}_batch-0.tsv", sep="\t", index=False)


def empathy(sources: Path, work: Path, seed: int, configs: Sequence[str], sizes: Sequence[int] = SIZES) -> dict:
    """Every config in `configs` (the religion settings), imported together; per config, the coverage of δ's
    interval over samples of each size drawn as `probes run --sample n --sample-seed k` draws them
    (`promptgen.sample_order`: k = 0..199, the first n units of seed k's order, stratified by emotion), the same
    events for every config, as a sampled run scores them."""
    started = time.perf_counter()
    prompts = build("intergroup-empathy", out_dir=work, sources=sources, configs=list(configs)).path
    built_s = time.perf_counter() - started
    tsv = work / "authors"
    tsv.mkdir()
    for k, config in enumerate(configs):
        authors_tsv(prompts, config, tsv, np.random.default_rng([seed, k]))
    results = work / "results"
    started = time.perf_counter()
    command = [sys.executable, "-m", "probes.cli", "import", str(tsv), "--format", "empathy-authors"]
    command += ["--prompts", str(prompts), "--model-name", "simulated/empathy", "--out", str(results)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    imported_s = time.perf_counter() - started
    joined_all = collect(prompts, [results]).joined["empathy"]
    first = joined_all[configs[0]].drop_duplicates("text_id")
    units = dict(zip(first["text_id"].astype(str), first["emotion"].astype(str), strict=True))
    orders = [sample_order(units, seed=k, probe="intergroup-empathy") for k in range(SAMPLES)]
    out: dict = {"events": len(units), "build_s": built_s, "import_s": imported_s, "configs": {}}
    for config in configs:
        out["configs"][config] = empathy_config(joined_all[config], orders, sizes)
        print(config, json.dumps(out["configs"][config]["sizes"]), flush=True)
    out["pooled"] = pooled([c["sizes"] for c in out["configs"].values()])
    return out


def pooled(per_config: Sequence[Sequence[dict]]) -> list[dict]:
    """Per size, the coverage over every config's intervals together (7 x 200 = 1,400 for the religion configs),
    with its exact binomial 95% interval: one config's 200 samples miss 93-97% about one time in five even for an
    interval whose coverage is exactly 95%, 1,400 intervals almost never."""
    rows = []
    for at_size in zip(*per_config, strict=True):
        intervals = sum(r["intervals"] for r in at_size)
        held = round(sum(r["coverage"] * r["intervals"] for r in at_size))
        ci = binomtest(held, intervals).proportion_ci(0.95)
        share = held / intervals
        rows.append(
            {
                "n": at_size[0]["n"],
                "intervals": intervals,
                "coverage": share,
                "coverage_ci": [ci.low, ci.high],
                "within_target": TARGET[0] <= share <= TARGET[1],
                "cells_within_target": sum(TARGET[0] <= r["coverage"] <= TARGET[1] for r in at_size),
            }
        )
    return rows


def empathy_config(joined: pd.DataFrame, orders: Sequence[list[str]], sizes: Sequence[int] = SIZES) -> dict:
    """One config's full-set δ and the coverage of its intervals over the samples `orders` give at each size."""
    frame = emp.intensity_frame(joined, score="parsed_value")
    samples = run_samples(joined)
    population = next(iter(samples.values()))[0]
    truth = {
        tuple(row[: len(emp.group_keys(frame))]): row[-1]
        for row in emp.compute_gap(emp.compute_cells(frame), n_permutations=1)[
            [*emp.group_keys(frame), "delta"]
        ].itertuples(index=False)
    }
    by_event = {str(t): g for t, g in frame.groupby("text_id", sort=False)}
    covered = []
    started = time.perf_counter()
    for n in sizes:
        draws = []
        for k, order in enumerate(orders):
            rows = pd.concat([by_event[t] for t in order[:n]], ignore_index=True)
            draws.append(gap_precision(rows, samples, seed=k))
        covered.append(coverage(truth, draws, n, population))
        covered[-1]["within_target"] = TARGET[0] <= covered[-1]["coverage"] <= TARGET[1]
    return {
        "rows": len(frame),
        "full_set_delta": float(next(iter(truth.values()))),
        "bootstrap_s": time.perf_counter() - started,
        "sizes": covered,
        "half_width_shrinkage": shrinkage(covered),
    }


# ----------------------------------------------------------------------------- attribution


def attribution(sources: Path, work: Path, seed: int, fractions: Sequence[float]) -> dict:
    recipe = yaml.safe_load((REPO / "builders" / "talent_or_luck.yaml").read_text(encoding="utf-8"))
    recipe["parameters"]["release_configs"] = False
    path = work / "talent_or_luck.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True), encoding="utf-8")
    prompts = build(str(path), out_dir=work / "designed", sources=sources).path
    rows = load_prompt_config(str(prompts), "single_actor").dataset.to_pandas()
    rng = np.random.default_rng(seed)
    templates = rows["template_id"].unique()
    identities = sorted(set(rows["identity"]))
    # cause logits in CAUSES order (effort, ability, difficulty, luck: promptgen.attribution.release)
    template_effect = dict(zip(templates, rng.normal(0, 0.8, (len(templates), 4)), strict=True))
    identity_effect = dict(zip(identities, rng.normal(0, 0.3, len(identities)), strict=True))
    logits = np.stack(rows["template_id"].map(template_effect).to_numpy())
    logits[:, :2] += rows["identity"].map(identity_effect).to_numpy()[:, None]
    logits += rng.normal(0, 0.5, logits.shape)
    cause_p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    from promptgen.attribution.release import CAUSES

    probs = [p[[CAUSES.index(t) for t in types]] for p, types in zip(cause_p, rows["choice_types"], strict=True)]
    joined = rows.drop(columns=["prompt", "messages"]).assign(
        model="simulated/attribution", model_revision="main", scoring="{}", refused=False, choice_probs=probs
    )
    items = compute_items(joined)
    by = ("dimension", "identity", "outcome")
    population = len(templates)
    full = {("simulated/attribution", "main", "{}"): (population, None)}  # every template: no bootstrap
    truth = {k: p.estimate for k, p in mean_d_precision(items, full, by).items() if k[3] == "excluded"}
    units = pd.Series(templates)
    strata = units.map(dict(zip(rows["template_id"], rows["outcome"], strict=False)))
    by_template = {t: g for t, g in items.groupby("template_id", sort=False)}
    sizes = []
    started = time.perf_counter()
    for fraction in fractions:
        n = round(fraction * population)
        draws = []
        for k in range(SAMPLES):
            chosen = stratified_draw(units, strata, n, np.random.default_rng([seed, n, k]))
            sample = pd.concat([by_template[t] for t in chosen], ignore_index=True)
            found = mean_d_precision(sample, {("simulated/attribution", "main", "{}"): (population, None)}, by, seed=k)
            draws.append({key: p for key, p in found.items() if key in truth})
        sizes.append(coverage(truth, draws, n, population))
    return {
        "config": "single_actor",
        "templates": population,
        "items": len(items),
        "identities": len(identities),
        "metrics_per_sample": len(truth),
        "bootstrap_s": time.perf_counter() - started,
        "sizes": sizes,
        "half_width_shrinkage": shrinkage(sizes),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, default=REPO.parent / "shared" / "sources")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sample_coverage.json")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe", choices=("empathy", "attribution", "both"), default="both")
    parser.add_argument("--template-fractions", type=float, nargs="+", default=(0.1, 0.25, 0.5))
    parser.add_argument("--configs", nargs="+", default=RELIGION, help="empathy configs (default: every religion one)")
    parser.add_argument("--method", choices=precision.METHODS, help="the interval (default: analysis.precision.METHOD)")
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="empathy sample sizes, in events")
    args = parser.parse_args(argv)
    if args.method is not None:
        precision.METHOD = args.method  # what every headline's interval uses, for this run
    record: dict = {
        "benchmark": "sample_coverage",
        "resamples": RESAMPLES,
        "method": precision.METHOD,
        "samples_per_size": SAMPLES,
        "target_coverage": list(TARGET),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
    }
    if args.out.is_file():
        record = {**json.loads(args.out.read_text()), **record}
    runs: dict[str, Callable[[Path], dict]] = {
        "empathy": lambda work: empathy(args.sources, work, args.seed, args.configs, args.sizes),
        "attribution": lambda work: attribution(args.sources, work, args.seed, args.template_fractions),
    }
    for name, run in runs.items():
        if args.probe not in (name, "both"):
            continue
        with tempfile.TemporaryDirectory(prefix=f"coverage-{name}-") as work:
            record[name] = run(Path(work))
        for size in record[name].get("sizes", ()):
            size["within_target"] = TARGET[0] <= size["coverage"] <= TARGET[1]
        print(name, "done", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
