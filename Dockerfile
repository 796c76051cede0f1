# One image for every Quire service; docker-compose.yml picks the module
# (python -m bookie | gateway | auditor | replicator) and the QUIRE_* settings.
# The stage "spark" adds a JRE to it for a Spark master and workers (pyspark, pyarrow and
# the connector services/spark are dependencies of the project, so already installed).
# The default (last) stage is the plain image: the Quire services need no Java.
FROM python:3.11-slim AS quire

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/quire
# Dependencies first (pinned by constraints.txt), so code changes reuse this layer.
COPY pyproject.toml constraints.txt README.md ./
RUN python -c "import tomllib; print(chr(10).join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -c constraints.txt -r /tmp/requirements.txt
COPY . .
RUN pip install --no-deps -c constraints.txt . \
    && useradd --system --uid 10001 --home-dir /var/lib/quire quire \
    && mkdir -p /var/lib/quire/data \
    && chown -R quire:quire /var/lib/quire

USER quire
WORKDIR /var/lib/quire
ENV QUIRE_DATA_DIR=/var/lib/quire/data
EXPOSE 3181 8080 8091 8092
CMD ["python", "-m", "bookie"]

FROM quire AS spark
USER root
# A JRE 17+ (Debian's default) for Spark; procps for Spark's scripts (ps).
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        default-jre-headless procps \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/quire/spark/work /var/lib/quire/spark/local /var/lib/quire/spark/logs \
    && chown -R quire:quire /var/lib/quire/spark
USER quire
# spark-class, spark-submit and pyspark are on PATH (pip installs them); executors run
# this image's python, which has pyarrow and the connector.
ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/usr/local/bin/python \
    SPARK_WORKER_DIR=/var/lib/quire/spark/work \
    SPARK_LOCAL_DIRS=/var/lib/quire/spark/local \
    SPARK_LOG_DIR=/var/lib/quire/spark/logs
EXPOSE 7077 8180 8181
CMD ["spark-class", "org.apache.spark.deploy.master.Master"]

FROM quire
