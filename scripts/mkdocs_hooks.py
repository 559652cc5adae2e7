"""MkDocs hooks (mkdocs.yml `hooks:`): the README is the site's home page, and links leave no page broken.

The README is written for the repository root (`docs/USAGE.md`, `cards/...`), the pages for docs/
(`USAGE.md`, `../README.md`). The site holds only docs/ and the README (as `index.md`, made here;
nothing is written to docs/). Every relative link is resolved from its page's place in the
repository: one to a page of the site stays relative (so `mkdocs build --strict` checks it), one to
the README becomes `index.md`, and one to any other file of the repository becomes its address on
GitHub. tests/test_docs.py checks that those files exist.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: where a link to a file outside docs/ points on the site
BLOB = "https://github.com/social-bias-probes/social-bias-probes/blob/main/"
HOME = "index.md"
#: a Markdown link or image's target: `](target)` or `](target "title")`
_LINK = re.compile(r"(\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")
_FENCE = re.compile(r"^(```|~~~)")


def on_files(files: Any, config: Any) -> Any:
    """Add the README as the home page (a generated file: docs/ gets no copy)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, HOME, abs_src_path=str(REPO / "README.md")))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Each relative link resolved from the page's place in the repository (the README's is the root)."""
    source = "README.md" if page.file.src_uri == HOME else f"docs/{page.file.src_uri}"
    return rewrite_links(markdown, source)


def rewrite_links(markdown: str, source: str) -> str:
    """`markdown` (the repository file `source`) with its links pointing where the site has their targets."""
    base = posixpath.dirname(source)
    out, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        out.append(line if fenced else _LINK.sub(lambda m: m.group(1) + _target(m.group(2), base) + m.group(3), line))
    return "".join(out)


def _target(link: str, base: str) -> str:
    if re.match(r"^[a-z][a-z0-9+.-]*:", link) or link.startswith(("#", "/")):
        return link  # an address, an anchor of this page, or a site path
    path, _, anchor = link.partition("#")
    anchor = f"#{anchor}" if anchor else ""
    target = posixpath.normpath(posixpath.join(base, path))
    if target == "README.md":
        return posixpath.relpath(HOME, start=_site_dir(base)) + anchor
    if target.startswith("docs/"):
        return posixpath.relpath(target[len("docs/") :], start=_site_dir(base)) + anchor
    return BLOB + target + anchor


def _site_dir(base: str) -> str:
    """Where a page of the repository folder `base` sits on the site (docs/ and the root are its top)."""
    return "." if base in ("", "docs") else base.removeprefix("docs/")
