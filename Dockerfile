# The nines image: Python 3.11, Java 17 (Spark), nines. Runs as a non-root user.
# The stream job's histogram merge (jvm/aggregator) is built here and baked in: nothing is
# downloaded when the job starts.
FROM maven:3.9-eclipse-temurin-17 AS aggregator
WORKDIR /build
COPY jvm/aggregator/pom.xml jvm/aggregator/pom.xml
RUN mvn -B -q -f jvm/aggregator/pom.xml dependency:go-offline
COPY jvm/aggregator/src jvm/aggregator/src
RUN mvn -B -q -f jvm/aggregator/pom.xml package

FROM python:3.11-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/nines
COPY pyproject.toml README.md ./
COPY core core
COPY runtime runtime
COPY kafkautil kafkautil
COPY probes probes
COPY streaming streaming
COPY monitor monitor
COPY testbroker testbroker
COPY dashboards dashboards
# SPARK_VERSION: the pyspark `make setup` installs and the chart's sparkOperator.sparkVersion
ARG SPARK_VERSION=4.3.0
RUN pip install --no-cache-dir . "pyspark==${SPARK_VERSION}" \
 && printf 'import sys\nfrom monitor.cli import main\nsys.exit(main())\n' > /opt/nines/spark_main.py
COPY --from=aggregator /build/jvm/aggregator/target/nines-aggregator.jar /opt/nines/jars/nines-aggregator.jar
RUN useradd --uid 10001 --user-group --home /tmp nines
USER 10001
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 HOME=/tmp \
    NINES_AGGREGATOR_JAR=/opt/nines/jars/nines-aggregator.jar
ENTRYPOINT ["nines"]
CMD ["--help"]
