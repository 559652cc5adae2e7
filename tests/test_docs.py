"""The documentation says what the code does: README.md and docs/*.md are checked against the command line.

- Every `probes COMMAND` and every `--flag` the docs name, in code spans and in shell code blocks,
  exists in that command's `--help`. The commands and flags come from the typer app itself
  (`typer.main.get_command`, its parameters), not from the help text, with the tests' plugins
  loaded, since docs/EXTENDING.md names their command and flags. A flag in a span of its own
  (`--limit`) belongs to the first command its section names (else its enclosing section's; else
  any command's); a span or shell line that starts with `probes COMMAND` gives its own.
- Every code block marked `<!-- run -->` on the line above its fence runs, as the README's Python
  block does (tests/test_readme_python.py), in a fresh folder laid out like the repository root.
- Every relative link points at a file of the repository (mkdocs checks the links between pages;
  scripts/mkdocs_hooks.py turns the others into GitHub addresses), and the README stays a front page.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: a code block to run: this comment on the line above its fence
RUN_MARKER = "<!-- run -->"
#: code blocks whose lines are shell commands (others, such as python, text or bibtex, name no command)
SHELL = {"", "bash", "sh", "shell", "console"}
#: the longest the README may be (a front page)
README_LINES = 150

_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_SPAN = re.compile(r"`([^`\n]+)`")
_LONG_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*(?![\w])")
_PROBES = re.compile(r"^(?:\S*/)?probes$")

#: prints {"": top-level options, COMMAND: [its options], ...}, taken from the typer app's click command
_SURFACE = """
import json, typer
from probes.cli import app

def options(command):
    return sorted({o for p in command.params if p.param_type_name == "option" for o in p.opts + p.secondary_opts}
                  | {"--help"})

group = typer.main.get_command(app)
print(json.dumps({"": options(group), **{name: options(c) for name, c in group.commands.items()}}))
"""


@dataclass(frozen=True)
class Mention:
    """A command and the flags one place of the docs names; `command` None: any command's flags."""

    where: str
    command: str | None
    flags: tuple[str, ...]
    explicit: bool  # the command is named here (so it must exist), not taken from the section


def cli_surface() -> dict[str, set[str]]:
    """Every command of `probes` (the tests' plugins loaded) and its options, from the typer app."""
    env = {
        **os.environ,
        "PROBES_PLUGINS": "fake_probe,fake_backend",
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", _SURFACE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: set(flags) for name, flags in json.loads(done.stdout).items()}


def _command_words(words: list[str]) -> tuple[str | None, list[str]] | None:
    """(COMMAND, the words after it) of one shell command that runs `probes`; None for another program.

    COMMAND is None where the docs write a placeholder (`probes CMD`)."""
    if not words or not _PROBES.match(words[0]):
        return None
    rest = words[1:]
    while rest and rest[0].startswith("-"):  # options of `probes` itself (`-v`)
        rest = rest[1:]
    if not rest:
        return None, []
    name = rest[0]
    return (name if re.fullmatch(r"[a-z][a-z0-9-]*", name) else None), rest[1:]


def _flags(words: list[str], short: bool) -> list[str]:
    found = []
    for word in words:
        found += _LONG_FLAG.findall(word.split("=", 1)[0])
        if short and re.fullmatch(r"-[a-zA-Z]", word):
            found.append(word)
    return found


def _shell_mentions(line: str, where: str) -> list[Mention]:
    """The `probes` commands of one logical shell line (`&&`, `;` and `|` separate commands; `#` a comment)."""
    mentions = []
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        words = line.split()
    command: list[str] = []
    for word in [*words, "&&"]:
        if word in ("&&", "||", ";", "|"):
            found = _command_words(command)
            if found is not None:
                name, rest = found
                mentions.append(Mention(where, name, tuple(_flags(rest, short=True)), name is not None))
            command = []
        else:
            command.append(word)
    return mentions


def _span_mention(span: str, where: str) -> Mention | None:
    """What a code span names: `probes CMD ...` (its command and flags), or bare flags (`--limit N`)."""
    words = span.replace("[", " ").replace("]", " ").split()
    if not words:
        return None
    found = _command_words(words)
    if found is not None:
        name, rest = found
        return Mention(where, name, tuple(_flags(rest, short=True)), name is not None)
    if words[0].startswith("--"):
        return Mention(where, None, tuple(_flags(words, short=False)), False)
    return None


@dataclass
class _Section:
    level: int
    parent: int
    lead: str | None = None  # the first command its heading or first paragraph names
    first_paragraph: int | None = None


def mentions(text: str, source: str = "<text>") -> list[Mention]:
    """Every command and flag a Markdown text names, each bare flag given its command (module docstring).

    A bare flag's command is the last one named before it in its paragraph (a list item, a table
    row), else the one its section's heading or first paragraph names, else its enclosing section's.
    """
    sections = [_Section(0, 0)]
    found: list[tuple[int, int, Mention]] = []  # (section, paragraph, mention)
    paragraph, fence, lang, pending = 0, None, "", ""
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{source}:{number}"
        section = len(sections) - 1
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence, lang, paragraph = opened.group(1), opened.group(2).lower(), paragraph + 1
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence, paragraph = None, paragraph + 1
            elif lang in SHELL:
                pending += line.rstrip()
                if pending.endswith("\\"):
                    pending = pending[:-1] + " "
                    continue
                found += [(section, paragraph, m) for m in _shell_mentions(pending, where)]
                pending = ""
            continue
        heading = _HEADING.match(line)
        if heading:
            level, parent = len(heading.group(1)), section
            while parent and sections[parent].level >= level:
                parent = sections[parent].parent
            sections.append(_Section(level, parent))
            section, paragraph = len(sections) - 1, paragraph + 1
        elif not line.strip():
            paragraph += 1
            continue
        elif re.match(r"^\s*([-*+]|\d+\.)\s+", line) or line.lstrip().startswith("|"):
            paragraph += 1  # a list item or a table row is a paragraph of its own
        if not heading and sections[section].first_paragraph is None:
            sections[section].first_paragraph = paragraph
        for span in _SPAN.findall(line):
            mention = _span_mention(span, where)
            if mention is not None:
                found.append((section, paragraph, mention))
    for section, para, m in found:
        if m.explicit and sections[section].lead is None and para <= (sections[section].first_paragraph or para):
            sections[section].lead = m.command
    out = []
    for index, (section, para, m) in enumerate(found):
        if not m.explicit:
            before = [n.command for s, q, n in found[:index] if (s, q) == (section, para) and n.explicit]
            command, at = (before[-1] if before else None), section
            while command is None:
                command = sections[at].lead
                if at == 0:
                    break
                at = sections[at].parent
            m = Mention(m.where, command, m.flags, False)
        out.append(m)
    return out


def problems(text: str, surface: dict[str, set[str]], source: str = "<text>") -> list[str]:
    """One line per command the CLI lacks and per flag its command's `--help` lacks."""
    every = set().union(*surface.values())
    lines = []
    for m in mentions(text, source):
        if m.explicit and m.command not in surface:
            lines.append(f"{m.where}: `probes {m.command}` is no command (commands: {', '.join(sorted(surface)[1:])})")
            continue
        known = every if m.command is None else surface[m.command] | surface[""]
        for flag in m.flags:
            if flag not in known:
                named = "any command" if m.command is None else f"`probes {m.command} --help`"
                lines.append(f"{m.where}: {flag} is not a flag of {named}")
    return lines


@pytest.fixture(scope="module")
def surface() -> dict[str, set[str]]:
    return cli_surface()


def test_the_surface_is_the_app_s_own(surface: dict[str, set[str]]) -> None:
    assert {"build", "run", "sweep", "analyze", "import", "publish", "demo", "fake-groups"} <= set(surface)
    assert {"--config", "-c", "--chat", "--no-chat", "--fake-note", "--help"} <= surface["run"]
    assert "--fake-round" in surface["analyze"] and "--verbose" in surface[""]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_command_and_flag_the_docs_name_exists(doc: Path, surface: dict[str, set[str]]) -> None:
    assert problems(doc.read_text(encoding="utf-8"), surface, doc.relative_to(REPO).as_posix()) == []


def test_the_docs_name_commands_and_flags_at_all() -> None:
    """The check is not vacuous: the docs name most commands, each with flags."""
    found = [m for doc in DOCS for m in mentions(doc.read_text(encoding="utf-8"))]
    assert {"build", "run", "sweep", "plan", "analyze", "export", "import", "publish", "demo"} <= {
        m.command for m in found
    }
    assert sum(len(m.flags) for m in found) > 100


def test_a_flag_or_command_the_cli_lacks_is_reported() -> None:
    """The negative self-test, on a made-up text and a made-up command line."""
    surface = {"": {"--help", "--verbose"}, "run": {"--help", "--limit", "-c"}, "build": {"--help", "--out"}}
    text = "\n".join(
        [
            "# Usage",
            "`probes run --limit 3 -c x` and `probes run --frobnicate`.",
            "## Building",
            "`probes build` writes to `--out`, never `--limit`.",
            "```bash",
            "probes build x \\",
            "    --no-such-flag # a comment: --not-read",
            "bash scripts/setup.sh --vllm && .venv/bin/probes run --limit 2",
            "probes frobnicate --out x",
            "```",
            "### Sub",
            "`--out` again; `pip install --upgrade x` is another program's.",
            "```python",
            "from probes import api  # --not-a-command-line",
            "```",
        ]
    )
    assert problems(text, surface) == [
        "<text>:2: --frobnicate is not a flag of `probes run --help`",
        "<text>:4: --limit is not a flag of `probes build --help`",
        "<text>:7: --no-such-flag is not a flag of `probes build --help`",
        "<text>:9: `probes frobnicate` is no command (commands: build, run)",
    ]
    assert problems("`probes CMD --help` and `--limit`; `--nope`", surface) == [
        "<text>:1: --nope is not a flag of any command"
    ]


# ----------------------------------------------------------------------------- runnable blocks


def runnable_blocks() -> list[tuple[str, str, str]]:
    """(where, language, code) of each code block marked to run."""
    blocks = []
    for doc in DOCS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if line.strip() != RUN_MARKER:
                continue
            where = f"{doc.relative_to(REPO).as_posix()}:{number + 1}"
            opened = _FENCE.match(lines[number + 1]) if number + 1 < len(lines) else None
            assert opened, f"{where}: {RUN_MARKER} must be the line right above a code block's fence"
            end = next(i for i in range(number + 2, len(lines)) if lines[i].strip().startswith(opened.group(1)))
            blocks.append((where, opened.group(2).lower(), "\n".join(lines[number + 2 : end]) + "\n"))
    return blocks


def test_the_docs_mark_blocks_to_run() -> None:
    languages = [language for _, language, _ in runnable_blocks()]
    assert "bash" in languages and "python" in languages


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda b: b[0])
def test_a_block_marked_to_run_runs(block: tuple[str, str, str], shared_sources: Path, tmp_path: Path) -> None:
    where, language, code = block
    work = tmp_path / "repo"
    work.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "sources").symlink_to(shared_sources, target_is_directory=True)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        "NO_COLOR": "1",
    }
    env.pop("PROBES_PLUGINS", None)
    if language == "python":
        argv = [sys.executable, "-c", code]
    else:
        assert language in ("bash", "sh"), f"{where}: no runner for {language!r} blocks"
        argv = ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{where}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


# ----------------------------------------------------------------------------- links and the front page

_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_every_relative_link_points_at_a_file_of_the_repository() -> None:
    missing = []
    for doc in DOCS:
        fence = None
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            opened = _FENCE.match(line)
            if opened and (fence is None or line.strip().startswith(fence)):
                fence = opened.group(1) if fence is None else None
                continue
            if fence is not None:
                continue
            for target in _LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue
                path = (doc.parent / target.split("#", 1)[0]).resolve()
                if not path.exists() or not path.is_relative_to(REPO):
                    missing.append(f"{doc.relative_to(REPO)}:{number}: {target}")
    assert missing == []


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", REPO / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_site_hook_points_each_link_where_the_site_has_its_target() -> None:
    hooks = _hooks()
    readme = "[u](docs/USAGE.md#x) [c](cards/a.md.j2) [w](https://x.org) [s](#cite)\n```\n[k](docs/A.md)\n```\n"
    assert hooks.rewrite_links(readme, "README.md") == (
        f"[u](USAGE.md#x) [c]({hooks.BLOB}cards/a.md.j2) [w](https://x.org) [s](#cite)\n```\n[k](docs/A.md)\n```\n"
    )
    page = "[r](../README.md#quick-start) [p](PROBES.md) [b](../benchmarks/README.md#builds)"
    assert hooks.rewrite_links(page, "docs/USAGE.md") == (
        f"[r](index.md#quick-start) [p](PROBES.md) [b]({hooks.BLOB}benchmarks/README.md#builds)"
    )


def test_the_readme_is_a_front_page() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LINES
    assert "`sources → build → run → analyze → publish`" in text
    for section in ("## Install", "## Quick start", "## The three probes", "## Commands", "## Use from Python"):
        assert section in text
    assert "```bibtex" in text


def test_sentence_stats_counts_prose_only(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A heading of many words that is left out\n\n"
        "One two three. Four five, e.g. `a b c` six.\n\n"
        "| a table | row |\n\n```bash\nleft out too\n```\n- A list item.\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "sentence_stats.py"), str(page)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert (stats["sentences"], stats["median_words"], stats["longest"]) == (3, 3, 5)
