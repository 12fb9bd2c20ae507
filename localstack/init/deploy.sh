#!/usr/bin/env bash
# deploy.sh is the compose file's init hook: it installs Terraform if missing, runs the
# database migrations against the compose Postgres, and deploys the whole stack to LocalStack
# with `crawlq deploy` (AWS_ENDPOINT_URL makes it pass aws_endpoint to terraform/).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v terraform >/dev/null 2>&1; then
  v=${TERRAFORM_VERSION:-1.11.4}
  arch=$(dpkg --print-architecture)
  echo "deploy: installing terraform $v"
  apt-get update -qq && apt-get install -y -qq unzip >/dev/null
  curl -fsSL -o /tmp/terraform.zip "https://releases.hashicorp.com/terraform/${v}/terraform_${v}_linux_${arch}.zip"
  unzip -qo /tmp/terraform.zip -d /usr/local/bin
fi

echo "deploy: AWS endpoint $AWS_ENDPOINT_URL"
go run ./cmd/crawlq migrate
go run ./cmd/crawlq deploy
echo "deploy: done; invoke with: aws --endpoint-url http://127.0.0.1:4566 lambda invoke --function-name crawlq-api ..."
