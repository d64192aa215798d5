"""The library imports without PySpark: nothing imports it until a Spark entry point runs."""

from __future__ import annotations

import subprocess
import sys


def test_importing_privpub_does_not_import_pyspark() -> None:
    code = ("import sys, privpub, privpub.spark, privpub.decision, privpub.stream, privpub.ldp, privpub.histogram, "
            "privpub.cli; import pandas as pd; from privpub.spark import is_spark_frame; "
            "assert not is_spark_frame(pd.DataFrame()); "
            "assert not any(m == 'pyspark' or m.startswith('pyspark.') for m in sys.modules), 'pyspark imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
