locals {
  emulated = var.aws_endpoint != ""
  # Every service the stack calls, pointed at the emulator when var.aws_endpoint is set
  # (null leaves the provider's real AWS endpoint in place).
  endpoint = local.emulated ? var.aws_endpoint : null
}

provider "aws" {
  region = var.region

  # Only for a local emulator (LocalStack or moto): fake credentials are fine there, and the
  # instance metadata service does not exist.
  skip_credentials_validation = local.emulated
  skip_metadata_api_check     = local.emulated
  skip_region_validation      = local.emulated
  s3_use_path_style           = local.emulated

  endpoints {
    cloudwatch     = local.endpoint
    cloudwatchlogs = local.endpoint
    kms            = local.endpoint
    ec2            = local.endpoint
    ecr            = local.endpoint
    ecs            = local.endpoint
    events         = local.endpoint
    iam            = local.endpoint
    lambda         = local.endpoint
    rds            = local.endpoint
    s3             = local.endpoint
    scheduler      = local.endpoint
    secretsmanager = local.endpoint
    sns            = local.endpoint
    ssm            = local.endpoint
    sts            = local.endpoint
  }

  default_tags {
    tags = merge({ Application = var.name }, var.tags)
  }
}
