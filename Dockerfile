# Multi-stage build of the hostgate image: a static binary (no cgo) on a
# distroless base, running as an unprivileged user.
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t hostgate .
FROM golang:1.27 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/hostgate .
# A non-root process binds ports 80 and 443 only through a file capability
# on its binary; the DaemonSet keeps NET_BIND_SERVICE in its bounding set.
RUN apt-get update -qq && apt-get install -y -qq libcap2-bin && setcap cap_net_bind_service=+ep /out/hostgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hostgate /hostgate
USER 65532:65532
ENTRYPOINT ["/hostgate"]
