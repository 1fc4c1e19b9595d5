"""What `make run` and `make test` need on the machine, checked before anything is installed: one line per
tool, saying what to install when it is missing.

    python3 embedded/prerequisites.py [--python python3.11] [--for run|test]

Required for both: a JDK 17 or later with `javac` (Spark, the local Kafka broker, the gateway's JVM classes),
Maven (`mvn`, resolves the jars) and Python 3.11 (the venv). For `test` also Node.js with npm and Go (Kafka
clients in other languages: kafkajs, franz-go) and openssl (the security walk-through's certificates). kcat is
optional: the docs' examples use it, `make test` installs it.
Exit status 0 when everything required is there, 1 otherwise. Standard library only: it runs before the venv
exists, with any Python 3.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MIN_JAVA = 17
PYTHON_VERSION = (3, 11)

# (argv) -> (exit status, stdout + stderr); injected by the tests
Runner = Callable[[Sequence[str]], "tuple[int, str]"]
Which = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True

    def line(self) -> str:
        status = "ok" if self.ok else ("MISSING" if self.required else "optional, missing")
        return f"{status:<18} {self.name}: {self.detail}"


def run_tool(argv: Sequence[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)
    return done.returncode, done.stdout + done.stderr


def java_major(text: str) -> int | None:
    """The major version in `java -version` / `javac -version` output: `17.0.9` → 17, `1.8.0_392` → 8."""
    m = re.search(r'(?:version "|javac )(\d+)(?:\.(\d+))?', text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def _jdk_tool(tool: str, argv: Sequence[str], run: Runner, which: Which) -> Check:
    hint = f"install a JDK {MIN_JAVA} or later (e.g. Debian: apt-get install openjdk-{MIN_JAVA}-jdk-headless)"
    if which(tool) is None:
        return Check(tool, False, f"not on PATH; {hint}")
    code, out = run(argv)
    major = java_major(out) if code == 0 else None
    if major is None:
        return Check(tool, False, f"`{' '.join(argv)}` failed or printed no version; {hint}")
    if major < MIN_JAVA:
        return Check(tool, False, f"version {major}, needs {MIN_JAVA} or later; {hint}")
    return Check(tool, True, f"version {major}")


def check_all(purpose: str = "run", python: str = "python3.11", run: Runner = run_tool,
              which: Which = shutil.which) -> list[Check]:
    checks = [
        _jdk_tool("java", ["java", "-version"], run, which),
        _jdk_tool("javac", ["javac", "-version"], run, which),
    ]
    if which("mvn") is None:
        checks.append(Check("mvn", False, "not on PATH; install Apache Maven (e.g. Debian: apt-get install maven)"))
    else:
        checks.append(Check("mvn", True, "found"))
    wanted = ".".join(map(str, PYTHON_VERSION))
    hint = f"install Python {wanted} with its venv module, or give its path: make PYTHON=/path/to/python{wanted}"
    if which(python) is None:
        checks.append(Check(python, False, f"not on PATH; {hint}"))
    else:
        code, out = run([python, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"])
        found = out.strip().splitlines()[-1] if code == 0 and out.strip() else None
        checks.append(Check(python, found == wanted,
                            f"Python {found}" if found == wanted else f"{found or 'no venv module'}; {hint}"))
    if purpose == "test":
        for tool in ("node", "npm"):
            checks.append(Check(tool, which(tool) is not None, "found" if which(tool) else
                                "not on PATH; install Node.js with npm (the tests' kafkajs client)"))
        checks.append(Check("go", which("go") is not None, "found" if which("go") else
                            "not on PATH; install Go (the tests' franz-go client; e.g. Debian: apt-get install golang)"))
        checks.append(Check("openssl", which("openssl") is not None, "found" if which("openssl") else
                            "not on PATH; install OpenSSL (docs/security.md's walk-through makes its certificates "
                            "with it; e.g. Debian: apt-get install openssl)"))
    checks.append(Check("kcat", which("kcat") is not None, "found" if which("kcat") else
                        "not on PATH; the docs' examples use it (`make test` installs Debian's package)",
                        required=False))
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prerequisites", description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="python3.11", help="the interpreter the venv is made from")
    parser.add_argument("--for", dest="purpose", choices=("run", "test"), default="run",
                        help="what the machine is for (test adds Node.js, npm and Go; default %(default)s)")
    args = parser.parse_args(argv)
    checks = check_all(args.purpose, args.python)
    for c in checks:
        print(c.line())
    return 0 if all(c.ok for c in checks if c.required) else 1


if __name__ == "__main__":
    sys.exit(main())
