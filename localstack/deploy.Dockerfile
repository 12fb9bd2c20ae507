# The compose file's "deploy" service: Go to build crawlq, plus what `crawlq deploy` runs on
# the way: make and zip (make lambdas writes build/<fn>.zip) and Terraform.
FROM golang:1.26-bookworm
ARG TERRAFORM_VERSION=1.11.4
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends make zip unzip curl ca-certificates >/dev/null \
 && rm -rf /var/lib/apt/lists/* \
 && arch=$(dpkg --print-architecture) \
 && curl -fsSL -o /tmp/terraform.zip "https://releases.hashicorp.com/terraform/${TERRAFORM_VERSION}/terraform_${TERRAFORM_VERSION}_linux_${arch}.zip" \
 && unzip -qo /tmp/terraform.zip -d /usr/local/bin \
 && rm /tmp/terraform.zip \
 && terraform version
