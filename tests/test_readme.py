"""The README's example of testing your own agent runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


async def test_the_readme_example_for_testing_an_agent_passes(tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1

    await tests[0](tmp_path)  # type: ignore[operator]


ROOT = README.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(path: Path) -> str:
    """The file's Markdown without its code blocks, where brackets are code, not links."""
    return FENCE.sub("", path.read_text())


def _anchors(path: Path) -> set[str]:
    """The heading anchors GitHub makes: lower case, punctuation dropped, spaces to '-'."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", _prose(path), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    documents = [README, *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for document in documents:
        for target in LINK.findall(_prose(document)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto: ...: not ours to check offline
            file, _, anchor = target.partition("#")
            resolved = (document.parent / file).resolve() if file else document
            if not resolved.exists():
                broken.append(f"{document.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{document.relative_to(ROOT)}: {target} (no such heading)")
    assert len(documents) > 1
    assert not broken, "\n".join(broken)


def test_the_readme_stays_short_enough_to_read() -> None:
    """The README is for users; depth belongs in docs/ (linked from it)."""
    lines = README.read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move depth to docs/"
