#!/usr/bin/env bash
# Kafka's kafka-console-producer.sh: org.apache.kafka.tools.ConsoleProducer, from the jars `make jars` put in .jvm/kafka-tools.
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kafka-run-class.sh" org.apache.kafka.tools.ConsoleProducer "$@"
