#!/usr/bin/env bash
# deploy.sh is the compose file's deploy step (the image of localstack/deploy.Dockerfile has Go,
# make, zip and Terraform): it deploys the whole stack to LocalStack with `crawlq deploy`
# (AWS_ENDPOINT_URL makes it pass aws_endpoint to terraform/).
#
# The state lives in .local/localstack/, apart from a real deploy's (.local/deploy, the default
# --work-dir), so this can never touch, or be confused with, a real stack's state.
# The database is the stack's own: LocalStack's RDS runs PostgreSQL, and the stack's migrate
# function migrates it and gives the application role its login, as on AWS.
set -euo pipefail
cd "$(dirname "$0")/../.."

for tool in go make zip terraform; do
  command -v "$tool" >/dev/null 2>&1 || { echo "deploy: $tool is missing from this image (see localstack/deploy.Dockerfile)" >&2; exit 1; }
done
case ${AWS_ENDPOINT_URL:-} in
  http://localstack:4566 | http://127.0.0.1:4566 | http://localhost:4566) ;;
  *) echo "deploy: AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL:-<unset>} is not LocalStack; refusing to deploy from here" >&2; exit 1 ;;
esac

echo "deploy: AWS endpoint $AWS_ENDPOINT_URL, state in .local/localstack"
go run ./cmd/crawlq deploy --work-dir .local/localstack "$@"
echo "deploy: done; invoke with: aws --endpoint-url http://127.0.0.1:4566 lambda invoke --function-name crawlq-api --payload '{\"action\":\"daemonstatus\"}' /dev/stdout"
