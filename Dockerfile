# trl-launch's daemons (trl-coord, trl-agent, trl-slurm-node) and the demo
# trainer, built from this repository with Debian's packages.
#   docker build -t trl-launch .
# The runtime image carries PyTorch from Debian so that a train.py runs as
# is; build FROM it to add your own training code.
FROM debian:12 AS build
# Debian 12's packages are the pin: the base image names the release.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      cmake g++ make pkg-config libgrpc++-dev protobuf-compiler-grpc \
      libprotobuf-dev protobuf-compiler libyaml-cpp-dev libspdlog-dev \
      libfmt-dev libcli11-dev libgtest-dev libabsl-dev libgloo-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build /build -j "$(nproc)" --target trl-coord trl-agent trl-env-worker trl-demo-train

FROM debian:12-slim
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libyaml-cpp0.7 libspdlog1.10 libfmt9 \
      libabsl20220623 libgloo0 python3 python3-torch ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/trl-launch trl
COPY --from=build /build/coordinator/trl-coord /build/agent/trl-agent \
     /build/worker/trl-env-worker /build/worker/trl-demo-train /usr/local/bin/
COPY deploy/slurm/trl-slurm-node /usr/local/bin/
COPY deploy/README.md /usr/local/share/doc/trl-launch/deploy/README.md
EXPOSE 29500/tcp 29500/udp
ENTRYPOINT []
CMD ["trl-coord", "--help"]
