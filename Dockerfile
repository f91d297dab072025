# clawbot in a container: slim, not root, bubblewrap inside for the shell's sandbox, a
# healthcheck. docs/deploy.md walks through it and compose.yaml.
#
#   docker build -t clawbot .
#
# BASE_IMAGE: any Debian-based image with Python 3.11+ and its venv module. The default is
# Docker Hub's; CI builds on a base made from Debian's packages (deploy/build-image).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

# bubblewrap: shell_exec runs sandboxed (docs/tools.md); tini: signals reach clawbot and
# its children are reaped. Nothing else: no compiler, every dependency comes as a wheel.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        bubblewrap ca-certificates tini \
    && rm -rf /var/lib/apt/lists/*

# The bot's user: no shell login, no sudo. Its home folder (CLAWBOT_HOME) is /data, a volume:
# the settings (.env, clawbot.toml), the workspace, the agents and, without PostgreSQL, the
# SQLite database.
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin clawbot \
    && install -d -o clawbot -g clawbot -m 0700 /data /data/workspace /data/agents

# The dependencies first (a layer kept while only the code changes), then the code. The
# checkout stays in /opt/clawbot, read-only to the bot: its shipped workspace and agents
# seed a new home from there.
WORKDIR /opt/clawbot
COPY pyproject.toml README.md ./
RUN python3 -m venv /opt/clawbot/.venv \
    && mkdir -p clawbot adapters && touch clawbot/__init__.py adapters/__init__.py \
    && /opt/clawbot/.venv/bin/pip install --no-cache-dir --disable-pip-version-check '.[postgres]' \
    && /opt/clawbot/.venv/bin/pip uninstall -y --disable-pip-version-check clawbot \
    && rm -rf clawbot adapters build ./*.egg-info
COPY clawbot ./clawbot
COPY adapters ./adapters
COPY agents ./agents
COPY workspace ./workspace
RUN /opt/clawbot/.venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps -e . \
    && /opt/clawbot/.venv/bin/python -m compileall -q clawbot adapters

ENV PATH=/opt/clawbot/.venv/bin:$PATH \
    CLAWBOT_HOME=/data \
    PYTHONUNBUFFERED=1
USER clawbot:clawbot
WORKDIR /data
VOLUME ["/data"]
# Telegram's webhook (CLAWBOT_TELEGRAM_WEBHOOK_PORT) and Slack's HTTP Events
# (CLAWBOT_SLACK_HTTP_PORT); set their *_LISTEN / *_HOST to 0.0.0.0 to reach them.
EXPOSE 8443 3000

# clawbot doctor: the settings, the model's key, the home and the database (a PostgreSQL
# server that stopped answering makes the container unhealthy). It calls no platform and
# no model; about 2 s of CPU.
HEALTHCHECK --interval=60s --timeout=30s --start-period=30s --retries=3 \
    CMD ["clawbot", "doctor"]

ENTRYPOINT ["/usr/bin/tini", "--", "clawbot"]
CMD ["run"]
