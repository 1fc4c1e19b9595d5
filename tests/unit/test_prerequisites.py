"""`make run`'s first step: one clear line per tool the machine lacks (embedded/prerequisites.py), checked with
made-up machines, not this one."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from embedded.prerequisites import check_all, java_major, main

JAVA_17 = 'openjdk version "17.0.9" 2023-10-17\nOpenJDK Runtime Environment (build 17.0.9+9-Debian-1deb12u1)'


def machine(tools: dict[str, str], python: str = "3.11"):
    """`which` and a runner for a machine with these tools (name -> version output)."""
    def which(name: str) -> str | None:
        return f"/usr/bin/{name}" if name in tools else None

    def run(argv: Sequence[str]) -> tuple[int, str]:
        if argv[0].startswith("python"):
            return 0, python + "\n"
        return 0, tools[argv[0]]

    return which, run


COMPLETE = {"java": JAVA_17, "javac": "javac 17.0.9", "mvn": "Apache Maven 3.8.7", "python3.11": "",
            "node": "v20", "npm": "10", "go": "go version go1.26.0 linux/amd64", "openssl": "OpenSSL 3.0.19",
            "kcat": "kcat 1.7"}


@pytest.mark.parametrize(("text", "major"), [
    (JAVA_17, 17), ("javac 21.0.2", 21), ('java version "1.8.0_392"', 8), ("javac 11", 11), ("nothing", None)])
def test_java_major(text: str, major: int | None) -> None:
    assert java_major(text) == major


def test_a_complete_machine_passes() -> None:
    which, run = machine(COMPLETE)
    checks = check_all("test", run=run, which=which)
    assert all(c.ok for c in checks) and [c.name for c in checks] == [
        "java", "javac", "mvn", "python3.11", "node", "npm", "go", "openssl", "kcat"]


def test_run_needs_no_node_and_kcat_is_optional() -> None:
    which, run = machine({k: v for k, v in COMPLETE.items() if k not in ("node", "npm", "go", "openssl", "kcat")})
    checks = check_all("run", run=run, which=which)
    assert [c.name for c in checks] == ["java", "javac", "mvn", "python3.11", "kcat"]
    assert all(c.ok for c in checks if c.required)
    assert checks[-1].line().startswith("optional, missing  kcat: not on PATH")


def test_each_missing_tool_gets_one_line_saying_what_to_install() -> None:
    tools = {**COMPLETE, "java": 'openjdk version "11.0.2"', "javac": "javac 11.0.2"}
    del tools["mvn"], tools["npm"], tools["go"], tools["openssl"]
    which, run = machine(tools, python="3.12")
    lines = {c.name: c.line() for c in check_all("test", run=run, which=which)}
    assert lines["java"] == ("MISSING            java: version 11, needs 17 or later; install a JDK 17 or later "
                             "(e.g. Debian: apt-get install openjdk-17-jdk-headless)")
    assert lines["javac"].startswith("MISSING            javac: version 11, needs 17 or later")
    assert lines["mvn"].startswith("MISSING            mvn: not on PATH; install Apache Maven")
    assert lines["python3.11"].startswith("MISSING            python3.11: 3.12; install Python 3.11")
    assert lines["npm"].startswith("MISSING            npm: not on PATH")
    assert lines["node"].startswith("ok")
    assert lines["go"].startswith("MISSING            go: not on PATH; install Go")
    assert lines["openssl"].startswith("MISSING            openssl: not on PATH; install OpenSSL")


def test_a_jre_without_javac_is_named() -> None:
    which, run = machine({k: v for k, v in COMPLETE.items() if k != "javac"})
    (javac,) = [c for c in check_all(run=run, which=which) if c.name == "javac"]
    assert not javac.ok and "not on PATH; install a JDK 17" in javac.line()


def test_exit_status(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import embedded.prerequisites as prerequisites

    which, run = machine(COMPLETE)
    monkeypatch.setattr(prerequisites.shutil, "which", which)
    monkeypatch.setattr(prerequisites, "run_tool", run)
    monkeypatch.setattr(prerequisites, "check_all",
                        lambda purpose, python: check_all(purpose, python, run=run, which=which))
    assert main([]) == 0 and len(capsys.readouterr().out.splitlines()) == 5
    which, run = machine({k: v for k, v in COMPLETE.items() if k != "mvn"})
    assert main(["--for", "test"]) == 1 and "MISSING            mvn" in capsys.readouterr().out
