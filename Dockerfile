# The service's production image: `node dist/server.js` on Node 24, as a non-root user, with
# production dependencies only. The operator CLIs run from the same image:
#   docker run --rm gss node dist/operator/main.js help
#   docker run --rm gss node dist/secrets/main.js status
# No setting is baked in: every secret (SIGNER_PRIVATE_KEY, SECRETS_ENCRYPTION_KEY, DATABASE_URL
# with its password, ...) is given at `docker run` time, and nothing here takes one as an ARG.
# test/container.test.ts reproduces this file's COPY steps and .dockerignore without a daemon and
# checks what reaches each stage.
#
# NODE_IMAGE: any Debian-based image with Node 24 (and npm, for the build stage) on PATH; a
# mirror or a locally built base can be substituted with --build-arg NODE_IMAGE=...
ARG NODE_IMAGE=node:24-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# The lock file alone decides the install, so this layer is reused until a dependency changes.
# The local package test/support/anvil-binary is a devDependency (`file:`): npm needs its
# package.json to install, and prunes it with the other devDependencies below.
COPY package.json package-lock.json ./
COPY test/support/anvil-binary/package.json test/support/anvil-binary/
# package.json approves install scripts per package in `allowScripts`, which only npm 11 reads;
# the npm 10 of other Node images would run every package's script. So none runs, and the one
# approved package is rebuilt explicitly: secp256k1 (node-gyp-build picks its bundled prebuilt
# binary for linux-x64 glibc, or compiles one where a compiler is present, or exits quietly and the
# signer uses the JavaScript implementation).
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild secp256k1
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.mjs scripts/
COPY src src
# --omit=optional as well: npm keeps a package that a devDependency needs and a production one
# names only as an optional peer (typescript, through viem and abitype; zod), and --omit=dev alone
# would ship it. The production tree's one optional package is pg-cloudflare, which pg loads
# only on Cloudflare Workers.
RUN npm run build \
 && npm prune --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    PORT=3000 \
    DATA_DIR=/var/lib/gss
# A user of its own rather than the base image's `node`, so that any Debian base works. The
# server creates DATA_DIR at start even on PostgreSQL (it holds nothing then, but must be
# writable); the code and dependencies stay owned by root, read-only to the service.
RUN groupadd --system gss \
 && useradd --system --gid gss --home-dir /var/lib/gss --shell /usr/sbin/nologin gss \
 && install -d -o gss -g gss -m 0700 /var/lib/gss
WORKDIR /app
# services.ts reads ../package.json for the version; the operator CLI reads the paymaster's
# compiled contracts (deploy) from contracts/artifacts, relative to dist/operator/.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY contracts/artifacts/SponsorPaymaster.json contracts/artifacts/SponsorPaymasterV08.json contracts/artifacts/
USER gss
EXPOSE 3000
# Node itself asks, since slim images have no curl: healthy while /health/ready answers 2xx (the
# database reachable, the service not shutting down).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exec form: the server is PID 1 and receives SIGTERM itself (graceful shutdown).
CMD ["node", "dist/server.js"]
