"""A run's sample: the rows of the first n units of its probe's seeded order (DESIGN 9).

`--sample N` draws what a probe's metrics average over (its `ProbeSpec.sample_unit`: empathy events
by emotion, attribution templates) and keeps every row of a drawn unit, so every cell, identity and
option order of it is scored. The order is `promptgen.sample_order`'s: nested (a larger sample holds a
smaller one, and resumes it under the same result key) and the same for every model and every config
of the probe that holds the same units. A config whose probe declares no unit (the Trust Game's small
sets) is taken whole.

The sample is recorded in the run's manifest entry (`SampleDraw.record`), never in the result key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.probe_spec import ProbeSpec, SampleUnit
from promptgen.sample_order import sample_order

#: what separates the values of a unit's (or a stratum's) columns in its key
SEP = "\x1f"


@dataclass(frozen=True)
class Sample:
    """`--sample N --sample-seed S`: the first `size` units of each config's seeded order."""

    size: int
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ProbeError(f"--sample must be a positive number of units, got {self.size}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ProbeError(f"--sample-seed must be an integer, got {self.seed!r}")


@dataclass(frozen=True)
class SampleDraw:
    """One config's sample: which unit, how many of how many, and the rows (positions in its table) they hold."""

    unit: str | None
    columns: tuple[str, ...]
    size: int
    seed: int
    population: int
    rows: tuple[int, ...]
    #: the size asked (above `population`: the whole config was taken)
    asked: int

    def record(self) -> dict[str, Any]:
        """The manifest entry's `sample` (what the analysis reads: `seed`, `size`, `population`)."""
        return {
            "unit": self.unit,
            "columns": list(self.columns),
            "size": self.size,
            "seed": self.seed,
            "population": self.population,
        }

    @property
    def whole(self) -> bool:
        return self.size >= self.population

    def note(self, config: str) -> str:
        """One line when the sample is the whole config (asked for more units than it has, or it has no unit)."""
        if self.unit is None:
            return f"config {config!r}: its probe declares no sample unit; --sample takes all {self.population} rows"
        if self.asked > self.population:
            return (
                f"config {config!r}: --sample {self.asked} is more than its {self.population} {self.unit}s; "
                f"taking all of them"
            )
        return ""


def spec_of_rows(probe_values: Sequence[str]) -> ProbeSpec | None:
    """The probe whose rows these are (their `probe` column, `ProbeSpec.row_probes`); None: no probe claims them."""
    from promptgen.probe_registry import probes

    wanted = set(probe_values)
    return next((spec for spec in probes().values() if wanted & {spec.name, *spec.row_probes}), None)


def unit_columns() -> set[str]:
    """Every column a probe's sample unit or strata name, and `probe`: all a draw reads of a config."""
    from promptgen.probe_registry import probes

    named = {c for spec in probes().values() for unit in spec.sample_units for c in (*unit.columns, *unit.strata)}
    return {"probe", *named}


def config_unit(table: Any) -> tuple[str, SampleUnit | None]:
    """(the probe's name for the order's seed, the unit its sample draws) of a config's Arrow `table`."""
    import pyarrow.compute as pc

    values = [str(v) for v in pc.unique(table["probe"]).to_pylist()] if "probe" in table.column_names else []
    spec = spec_of_rows(values)
    if spec is None:
        return (values[0] if values else ""), None
    return spec.name, spec.sample_unit(table.column_names)


def _keys(table: Any, columns: Sequence[str]) -> Any:
    """One string per row naming its values of `columns` (joined by `SEP`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = [pc.cast(table[c], pa.string()) for c in columns]
    if len(parts) == 1:
        return pc.fill_null(parts[0], "")
    return pc.binary_join_element_wise(*[pc.fill_null(p, "") for p in parts], SEP)


def unit_strata(table: Any, unit: SampleUnit, what: str) -> tuple[Any, dict[str, str]]:
    """Each row's unit key, and every unit's stratum (one per unit: a unit in two strata is one `ProbeError`)."""
    import pyarrow as pa

    keys = _keys(table, unit.columns)
    strata = _keys(table, unit.strata) if unit.strata else pa.repeat("", len(table)).cast(pa.string())
    pairs = pa.table({"unit": keys, "stratum": strata}).group_by(["unit", "stratum"]).aggregate([])
    units: dict[str, str] = {}
    for u, s in zip(pairs["unit"].to_pylist(), pairs["stratum"].to_pylist(), strict=True):
        if u in units and units[u] != s:
            raise ProbeError(
                f"{what}: {unit.name} {u!r} (columns {', '.join(unit.columns)}) is in two strata ({units[u]!r} and "
                f"{s!r} of {', '.join(unit.strata)}); a sample unit keeps one stratum"
            )
        units[u] = s
    return keys, units


@dataclass(frozen=True)
class UnitIndex:
    """A config's units in sample order and each row's unit: any size's draw without reading the config again
    (the plan's `--budget-hours` prices many sizes of one config)."""

    unit: SampleUnit | None
    seed: int
    #: the units in sample order (empty: no unit, the config is taken whole)
    order: tuple[str, ...]
    #: each row's unit key (an Arrow string array; None without a unit)
    keys: Any
    rows: int

    @classmethod
    def of(cls, table: Any, seed: int, what: str) -> UnitIndex:
        """The index of `table` (an Arrow table of a config's rows, after its `where`)."""
        probe, unit = config_unit(table)
        if unit is None:
            return cls(None, seed, (), None, len(table))
        keys, units = unit_strata(table, unit, what)
        return cls(unit, seed, tuple(sample_order(units, seed=seed, probe=probe)), keys, len(table))

    @property
    def population(self) -> int:
        """The config's distinct units (its rows when it has none)."""
        return len(self.order) if self.unit is not None else self.rows

    def draw(self, size: int) -> SampleDraw:
        """The rows of the first `size` units, in table order (all of them above the population)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.unit is None:
            return SampleDraw(None, (), self.rows, self.seed, self.rows, tuple(range(self.rows)), size)
        taken = min(size, len(self.order))
        chosen = pa.array(self.order[:taken], pa.string())
        rows = pc.indices_nonzero(pc.is_in(self.keys, value_set=chosen)).to_pylist()
        unit = self.unit
        return SampleDraw(unit.name, unit.columns, taken, self.seed, len(self.order), tuple(rows), size)


def draw_sample(table: Any, sample: Sample, what: str) -> SampleDraw:
    """The rows of `table` (an Arrow table of a config's rows, after its `where`) the sample takes, in table order."""
    return UnitIndex.of(table, sample.seed, what).draw(sample.size)


def limit_warning(table: Any, config: str, flag: str = "--limit") -> str:
    """The one line `--limit` (the sweep's `--limit-per-config`) gives on a config with a sample unit: it takes
    the first rows (one cell of the empathy matrix), not a spread of its units."""
    _, unit = config_unit(table)
    if unit is None:
        return ""
    return (
        f"config {config!r}: {flag} takes its first rows in build order (on an empathy config, one cell of its "
        f"matrix), not a spread of its {unit.plural}; --sample N draws N {unit.plural} with every row of each"
    )
