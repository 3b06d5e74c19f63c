# Chela in a container: `chela run` on the workspace volume /data.
#
#   docker build -t chela .
#   docker run -d --name chela -v chela-data:/data -p 18789:18789 -e CHELA_GATEWAY__TOKEN=$(openssl rand -hex 16) chela
#
# Inside the container the gateway listens on 0.0.0.0 (a loopback address is unreachable
# through a published port), so every request needs `Authorization: Bearer <gateway.token>`.
# Set the token as above, or leave it out and read the one generated on first start with
# `docker logs chela`. Keys and other settings live in the volume:
#   docker exec -i chela /chela --workspace /data config set llm.api_key - < key.txt

# --- build: a static binary (musl) --------------------------------------------------------
# The toolchain is pinned to the project's MSRV ceiling.
FROM rust:1.95-bookworm AS build
ARG TARGETARCH
# musl-gcc compiles ring's and Lua's C and ring's assembly for the musl target (the voice
# pipeline's Opus codec is pure Rust).
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
RUN case "${TARGETARCH:-amd64}" in \
      amd64) echo x86_64-unknown-linux-musl ;; \
      arm64) echo aarch64-unknown-linux-musl ;; \
      *) echo "unsupported architecture ${TARGETARCH}" >&2; exit 1 ;; \
    esac > /target-triple \
 && rustup target add "$(cat /target-triple)"
WORKDIR /src
COPY . .
# crates/chela/build.rs links this static build with the toolchain's rust-lld and places the
# start-up code of `chela run` together (crates/chela/startup-order.txt): 2 MiB less idle RSS.
RUN cargo build --locked --profile release-small --target "$(cat /target-triple)" -p chela --bin chela \
 && cp "target/$(cat /target-triple)/release-small/chela" /chela
# The workspace folder, copied below owned by the image's unprivileged user and private to it.
RUN mkdir -m 700 /data

# --- run: nothing but the binary -----------------------------------------------------------
# distroless/static has /etc/passwd, the time zone database and a non-root user; Chela needs
# no libc and no CA bundle (its TLS roots are built in).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /chela /chela
COPY --from=build --chown=65532:65532 /data /data
USER 65532:65532
ENV CHELA_GATEWAY__LISTEN=0.0.0.0:18789
VOLUME /data
EXPOSE 18789
# GET /healthz needs no token and tells nothing but "ok"; the image has no curl, so the binary asks.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/chela", "--workspace", "/data", "gateway", "health"]
ENTRYPOINT ["/chela", "--workspace", "/data", "run"]
