#!/usr/bin/env bash
# Kafka's kafka-topics.sh: org.apache.kafka.tools.TopicCommand, from the jars `make jars` put in .jvm/kafka-tools.
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"
