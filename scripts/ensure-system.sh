#!/usr/bin/env bash
# System packages the project needs beyond Python: a JDK 17+ (PySpark 4; javac for the Flink plugin) and Chromium (the
# report's headless rendering test) and Prometheus (Debian's package: the live Flink-metrics tests and
# `flink-local start --prometheus`). Missing ones are installed with apt-get when root.
set -euo pipefail
java_major() { java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]; exit}'; }
missing=()
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  missing+=(openjdk-17-jdk-headless)
elif ! command -v javac >/dev/null 2>&1; then
  missing+=(openjdk-17-jdk-headless)  # javac builds the Flink placement plugin
fi
if ! command -v chromium >/dev/null 2>&1; then
  missing+=(chromium)
fi
if ! command -v prometheus >/dev/null 2>&1; then
  missing+=(prometheus)  # `apt-cache policy prometheus`: Debian 12 ships 2.42
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} with apt-get" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "missing system packages: ${missing[*]} (install them; Java 17+ is required for Spark," \
     "Chromium only for the report rendering test, Prometheus for the Flink-metrics tests)" >&2
case " ${missing[*]} " in *openjdk*) exit 1 ;; esac
