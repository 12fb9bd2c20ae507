# Functions: the five Lambda functions (api, worker, dispatch, metrics, migrate), one IAM role
# each with only what that function does, and their log groups. Code comes from
# <build_dir>/<fn>.zip (a `bootstrap` binary for provided.al2023 on arm64), uploaded to the code
# bucket (code.tf).
#
# api, worker, dispatch and metrics connect to the database proxy as the application role;
# only the worker touches the items bucket. migrate connects as the master user (IAM auth
# through the proxy) and reads the application role's secret, to migrate the schema and give
# the role its login; the root module invokes it once per deploy whose code changed.

variable "name" {
  description = "Name prefix; functions are <name>-<fn>."
  type        = string
}

variable "build_dir" {
  description = "Absolute folder holding <fn>.zip for each function."
  type        = string
}

variable "code_bucket" {
  description = "Bucket the zips are uploaded to, for Lambda to read."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets the functions run in."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the functions."
  type        = list(string)
}

variable "environment" {
  description = "CRAWLQ_* environment shared by every function."
  type        = map(string)
}

variable "environment_overrides" {
  description = "Per function, entries replacing or adding to var.environment."
  type        = map(map(string))
  default     = {}
}

variable "log_retention_days" {
  description = "Log group retention."
  type        = number
}

variable "db_access_policy_json" {
  description = "Connect to the database proxy as the application role (every function but migrate)."
  type        = string
}

variable "items_policy_json" {
  description = "Read and write items in the bucket (the worker only)."
  type        = string
}

variable "api_items_policy_json" {
  description = "Read items and keep large answers in the bucket (the api only)."
  type        = string
}

variable "migrate_policy_json" {
  description = "Connect as the master user and read the application role's secret (migrate only)."
  type        = string
}

variable "function_arns" {
  description = "ARNs of the functions by role, computed from their names."
  type        = map(string)
}

variable "reserved_concurrency" {
  description = "Reserved concurrency by function; null reserves none."
  type        = map(number)
}

variable "timeouts" {
  description = "Timeout in seconds by function."
  type        = map(number)
}

variable "memory" {
  description = "Memory in MB by function."
  type        = map(number)
}

variable "schedule_arn_pattern" {
  description = "ARN pattern of the schedules in the crawlq schedule group (arn:...:schedule/<group>/*)."
  type        = string
}

variable "scheduler_role_arn" {
  description = "Role EventBridge Scheduler assumes; api passes it when creating schedules."
  type        = string
}

variable "ecs_cluster_arn" {
  description = "Cluster dispatch starts runner tasks in."
  type        = string
}

variable "ecs_task_def_arn" {
  description = "Runner task definition family ARN (…:task-definition/<family>:*)."
  type        = string
}

variable "ecs_pass_role_arns" {
  description = "Task and execution roles of the runner, which RunTask passes."
  type        = list(string)
}

locals {
  functions = toset(["api", "worker", "dispatch", "metrics", "migrate"])
  task_arns = "${replace(var.ecs_cluster_arn, ":cluster/", ":task/")}/*"
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "fn" {
  for_each           = local.functions
  name               = "${var.name}-${each.key}"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_cloudwatch_log_group" "fn" {
  for_each          = local.functions
  name              = "/aws/lambda/${var.name}-${each.key}"
  retention_in_days = var.log_retention_days
}

data "aws_iam_policy_document" "base" {
  for_each = local.functions
  source_policy_documents = each.key == "migrate" ? [var.migrate_policy_json] : (
    each.key == "worker" ? [var.db_access_policy_json, var.items_policy_json] : (
      each.key == "api" ? [var.db_access_policy_json, var.api_items_policy_json] : [var.db_access_policy_json]
    )
  )

  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.fn[each.key].arn}:*"]
  }
  statement {
    # Lambda manages the function's network interfaces in the VPC through the function role.
    # These EC2 actions have no resource-level permissions (Describe*) or act on interfaces that
    # do not exist yet, so AWS requires "*" here (the same as AWSLambdaVPCAccessExecutionRole).
    sid = "VpcNetworkInterfaces"
    actions = [
      "ec2:CreateNetworkInterface",
      "ec2:DescribeNetworkInterfaces",
      "ec2:DescribeSubnets",
      "ec2:DeleteNetworkInterface",
      "ec2:AssignPrivateIpAddresses",
      "ec2:UnassignPrivateIpAddresses",
    ]
    resources = ["*"]
  }
}

# api: manages recurring runs as schedules in the crawlq group and pokes dispatch after a
# schedule request so work starts before the next minute tick.
data "aws_iam_policy_document" "api" {
  source_policy_documents = [data.aws_iam_policy_document.base["api"].json]

  statement {
    sid = "ManageRunSchedules"
    actions = [
      "scheduler:CreateSchedule",
      "scheduler:UpdateSchedule",
      "scheduler:DeleteSchedule",
      "scheduler:GetSchedule",
    ]
    resources = [var.schedule_arn_pattern]
  }
  statement {
    sid       = "ListRunSchedules"
    actions   = ["scheduler:ListSchedules"]
    resources = ["*"] # ListSchedules has no resource-level permission; it only reads names
  }
  statement {
    sid       = "PassSchedulerRole"
    actions   = ["iam:PassRole"]
    resources = [var.scheduler_role_arn]
    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["scheduler.amazonaws.com"]
    }
  }
  statement {
    sid       = "PokeDispatch"
    actions   = ["lambda:InvokeFunction"]
    resources = [var.function_arns["dispatch"]]
  }
}

# dispatch: fans out to worker invocations and runner tasks.
data "aws_iam_policy_document" "dispatch" {
  source_policy_documents = [data.aws_iam_policy_document.base["dispatch"].json]

  statement {
    sid       = "InvokeWorker"
    actions   = ["lambda:InvokeFunction"]
    resources = [var.function_arns["worker"]]
  }
  statement {
    sid       = "RunRunnerTasks"
    actions   = ["ecs:RunTask"]
    resources = [var.ecs_task_def_arn]
    condition {
      test     = "ArnEquals"
      variable = "ecs:cluster"
      values   = [var.ecs_cluster_arn]
    }
  }
  statement {
    sid       = "ListRunnerTasks"
    actions   = ["ecs:ListTasks"]
    resources = ["*"] # ListTasks is scoped by the condition, not by resource
    condition {
      test     = "ArnEquals"
      variable = "ecs:cluster"
      values   = [var.ecs_cluster_arn]
    }
  }
  statement {
    sid       = "InspectRunnerTasks"
    actions   = ["ecs:DescribeTasks", "ecs:StopTask"]
    resources = [local.task_arns]
  }
  statement {
    sid       = "PassRunnerRoles"
    actions   = ["iam:PassRole"]
    resources = var.ecs_pass_role_arns
    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ecs-tasks.amazonaws.com"]
    }
  }
}

locals {
  policies = {
    api      = data.aws_iam_policy_document.api.json
    worker   = data.aws_iam_policy_document.base["worker"].json
    dispatch = data.aws_iam_policy_document.dispatch.json
    metrics  = data.aws_iam_policy_document.base["metrics"].json
    migrate  = data.aws_iam_policy_document.base["migrate"].json
  }
}

resource "aws_iam_role_policy" "fn" {
  for_each = local.functions
  name     = "${var.name}-${each.key}"
  role     = aws_iam_role.fn[each.key].id
  policy   = local.policies[each.key]
}

resource "aws_lambda_function" "fn" {
  for_each = local.functions

  function_name    = "${var.name}-${each.key}"
  role             = aws_iam_role.fn[each.key].arn
  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  handler          = "bootstrap"
  s3_bucket        = aws_s3_object.code[each.key].bucket
  s3_key           = aws_s3_object.code[each.key].key
  source_code_hash = filebase64sha256(local.zips[each.key])
  timeout          = var.timeouts[each.key]
  memory_size      = var.memory[each.key]

  reserved_concurrent_executions = var.reserved_concurrency[each.key]

  environment {
    variables = merge(var.environment, lookup(var.environment_overrides, each.key, {}))
  }

  vpc_config {
    subnet_ids         = var.subnet_ids
    security_group_ids = var.security_group_ids
  }

  depends_on = [aws_iam_role_policy.fn, aws_cloudwatch_log_group.fn]
}

output "names" {
  value = { for k, f in aws_lambda_function.fn : k => f.function_name }
}

output "source_code_hashes" {
  value = { for k, f in aws_lambda_function.fn : k => f.source_code_hash }
}

output "arns" {
  value = { for k, f in aws_lambda_function.fn : k => f.arn }
}
