"""The repository describes itself: docs/design.md's layout table names every top-level folder the repository
holds, and nothing it holds cites a document outside it (a `§` section of a file a reader who clones the
repository does not have) — the code names Kafka's classes, a KIP, an RFC or a page of docs/ instead."""

from __future__ import annotations

import re
import subprocess

from streaming.config import REPO_ROOT

PRODUCT = ("contract", "validators", "storage", "kafka_cluster", "sinks", "streaming", "front_door", "clients",
           "embedded", "jvm", "bin", "tests")
OUTSIDE = re.compile(r"\.\./shared|DESIGN\.md|DESIGN §|kafka-broker-semantics|[Rr]eference §")
SECTION = re.compile(r"(?<!RFC \d{4} )(?<!RFC \d{3} )§")


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()


def test_the_layout_table_names_every_top_level_folder() -> None:
    folders = {path.split("/")[0] for path in _tracked() if "/" in path and not path.startswith(".")}
    table = (REPO_ROOT / "docs" / "design.md").read_text().split("\n## Layout", 1)[1].split("\n#", 1)[0]
    rows = set(re.findall(r"^\| `([^`/]+)/` \|", table, re.M))
    assert rows == folders


def test_nothing_cites_a_document_outside_the_repository() -> None:
    cited = []
    for path in _tracked():
        if path.split("/")[0] not in (*PRODUCT, "docs", "conf") and "/" in path:
            continue
        file = REPO_ROOT / path
        if file.suffix in (".py", ".c", ".java", ".md", ".json", ".properties", ".sh", ".toml") or file.name == "Makefile":
            for n, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                if OUTSIDE.search(line) or (path.split("/")[0] in PRODUCT and SECTION.search(line)):
                    cited.append(f"{path}:{n}: {line.strip()}")
    assert [c for c in cited if not c.startswith("tests/unit/test_layout.py:")] == []
