# One image for every Quire service; docker-compose.yml picks the module
# (python -m bookie | gateway | auditor | replicator) and the QUIRE_* settings.
FROM python:3.11-slim

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
