# The dnsconfigurer image for those who build with Docker (BuildKit):
#
#   read -r VERSION REVISION < <(hack/build-image --print-version)
#   docker build -t "dnsconfigurer:${VERSION/+/_}" \
#     --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" .
#
# (hack/build-image --print-version: the semver tag on HEAD, else the Go
# pseudo-version the go command would stamp, and the commit.) For both
# platforms: docker buildx build --platform linux/amd64,linux/arm64 ...
#
# It has the layout of the image hack/build-image writes offline (the one the
# tests run): the static binary at /usr/local/bin/dnsconfigurer as the
# entrypoint, user 65532:65532, CA certificates, on distroless' static base
# (which adds /etc/os-release, tzdata and the like). internal/imagebuild's
# TestDockerfile keeps the two in step.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=devel
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/dnsconfigurer/dnsconfigurer/internal/version.version=${VERSION} -X github.com/dnsconfigurer/dnsconfigurer/internal/version.revision=${REVISION}" \
      -o /out/dnsconfigurer ./cmd/dnsconfigurer

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.source=https://github.com/dnsconfigurer/dnsconfigurer
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/dnsconfigurer /usr/local/bin/dnsconfigurer
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/dnsconfigurer"]
