"""The scoring backends by `--backend` name: one registry that every caller reads.

A backend is registered once, as a `BackendSpec` (lm-eval's `@register_model`, made lazy): its
name, the extras it needs, its own load options (a dataclass whose fields are its `probes run`
flags: `load_flag`), how Ray places a replica, whether it starts an engine, and where its loader
and its token accounting live ("module:function", imported on first use, so registering costs
nothing and `import runners` needs no torch).
Nothing else in the project branches on a backend's name: loading (`runners.backends.load`), the
drivers, the extras check, plans and quotes and the CLI all read the spec.

A new backend is a package under `runners/backends/` (or any importable module) with a class
that implements `protocol.Backend` and a loader, plus one `register(BackendSpec(...))`
(docs/EXTENDING.md). The three built in register below, from their own `spec`
modules; a module outside the project registers from a plugin (an installed package's entry
point, or `PROBES_PLUGINS`), which `promptgen.core.plugins.load_extensions` loads: importing this
registry loads none.
"""

from __future__ import annotations

from .hf.spec import HF  # registers the built-in backends
from .registry import (  # the package's public names
    BACKENDS,
    DEFAULT_BACKEND,
    BackendOptions,
    BackendSpec,
    LoadFlag,
    Resolved,
    Settling,
    backend_flags,
    backend_spec,
    backends_taking,
    cpu_extras,
    extra_modules,
    flag_name,
    load_flag,
    load_flags,
    priced_backends,
    register,
    require_for_scoring,
)
from .vllm.spec import VLLM

# isort: split
# a model behind a server, registered after the in-process backends (`--help` and plans list them in this order)
from .openai.spec import OPENAI

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "HF",
    "OPENAI",
    "VLLM",
    "BackendOptions",
    "BackendSpec",
    "LoadFlag",
    "Resolved",
    "Settling",
    "backend_flags",
    "backend_spec",
    "backends_taking",
    "cpu_extras",
    "extra_modules",
    "flag_name",
    "load_flag",
    "load_flags",
    "priced_backends",
    "register",
    "require_for_scoring",
]
