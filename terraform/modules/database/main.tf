# Database: PostgreSQL on RDS (encrypted, private, backed up), reached with IAM authentication
# only, either through RDS Proxy (var.proxy) or, without it, directly: nothing else reaches the
# instance. Without the proxy the instance admits the functions' and runners' security groups
# itself.
#
# The users:
#   - the master user, whose password RDS keeps in Secrets Manager itself
#     (manage_master_user_password): with the proxy, only the migrate function connects as it
#     (IAM auth at the proxy); without it, the migrate function reads that secret and logs in
#     with the password (the master user cannot be given rds_iam without losing it);
#   - the application role (var.app_username, created NOLOGIN by migration 0007 with only the
#     table privileges crawlq needs), which the functions and runners connect as. With the
#     proxy it has a password that Secrets Manager generates and Terraform writes write-only
#     (ephemeral), so it never enters the state, and the migrate function sets it; without the
#     proxy it has none: the migrate function grants it rds_iam, and IAM tokens are its only
#     login.
# No function and no runner reads a password except migrate.

variable "name" {
  description = "Name prefix."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the database."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets (at least two zones)."
  type        = list(string)
}

variable "client_security_group" {
  description = "Security group of the functions and runner tasks allowed to reach the proxy."
  type        = string
}

variable "instance_class" {
  description = "Instance class."
  type        = string
}

variable "allocated_storage" {
  description = "Storage in GiB."
  type        = number
}

variable "engine_version" {
  description = "PostgreSQL major version."
  type        = string
}

variable "db_name" {
  description = "Database name."
  type        = string
}

variable "username" {
  description = "Master user name."
  type        = string
}

variable "app_username" {
  description = "Application role the functions and runners connect as (migration 0007 creates it)."
  type        = string
}

variable "runner_security_group" {
  description = "Security group of the runner tasks, also allowed to reach the proxy."
  type        = string
}

variable "backup_retention_days" {
  description = "Automated backup retention."
  type        = number
}

variable "multi_az" {
  description = "Multi-AZ deployment."
  type        = bool
}

variable "deletion_protection" {
  description = "Deletion protection."
  type        = bool
}

variable "skip_final_snapshot" {
  description = "Delete without a final snapshot."
  type        = bool
}

variable "proxy" {
  description = "Put RDS Proxy in front of the instance; false: clients connect to the instance."
  type        = bool
}

variable "emulator_workarounds" {
  description = "Leave out what moto cannot read back (see the root module's variable)."
  type        = bool
  default     = false
}

locals {
  parameters = {
    "rds.force_ssl" = "1"
    # Log slow statements: the queue's claim query must stay fast.
    "log_min_duration_statement" = "1000"
    # A stuck transaction holds locks the claim query waits behind.
    "idle_in_transaction_session_timeout" = "60000"
  }
  rule_description = { for k, v in {
    proxy_from_clients = "PostgreSQL from crawlq functions"
    proxy_from_runners = "PostgreSQL from crawlq runner tasks"
    proxy_to_db        = "PostgreSQL to the instance"
    db_from_proxy      = "PostgreSQL from the proxy"
    db_from_clients    = "PostgreSQL from crawlq functions"
    db_from_runners    = "PostgreSQL from crawlq runner tasks"
  } : k => var.emulator_workarounds ? null : v }
}

resource "aws_db_subnet_group" "this" {
  name       = var.name
  subnet_ids = var.subnet_ids
}

resource "aws_security_group" "proxy" {
  count       = var.proxy ? 1 : 0
  name        = "${var.name}-db-proxy"
  description = "RDS Proxy: reachable from crawlq functions and runners"
  vpc_id      = var.vpc_id
}

resource "aws_security_group" "db" {
  name        = "${var.name}-db"
  description = var.proxy ? "RDS instance: reachable from the proxy only" : "RDS instance: reachable from crawlq functions and runners"
  vpc_id      = var.vpc_id
}

resource "aws_vpc_security_group_ingress_rule" "proxy_from_clients" {
  count                        = var.proxy ? 1 : 0
  security_group_id            = aws_security_group.proxy[0].id
  description                  = local.rule_description["proxy_from_clients"]
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = var.client_security_group
}

resource "aws_vpc_security_group_egress_rule" "proxy_to_db" {
  count                        = var.proxy ? 1 : 0
  security_group_id            = aws_security_group.proxy[0].id
  description                  = local.rule_description["proxy_to_db"]
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = aws_security_group.db.id
}

resource "aws_vpc_security_group_ingress_rule" "db_from_proxy" {
  count                        = var.proxy ? 1 : 0
  security_group_id            = aws_security_group.db.id
  description                  = local.rule_description["db_from_proxy"]
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = aws_security_group.proxy[0].id
}

resource "aws_vpc_security_group_ingress_rule" "proxy_from_runners" {
  count                        = var.proxy ? 1 : 0
  security_group_id            = aws_security_group.proxy[0].id
  description                  = local.rule_description["proxy_from_runners"]
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = var.runner_security_group
}

resource "aws_vpc_security_group_ingress_rule" "db_from_clients" {
  count                        = var.proxy ? 0 : 1
  security_group_id            = aws_security_group.db.id
  description                  = local.rule_description["db_from_clients"]
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = var.client_security_group
}

resource "aws_vpc_security_group_ingress_rule" "db_from_runners" {
  count                        = var.proxy ? 0 : 1
  security_group_id            = aws_security_group.db.id
  description                  = local.rule_description["db_from_runners"]
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = var.runner_security_group
}

resource "aws_db_parameter_group" "this" {
  name   = "${var.name}-pg${var.engine_version}"
  family = "postgres${var.engine_version}"

  dynamic "parameter" {
    for_each = var.emulator_workarounds ? {} : local.parameters
    content {
      name  = parameter.key
      value = parameter.value
    }
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_db_instance" "this" {
  identifier     = var.name
  engine         = "postgres"
  engine_version = var.engine_version
  instance_class = var.instance_class
  db_name        = var.db_name
  username       = var.username

  manage_master_user_password         = true
  iam_database_authentication_enabled = true

  allocated_storage     = var.allocated_storage
  max_allocated_storage = var.allocated_storage * 4
  storage_type          = "gp3"
  storage_encrypted     = true

  db_subnet_group_name   = aws_db_subnet_group.this.name
  vpc_security_group_ids = [aws_security_group.db.id]
  publicly_accessible    = false
  multi_az               = var.multi_az
  parameter_group_name   = aws_db_parameter_group.this.name

  backup_retention_period    = var.backup_retention_days
  backup_window              = "03:00-04:00"
  maintenance_window         = "sun:04:30-sun:05:30"
  copy_tags_to_snapshot      = true
  auto_minor_version_upgrade = true
  deletion_protection        = var.deletion_protection
  skip_final_snapshot        = var.skip_final_snapshot
  final_snapshot_identifier  = var.skip_final_snapshot ? null : "${var.name}-final-${terraform_data.final_snapshot_suffix.output}"
}

# The final snapshot's name carries the time of the stack's first apply, so each deploy-destroy
# cycle leaves a snapshot of its own name and the next cycle's destroy does not fail on the
# last one's. ignore_changes keeps the first value for the stack's whole life.
resource "terraform_data" "final_snapshot_suffix" {
  input = formatdate("YYYYMMDDhhmmss", timestamp())
  lifecycle {
    ignore_changes = [input]
  }
}

output "final_snapshot" {
  description = "The snapshot RDS keeps when the stack is destroyed; empty with skip_final_snapshot."
  value       = aws_db_instance.this.final_snapshot_identifier == null ? "" : aws_db_instance.this.final_snapshot_identifier
}

# The application role's password: generated by Secrets Manager during apply and written
# write-only, so neither it nor the plan ever holds it. Bump secret_string_wo_version to rotate
# (then invoke the migrate function, which sets the role's password from the secret).
ephemeral "aws_secretsmanager_random_password" "app" {
  count               = var.proxy ? 1 : 0
  password_length     = 40
  exclude_punctuation = true
}

resource "aws_secretsmanager_secret" "app" {
  count                   = var.proxy ? 1 : 0
  name                    = "${var.name}-db-${var.app_username}"
  description             = "Password of the crawlq application role; RDS Proxy and the migrate function read it"
  recovery_window_in_days = 0 # destroy and re-deploy under the same name must work
}

resource "aws_secretsmanager_secret_version" "app" {
  count     = var.proxy ? 1 : 0
  secret_id = aws_secretsmanager_secret.app[0].id
  secret_string_wo = jsonencode({
    username = var.app_username
    password = ephemeral.aws_secretsmanager_random_password.app[0].random_password
  })
  secret_string_wo_version = 1
}

data "aws_iam_policy_document" "proxy_assume" {
  count = var.proxy ? 1 : 0
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["rds.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "proxy" {
  count              = var.proxy ? 1 : 0
  name               = "${var.name}-db-proxy"
  assume_role_policy = data.aws_iam_policy_document.proxy_assume[0].json
}

data "aws_iam_policy_document" "proxy" {
  count = var.proxy ? 1 : 0
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [aws_db_instance.this.master_user_secret[0].secret_arn, aws_secretsmanager_secret.app[0].arn]
  }
}

resource "aws_iam_role_policy" "proxy" {
  count  = var.proxy ? 1 : 0
  name   = "read-db-secret"
  role   = aws_iam_role.proxy[0].id
  policy = data.aws_iam_policy_document.proxy[0].json
}

resource "aws_db_proxy" "this" {
  count                  = var.proxy ? 1 : 0
  name                   = var.name
  engine_family          = "POSTGRESQL"
  role_arn               = aws_iam_role.proxy[0].arn
  vpc_subnet_ids         = var.subnet_ids
  vpc_security_group_ids = [aws_security_group.proxy[0].id]
  require_tls            = true
  idle_client_timeout    = 1800

  # The master user: only the migrate function (IAM auth, rds-db:connect on this user).
  auth {
    auth_scheme = "SECRETS"
    iam_auth    = "REQUIRED"
    secret_arn  = aws_db_instance.this.master_user_secret[0].secret_arn
    description = "master user: migrations only"
  }
  # The application role: the functions and runners.
  auth {
    auth_scheme = "SECRETS"
    iam_auth    = "REQUIRED"
    secret_arn  = aws_secretsmanager_secret.app[0].arn
    description = "application role"
  }

  depends_on = [aws_secretsmanager_secret_version.app]
}

resource "aws_db_proxy_default_target_group" "this" {
  count         = var.proxy ? 1 : 0
  db_proxy_name = aws_db_proxy.this[0].name

  connection_pool_config {
    max_connections_percent      = 90
    max_idle_connections_percent = 50
    connection_borrow_timeout    = 120
  }
}

resource "aws_db_proxy_target" "this" {
  count                  = var.proxy ? 1 : 0
  db_proxy_name          = aws_db_proxy.this[0].name
  target_group_name      = aws_db_proxy_default_target_group.this[0].name
  db_instance_identifier = aws_db_instance.this.identifier
}

output "endpoint" {
  description = "Where clients connect: the proxy's endpoint, or the instance's address without it."
  value       = var.proxy ? aws_db_proxy.this[0].endpoint : aws_db_instance.this.address
}

output "proxy_name" {
  description = "The proxy's name; empty without it."
  value       = var.proxy ? aws_db_proxy.this[0].name : ""
}

output "connect_resource_id" {
  description = "The id that rds-db:connect ARNs name: the proxy's prx-..., or the instance's db-... without it."
  value       = var.proxy ? element(split(":", aws_db_proxy.this[0].arn), 6) : aws_db_instance.this.resource_id
}

output "secret_arn" {
  description = "The master user's secret (managed by RDS); the proxy reads it, or without it the migrate function."
  value       = aws_db_instance.this.master_user_secret[0].secret_arn
}

output "app_secret_arn" {
  description = "The application role's secret (the proxy and the migrate function read it); empty without the proxy."
  value       = var.proxy ? aws_secretsmanager_secret.app[0].arn : ""
}

output "instance_id" {
  value = aws_db_instance.this.identifier
}

output "instance_address" {
  value = aws_db_instance.this.address
}

# The proxy's resources became optional (var.proxy); a stack deployed before keeps them.
moved {
  from = aws_security_group.proxy
  to   = aws_security_group.proxy[0]
}
moved {
  from = aws_vpc_security_group_ingress_rule.proxy_from_clients
  to   = aws_vpc_security_group_ingress_rule.proxy_from_clients[0]
}
moved {
  from = aws_vpc_security_group_egress_rule.proxy_to_db
  to   = aws_vpc_security_group_egress_rule.proxy_to_db[0]
}
moved {
  from = aws_vpc_security_group_ingress_rule.db_from_proxy
  to   = aws_vpc_security_group_ingress_rule.db_from_proxy[0]
}
moved {
  from = aws_vpc_security_group_ingress_rule.proxy_from_runners
  to   = aws_vpc_security_group_ingress_rule.proxy_from_runners[0]
}
moved {
  from = aws_secretsmanager_secret.app
  to   = aws_secretsmanager_secret.app[0]
}
moved {
  from = aws_secretsmanager_secret_version.app
  to   = aws_secretsmanager_secret_version.app[0]
}
moved {
  from = aws_iam_role.proxy
  to   = aws_iam_role.proxy[0]
}
moved {
  from = aws_iam_role_policy.proxy
  to   = aws_iam_role_policy.proxy[0]
}
moved {
  from = aws_db_proxy.this
  to   = aws_db_proxy.this[0]
}
moved {
  from = aws_db_proxy_default_target_group.this
  to   = aws_db_proxy_default_target_group.this[0]
}
moved {
  from = aws_db_proxy_target.this
  to   = aws_db_proxy_target.this[0]
}
