"""Another tool's files for a probe's results, as a probe's parts declare them (`probes import`, `probes export`).

Here, below both stages that use it: a probe's `probes.probe_part.ProbeCommands` declares the formats
it reads, its `analysis.probe_part.ProbeAnalysis` the formats it writes. The format itself is
imported on first use, so `--help` lists every format without importing a reader or a writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ProbeError
from .plugins import PluginCode, is_plugin_module, plugin_call, resolve_reference


@dataclass(frozen=True)
class ReleaseFormat:
    """Another tool's files for a probe's results: `probes import --format NAME` reads them into its configs,
    `probes export --format NAME` writes them from its results."""

    #: "module:attribute" of the format, imported on first use: a reader (`probes.importer.common.ImportFormat`)
    #: or a writer (`analysis.export_format.ExportFormat`)
    format: str
    #: what it reads or writes, for `--help` (one sentence)
    help: str


def load_format(name: str, release: ReleaseFormat) -> Any:
    """The format object of `--format NAME`, imported on first use; one whose object names another format is
    refused (its rows or files would be recorded under the wrong format). A plugin's format comes guarded
    (`promptgen.core.plugins.PluginCode`): an exception its code raises is one line naming the format and the
    plugin's module, not a traceback."""
    target = release.format
    module = target.partition(":")[0]
    if not is_plugin_module(module):
        fmt = resolve_reference(target)
    else:  # a plugin's: whatever its code raises, on import or on use, is one line naming it (`PluginCode`)
        label = f"--format {name} (plugin {module})"
        fmt = PluginCode(label, plugin_call(label, f"importing {target}", resolve_reference, target))
    if fmt.name != name:
        raise ProbeError(f"--format {name}: {target} is format {fmt.name!r}")
    return fmt
