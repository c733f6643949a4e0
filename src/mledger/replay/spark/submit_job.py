"""Entry file for ``spark-submit``: replay event logs on a cluster.

::

    spark-submit --master yarn --deploy-mode cluster \
        --archives mledger-env.tar.gz#env \
        --conf spark.pyspark.python=./env/bin/python \
        src/mledger/replay/spark/submit_job.py hdfs:///logs/events hdfs:///logs/replay \
        --set max_unacked_ranges_to_persist=1000 --partitions 200

Arguments: ``EVENTS OUT [--set KEY=VALUE ...] [--emit-state] [--partitions N]``. The session
(master, resources, Python) is what ``spark-submit`` configures; mledger itself comes from
the packed virtualenv (docs/replay/cluster.md).
"""

import sys

from mledger.replay.spark._job import main_submit

if __name__ == "__main__":
    sys.exit(main_submit(sys.argv[1:]))
