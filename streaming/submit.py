"""`make submit` / `gateway submit`: the spark-submit command for the configured cluster, printed and run.

The command carries everything the executors need (docs/performance.md): Spark's Kafka connector jars and the
gateway's own (`--jars`), the packed Python environment (`--archives ...#environment`, built by `make pack`) as the
executors' interpreter, the driver's interpreter, the config's `spark_conf`, and the entry point
`gateway_submit.py`. The gateway's code travels as a zip the driver adds itself (streaming/session.py).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from embedded.spark_home import SPARK_HOME
from streaming.config import REPO_ROOT, GatewayConfig, add_config_argument
from streaming.config_file import load_gateway_config
from streaming.config_rules import setting_argument
from streaming.session import ENVIRONMENT_DIR, is_local, spark_jars

ENTRY_POINT = REPO_ROOT / "gateway_submit.py"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"  # pyspark's, in the project's venv


def submit_command(config: GatewayConfig, config_path: Path, extra: list[str] | None = None) -> list[str]:
    command = [str(SPARK_SUBMIT), "--master", config.spark_master, "--name", "ingest-gateway",
               "--jars", ",".join(str(j) for j in spark_jars())]
    if config.python_archive and not is_local(config.spark_master):
        command += ["--archives", f"{config.path(config.python_archive)}#{ENVIRONMENT_DIR}",
                    "--conf", f"spark.pyspark.python=./{ENVIRONMENT_DIR}/bin/python"]
    command += ["--conf", f"spark.pyspark.driver.python={sys.executable}"]
    for key, value in sorted(config.spark_conf.items()):
        command += ["--conf", f"{key}={value}"]
    return [*command, str(ENTRY_POINT), "run", "--config", str(config_path), *(extra or [])]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--master", type=setting_argument("spark_master"), help="Spark master (default from config)")
    parser.add_argument("--print-only", action="store_true", help="print the command, do not run it")


def run_submit(args: argparse.Namespace) -> int:
    config = load_gateway_config(args.config, spark_master=args.master)  # GatewayConfigError: a line per problem
    try:
        command = submit_command(config, args.config.resolve())
    except (OSError, ValueError) as e:  # jars `make jars` has not resolved
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(shlex.join(command), flush=True)
    if args.print_only:
        return 0
    if not is_local(config.spark_master) and not config.python_archive:
        print("note: no python_archive in the config: executors run the driver's interpreter "
              f"{sys.executable}, which must exist on every host (`make pack` builds the archive)", file=sys.stderr)
    env = {**os.environ, "SPARK_HOME": os.environ.get("SPARK_HOME", str(SPARK_HOME))}
    os.execve(command[0], command, env)  # spark-submit takes over this process: signals reach the driver
    return 0
