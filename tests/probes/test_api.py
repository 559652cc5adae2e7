"""`probes.api`: every name is its home module's object, imported when first used, so a command loads what it calls."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from probes import api


def test_every_name_of_the_api_is_the_object_its_home_defines() -> None:
    for name, home in api._HOMES.items():
        module, _, attribute = home.partition(":")
        assert getattr(api, name) is getattr(importlib.import_module(module), attribute or name), name
    assert set(api._HOMES) <= set(api.__all__) <= set(dir(api))
    assert all(getattr(api, name) is not None for name in api.__all__)


def test_importing_the_api_or_calling_import_loads_no_other_command_s_libraries() -> None:
    """`probes import` used to load the analysis, plots and statistics with the API: 59 MB more at its peak."""
    code = (
        "import json, sys; from probes import api; first = sorted(sys.modules); api.import_results; "
        "print(json.dumps([first, sorted(sys.modules)]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    first, after_import = (set(m) for m in json.loads(done.stdout.strip().splitlines()[-1]))
    heavy = {"analysis.report", "analysis.precision", "scipy", "statsmodels", "matplotlib", "probes.sweep"}
    assert not heavy & first, heavy & first
    assert "probes.importer" in after_import and not heavy & after_import, heavy & after_import
