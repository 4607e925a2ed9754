#!/usr/bin/env bash
# Make sure a Java 17+ runtime is present (PySpark 4 needs it); install it with apt-get if missing.
set -euo pipefail
version() { java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]; exit}'; }
if command -v java >/dev/null 2>&1 && [ "$(version)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Java 17+ not found: installing openjdk-17-jre-headless with apt-get" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  exit 0
fi
echo "Java 17+ is required for the Spark pipeline; install it (e.g. openjdk-17-jre-headless)" >&2
exit 1
