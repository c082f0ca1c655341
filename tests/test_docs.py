"""The documentation's links: every relative link in the Markdown files resolves to a file, and a ``#fragment`` to
one of its headings as GitHub makes their anchors; the README stays a first page (under 200 lines) that links
every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted({*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("training/**/*.md")})
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code, where a link or a heading is one."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (github-slugger): lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    result = set()
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        result.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return result


def broken_links(page: Path) -> list[str]:
    """The page's relative links that name no file, or a heading the file does not have."""
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not this repository's
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{page.relative_to(ROOT)}: {target} (no heading #{fragment} in {file.relative_to(ROOT)})")
    return broken


def test_slugs_are_githubs():
    assert (
        slug("Pipeline parallelism (`model_parallel_degree` K > 1)")
        == "pipeline-parallelism-model_parallel_degree-k--1"
    )
    assert slug("Running it here: `make run`") == "running-it-here-make-run"
    assert anchors("# Notes\n## Notes\n```\n# not a heading\n```\n## Notes\n") == {"notes", "notes-1", "notes-2"}


def test_every_relative_link_resolves_to_a_file_and_heading():
    assert {"README.md", "docs/workflow.md", "training/README.md"} <= {str(p.relative_to(ROOT)) for p in PAGES}
    assert [broken for page in PAGES for broken in broken_links(page)] == []


def test_the_readme_is_a_first_page_that_links_every_page_of_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in LINK.findall(prose(readme))}
    assert sorted(p.name for p in ROOT.glob("docs/*.md") if p.resolve() not in linked) == []


GENERATED = {"infra/plan_step/settings.json"}  # written into the Plan function's bundle at synth
CODE_PATH = re.compile(r"`((?:training|infra|local|cli|tests|bench)/[\w./-]+\.(?:py|json|mjs|md|txt|sh))`")


def test_every_file_the_pages_name_in_code_is_in_the_repository():
    """e.g. docs/configuration.md named training/gpt/presets.json after it moved to training/contract/."""
    missing = [
        f"{page.relative_to(ROOT)}: {path}"
        for page in PAGES
        for path in CODE_PATH.findall(page.read_text(encoding="utf-8"))
        if path not in GENERATED and not (ROOT / path).exists() and not (page.parent / path).exists()
    ]
    assert missing == []


def test_the_training_readme_gives_each_hyperparameter_the_schema_s_default():
    import sys

    sys.path.insert(0, str(ROOT / "training"))
    from contract import hparams

    rows = re.findall(r"^\| `(\w+)` \| ([^|]*) \|", (ROOT / "training" / "README.md").read_text(), re.M)
    documented = {name: cell.split(" (")[0].strip() for name, cell in rows if name in hparams.BY_NAME}
    assert len(documented) > 40

    def agrees(cell: str, default) -> bool:
        if isinstance(default, float):
            return float(cell.split()[0]) == default
        return cell == {None: "unset", "": '""'}.get(default, str(default))

    wrong = {name: cell for name, cell in documented.items() if not agrees(cell, hparams.BY_NAME[name].default)}
    assert wrong == {}


def test_the_cost_page_quotes_the_estimate_s_price():
    from infra.instances import INSTANCE_TYPES

    price = INSTANCE_TYPES["ml.p4d.24xlarge"].price_per_hour
    assert f"ml.p4d.24xlarge is about ${price:.2f} an hour on demand" in (ROOT / "docs" / "deploy.md").read_text()
