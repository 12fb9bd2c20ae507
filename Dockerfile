# The ECS runner image: `crawlq runner` as a static binary on an empty base.
# Without a Docker daemon, `make image` builds the same image (internal/image).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o /out/crawlq ./cmd/crawlq \
 && mkdir -m 1777 /out/tmp

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/tmp /tmp
COPY --from=build /out/crawlq /crawlq
ENV PATH=/ SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /tmp
USER 65532:65532
ENTRYPOINT ["/crawlq", "runner"]
