"""The gateway's entry point for spark-submit (the driver runs on the submitting host: Spark's standalone
and Kubernetes client mode; standalone refuses `--deploy-mode cluster` for Python applications):

    .venv/bin/spark-submit --master spark://HOST:7077 --jars <connector jars> \\
        --archives build/gateway-env.tar.gz#environment \\
        --conf spark.pyspark.python=./environment/bin/python \\
        --conf spark.pyspark.driver.python=.venv/bin/python \\
        gateway_submit.py run --config conf/gateway.json

`make submit` (streaming/submit.py) prints and runs exactly this for the configured master. The
gateway's own code reaches the executors as a zip the driver ships (streaming/session.py).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from streaming.__main__ import main  # noqa: E402 - the path above makes the packages importable

if __name__ == "__main__":
    raise SystemExit(main())
