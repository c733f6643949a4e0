"""The replay's Spark driver glue: sessions, the Spark job and its ``spark-submit`` entry file.

pyspark is imported lazily (inside functions), so importing this package needs no pyspark.
"""
