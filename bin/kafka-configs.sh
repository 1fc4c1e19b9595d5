#!/usr/bin/env bash
# Kafka's kafka-configs.sh: kafka.admin.ConfigCommand, from the jars `make jars` put in .jvm/kafka.
KAFKA_CLASSPATH_DIR=kafka exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kafka-run-class.sh" kafka.admin.ConfigCommand "$@"
