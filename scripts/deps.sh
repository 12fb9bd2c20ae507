#!/usr/bin/env bash
# deps.sh checks (and where it can, installs) what `make demo` and `make test` need.
#   scripts/deps.sh demo   # Go and PostgreSQL (installed from Debian when missing)
#   scripts/deps.sh test   # also moto_server, the aws CLI and terraform
# Anything it cannot provide makes it fail loudly, naming what is missing.
set -euo pipefail
what=${1:-test}
missing=()
apt_install() { # install Debian packages when running as root
  [[ $(id -u) -eq 0 ]] || return 1
  if [[ ! -f /tmp/.crawlq-apt-updated ]]; then apt-get update -qq >/dev/null 2>&1 && touch /tmp/.crawlq-apt-updated; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1
}
command -v go >/dev/null || missing+=("go (Go 1.26 toolchain)")
command -v python3 >/dev/null || apt_install python3 || missing+=("python3")
command -v psql >/dev/null || apt_install postgresql-client || missing+=("psql (Debian package postgresql-client)")
if [[ $what == test ]]; then
  command -v moto_server >/dev/null ||
    { pip install -q 'moto[server]' >/dev/null 2>&1 || apt_install python3-moto; } ||
    missing+=("moto_server (pip install 'moto[server]')")
  command -v aws >/dev/null || apt_install awscli || missing+=("aws CLI (Debian package awscli)")
  command -v terraform >/dev/null || missing+=("terraform >= 1.11 with the hashicorp/aws 5.100.0 provider in a filesystem mirror")
  # Scrapy projects run under crawlq in tests with Debian's Scrapy (PyPI is not reachable here).
  /usr/bin/python3 -c 'import scrapy' >/dev/null 2>&1 || apt_install python3-scrapy ||
    missing+=("Scrapy for /usr/bin/python3 (Debian package python3-scrapy)")
  command -v chromium >/dev/null || apt_install chromium || missing+=("chromium (Debian package chromium; internal/browser renders pages with it)")
fi
if ((${#missing[@]})); then
  echo "crawlq: cannot run '$what'; missing:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi
