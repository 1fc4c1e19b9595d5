# The two commands: `make run` (gateway on an embedded local stack; CONFIG=path for another config) and `make test`.
# Everything they need is installed here: a Python 3.11 venv in .venv/ and the JVM jars in .jvm/.
# `make run` needs only those; `make test` also installs the tests' own clients (kcat, kafkajs).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
MVN := mvn -q -B -s conf/jvm/settings.xml
KAFKA_JARS := .jvm/kafka
KAFKA_TOOLS_JARS := .jvm/kafka-tools
# Kafka Connect (distributed, with the file connectors) and Kafka Streams, each a classpath of its own: the
# tests run Kafka's frameworks unchanged through the front door (tests/integration/test_kafka_{connect,streams}.py).
KAFKA_CONNECT_JARS := .jvm/kafka-connect
KAFKA_STREAMS_JARS := .jvm/kafka-streams
SPARK_JARS := .jvm/spark
# The gateway's own JVM classes (jvm/), compiled against the Spark and Hadoop jars that pyspark ships.
GATEWAY_JAR := .jvm/gateway/gateway-checkpoint.jar
CDS_ARCHIVES := .jvm/cds/.made
NATIVE_LIBRARIES := .jvm/native/.made
GATEWAY_JAVA := $(shell find jvm -name '*.java')
# Only the connector and what Spark's own jars lack; the rest ships with pyspark.
SPARK_CONNECTOR_ARTIFACTS := spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2

NODE_CLIENTS := tests/integration/node
# franz-go: the tests' Kafka client in Go (SASL/SCRAM over TLS against the front door); modules from Go's proxy.
GO_SCRAM_CLIENT_DIR := tests/integration/go/scram_client
GO_SCRAM_CLIENT := tests/integration/go/bin/scram_client
# The login flood of `make bench` (no modules beyond Go's own).
GO_LOGIN_FLOOD_DIR := tests/integration/go/login_flood
GO_LOGIN_FLOOD := tests/integration/go/bin/login_flood
# the bench's cheapest answerer of that flood, for comparison
GO_LOGIN_REFUSER_DIR := tests/integration/go/login_refuser
GO_LOGIN_REFUSER := tests/integration/go/bin/login_refuser
# franz-go's steady producer and group consumer of the doors' failover test: one module, the SCRAM client's modules.
GO_CLIENTS_DIR := tests/integration/go/clients
GO_CLIENTS_SOURCES := $(GO_CLIENTS_DIR)/go.mod $(GO_CLIENTS_DIR)/go.sum $(wildcard $(GO_CLIENTS_DIR)/*/*.go)
GO_STEADY_PRODUCER := tests/integration/go/bin/steady_producer
GO_GROUP_CONSUMER := tests/integration/go/bin/group_consumer

.PHONY: prerequisites prerequisites-test setup venv jars frameworks tools node go run test test-unit bench lint clean pack submit soak compat

# One line per tool the machine must have (JDK 17+ with javac, Maven, Python 3.11), before anything is installed.
prerequisites:
	@python3 embedded/prerequisites.py --python $(PYTHON)
prerequisites-test:
	@python3 embedded/prerequisites.py --python $(PYTHON) --for test

# Everything the tests and benchmarks use: the running gateway's venv and jars, and the tests' own clients.
setup: prerequisites-test venv jars frameworks tools node go

# kcat: the tests' third Kafka client and the docs' front-door examples (Debian's package).
tools:
	@command -v kcat >/dev/null || { $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -q kcat >/dev/null \
	  || { $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -q >/dev/null && \
	       $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -q kcat >/dev/null; }; }

# kafkajs: the group tests' consumer in a second language (Node is on the machine; npm's registry).
node: $(NODE_CLIENTS)/node_modules/.installed
$(NODE_CLIENTS)/node_modules/.installed: $(NODE_CLIENTS)/package-lock.json
	npm ci --prefix $(NODE_CLIENTS) --no-audit --no-fund --loglevel=error
	touch $@

go: $(GO_SCRAM_CLIENT) $(GO_LOGIN_FLOOD) $(GO_LOGIN_REFUSER) $(GO_STEADY_PRODUCER) $(GO_GROUP_CONSUMER)
$(GO_SCRAM_CLIENT): $(GO_SCRAM_CLIENT_DIR)/main.go $(GO_SCRAM_CLIENT_DIR)/go.mod $(GO_SCRAM_CLIENT_DIR)/go.sum
	cd $(GO_SCRAM_CLIENT_DIR) && go build -mod=readonly -buildvcs=false -o $(CURDIR)/$@ .
$(GO_LOGIN_FLOOD): $(GO_LOGIN_FLOOD_DIR)/main.go $(GO_LOGIN_FLOOD_DIR)/go.mod
	cd $(GO_LOGIN_FLOOD_DIR) && go build -mod=readonly -buildvcs=false -o $(CURDIR)/$@ .
$(GO_LOGIN_REFUSER): $(GO_LOGIN_REFUSER_DIR)/main.go $(GO_LOGIN_REFUSER_DIR)/go.mod
	cd $(GO_LOGIN_REFUSER_DIR) && go build -mod=readonly -buildvcs=false -o $(CURDIR)/$@ .
$(GO_STEADY_PRODUCER) $(GO_GROUP_CONSUMER): $(GO_CLIENTS_SOURCES)
	cd $(GO_CLIENTS_DIR) && go build -mod=readonly -buildvcs=false -o $(CURDIR)/$@ ./$(notdir $@)

venv: $(VENV)/.installed
$(VENV)/.installed: requirements.lock pyproject.toml validators/codec/_record_walk.c sinks/_response_avro.c storage/_batched_calls.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $@

jars: $(KAFKA_JARS)/.resolved $(KAFKA_TOOLS_JARS)/.resolved $(SPARK_JARS)/.resolved $(GATEWAY_JAR) $(NATIVE_LIBRARIES) $(CDS_ARCHIVES)
# RocksDB's JNI library unpacked once for Spark's JVMs (embedded/native_libraries.py): none copied to /tmp per start.
$(NATIVE_LIBRARIES): $(VENV)/.installed embedded/native_libraries.py
	$(PY) -m embedded.native_libraries
	mkdir -p $(@D) && touch $@
# Class data sharing archives of the JVMs the gateway starts (embedded/class_data_sharing.py): seconds off each
# start of Spark's driver, the local broker and Kafka's tools. Made by starting each once (~1 min).
$(CDS_ARCHIVES): $(KAFKA_JARS)/.resolved $(SPARK_JARS)/.resolved $(GATEWAY_JAR) $(VENV)/.installed embedded/class_data_sharing.py streaming/class_data_archives.py
	$(PY) -m streaming.class_data_archives
	touch $@
$(GATEWAY_JAR): $(GATEWAY_JAVA) $(VENV)/.installed
	rm -rf .jvm/gateway && mkdir -p .jvm/gateway/classes
	javac --release 17 -nowarn -d .jvm/gateway/classes \
	  -cp "$(VENV)/lib/python3.11/site-packages/pyspark/jars/*" $(GATEWAY_JAVA)
	jar --create --file $@ -C .jvm/gateway/classes .
$(KAFKA_JARS)/.resolved: conf/jvm/kafka-broker.pom.xml conf/jvm/settings.xml
	rm -rf $(KAFKA_JARS)
	$(MVN) -f conf/jvm/kafka-broker.pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_JARS)
	touch $@
# Kafka's own tools (ProducerPerformance for `make bench`), a classpath apart from the broker's.
$(KAFKA_TOOLS_JARS)/.resolved: conf/jvm/kafka-tools.pom.xml conf/jvm/settings.xml
	rm -rf $(KAFKA_TOOLS_JARS)
	$(MVN) -f conf/jvm/kafka-tools.pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_TOOLS_JARS)
	touch $@
# The tests' Kafka frameworks; not in `jars`: `make run` needs neither.
frameworks: $(KAFKA_CONNECT_JARS)/.resolved $(KAFKA_STREAMS_JARS)/.resolved
$(KAFKA_CONNECT_JARS)/.resolved: conf/jvm/kafka-connect.pom.xml conf/jvm/settings.xml
	rm -rf $(KAFKA_CONNECT_JARS)
	$(MVN) -f conf/jvm/kafka-connect.pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_CONNECT_JARS)
	touch $@
$(KAFKA_STREAMS_JARS)/.resolved: conf/jvm/kafka-streams.pom.xml conf/jvm/settings.xml
	rm -rf $(KAFKA_STREAMS_JARS)
	$(MVN) -f conf/jvm/kafka-streams.pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_STREAMS_JARS)
	touch $@
$(SPARK_JARS)/.resolved: conf/jvm/spark-connectors.pom.xml conf/jvm/settings.xml
	rm -rf $(SPARK_JARS)
	$(MVN) -f conf/jvm/spark-connectors.pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DincludeArtifactIds=$(SPARK_CONNECTOR_ARTIFACTS) \
	  -DoutputDirectory=$(CURDIR)/$(SPARK_JARS)
	touch $@

# The packed Python environment for cluster executors (spark.archives; `python_archive` in the config).
# Spark's own jars stay out: executors have them.
PACKED_ENV := build/gateway-env.tar.gz
pack: $(PACKED_ENV)
$(PACKED_ENV): $(VENV)/.installed
	mkdir -p build
	$(VENV)/bin/venv-pack -p $(VENV) -o $@ --force -q \
	  --exclude 'lib/python3.11/site-packages/pyspark/jars/*' --exclude 'lib/python3.11/site-packages/pyspark/examples/*'

# The gateway through spark-submit on the configured master (MASTER=spark://host:7077 overrides it):
# prints the exact command, then runs it.
submit: prerequisites venv jars pack
	$(PY) -m streaming submit $(if $(MASTER),--master $(MASTER))

# CONFIG=path: another gateway config than conf/gateway.json (e.g. conf/secured-door.json, docs/security.md).
run: prerequisites venv jars
	$(PY) -m streaming run --demo $(if $(CONFIG),--config $(CONFIG))

test: setup
	$(PY) -m pytest -q

test-unit: venv
	$(PY) -m pytest -q tests/unit

bench: setup
	$(PY) -m tests.bench

# The long soak: steady load through the front door and the ingress topic, sampled; not part of `make test`.
SOAK_MINUTES ?= 120
soak: setup
	$(PY) -m tests.soak --minutes $(SOAK_MINUTES)

# franz-go's own pkg/kgo integration tests against the front door (franz-go from Go's module proxy, pinned in
# tests/compat/franz_go.py): a report of each test's outcome, exit 0 whatever they say; not part of `make test`.
compat: venv jars
	$(PY) -m tests.compat.franz_go

lint: venv
	$(VENV)/bin/ruff check contract embedded validators storage kafka_cluster streaming sinks clients front_door tests gateway_submit.py

# Everything `make run` makes: the broker's data and the segments (var/), and in checkpoints/ the query's checkpoint
# with its driver lock and holder (<query>.driver.lock, <query>.driver.json); checkpoints/README.md stays.
clean:
	rm -rf var .pytest_cache
	find checkpoints -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
