# Scheduler: EventBridge Scheduler's role, the schedule group that holds users' recurring
# spider runs (created by the api function, targeting it), and the two minute ticks that drive
# dispatch and metrics.

variable "name" {
  description = "Name prefix."
  type        = string
}

variable "group_name" {
  description = "Schedule group for recurring spider runs (CRAWLQ_SCHEDULE_GROUP)."
  type        = string
}

variable "account" {
  description = "AWS account ID (the role trusts only schedules of this account)."
  type        = string
}

variable "function_arns" {
  description = "ARNs of the functions by role, computed from their names."
  type        = map(string)
}

variable "dispatch_arn" {
  description = "ARN of the dispatch function (from the function itself)."
  type        = string
}

variable "metrics_arn" {
  description = "ARN of the metrics function (from the function itself)."
  type        = string
}

variable "migrated" {
  description = "The migrate invocation's result; the ticks are created only after it."
  type        = string
}

resource "aws_scheduler_schedule_group" "runs" {
  name = var.group_name
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [var.account]
    }
  }
}

resource "aws_iam_role" "scheduler" {
  name               = "${var.name}-scheduler"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

data "aws_iam_policy_document" "invoke" {
  statement {
    sid     = "InvokeScheduledFunctions"
    actions = ["lambda:InvokeFunction"]
    # api for user schedules; dispatch and metrics for the minute ticks. Nothing else.
    resources = [
      var.function_arns["api"],
      var.function_arns["dispatch"],
      var.function_arns["metrics"],
    ]
  }
}

resource "aws_iam_role_policy" "scheduler" {
  name   = "invoke-crawlq"
  role   = aws_iam_role.scheduler.id
  policy = data.aws_iam_policy_document.invoke.json
}

resource "aws_scheduler_schedule" "tick" {
  for_each = {
    dispatch = var.dispatch_arn
    metrics  = var.metrics_arn
  }

  name                = "${var.name}-${each.key}"
  group_name          = "default"
  schedule_expression = "rate(1 minute)"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = each.value
    role_arn = aws_iam_role.scheduler.arn
    input    = jsonencode({ source = "schedule" })

    retry_policy {
      # A missed tick is replaced by the next one a minute later; retrying only piles up.
      maximum_retry_attempts       = 0
      maximum_event_age_in_seconds = 60
    }
  }

  lifecycle {
    # Referencing the migrate result makes each tick wait for the migration step.
    precondition {
      condition     = var.migrated != null
      error_message = "the migrate step has not run"
    }
  }
}

output "group_name" {
  value = aws_scheduler_schedule_group.runs.name
}

output "role_arn" {
  value = aws_iam_role.scheduler.arn
}
