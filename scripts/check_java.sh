#!/bin/sh
# Check, before anything slow starts, that the Spark parts can run: PySpark 4 needs Java 17 or
# newer (17 or 21 are the versions Spark 4 supports), found as $JAVA_HOME/bin/java or `java` on
# PATH. Prints what to do and exits 1 when it is missing or older.
#
#   scripts/check_java.sh        # called by `make demo` and `make test`
set -eu

java="java"
if [ -n "${JAVA_HOME:-}" ]; then
    java="$JAVA_HOME/bin/java"
fi
if ! command -v "$java" >/dev/null 2>&1; then
    echo "check_java: no Java found ($java): the Spark parts of mledger (make demo, mledger replay" \
         "without --single-process, the Spark tests) need Java 17 or newer; on Debian/Ubuntu:" \
         "apt-get install openjdk-17-jre-headless (or set JAVA_HOME)" >&2
    exit 1
fi
# `java -version` prints e.g. 'openjdk version "17.0.15" 2025-04-15' or 'java version "1.8.0_392"'
version=$("$java" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
major=$(echo "$version" | sed 's/^1\.//; s/[^0-9].*//')
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
    echo "check_java: $java is Java ${version:-of an unknown version}; the Spark parts of mledger need" \
         "Java 17 or newer: install openjdk-17-jre-headless and put it first on PATH (or set JAVA_HOME)" >&2
    exit 1
fi
