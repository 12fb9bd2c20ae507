# Run events and monitors (internal/events): every run state change goes to the default
# EventBridge bus (source "crawlq", detail-type "Run State Change"), with a MonitorFailed metric
# per judged monitor. Whoever changes a run publishes its events at once (the api after a
# schedule, cancel or redrive; worker Lambdas and runner tasks as their runs start and end), and
# the dispatch tick publishes what is left, so all four may put events. This file is
# self-contained so it merges on its own: the publishing permissions, an example rule sending
# failed runs to the alarm topic, and one alarm per monitor kind. Route other events with more
# rules, e.g. chain a run on another's success with
# detail = { spider = ["a"], outcome = ["succeeded"] } and the api function as target.

locals {
  # internal/spider MonitorKinds(); the Monitor dimension of the MonitorFailed metric.
  monitor_kinds = ["min_items", "max_error_rate", "field_coverage", "items_vs_median"]
  event_bus_arn = "arn:${local.partition}:events:${local.region}:${local.account}:event-bus/default"
}

# The roles that publish run events (the modules' own role names).
locals {
  run_event_publishers = {
    api      = "${var.name}-api"
    worker   = "${var.name}-worker"
    dispatch = "${var.name}-dispatch"
    runner   = "${var.name}-runner-task"
  }
}

data "aws_iam_policy_document" "put_run_events" {
  statement {
    sid       = "PublishRunEvents"
    actions   = ["events:PutEvents"]
    resources = [local.event_bus_arn]
  }
}

resource "aws_iam_role_policy" "put_run_events" {
  for_each = local.run_event_publishers
  name     = "${var.name}-put-run-events"
  role     = each.value
  policy   = data.aws_iam_policy_document.put_run_events.json

  depends_on = [module.ecs, module.functions]
}

# Only dispatch published before; its policy keeps its place in existing states.
moved {
  from = aws_iam_role_policy.dispatch_put_run_events
  to   = aws_iam_role_policy.put_run_events["dispatch"]
}

# Example rule: runs that failed, ended incomplete, or succeeded while a monitor failed go to the
# alarm topic (the event's detail names the run, its stats and the failed monitors).
resource "aws_cloudwatch_event_rule" "run_failures" {
  name        = "${var.name}-run-failures"
  description = "crawlq runs that failed, ended incomplete or failed a monitor"
  event_pattern = jsonencode({
    source        = ["crawlq"]
    "detail-type" = ["Run State Change"]
    detail        = { outcome = ["failed", "incomplete", "monitors_failed"] }
  })
}

resource "aws_cloudwatch_event_target" "run_failures_to_alarms" {
  rule = aws_cloudwatch_event_rule.run_failures.name
  arn  = module.observability.topic_arn
}

# The alarm topic's only policy (it replaces SNS's default one): the account keeps its own
# access, and exactly the two services that publish alerts may publish, each only on behalf of
# this account's own sources (aws:SourceAccount and aws:SourceArn), so no other account's alarm
# or rule can use the topic. The topic's key (modules/observability) lets both services encrypt.
data "aws_iam_policy_document" "alarm_topic" {
  statement {
    sid       = "AccountOwner"
    actions   = ["SNS:Publish", "SNS:Subscribe", "SNS:GetTopicAttributes", "SNS:SetTopicAttributes", "SNS:ListSubscriptionsByTopic"]
    resources = [module.observability.topic_arn]
    principals {
      type        = "AWS"
      identifiers = ["arn:${local.partition}:iam::${local.account}:root"]
    }
  }
  statement {
    # Every alarm of the stack (modules/observability, the monitor alarms below) is named
    # "<name>-...".
    sid       = "CloudWatchAlarms"
    actions   = ["SNS:Publish"]
    resources = [module.observability.topic_arn]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = ["arn:${local.partition}:cloudwatch:${local.region}:${local.account}:alarm:${var.name}-*"]
    }
  }
  statement {
    sid       = "RunEvents"
    actions   = ["SNS:Publish"]
    resources = [module.observability.topic_arn]
    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_cloudwatch_event_rule.run_failures.arn]
    }
  }
}

resource "aws_sns_topic_policy" "alarm_topic" {
  arn    = module.observability.topic_arn
  policy = data.aws_iam_policy_document.alarm_topic.json
}

# One alarm per monitor kind, over every spider: a monitor of that kind failed on some run in
# the last 5 minutes. With metrics_per_spider the metric's Spider+Monitor dimensions tell which
# spider; either way `crawlq runs --spider NAME` and the run's events do.
resource "aws_cloudwatch_metric_alarm" "monitor_failed" {
  for_each            = toset(local.monitor_kinds)
  alarm_name          = "${var.name}-monitor-${each.key}"
  alarm_description   = "A crawlq run failed its ${each.key} monitor (crawlq runs --spider NAME shows which)."
  namespace           = var.metrics_namespace
  metric_name         = "MonitorFailed"
  dimensions          = { Monitor = each.key }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [module.observability.topic_arn]
  ok_actions          = [module.observability.topic_arn]
}
