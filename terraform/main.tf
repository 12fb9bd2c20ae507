# crawlq on AWS: a VPC, PostgreSQL (behind RDS Proxy when a Lambda crawls), five Lambda functions (api, worker,
# dispatch, metrics, migrate), EventBridge Scheduler, an ECS Fargate runner fleet in public
# subnets, an items bucket and CloudWatch dashboard + alarms.
#
# Names and environment variables here are the contract the Go code reads (see
# internal/awsx, internal/db, internal/dispatch); change them together.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  account   = data.aws_caller_identity.current.account_id
  partition = data.aws_partition.current.partition
  region    = data.aws_region.current.name

  functions = ["api", "worker", "dispatch", "metrics", "migrate"]
  # ARNs are built from names, not read from the functions, so the scheduler role and the
  # environment can refer to them without a dependency cycle.
  function_names = { for f in local.functions : f => "${var.name}-${f}" }
  function_arns  = { for f, n in local.function_names : f => "arn:${local.partition}:lambda:${local.region}:${local.account}:function:${n}" }

  runner_family    = "${var.name}-runner"
  runner_container = "runner"

  # The application role every function but migrate and every runner connects as. Migration
  # 0007 (internal/migrate/migrations) creates it under exactly this name.
  app_username = "crawlq_app"

  # The group of per-run log streams (runlogs.tf), a name here so the environment does not
  # depend on the group resource.
  run_log_group = "/${var.name}/runs"

  # Whether a Lambda crawls: hundreds of short-lived connections, and pages through NAT.
  lambda_crawls = var.crawl_runtime != "fargate" || var.crawl_lambda_burst != 0
  # The NAT instance when nothing but the functions' AWS calls passes NAT (variable "nat").
  nat_instance = var.nat == "instance" || (var.nat == "auto" && !local.lambda_crawls)
  # RDS Proxy when asked or when a Lambda crawls (variable "db_proxy").
  db_proxy = var.db_proxy == "on" || local.lambda_crawls

  # Without the proxy, the tasks' connections go to the instance itself: the runner tasks
  # (crawl_max_tasks + ecs_max_tasks) at runner_db_connections each, and a reserve for the
  # functions (api, dispatch, metrics, migrate: a few each) must fit in what the class serves.
  # RDS PostgreSQL's max_connections is LEAST(DBInstanceClassMemory / 9531392, 5000); the memory
  # RDS leaves the engine is below the class's, so count 80% of it.
  db_class_memory_gib = {
    "db.t4g.micro"  = 1, "db.t4g.small" = 2, "db.t4g.medium" = 4, "db.t4g.large" = 8,
    "db.t4g.xlarge" = 16, "db.t4g.2xlarge" = 32, "db.m7g.large" = 8, "db.m7g.xlarge" = 16,
    "db.r7g.large"  = 16, "db.r7g.xlarge" = 32,
  }
  db_max_connections    = floor(lookup(local.db_class_memory_gib, var.db_instance_class, 2) * 1073741824 / 9531392 * 0.8)
  db_function_reserve   = 40
  db_runner_connections = (var.crawl_max_tasks + var.ecs_max_tasks) * var.runner_db_connections

  environment = merge({
    CRAWLQ_DB_HOST             = module.database.endpoint
    CRAWLQ_DB_PORT             = "5432"
    CRAWLQ_DB_NAME             = var.db_name
    CRAWLQ_DB_USER             = local.app_username
    CRAWLQ_DB_IAM_AUTH         = "true"
    CRAWLQ_DB_EXEC_MODE        = "exec"
    CRAWLQ_ITEMS_BUCKET        = module.storage.bucket
    CRAWLQ_WORKER_FUNCTION     = local.function_names["worker"]
    CRAWLQ_DISPATCH_FUNCTION   = local.function_names["dispatch"]
    CRAWLQ_API_FUNCTION_ARN    = local.function_arns["api"]
    CRAWLQ_SCHEDULE_GROUP      = var.name
    CRAWLQ_SCHEDULER_ROLE_ARN  = module.scheduler.role_arn
    CRAWLQ_ECS_CLUSTER         = module.ecs.cluster_name
    CRAWLQ_ECS_TASK_DEFINITION = local.runner_family
    # Runner tasks: public subnets, public IPs, a security group without inbound rules.
    CRAWLQ_ECS_SUBNETS          = join(",", module.network.public_subnet_ids)
    CRAWLQ_ECS_SECURITY_GROUPS  = module.network.runner_security_group_id
    CRAWLQ_ECS_ASSIGN_PUBLIC_IP = "true"
    CRAWLQ_ECS_MAX_TASKS        = tostring(var.ecs_max_tasks)
    CRAWLQ_ECS_CONTAINER        = local.runner_container
    CRAWLQ_WORKER_MAX           = tostring(var.worker_max > 0 ? var.worker_max : coalesce(var.worker_reserved_concurrency, 50))
    CRAWLQ_METRICS_NAMESPACE    = var.metrics_namespace
    CRAWLQ_METRICS_PER_SPIDER   = tostring(var.metrics_per_spider)
    CRAWLQ_LOG_LEVEL            = var.log_level
    # Where the crawl queue runs: runner tasks (fargate) or worker Lambdas (lambda).
    CRAWLQ_CRAWL_RUNTIME         = var.crawl_runtime
    CRAWLQ_ECS_CRAWL_MAX_TASKS   = tostring(var.crawl_max_tasks)
    CRAWLQ_ECS_CRAWL_CONCURRENCY = tostring(var.crawl_concurrency)
    CRAWLQ_CRAWL_LAMBDA_BURST    = tostring(var.crawl_lambda_burst)
    # Automatic maintenance in the dispatch tick (internal/maintain).
    CRAWLQ_MAINTAIN          = var.maintain ? "on" : "off"
    CRAWLQ_RETAIN_SUCCEEDED  = var.retain_succeeded
    CRAWLQ_RETAIN_CANCELLED  = var.retain_cancelled
    CRAWLQ_RETAIN_DEAD       = var.retain_dead
    CRAWLQ_RETAIN_RUN_DATA   = var.retain_run_data
    CRAWLQ_RETAIN_IDLE_HOSTS = var.retain_idle_hosts
    CRAWLQ_RUN_LOG_GROUP     = local.run_log_group
    # Run events (events.tf): named for the runners, whose CLI publishes nowhere by default.
    CRAWLQ_EVENT_BUS = "default"
    },
    # An emulator's RDS serves no certificate to verify; on AWS, TLS is verify-full (internal/db).
    local.emulated ? { CRAWLQ_DB_TLS = "false" } : {},
    # The instance's certificate chains to the RDS roots, which no system trust store holds
    # (RDS Proxy's chains to Amazon's public roots): each process fetches the region's bundle
    # from AWS's trust store over HTTPS at start-up (not with CRAWLQ_DB_TLS=false).
    local.db_proxy ? {} : { CRAWLQ_DB_CA_URL = "https://truststore.pki.rds.amazonaws.com/${local.region}/${local.region}-bundle.pem" },
  )
  # What the runner tasks get besides: their connection cap without the proxy, and no items
  # bucket when their items go to Postgres.
  runner_environment = merge(
    { for k, v in local.environment : k => v if var.runner_items_to_s3 || k != "CRAWLQ_ITEMS_BUCKET" },
    local.db_proxy ? {} : { CRAWLQ_DB_MAX_CONNS = tostring(var.runner_db_connections) },
  )
}

# Without the proxy, a plan whose runner tasks could open more connections than the instance
# serves fails here, naming the variables, instead of refusing connections under load.
resource "terraform_data" "db_connection_budget" {
  input = local.db_proxy ? 0 : local.db_runner_connections + local.db_function_reserve

  lifecycle {
    precondition {
      condition     = local.db_proxy || local.db_runner_connections + local.db_function_reserve <= local.db_max_connections
      error_message = "Without RDS Proxy, (crawl_max_tasks + ecs_max_tasks) x runner_db_connections = ${local.db_runner_connections} connections, plus ${local.db_function_reserve} for the functions, exceed the ${local.db_max_connections} that ${var.db_instance_class} serves: lower them, pick a larger db_instance_class, or set db_proxy = \"on\"."
    }
  }
}

module "network" {
  source = "./modules/network"

  name               = var.name
  cidr               = var.vpc_cidr
  az_count           = var.az_count
  single_nat_gateway = var.single_nat_gateway
  nat_instance       = local.nat_instance
  nat_instance_type  = var.nat_instance_type
}

module "storage" {
  source = "./modules/storage"

  name                 = var.name
  account              = local.account
  noncurrent_days      = var.items_noncurrent_days
  emulator_workarounds = var.emulator_workarounds
}

module "database" {
  source = "./modules/database"

  name                  = var.name
  vpc_id                = module.network.vpc_id
  subnet_ids            = module.network.private_subnet_ids
  client_security_group = module.network.app_security_group_id
  instance_class        = var.db_instance_class
  allocated_storage     = var.db_allocated_storage
  engine_version        = var.db_engine_version
  db_name               = var.db_name
  username              = var.db_username
  app_username          = local.app_username
  runner_security_group = module.network.runner_security_group_id
  backup_retention_days = var.db_backup_retention_days
  multi_az              = var.db_multi_az
  proxy                 = local.db_proxy
  deletion_protection   = var.db_deletion_protection
  skip_final_snapshot   = var.db_skip_final_snapshot
  emulator_workarounds  = var.emulator_workarounds
}

module "ecs" {
  source = "./modules/ecs"

  name               = var.name
  family             = local.runner_family
  container_name     = local.runner_container
  image_tag          = var.image_tag
  image              = var.runner_image
  cpu                = var.runner_cpu
  memory             = var.runner_memory
  environment        = local.runner_environment
  log_retention_days = var.log_retention_days
  container_insights = var.container_insights
  access_policy_json = data.aws_iam_policy_document.runner.json
}

module "functions" {
  source = "./modules/functions"

  name               = var.name
  build_dir          = abspath(var.build_dir)
  code_bucket        = module.storage.code_bucket
  subnet_ids         = module.network.private_subnet_ids
  security_group_ids = [module.network.app_security_group_id]
  environment        = local.environment
  environment_overrides = {
    api = var.scrapyd_api ? { CRAWLQ_SCRAPYD_SECRET_ARN = aws_secretsmanager_secret.scrapyd[0].arn } : {}
    # With the proxy: the master user by IAM at the proxy, and the application role's password
    # from its secret. Without: the master user's password from its RDS-managed secret, and the
    # application role granted rds_iam (IAM tokens its only login).
    migrate = local.db_proxy ? tomap({
      CRAWLQ_DB_USER           = var.db_username
      CRAWLQ_DB_APP_USER       = local.app_username
      CRAWLQ_DB_APP_SECRET_ARN = module.database.app_secret_arn
      }) : tomap({
      CRAWLQ_DB_USER       = var.db_username
      CRAWLQ_DB_IAM_AUTH   = "false"
      CRAWLQ_DB_SECRET_ARN = module.database.secret_arn
      CRAWLQ_DB_APP_USER   = local.app_username
      CRAWLQ_DB_APP_IAM    = "true"
    })
  }
  log_retention_days    = var.log_retention_days
  db_access_policy_json = data.aws_iam_policy_document.db_app.json
  items_policy_json     = data.aws_iam_policy_document.items.json
  api_items_policy_json = data.aws_iam_policy_document.api_items.json
  migrate_policy_json   = data.aws_iam_policy_document.migrate.json
  function_arns         = local.function_arns

  # One tick at a time when asked: dispatch's own lease makes overlap safe, this makes it
  # cheap; migrations take a lock anyway.
  reserved_concurrency = {
    api      = var.api_reserved_concurrency
    worker   = var.worker_reserved_concurrency
    dispatch = var.reserve_singleton_concurrency ? 1 : null
    metrics  = var.reserve_singleton_concurrency ? 1 : null
    migrate  = var.reserve_singleton_concurrency ? 1 : null
  }
  timeouts = { api = 30, worker = var.worker_timeout, dispatch = 60, metrics = 60, migrate = 300 }
  memory   = { api = 256, worker = var.worker_memory, dispatch = 256, metrics = 256, migrate = 256 }

  schedule_arn_pattern = "arn:${local.partition}:scheduler:${local.region}:${local.account}:schedule/${var.name}/*"
  scheduler_role_arn   = module.scheduler.role_arn
  ecs_cluster_arn      = module.ecs.cluster_arn
  ecs_task_def_arn     = module.ecs.task_definition_family_arn
  ecs_pass_role_arns   = module.ecs.role_arns
}

# Migrations are their own step: the migrate function (master user, through the proxy) brings
# the schema up to date and gives the application role its login, before the minute ticks
# exist. It runs again whenever its code (which embeds the migrations) changes. A failed
# migration fails the apply, loudly.
resource "aws_lambda_invocation" "migrate" {
  function_name = module.functions.names["migrate"]
  input         = jsonencode({ source = "deploy" })
  triggers = {
    code = module.functions.source_code_hashes["migrate"]
  }

  depends_on = [module.database]
}

module "scheduler" {
  source = "./modules/scheduler"

  name          = var.name
  group_name    = var.name
  account       = local.account
  function_arns = local.function_arns
  # The schedules target the functions themselves, so they wait for them to exist.
  dispatch_arn = module.functions.arns["dispatch"]
  metrics_arn  = module.functions.arns["metrics"]
  # The ticks start work, so they wait for the schema.
  migrated = aws_lambda_invocation.migrate.result
}

module "observability" {
  source = "./modules/observability"

  name                      = var.name
  region                    = local.region
  account                   = local.account
  partition                 = local.partition
  namespace                 = var.metrics_namespace
  metrics_per_spider        = var.metrics_per_spider
  function_names            = module.functions.names
  cluster_name              = module.ecs.cluster_name
  container_insights        = var.container_insights
  nat_instance              = local.nat_instance
  nat_instance_id           = module.network.nat_instance_id
  db_instance_id            = module.database.instance_id
  db_proxy_name             = module.database.proxy_name
  alarm_email               = var.alarm_email
  oldest_past_due_threshold = var.alarm_oldest_past_due_seconds
  rds_cpu_threshold         = var.alarm_rds_cpu_percent
  lambda_errors_threshold   = var.alarm_lambda_errors
}

# Connect to the database (the proxy, or the instance without it) as the application role:
# every function but migrate, and the runner. No function and no runner can read a database
# secret.
data "aws_iam_policy_document" "db_app" {
  statement {
    sid       = "ConnectAsAppRole"
    actions   = ["rds-db:connect"]
    resources = ["arn:${local.partition}:rds-db:${local.region}:${local.account}:dbuser:${module.database.connect_resource_id}/${local.app_username}"]
  }
}

# The runner: connect as the application role, and with runner_items_to_s3 write its items
# under items/ and keep the screenshots and HTML of failed rendered pages under artifacts/
# (internal/artifact.Prefix); nothing else of the bucket (no read, list or delete).
data "aws_iam_policy_document" "runner" {
  source_policy_documents = [data.aws_iam_policy_document.db_app.json]
  # With runner_items_to_s3 (the runner is told the bucket): its items, and failed pages' files.
  dynamic "statement" {
    for_each = var.runner_items_to_s3 ? [1] : []
    content {
      sid       = "WriteItemsAndFailedPages"
      actions   = ["s3:PutObject"]
      resources = ["${module.storage.bucket_arn}/items/*", "${module.storage.bucket_arn}/artifacts/*"]
    }
  }
}

# Read and write items: the worker only.
data "aws_iam_policy_document" "items" {
  statement {
    sid       = "Items"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${module.storage.bucket_arn}/*"]
  }
  statement {
    sid       = "ListItems"
    actions   = ["s3:ListBucket"]
    resources = [module.storage.bucket_arn]
  }
}

# The api: reads items for the Scrapyd API's /items (worker Lambdas write them to the bucket),
# and keeps an answer too large for its function URL under scrapyd-answers/
# (internal/scrapyd.SpillPrefix; they expire after a day) to redirect the client to. It cannot
# change or delete an item.
data "aws_iam_policy_document" "api_items" {
  statement {
    sid       = "ReadItems"
    actions   = ["s3:GetObject"]
    resources = ["${module.storage.bucket_arn}/items/*"]
  }
  statement {
    sid       = "ListItems"
    actions   = ["s3:ListBucket"]
    resources = [module.storage.bucket_arn]
  }
  statement {
    sid       = "KeepLargeAnswers"
    actions   = ["s3:PutObject", "s3:GetObject"]
    resources = ["${module.storage.bucket_arn}/scrapyd-answers/*"]
  }
}

# The migrate function. With the proxy: connect as the master user through it (IAM auth; it
# never reads the master secret) and read the application role's secret to set the role's
# password. Without: read the master user's secret (its only way in) and nothing else.
data "aws_iam_policy_document" "migrate" {
  dynamic "statement" {
    for_each = local.db_proxy ? [1] : []
    content {
      sid       = "ConnectAsMaster"
      actions   = ["rds-db:connect"]
      resources = ["arn:${local.partition}:rds-db:${local.region}:${local.account}:dbuser:${module.database.connect_resource_id}/${var.db_username}"]
    }
  }
  statement {
    sid       = local.db_proxy ? "ReadAppRoleSecret" : "ReadMasterSecret"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [local.db_proxy ? module.database.app_secret_arn : module.database.secret_arn]
  }
}
