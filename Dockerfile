# payhook in a container: a static binary on an empty image, run as a
# non-root user, its SQLite database in a volume. docs/deploy.md explains it.
#
#   docker build -t payhook .
#   docker run -d --name payhook -p 8080:8080 --stop-timeout 45 \
#     -v payhook-data:/var/lib/payhook \
#     -v "$PWD/payhook.yaml:/etc/payhook/payhook.yaml:ro" \
#     -e PAYHOOK_CONFIG=/etc/payhook/payhook.yaml --env-file payhook.env payhook
#
# With PostgreSQL, set PAYHOOK_DB=postgres://... and no volume is needed.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The same command line cmd/payhook's TestDeployBinary builds and starts.
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/payhook ./cmd/payhook
# The volume's mount point (owned below by the user payhook runs as: a new
# named volume takes that owner), and a /tmp for SQLite's temporary files.
RUN mkdir -p /out/state /out/tmp && chmod 0700 /out/state && chmod 1777 /out/tmp

FROM scratch
# CA roots, for the provider APIs payhook reads (api_url).
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/tmp /tmp
COPY --from=build --chown=65532:65532 /out/state /var/lib/payhook
COPY --from=build /out/payhook /payhook
USER 65532:65532
WORKDIR /var/lib/payhook
VOLUME /var/lib/payhook
ENV PAYHOOK_DB=sqlite:///var/lib/payhook/payhook.db \
    PAYHOOK_ADDR=0.0.0.0:8080
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/payhook"]
CMD ["serve"]
