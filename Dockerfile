# The goalrun action image: the static goalrun binary (CGO_ENABLED=0) on a
# minimal base, entry point `goalrun action`.
#
# Build stage without pulling anything. Both base images are build arguments
# whose defaults are ordinary public images, so on GitHub's runners
# `runs: image: Dockerfile` just works. Where no image can be pulled (this
# project's CI), create the Go image locally under the default tag first and
# the build never touches a registry:
#
#   tar -C / -cf - usr/local/go | docker import \
#       --change 'ENV PATH=/usr/local/go/bin:/bin' --change 'ENV GOTOOLCHAIN=local' - golang:1.26.8
#
# plus busybox (Debian's busybox-static) as /bin/sh, /tmp and the CA bundle in
# the same tarball — `.ci/run` (section github) does exactly this. The final
# stage is `scratch`, which is never pulled.
#
# Go modules: when the build context holds a vendor/ directory (`.ci/run`
# makes one with `go mod vendor` in a temporary copy of the context; it is
# never committed) the build uses it and needs no network; otherwise modules
# come from GOPROXY.
ARG GO_IMAGE=golang:1.26.8
ARG BASE_IMAGE=scratch

FROM ${GO_IMAGE} AS build
ARG GOPROXY=https://proxy.golang.org,direct
ARG VERSION=""
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOCACHE=/tmp/gocache GOPATH=/tmp/gopath GOPROXY=${GOPROXY}
WORKDIR /src
COPY . .
RUN set -e; \
    mod=mod; if [ -d vendor ]; then mod=vendor; fi; \
    go build -mod=$mod -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/usr/local/bin/goalrun ./cmd/goalrun; \
    mkdir -p /out/tmp /out/etc/ssl/certs /out/github/workspace; \
    chmod 1777 /out/tmp; \
    cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ca-certificates.crt

FROM ${BASE_IMAGE}
COPY --from=build /out/ /
ENV TMPDIR=/tmp
LABEL org.opencontainers.image.title="goalrun" \
      org.opencontainers.image.description="Run a coding agent in a hardened sandbox until a deterministic check passes."
ENTRYPOINT ["/usr/local/bin/goalrun", "action"]
