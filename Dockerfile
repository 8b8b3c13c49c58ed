# The nines image: Python 3.11, Java 17 (Spark), nines. Runs as a non-root user.
FROM python:3.11-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/nines
COPY pyproject.toml README.md ./
COPY core core
COPY kafkautil kafkautil
COPY probes probes
COPY streaming streaming
COPY monitor monitor
COPY testbroker testbroker
COPY dashboards dashboards
RUN pip install --no-cache-dir . \
 && printf 'import sys\nfrom monitor.cli import main\nsys.exit(main())\n' > /opt/nines/spark_main.py
RUN useradd --uid 10001 --user-group --home /tmp nines
USER 10001
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 HOME=/tmp
ENTRYPOINT ["nines"]
CMD ["--help"]
