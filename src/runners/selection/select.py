"""A run's rows: one `Selection` (where, sample, shard, limit) and the one function that selects them.

The steps run in one order, written once here: the rows the protocol (or `--where`) names, then the
seeded sample of their units (`--sample N --sample-seed S`: drawn from the whole config's units, so
every shard and every model gets the same ones), then the shard (a hash of the item id, so shards
partition a config in any row order), then the first `--limit` of those. `runners.run.runner.
resolve_protocol` selects a run's rows once (`runners.prompts.select_prompts`); a narrowed load
(`runners.prompts.load_prompt_config`), a session, the engine's sizing and a sweep's pricing read
the same rows through `select_rows`, and do not select again where the config already holds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from promptgen.core.errors import ProbeError
from runners.results.layout import shard_of
from runners.selection.sample import Sample, SampleDraw, UnitIndex, unit_columns
from runners.selection.where import where_mask, where_text

if TYPE_CHECKING:
    from promptgen.protocols import Protocol


@dataclass(frozen=True)
class Selection:
    """Which rows of a config a run scores (module docstring): a value, compared to know whether a config
    already holds them (`runners.prompts.PromptConfig.selection`).

    `where`: column -> values (None: every row; a request's None is its protocol's, `under`); `shard`:
    (i, n); `limit`: the first N rows (None: all); `sample`: the rows of the first N units of the seeded
    order of `seed` (None: no sample).
    """

    where: Mapping[str, Sequence[str]] | None = None
    shard: tuple[int, int] = (0, 1)
    limit: int | None = None
    sample: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.where is not None:  # one form (tuples of values), so two selections of the same rows are equal
            object.__setattr__(self, "where", {column: tuple(values) for column, values in self.where.items()})
        if self.limit is not None and self.limit < 1:
            raise ProbeError(f"--limit must be positive, got {self.limit}")
        if self.sample is not None:
            Sample(self.sample, self.seed)  # a size below 1 is one line, as the selection is made

    @property
    def drawn(self) -> Sample | None:
        """The sample asked (`--sample N --sample-seed S`); None: every row the other steps keep."""
        return None if self.sample is None else Sample(self.sample, self.seed)

    @property
    def narrows(self) -> bool:
        """Whether a load may read only these rows: a shard or a limit, and no sample (a sample is drawn from the
        whole config's units, so with one the load reads every row `where` keeps)."""
        return self.sample is None and (self.limit is not None or self.shard[1] > 1)

    def under(self, protocol: Protocol | None) -> Selection:
        """A request's selection with its `where` left as None made the protocol's (`resolve_scoring`'s rule)."""
        if self.where is not None or protocol is None or protocol.where is None:
            return self
        return replace(self, where=protocol.where)

    def columns(self) -> list[str]:
        """The columns `select_rows` reads: the id (a shard), `where`'s, and every column a probe's sample unit
        may name (a config has some of them)."""
        named = [*(["id"] if self.shard[1] > 1 else []), *(self.where or {})]
        if self.sample is not None:
            named += ["id", *sorted(unit_columns())]
        return list(dict.fromkeys(named))


#: every row of a config: no where, sample, shard or limit
EVERY_ROW = Selection()


@dataclass(frozen=True)
class Selected:
    """The rows a `Selection` keeps (positions in the table, in table order) and the sample drawn (None: none)."""

    rows: Sequence[int]
    draw: SampleDraw | None = None


def select_rows(tables: Any | Iterable[Any], selection: Selection, what: str) -> Selected:
    """The rows of a config that `selection` keeps, from its Arrow columns (`Selection.columns`).

    `tables`: one Arrow table, or the config's files in order (an iterator of tables): without a sample,
    reading stops once `limit` rows are kept, so a 4-item run of a config of millions reads little of it.
    A `where` that no row meets is one `ProbeError` naming `what`. The whole config (no `where`,
    sample or shard) is a `range`: no Python int per row of a config of millions.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks: Iterable[Any] = [tables] if isinstance(tables, pa.Table) else tables
    where, (i, n), limit, drawn = selection.where, selection.shard, selection.limit, selection.drawn
    if drawn is not None:  # a draw needs every unit of the config
        chunks = [pa.concat_tables(list(chunks))]
    if not where and n == 1 and drawn is None:
        total = 0
        for chunk in chunks:
            if limit is not None and total >= limit:
                break
            total += len(chunk)
        return Selected(range(total if limit is None else min(limit, total)))
    kept: list[int] = []
    draw = None
    offset = 0
    met = False
    for chunk in chunks:
        if limit is not None and drawn is None and len(kept) >= limit:
            break
        keep: Sequence[int] = range(len(chunk))
        if where:
            keep = pc.indices_nonzero(where_mask(chunk, where, what)).to_pylist()
            met = met or bool(keep)
        if drawn is not None:
            index = UnitIndex.of(chunk.take(list(keep)) if where else chunk, drawn.seed, what)
            draw = index.draw(drawn.size)
            keep = [keep[r] for r in draw.rows]
        if n > 1:
            ids = chunk["id"].to_pylist()
            keep = [k for k in keep if shard_of(ids[k], n) == i]
        kept.extend(offset + k for k in keep)
        offset += len(chunk)
    if where and not met and offset:
        raise ProbeError(f"{what}: no row has {where_text(where)}")
    return Selected(kept if limit is None else kept[:limit], draw)
