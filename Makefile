# The front door. `make demo` and `make test` are the whole set-up (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The stamp names the dependency spec and this checkout's path: an editable install points here.
STAMP := $(VENV)/.nines-installed-$(shell (cat pyproject.toml; echo $(CURDIR)) | sha1sum | cut -c1-12)

.PHONY: demo test lint bench timing soak dashboards setup system-test-deps maven kafka-jars kube-bins aggregator-jar clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.nines-installed-*
	@touch $(STAMP)

setup: $(STAMP) aggregator-jar

## Maven builds the stream job's aggregator and resolves Apache Kafka for the tests: installed
## from Debian's packages when missing and run as root, else one line naming it.
maven:
	@if ! command -v mvn >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null) \
	      || { echo "error: could not install maven (apt-get install maven)"; exit 1; }; \
	  else echo "error: nines needs Maven (mvn): apt-get install maven"; exit 1; fi; \
	fi

## The stream job's histogram merge (jvm/aggregator, Java 17): built once with Maven and cached
## under ~/.cache/nines, named by its sources' hash (a no-op when the cached jar is current).
aggregator-jar: $(STAMP) maven
	@$(PY) -m streaming.aggregator_jar >/dev/null

## Test-only system packages: real Prometheus, promtool and Alertmanager for the e2e tests;
## nats-server, redis-server and rabbitmq-server for the probe's transport tests; etcd for the
## chart's install tests (tests/k8s).
## Under CI (CI=true) a failed install fails the run: the tests they back must never skip there.
system-test-deps:
	@$(PY) -c "from testkit.keycloak import java_home; java_home()" 2>/dev/null \
	  || { msg="Keycloak (the OIDC tests) needs Java 21+ in \$$JAVA_HOME or /usr/lib/jvm (e.g. temurin-21-jdk)"; \
	       if [ "$$CI" = true ]; then echo "error: $$msg"; exit 1; else echo "warning: $$msg; those tests will be skipped"; fi; }
	@if ! command -v promtool >/dev/null || ! command -v prometheus-alertmanager >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus prometheus-alertmanager >/dev/null) \
	      || { if [ "$$CI" = true ]; then echo "error: could not install prometheus/alertmanager (CI needs them)"; exit 1; \
	           else echo "warning: could not install prometheus/alertmanager; e2e tests will be skipped"; fi; }; \
	  elif [ "$$CI" = true ]; then echo "error: CI needs prometheus and prometheus-alertmanager (run as root)"; exit 1; \
	  else echo "warning: not root; install prometheus and prometheus-alertmanager for the e2e tests"; fi; \
	fi
	@if ! command -v nats-server >/dev/null || ! command -v redis-server >/dev/null || ! command -v rabbitmq-server >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server redis-server rabbitmq-server >/dev/null) \
	      || { if [ "$$CI" = true ]; then echo "error: could not install nats-server/redis-server/rabbitmq-server (CI needs them)"; exit 1; \
	           else echo "warning: could not install nats-server/redis-server/rabbitmq-server; their probe tests will be skipped"; fi; }; \
	  elif [ "$$CI" = true ]; then echo "error: CI needs nats-server, redis-server and rabbitmq-server (run as root)"; exit 1; \
	  else echo "warning: not root; install nats-server, redis-server and rabbitmq-server for the probe transport tests"; fi; \
	fi
	@if ! command -v etcd >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null) \
	      || { if [ "$$CI" = true ]; then echo "error: could not install etcd-server (CI needs it)"; exit 1; \
	           else echo "warning: could not install etcd-server; the chart's install tests will be skipped"; fi; }; \
	  elif [ "$$CI" = true ]; then echo "error: CI needs etcd-server (run as root)"; exit 1; \
	  else echo "warning: not root; install etcd-server for the chart's install tests"; fi; \
	fi

## Apache Kafka for the tests and benches (`nines broker --engine kafka`): the release pinned in
## testbroker/kafka/pom.xml, resolved once with Maven into ~/.m2 (the classpath is cached under
## ~/.cache/nines; later runs take 0.3 s).
kafka-jars: setup maven
	$(PY) -m testbroker.kafka_jars

## The Kubernetes control plane the chart's install tests run on (tests/k8s): kube-apiserver,
## kube-controller-manager, kube-scheduler and kwok, pinned by testkube/go/go.mod and built once
## with Go into ~/.cache/nines/kube/<version>-<hash>/ (fresh: see README.md; cached: a no-op).
## Outside CI a failed build only warns (those tests skip, naming it); under CI=true it fails.
kube-bins: setup
	@$(PY) -m testkube.build || { if [ "$$CI" = true ]; then exit 1; \
	  else echo "warning: control plane not built; the chart's install tests will be skipped"; fi; }

demo: setup
	$(VENV)/bin/nines demo $(DEMO_ARGS)

## The control plane of the chart's install tests is built by the test run itself when it is not
## cached: in the background, at nice 19, while the rest of the suite runs (tests/k8s run last).
## The suite runs in parts (testkit/suite.py says which and why): the unit tests that time
## nothing at nice 19 throughout; two halves of the rest side by side (the stream tests, the
## others); the auth tests at nice 10 from the end of the first half; then the timing-sensitive
## set (bench/timing_runs.py) once both halves are done. PYTEST_ARGS go to every part.
test: setup system-test-deps kafka-jars
	$(PY) -m testkit.suite $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy core runtime probes streaming monitor dashboards testbroker kafkautil testkit testkube

bench: setup system-test-deps kafka-jars
	$(PY) -m bench.run

## The suite's timing-sensitive tests, TIMING_RUNS times each on a quiet machine (issue 41: one
## failure in ten is a broken test); the tally goes to docs/benchmarks.md with the next `make bench`.
TIMING_RUNS ?= 10
timing: setup system-test-deps kafka-jars
	$(PY) -m bench.timing_runs --runs $(TIMING_RUNS)

## Hours-long probe soak (memory, CPU, every echo); SOAK_HOURS=2 by default. Then `make bench`
## (or `python -m bench.run --report-only`) puts it in docs/benchmarks.md.
SOAK_HOURS ?= 2
soak: setup
	$(PY) -m bench.soak --hours $(SOAK_HOURS)

dashboards: setup
	$(VENV)/bin/nines dashboards export dashboards/json
	cp dashboards/json/*.json helm/nines/files/dashboards/
	$(VENV)/bin/nines alerts render --sla examples/sla.yaml --format rules --out helm/nines/files/rules.yaml

clean:
	rm -rf build *.egg-info .pytest_cache
