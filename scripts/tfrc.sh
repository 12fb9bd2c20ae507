#!/usr/bin/env bash
# tfrc.sh finds the local Terraform provider mirror and writes a CLI config that uses it.
#
#   export TF_CLI_CONFIG_FILE=$(scripts/tfrc.sh)
#
# The machine has no access to registry.terraform.io, so providers come from a filesystem
# mirror: a folder holding registry.terraform.io/hashicorp/aws/<version>/<os_arch>/. Set
# TF_PLUGIN_MIRROR to skip the search. Prints the path of .local/terraformrc.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/.local/terraformrc

mirror=${TF_PLUGIN_MIRROR:-}
if [[ -z $mirror ]]; then
  for cand in /opt/tf-plugins "$HOME/.terraform.d/plugins" /usr/share/terraform/plugins \
    /usr/local/share/terraform/plugins; do
    [[ -d $cand/registry.terraform.io/hashicorp/aws ]] && { mirror=$cand; break; }
  done
fi
if [[ -z $mirror ]]; then
  hit=$(find / -maxdepth 8 -type d -path '*registry.terraform.io/hashicorp/aws' \
    -not -path '/proc/*' -not -path '/sys/*' 2>/dev/null | head -1 || true)
  [[ -n $hit ]] && mirror=${hit%/registry.terraform.io/hashicorp/aws}
fi
if [[ -z $mirror || ! -d $mirror/registry.terraform.io/hashicorp/aws ]]; then
  echo "tfrc: no Terraform provider mirror holding registry.terraform.io/hashicorp/aws found (set TF_PLUGIN_MIRROR)" >&2
  exit 1
fi

mkdir -p "$(dirname "$out")"
cat >"$out" <<CONF
# Written by scripts/tfrc.sh: install providers only from the local mirror.
provider_installation {
  filesystem_mirror {
    path    = "$mirror"
    include = ["registry.terraform.io/*/*"]
  }
  direct {
    exclude = ["registry.terraform.io/*/*"]
  }
}
CONF
echo "$out"
