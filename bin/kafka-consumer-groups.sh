#!/usr/bin/env bash
# Kafka's kafka-consumer-groups.sh: org.apache.kafka.tools.consumer.group.ConsumerGroupCommand, from the jars `make jars` put in .jvm/kafka-tools.
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kafka-run-class.sh" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "$@"
