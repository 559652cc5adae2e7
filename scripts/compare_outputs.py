"""Compare two captures of `scripts/capture_outputs.sh`: dataset files byte for byte, result and imported rows to
the bit, demo tables byte for byte. Prints one line per part and IDENTICAL or DIFFERENT (exit 0 or 1).

Result part files are named by the time they were written, so rows are compared, not files: by config and
id, every column, floats by `repr` (exact round trip, and NaN equal to NaN).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq


def file_digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def result_rows(root: Path, folder: str = "results") -> dict[tuple[str, str], str]:
    rows = {}
    for part in sorted((root / folder / "data").rglob("part-*.parquet")):
        for row in pq.read_table(part).to_pylist():
            rows[(part.parent.parent.name, row["id"])] = repr(row)
    return rows


def demo_tables(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "demo").rglob("tables/*.csv"))}


def main(before: Path, after: Path) -> int:
    same = True
    db, da = file_digests(before / "datasets"), file_digests(after / "datasets")
    differ = [k for k in sorted(set(db) | set(da)) if db.get(k) != da.get(k)]
    print(f"datasets: {len(db)} files before, {len(da)} after, {len(differ)} differ {differ[:5]}")
    for manifest in sorted((before / "datasets").glob("*/build_manifest.json")):
        other = after / "datasets" / manifest.parent.name / "build_manifest.json"
        fb = json.loads(manifest.read_text())["fingerprint"]
        fa = json.loads(other.read_text())["fingerprint"] if other.is_file() else None
        print(f"  {manifest.parent.name}: fingerprint {fb} before, {fa} after")
    rb, ra = result_rows(before), result_rows(after)
    bad = [k for k in rb if rb[k] != ra.get(k)]
    print(f"result rows: {len(rb)} before, {len(ra)} after, {len(bad)} differ {bad[:3]}")
    ib, ia = result_rows(before, "imported"), result_rows(after, "imported")
    ibad = [k for k in ib if ib[k] != ia.get(k)]
    print(f"imported rows: {len(ib)} before, {len(ia)} after, {len(ibad)} differ {ibad[:3]}")
    tb, ta = demo_tables(before), demo_tables(after)
    tdiff = [k for k in sorted(set(tb) | set(ta)) if tb.get(k) != ta.get(k)]
    print(f"demo tables: {len(tb)} before, {len(ta)} after, {len(tdiff)} differ {tdiff[:5]}")
    same = not differ and not bad and len(rb) == len(ra) and not ibad and len(ib) == len(ia) and not tdiff and bool(tb)
    print("IDENTICAL" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
