#!/usr/bin/env bash
# Kafka's kafka-run-class.sh for the jars `make jars` resolved into .jvm/ (`make run` resolves them too):
#   bin/kafka-run-class.sh CLASS [ARGS...]
# runs CLASS on the classpath of Kafka's tools (.jvm/kafka-tools), or of the broker (.jvm/kafka) with
# KAFKA_CLASSPATH_DIR=kafka (kafka-configs.sh: ConfigCommand lives in the broker's jar). Kafka's own variables
# apply: KAFKA_HEAP_OPTS (default -Xmx256M, as Kafka's), KAFKA_JVM_PERFORMANCE_OPTS (default the serial
# collector and C1 alone: a tool lives seconds), KAFKA_LOG4J_OPTS (default conf/tools-log4j2.properties:
# warnings on stderr, as Kafka's tools log) and KAFKA_OPTS.
set -euo pipefail
repo="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"  # a link to bin/ or to a script finds the jars
jars="$repo/.jvm/${KAFKA_CLASSPATH_DIR:-kafka-tools}"
if [ ! -f "$jars/.resolved" ]; then
  echo "error: Apache Kafka's jars are not in $jars: run \`make jars\` in $repo" >&2
  exit 1
fi
java=java
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
  java="$JAVA_HOME/bin/java"
fi
if ! command -v "$java" >/dev/null; then
  echo "error: no java: set JAVA_HOME or put Java 17 or later on PATH" >&2
  exit 1
fi
# Kafka's variables hold several options each: split on spaces, as Kafka's script does.
# shellcheck disable=SC2086
exec "$java" ${KAFKA_HEAP_OPTS:--Xmx256M} ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1} \
  ${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$repo/conf/tools-log4j2.properties} ${KAFKA_OPTS:-} \
  -cp "$jars/*" "$@"
