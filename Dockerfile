# The `outbox` CLI as a container image: one image for the router, the relay, the watchdog and the
# one-shot commands (db:provision, connector:deploy, schemas:register, status, …).
#
#   docker build -t outbox-router .
#   docker run --rm outbox-router --help
#   docker run --rm -e PGHOST=db … outbox-router router --handlers /app/handlers/handlers.js
#
# Built and run in CI by test/integration/container-image.test.ts, on a private engine with a locally built
# base (scripts/docker: no registry is reachable there); test/unit/deploy/dockerfile.test.ts checks the
# properties below statically. No `# syntax=` line: BuildKit would pull that frontend from a registry.
# docs/deploy.md has the details.

# ---- build: compile TypeScript with the dev dependencies -------------------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /app
# --ignore-scripts: nothing the build needs has an install script; the ones in the tree (testcontainers'
# ssh2 and cpu-features, @parcel/watcher) would want a compiler this image does not have.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json tsconfig.scripts.json ./
COPY src ./src
COPY scripts ./scripts
COPY examples ./examples
RUN npm run build

# ---- runtime: production dependencies, dist/ and the shipped assets ---------------------------------
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The assets the package ships (package.json "files"): the connector template, migrations, example
# schemas. src/assets resolves them beside dist/, so they live at /app/connect, /app/sql, /app/schemas.
COPY connect/outbox-connector.json ./connect/
COPY sql ./sql
COPY schemas ./schemas
COPY web ./web
# A handlers module placed under /app (e.g. /app/handlers/) can import `outbox-router/...`: Node resolves
# the package's own name through its "exports" map.
RUN mkdir /app/handlers

# Inside a container 127.0.0.1 is unreachable from outside it: the health and metrics listeners bind
# every interface here (the code's default stays 127.0.0.1). Override with --metrics-host or the variables.
ENV OUTBOX_ROUTER_METRICS_HOST=0.0.0.0 \
    OUTBOX_WATCHDOG_METRICS_HOST=0.0.0.0 \
    OUTBOX_RELAY_METRICS_HOST=0.0.0.0
# router / watchdog / relay: /metrics, /livez, /readyz, /healthz (STACK_PORTS in src/config/local-stack.ts)
EXPOSE 9464 9465 9466

# The base image's unprivileged `node` user (uid 1000), by number so Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
# Services stop gracefully on SIGTERM (they install their own handler, so PID 1 is fine without an init).
ENTRYPOINT ["node", "/app/dist/cli/main.js"]
CMD ["--help"]
