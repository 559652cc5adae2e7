"""Render dataset cards from the Jinja2 templates in `cards/`.

The YAML front matter is produced with `yaml.safe_dump` from data (never string
templating), so the `configs:` block is always valid; the template writes the prose.
"""

from __future__ import annotations

from typing import Any

import jinja2

from ..assets import cards_dirs
from ..recipe import Recipe
from .draft import DatasetDraft
from .folder import WrittenConfig, card_front_matter


def card_environment() -> jinja2.Environment:
    """The Jinja2 environment of every card template in the card folders (strict: an undefined name is an error)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(folder) for folder in cards_dirs()]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["thousands"] = lambda n: f"{n:,}"
    return env


def render_card(recipe: Recipe, draft: DatasetDraft, manifest: dict[str, Any], written: list[WrittenConfig]) -> str:
    """README.md text for a built dataset folder."""
    front = card_front_matter(
        pretty_name=recipe.pretty_name,
        license=recipe.license,
        tags=recipe.tags,
        configs=written,
        default_config=draft.default_config,
    )
    template = card_environment().get_template(recipe.card)
    body = template.render(
        recipe=recipe,
        manifest=manifest,
        configs=draft.configs,
        written={w.name: w for w in written},
        **draft.card_context,
    )
    return f"---\n{front}---\n\n{_with_selection_note(body.lstrip(), manifest)}"


def _with_selection_note(body: str, manifest: dict[str, Any]) -> str:
    """A build of some configs (`probes build --config`) says so under the title: the text describes the recipe."""
    chosen = manifest.get("parameters", {}).get("configs")
    if not chosen:
        return body
    names = ", ".join(f"`{name}`" for name in chosen)
    plural = "s" if len(chosen) > 1 else ""
    note = (
        f"> This folder holds only the config{plural} {names} of the recipe (built with `probes build --config`); "
        "the text below describes every config the recipe builds.\n"
    )
    title, sep, rest = body.partition("\n")
    return f"{title}\n\n{note}{rest}" if sep and title.startswith("#") else f"{note}\n{body}"
