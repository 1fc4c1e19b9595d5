"""The documentation says what the code does: every command in a shell block of README.md and docs/ parses
as written (the command's own argparse parser, nothing run), every link stays inside the repository and
lands, the configuration reference names every setting, and the compatibility page's API table is the
front door's own."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from front_door.apis.api_versions import ADVERTISED
from front_door.apis.registry import REFUSED_APIS
from sinks.time_arguments import protect_relative_times
from streaming.config import GatewayConfig
from validators.topic_config import GATEWAY_DEFAULT_KEYS, REGISTRY_SECTIONS, TOPIC_CONFIG_KEYS, TOPIC_FIELDS

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("*.md"))
MARKDOWN = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "checkpoints" / "README.md", *DOCS]
SHELL_BLOCK = re.compile(r"^```(?:sh|bash|shell|console)\n(.*?)^```", re.M | re.S)


def _name(path: Path) -> str:
    return str(path.relative_to(REPO))


# ------------------------------------------------------------------------------------------------
# commands


def _parsers() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    from sinks.__main__ import build_parser as sinks_parser
    from streaming.__main__ import build_parser as gateway_parser
    from tests.bench import build_parser as bench_parser
    from tests.soak import build_parser as soak_parser
    from validators.__main__ import build_parser as validators_parser

    return {"streaming": gateway_parser, "sinks": sinks_parser, "validators": validators_parser,
            "tests.bench": bench_parser, "tests.soak": soak_parser}


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*):", text, re.M))


def shell_lines(path: Path) -> Iterator[str]:
    """Each logical line of the file's shell blocks (continuations joined)."""
    for block in SHELL_BLOCK.findall(path.read_text()):
        yield from (line for line in block.replace("\\\n", " ").splitlines() if line.strip())


def simple_commands(line: str) -> Iterator[list[str]]:
    """The line's simple commands: comments, pipes, `&&`, `;`, redirections and VAR=value prefixes removed."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    skip_next = False
    for token in lexer:
        if skip_next:
            skip_next = False
            continue
        if token in ("|", "||", "&&", ";", "&"):
            if words:
                yield words
            words = []
        elif token in ("<", ">", ">>", "2>"):
            skip_next = True  # the redirection's file
        elif not words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", token):
            continue  # an environment assignment before the command
        else:
            words.append(token)
    if words:
        yield words


def check_command(words: list[str]) -> str | None:
    """None when the command parses as written (or is not the project's), else why not."""
    parsers = _parsers()
    head, args = words[0], words[1:]
    if head == "make":
        unknown = [t for t in args if "=" not in t and t not in _make_targets()]
        configs = [t.partition("=")[2] for t in args if t.startswith("CONFIG=")]
        missing = [c for c in configs if not (REPO / c).exists()]
        return f"no make target {unknown}" if unknown else f"CONFIG={missing[0]} does not exist" if missing else None
    if head.endswith("python") or head.endswith("python3") or head.endswith("python3.11"):
        if args[:1] != ["-m"] or len(args) < 2:
            return None  # a script, not a command of the project's
        module, args = args[1], args[2:]
        if module not in parsers:
            return f"python -m {module} is not a command of the project's"
    elif head.endswith("/gateway") or head == "gateway" or head.endswith("gateway_submit.py"):
        module = "streaming"
    elif head.startswith("bin/"):  # Kafka's tools as the repository ships them
        return None if (REPO / head).is_file() else f"{head} is not in the repository"
    elif head.endswith("spark-submit"):
        submit = next((i for i, w in enumerate(words) if w.endswith("gateway_submit.py")), None)
        return None if submit is None else check_command(words[submit:])
    else:
        return None  # kcat, printf, dd, ...: not the project's
    for arg in args:
        if re.fullmatch(r"conf/[\w./-]+", arg) and not (REPO / arg).exists():
            return f"{arg} does not exist"
    if module in ("streaming", "sinks") and args[:1] == ["dlq"]:
        from sinks.dlq.cli import build_parser as dlq_parser

        parser, args = dlq_parser(), args[1:]
    else:
        parser = parsers[module]()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(protect_relative_times(args))
    except SystemExit as e:
        return None if e.code == 0 else err.getvalue().strip().splitlines()[-1]
    return None


def _documented_commands() -> list[tuple[str, list[str]]]:
    return [(f"{_name(path)}: {line.strip()}", words) for path in MARKDOWN for line in shell_lines(path)
            for words in simple_commands(line)]


@pytest.mark.parametrize(("where", "words"), _documented_commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_documented_command_parses_as_written(where: str, words: list[str]) -> None:
    assert check_command(words) is None, where


def test_the_check_catches_what_it_should() -> None:
    assert check_command(["make", "run"]) is None
    assert check_command(["make", "runn"]) == "no make target ['runn']"
    assert check_command([".venv/bin/gateway", "dlq", "show", "--raw", "b.bin", "0:1"]) is None
    assert "unrecognized arguments" in check_command([".venv/bin/gateway", "dlq", "list", "--bogus"])
    assert "invalid choice" in check_command([".venv/bin/python", "-m", "sinks", "segmentz"])
    assert check_command([".venv/bin/gateway", "run", "--config", "conf/nothing.json"]) == \
        "conf/nothing.json does not exist"
    assert check_command(["python", "-m", "nosuch"]) == "python -m nosuch is not a command of the project's"
    assert check_command(["bin/kafka-acls.sh", "--list"]) is None
    assert check_command(["bin/kafka-nothing.sh"]) == "bin/kafka-nothing.sh is not in the repository"
    words = list(simple_commands("GATEWAY_LOG_LEVEL=DEBUG make run  # comment | not a pipe"))
    assert words == [["make", "run"]]
    assert list(simple_commands("printf 'a|b' | kcat -P < in.bin")) == [["printf", "a|b"], ["kcat", "-P"]]


def test_the_docs_have_commands_to_check() -> None:
    commands = [words for _, words in _documented_commands()]
    assert sum(1 for w in commands if w[0] == "make") >= 3
    assert sum(1 for w in commands if w[0].endswith("gateway")) >= 10


# ------------------------------------------------------------------------------------------------
# links

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def _links(path: Path) -> Iterator[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)  # links inside code are code
    yield from LINK.findall(text)


@pytest.mark.parametrize("path", MARKDOWN, ids=_name)
def test_links_stay_in_the_repository_and_land(path: Path) -> None:
    bad = []
    for target in _links(path):
        if re.match(r"[a-z]+:", target):
            continue  # an address on the web (http:, https:, mailto:)
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.is_relative_to(REPO):
            bad.append(f"{target}: outside the repository")
        elif not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no such heading")
    assert bad == []


# ------------------------------------------------------------------------------------------------
# the configuration reference


def _documented_keys() -> set[str]:
    """Backquoted keys in the first two columns of configuration.md's tables."""
    keys: set[str] = set()
    for line in (REPO / "docs" / "configuration.md").read_text().splitlines():
        if line.startswith("|"):
            for cell in line.strip("|").split("|")[:2]:
                keys.update(re.findall(r"`([^`]+)`", cell))
    return keys


def test_every_gateway_setting_is_documented() -> None:
    documented = _documented_keys()
    fields = {f.name for f in dataclasses.fields(GatewayConfig)}
    in_file = set(json.loads((REPO / "conf" / "gateway.json").read_text()))
    assert sorted((fields | in_file) - documented) == []


def test_every_topic_registry_key_is_documented() -> None:
    documented = _documented_keys()
    keys = set(REGISTRY_SECTIONS) | set(TOPIC_FIELDS) | TOPIC_CONFIG_KEYS | GATEWAY_DEFAULT_KEYS
    assert sorted(keys - documented) == []


# ------------------------------------------------------------------------------------------------
# the compatibility page


def _api_rows(section: str) -> dict[int, str]:
    """`key -> versions` cell of the table under a heading of kafka-compatibility.md."""
    text = (REPO / "docs" / "kafka-compatibility.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and cells[1].isdigit():
            rows[int(cells[1])] = cells[2]
    return rows


def test_the_served_api_table_is_the_front_doors() -> None:
    documented = {}
    for key, versions in _api_rows("APIs the front door serves").items():
        low, high = re.fullmatch(r"(\d+)–(\d+)", versions).groups()
        documented[key] = (int(low), int(high))
    assert documented == {int(k): v for k, v in ADVERTISED.items()}


def test_the_refused_api_table_is_the_front_doors() -> None:
    assert set(_api_rows("APIs the front door refuses")) == set(REFUSED_APIS)


# ------------------------------------------------------------------------------------------------
# the product, not its history

NARRATION = re.compile(
    r"\bissues? [0-9]+\b|\b(this|earlier|previous|next|later|first|second|third|fourth|fifth|sixth|seventh|eighth"
    r"|ninth|tenth|eleventh) sessions?\b|\(was [0-9a-z]|\bused to (be|run|take|have)\b|\bbefore this (change|issue|"
    r"commit)\b", re.I)


def test_no_text_narrates_how_the_product_was_built() -> None:
    """Docs, docstrings, comments and test names speak of the product; changes go in CHANGELOG.md by version."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=False).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    hits = []
    for name in tracked:
        path = REPO / name
        if path.suffix in (".py", ".md", ".toml", ".json", ".c", ".java", ".properties", ".yml") or \
                path.name == "Makefile":
            if path.is_file():
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if NARRATION.search(line) and path != Path(__file__):
                        hits.append(f"{name}:{number}: {line.strip()[:100]}")
    assert hits == []


def test_make_run_takes_another_config() -> None:
    """`make run CONFIG=path` runs the gateway on that config (docs/security.md's walk-through)."""
    import subprocess

    # --no-print-directory: under `make test` this make is a sub-make, which names its directory otherwise
    shown = subprocess.run(["make", "--no-print-directory", "-n", "run", "CONFIG=conf/secured-door.json"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert shown[-1].endswith(" -m streaming run --demo --config conf/secured-door.json")
    assert check_command(["make", "run", "CONFIG=conf/nothing.json"]) == "CONFIG=conf/nothing.json does not exist"


# ------------------------------------------------------------------------------------------------
# the contract's headers


def _design_section(title: str) -> str:
    text = (REPO / "docs" / "design.md").read_text()
    return text.split(f"### {title}", 1)[1].split("\n### ", 1)[0]


def test_design_names_every_header_of_the_contract() -> None:
    """Every ingress header (contract/ingress.py) and dead-letter field (contract/dead_letters.py) is named in
    docs/design.md's section on its topic."""
    from contract import ingress
    from contract.dead_letters import HEADER_PREFIX, DeadLetterField

    headers = [value for name, value in vars(ingress).items() if name.startswith("HEADER_")]
    ingress_section = _design_section("Ingress topic")
    assert len(headers) >= 9 and [h for h in headers if f"`{h}`" not in ingress_section] == []
    dead_letters = _design_section("Dead-letter topic")
    assert f"`{HEADER_PREFIX}`" in dead_letters
    assert [f.value for f in DeadLetterField if f"`{f.value}`" not in dead_letters] == []
