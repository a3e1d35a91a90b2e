#!/bin/sh
# Start FIBServe bound to every interface of the container, but only with a bearer token:
# anyone who can reach the port could otherwise run code on this host's GPUs.
set -eu
if [ -z "${FIBSERVE_TOKEN:-}" ]; then
    echo "fibserve: refusing to bind 0.0.0.0 without a token; set FIBSERVE_TOKEN (see docker/.env.example)" >&2
    exit 64
fi
# FIBSERVE_TOKEN and DATASET_ROOTS are read from the environment by `fibserve serve` itself.
exec fibserve serve --host 0.0.0.0 --port "${FIBSERVE_PORT:-10000}" --state-dir /var/lib/fibserve "$@"
