variable "region" {
  description = "AWS region to deploy into."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Prefix of every resource name (functions are <name>-api, <name>-worker, ...)."
  type        = string
  default     = "crawlq"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,30}$", var.name))
    error_message = "name must be 2-31 lowercase letters, digits or dashes, starting with a letter."
  }
}

variable "aws_endpoint" {
  description = "Endpoint of a local AWS emulator (LocalStack, moto), e.g. http://127.0.0.1:4566. Empty means real AWS."
  type        = string
  default     = ""
}

variable "emulator_workarounds" {
  description = <<-EOT
    Only for a local emulator (moto), never for real AWS. moto reads back two things differently
    from AWS, so a second plan would never be empty, and applies one policy differently; true
    leaves exactly these out:
    - the RDS parameter group's parameters (moto's DescribeDBParameters omits each parameter's
      Source, and the provider only keeps parameters whose Source is "user");
    - descriptions of security group rules that reference another security group (moto drops them);
    - the code bucket's TLS-only policy (moto applies a bucket policy's Deny without its
      aws:SecureTransport condition, so on its plain-HTTP endpoint it would refuse Terraform's own
      upload and reads of the functions' zips).
    Everything else is the same module that deploys to AWS.
  EOT
  type        = bool
  default     = false
}

variable "tags" {
  description = "Extra tags for every resource."
  type        = map(string)
  default     = {}
}

variable "build_dir" {
  description = "Folder holding the Lambda zips api.zip, worker.zip, dispatch.zip, metrics.zip and migrate.zip (relative to the root module or absolute)."
  type        = string
  default     = "../build"
}

variable "image_tag" {
  description = "Tag of the runner image in the stack's ECR repository (ignored when runner_image is set)."
  type        = string
  default     = "latest"
}

variable "runner_image" {
  description = <<-EOT
    Full reference of the runner image (for example a team's own image with the runner layered
    on by `crawlq image --base`, pushed to their registry). Empty: this stack's ECR repository
    at image_tag, which `crawlq deploy` pushes to. The task's execution role can pull only from
    this stack's repository; grant it pull rights when the image lives elsewhere.
  EOT
  type        = string
  default     = ""
}

variable "log_level" {
  description = "CRAWLQ_LOG_LEVEL for every function and the runner."
  type        = string
  default     = "info"
}

variable "log_retention_days" {
  description = "Retention of the Lambda and ECS log groups."
  type        = number
  default     = 30
}

# --- network ---

variable "vpc_cidr" {
  description = "CIDR block of the VPC."
  type        = string
  default     = "10.42.0.0/16"
}

variable "az_count" {
  description = "Number of availability zones (public + private subnet in each)."
  type        = number
  default     = 2
}

variable "nat" {
  description = <<-EOT
    How the functions in the private subnets reach the internet (AWS APIs; pages, when Lambdas
    crawl):
    - "auto" (default): "instance" when no Lambda crawls (crawl_runtime "fargate" and
      crawl_lambda_burst 0), else "gateway";
    - "instance": one t4g.nano NAT instance ($7.36 a month with its address, against $36.50 for
      a NAT gateway): enough for the functions' AWS calls, with EC2's automatic recovery after a
      host failure and an alarm on its status checks, but one instance in one zone: while it is
      down or rebooting for a patch, dispatch cannot start tasks and the api cannot create
      schedules (the runners keep crawling; docs/cost.md);
    - "gateway": managed NAT gateways (single_nat_gateway), highly available within a zone and
      scaling to 100 Gbps.
  EOT
  type        = string
  default     = "auto"

  validation {
    condition     = contains(["auto", "instance", "gateway"], var.nat)
    error_message = "nat must be \"auto\", \"instance\" or \"gateway\"."
  }
}

variable "nat_instance_type" {
  description = "Instance type of the NAT instance (an arm64 type: the AMI is Graviton's)."
  type        = string
  default     = "t4g.nano"
}

variable "single_nat_gateway" {
  description = "With NAT gateways: one for all private subnets (cheaper); false puts one in every zone (zone-failure tolerant)."
  type        = bool
  default     = true
}

# --- database ---

variable "db_proxy" {
  description = <<-EOT
    Whether clients reach PostgreSQL through RDS Proxy:
    - "auto" (default): only when a Lambda crawls (crawl_runtime "lambda" or crawl_lambda_burst
      above 0: hundreds of short-lived connections need pooling). Otherwise the functions and
      runners connect to the instance itself with IAM auth (the application role is granted
      rds_iam and has no password), each runner task with at most runner_db_connections
      connections, and a plan fails if the tasks' connections could exceed what the instance
      class serves. Saves $21.90 a month and the application role's secret (docs/cost.md);
    - "on": RDS Proxy in front of the instance (IAM auth at the proxy, which logs in with the
      application role's password secret), pooling connections and holding clients' connections
      through a failover.
  EOT
  type        = string
  default     = "auto"

  validation {
    condition     = contains(["auto", "on"], var.db_proxy)
    error_message = "db_proxy must be \"auto\" or \"on\"."
  }
}

variable "runner_db_connections" {
  description = "Without RDS Proxy: the most database connections each runner task opens (CRAWLQ_DB_MAX_CONNS). With the proxy the runner's own default (20) applies."
  type        = number
  default     = 4

  validation {
    condition     = var.runner_db_connections >= 2 && floor(var.runner_db_connections) == var.runner_db_connections
    error_message = "runner_db_connections must be a whole number, at least 2."
  }
}

variable "db_instance_class" {
  description = <<-EOT
    RDS instance class. db.t4g.small (default) has the CPU of db.t4g.medium (2 burstable vCPUs,
    the same baseline) and half its memory (2 GiB): about 190 server connections and a smaller
    cache of the jobs table. Raise it when the RDS CPU alarm fires or reads go to disk
    (docs/cost.md).
  EOT
  type        = string
  default     = "db.t4g.small"
}

variable "db_allocated_storage" {
  description = "RDS storage in GiB."
  type        = number
  default     = 50
}

variable "db_engine_version" {
  description = "PostgreSQL major version (must match the parameter group family)."
  type        = string
  default     = "16"
}

variable "db_name" {
  description = "Database name."
  type        = string
  default     = "crawlq"
}

variable "db_username" {
  description = "Master user; RDS keeps its password in Secrets Manager, the proxy uses it, only the migrate function connects as it."
  type        = string
  default     = "crawlq"
}

variable "db_backup_retention_days" {
  description = "Days of automated RDS backups."
  type        = number
  default     = 7
}

variable "db_multi_az" {
  description = "Run RDS Multi-AZ."
  type        = bool
  default     = false
}

variable "db_deletion_protection" {
  description = <<-EOT
    Refuse to delete the database. `crawlq destroy` checks the deployed stack first and, while
    this is on, refuses before deleting anything and prints the command that turns it off
    (`crawlq deploy --var db_deletion_protection=false`).
  EOT
  type        = bool
  default     = true
}

variable "db_skip_final_snapshot" {
  description = "Delete the database without a final snapshot (<name>-final); keep false for real data."
  type        = bool
  default     = false
}

# --- functions ---

# Reserved concurrency is off by default: AWS keeps 100 units of an account's concurrency
# unreserved, so a new account (whose quota starts at 10) rejects any reservation, and the apply
# with it. Reserve only where the account's quota leaves room (docs/operations.md, "Quotas").

variable "api_reserved_concurrency" {
  description = "Reserved concurrency of the api function; null (default) reserves none."
  type        = number
  default     = null
}

variable "worker_reserved_concurrency" {
  description = "Reserved concurrency of the worker function; null (default) reserves none. Also CRAWLQ_WORKER_MAX unless worker_max is set."
  type        = number
  default     = null
}

variable "reserve_singleton_concurrency" {
  description = "Reserve 1 unit of concurrency each for dispatch, metrics and migrate (one at a time: cheap, and obvious); false (default) relies on dispatch's lease and migrate's lock alone."
  type        = bool
  default     = false
}

variable "worker_max" {
  description = "CRAWLQ_WORKER_MAX: most concurrent worker invocations dispatch starts; 0 means worker_reserved_concurrency, or 50 when that is null."
  type        = number
  default     = 0
}

variable "worker_timeout" {
  description = "Timeout of the worker function in seconds."
  type        = number
  default     = 300
}

variable "worker_memory" {
  description = "Memory of the worker function in MB."
  type        = number
  default     = 512
}

# --- storage ---

variable "items_noncurrent_days" {
  description = "Days an overwritten or deleted item version stays in the bucket before it expires."
  type        = number
  default     = 30
}

# --- ECS ---

variable "crawl_runtime" {
  description = <<-EOT
    Where the crawl queue's jobs run (CRAWLQ_CRAWL_RUNTIME):
    - "fargate" (default): runner tasks on Fargate Spot in the public subnets, fetching through
      the internet gateway (free inbound data): about $0.33 per million 100 KB pages;
    - "lambda": worker Lambdas in the private subnets, where every fetched byte pays NAT
      processing and, from the zones without the NAT gateway, cross-zone transfer: about $6.27.
    `crawlq cost` prints both, term by term. Spiders declared `runtime: ecs` and command spiders
    run on the runner fleet either way.
  EOT
  type        = string
  default     = "fargate"

  validation {
    condition     = contains(["fargate", "lambda"], var.crawl_runtime)
    error_message = "crawl_runtime must be \"fargate\" or \"lambda\"."
  }
}

variable "runner_items_to_s3" {
  description = "The runner tasks write items to the items bucket under items/ (at least once, read back once each by the Scrapyd API's /items; `crawlq items` exports only items in Postgres), as the worker does, and failed rendered pages' files under artifacts/; false writes both to Postgres, where nothing deletes items and RDS storage grows with every page (docs/cost.md)."
  type        = bool
  default     = true
}

variable "crawl_max_tasks" {
  description = "CRAWLQ_ECS_CRAWL_MAX_TASKS: most runner tasks working the crawl queue (crawl_runtime = \"fargate\")."
  type        = number
  default     = 20
}

variable "crawl_lambda_burst" {
  description = <<-EOT
    CRAWLQ_CRAWL_LAMBDA_BURST (crawl_runtime = "fargate"): most worker Lambdas that work the crawl
    queue while its runner tasks do not cover the backlog, so a small run starts within a second
    instead of after a task's start (30-60 s), and a backlog beyond crawl_max_tasks gets help.
    Pages those Lambdas fetch pay NAT processing (see crawl_runtime). 0 turns bursting off.
  EOT
  type        = number
  default     = 0

  validation {
    condition     = var.crawl_lambda_burst >= 0 && floor(var.crawl_lambda_burst) == var.crawl_lambda_burst
    error_message = "crawl_lambda_burst must be a whole number, 0 or more."
  }
}

variable "crawl_concurrency" {
  description = "CRAWLQ_ECS_CRAWL_CONCURRENCY: crawl jobs each crawl-queue runner task works at once (about a page a second each: the task's crawl rate, which `crawlq cost` prices)."
  type        = number
  default     = 50
}

variable "runner_cpu" {
  description = "Fargate CPU units of a runner task."
  type        = number
  default     = 1024
}

variable "runner_memory" {
  description = "Fargate memory (MiB) of a runner task."
  type        = number
  default     = 2048
}

variable "ecs_max_tasks" {
  description = "CRAWLQ_ECS_MAX_TASKS: most runner tasks dispatch keeps running."
  type        = number
  default     = 10
}

variable "container_insights" {
  description = "Enable ECS Container Insights: 22 more CloudWatch metrics ($6.60 a month), the dashboard's running-task count and the tasks' CPU and memory. Off by default (docs/cost.md)."
  type        = bool
  default     = false
}

# --- observability ---

variable "metrics_namespace" {
  description = "CloudWatch namespace the metrics function writes to."
  type        = string
  default     = "crawlq"
}

variable "metrics_per_spider" {
  description = <<-EOT
    CRAWLQ_METRICS_PER_SPIDER: write crawlq's spider and monitor metrics per spider (dimension
    Spider): 13 CloudWatch metrics a spider, $3.90 a month each ($39 for 10 spiders). false
    (default) writes them as totals over every spider, 13 metrics in all: the dashboard graphs
    the totals, the monitor alarms are per monitor kind either way, and every EMF line still
    names its spider, so CloudWatch Logs Insights breaks the totals down (docs/cost.md).
  EOT
  type        = bool
  default     = false
}

variable "alarm_email" {
  description = "Email subscribed to the alarm topic. `crawlq deploy` refuses an empty one unless --allow-no-alarm-email is given (alarms would reach nobody)."
  type        = string
  default     = ""
}

variable "alarm_oldest_past_due_seconds" {
  description = "Alarm when the oldest past-due job of any queue has waited longer than this."
  type        = number
  default     = 600
}

variable "alarm_rds_cpu_percent" {
  description = "Alarm when RDS CPU stays above this percentage."
  type        = number
  default     = 80
}

variable "alarm_lambda_errors" {
  description = "Alarm when a function has more errors than this in 5 minutes."
  type        = number
  default     = 0
}

# --- storage over time (internal/maintain; see docs/operations.md, "Maintenance") ---

variable "maintain" {
  description = "CRAWLQ_MAINTAIN: automatic maintenance (retention) in the dispatch tick and in runners; false turns it off."
  type        = bool
  default     = true
}

variable "retain_succeeded" {
  description = "CRAWLQ_RETAIN_SUCCEEDED: how long succeeded jobs are kept after they finished (a Go duration, at least 1m)."
  type        = string
  default     = "24h"
  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(h|m|s))+$", var.retain_succeeded))
    error_message = "retain_succeeded must be a Go duration such as 24h or 90m."
  }
}

variable "retain_cancelled" {
  description = "CRAWLQ_RETAIN_CANCELLED: how long cancelled jobs are kept after they finished (a Go duration, at least 1m)."
  type        = string
  default     = "24h"
  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(h|m|s))+$", var.retain_cancelled))
    error_message = "retain_cancelled must be a Go duration such as 24h or 90m."
  }
}

variable "retain_dead" {
  description = "CRAWLQ_RETAIN_DEAD: how long dead jobs are kept for redrive; a run keeps its URL once keys while it has any (a Go duration, at least 1m)."
  type        = string
  default     = "168h"
  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(h|m|s))+$", var.retain_dead))
    error_message = "retain_dead must be a Go duration such as 168h."
  }
}

variable "retain_run_data" {
  description = "CRAWLQ_RETAIN_RUN_DATA: how long after a run finished its once keys, robots.txt copies and stat rows are kept (runs without dead jobs; a Go duration, at least 1m)."
  type        = string
  default     = "24h"
  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(h|m|s))+$", var.retain_run_data))
    error_message = "retain_run_data must be a Go duration such as 24h."
  }
}

variable "retain_idle_hosts" {
  description = "CRAWLQ_RETAIN_IDLE_HOSTS: how long a host's politeness row is kept after its last request (a Go duration, at least 1h)."
  type        = string
  default     = "24h"
  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(h|m|s))+$", var.retain_idle_hosts))
    error_message = "retain_idle_hosts must be a Go duration such as 24h."
  }
}
