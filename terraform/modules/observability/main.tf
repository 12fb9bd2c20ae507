# Observability: the CloudWatch dashboard, the alarms and their SNS topic.
#
# The crawlq metric names below are the ones internal/metrics writes (QueueMetricNames,
# SpiderMetricNames); terraform/terraform_test.go fails if the two drift apart.

variable "name" {
  description = "Name prefix."
  type        = string
}

variable "region" {
  description = "Region (for the dashboard widgets and URL)."
  type        = string
}

variable "namespace" {
  description = "Namespace of crawlq's own metrics."
  type        = string
}

variable "function_names" {
  description = "Lambda function names by role."
  type        = map(string)
}

variable "cluster_name" {
  description = "ECS cluster."
  type        = string
}

variable "db_instance_id" {
  description = "RDS instance identifier."
  type        = string
}

variable "metrics_per_spider" {
  description = "Whether spider metrics carry the Spider dimension (else they are totals without dimensions)."
  type        = bool
}

variable "nat_instance" {
  description = "Whether the stack has a NAT instance (nat_instance_id) to alarm on."
  type        = bool
}

variable "nat_instance_id" {
  description = "The NAT instance's id, with nat_instance."
  type        = string
}

variable "container_insights" {
  description = "Whether the cluster has Container Insights (the running-task widget needs it)."
  type        = bool
}

variable "db_proxy_name" {
  description = "RDS Proxy name; empty without the proxy (the dashboard then graphs the instance's connections only)."
  type        = string
}

variable "account" {
  description = "AWS account ID (the alarm key's administrators)."
  type        = string
}

variable "partition" {
  description = "AWS partition (aws, aws-cn, ...)."
  type        = string
}

variable "alarm_email" {
  description = "Email subscribed to the alarm topic; empty for none."
  type        = string
}

variable "oldest_past_due_threshold" {
  description = "Seconds."
  type        = number
}

variable "rds_cpu_threshold" {
  description = "Percent."
  type        = number
}

variable "lambda_errors_threshold" {
  description = "Errors per 5 minutes per function."
  type        = number
}

# The alarm topic is encrypted with a key of our own: a service publishes to an encrypted topic
# only when the key's policy lets that service use it, which the AWS-managed alias/aws/sns key
# never does (alarms would fire into nothing). Two services publish: CloudWatch (the alarms) and
# EventBridge (the failed-runs rule, terraform/events.tf). The topic's own policy limits both to
# this account's alarms and rule; the key is used by this topic only.
data "aws_iam_policy_document" "alarm_key" {
  statement {
    # The account administers the key through IAM, as for every key (without this statement
    # the key could become unmanageable); the key policy is the only place kms:* appears.
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"] # in a key policy, "*" is this key
    principals {
      type        = "AWS"
      identifiers = ["arn:${var.partition}:iam::${var.account}:root"]
    }
  }
  statement {
    sid       = "ServicesPublishAlerts"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com", "events.amazonaws.com"]
    }
  }
}

resource "aws_kms_key" "alarms" {
  description             = "${var.name} alarm topic"
  enable_key_rotation     = true
  deletion_window_in_days = 7
  policy                  = data.aws_iam_policy_document.alarm_key.json
}

resource "aws_kms_alias" "alarms" {
  name          = "alias/${var.name}-alarms"
  target_key_id = aws_kms_key.alarms.key_id
}

resource "aws_sns_topic" "alarms" {
  name              = "${var.name}-alarms"
  kms_master_key_id = aws_kms_key.alarms.arn
}

resource "aws_sns_topic_subscription" "email" {
  count     = var.alarm_email == "" ? 0 : 1
  topic_arn = aws_sns_topic.alarms.arn
  protocol  = "email"
  endpoint  = var.alarm_email
}

locals {
  # One line per queue / spider, whatever queues and spiders exist: SEARCH finds them.
  queue_search = "{${var.namespace},Queue} MetricName="
  # Per spider, a line each; as totals, the one series without dimensions.
  spider_search = var.metrics_per_spider ? "{${var.namespace},Spider} MetricName=" : "{${var.namespace}} MetricName="

  crawlq_widgets = [
    { title = "Queue depth (available)", dim = "queue", metric = "QueueAvailable", stat = "Maximum" },
    { title = "Past-due jobs", dim = "queue", metric = "QueuePastDue", stat = "Maximum" },
    { title = "Oldest past-due age (s)", dim = "queue", metric = "QueueOldestPastDueAge", stat = "Maximum" },
    { title = "Running jobs", dim = "queue", metric = "QueueRunning", stat = "Maximum" },
    { title = "Throughput (jobs succeeded / min)", dim = "queue", metric = "JobsSucceeded", stat = "Sum" },
    # JobsFailed is written as the change of the queue's dead count (internal/lambdafn Metrics):
    # jobs that died this minute, not every failed attempt. The title says so.
    { title = "Jobs died / min", dim = "queue", metric = "JobsFailed", stat = "Sum" },
    { title = "Dead jobs", dim = "queue", metric = "QueueDead", stat = "Maximum" },
    { title = "Pages / min", dim = "spider", metric = "SpiderPages", stat = "Sum" },
    { title = "Items / min", dim = "spider", metric = "SpiderItems", stat = "Sum" },
    { title = "Spider errors / min", dim = "spider", metric = "SpiderErrors", stat = "Sum" },
    { title = "Runs finished", dim = "spider", metric = "RunsFinished", stat = "Sum" },
    { title = "Runs failed", dim = "spider", metric = "RunsFailed", stat = "Sum" },
    # Runs that ended with dead pages (items kept; crawlq redrive --run retries them).
    { title = "Runs incomplete", dim = "spider", metric = "RunsIncomplete", stat = "Sum" },
    { title = "Dead pages", dim = "spider", metric = "DeadPages", stat = "Sum" },
    # Bans and proxy failures are retried, not errors: a spider being banned shows only here.
    { title = "Bans / min", dim = "spider", metric = "SpiderBans", stat = "Sum" },
    { title = "Proxy failures / min", dim = "spider", metric = "SpiderProxyFailures", stat = "Sum" },
  ]

  fns = sort(values(var.function_names))

  aws_widgets = concat([
    {
      title   = "Lambda errors"
      stat    = "Sum"
      metrics = [for f in local.fns : ["AWS/Lambda", "Errors", "FunctionName", f]]
    },
    {
      title   = "Lambda duration (p95 ms)"
      stat    = "p95"
      metrics = [for f in local.fns : ["AWS/Lambda", "Duration", "FunctionName", f]]
    },
    {
      title   = "Lambda concurrency"
      stat    = "Maximum"
      metrics = [for f in local.fns : ["AWS/Lambda", "ConcurrentExecutions", "FunctionName", f]]
    },
    {
      title   = "Lambda throttles"
      stat    = "Sum"
      metrics = [for f in local.fns : ["AWS/Lambda", "Throttles", "FunctionName", f]]
    },
    ],
    # RunningTaskCount exists per service only; dispatch starts standalone tasks (RunTask),
    # which only Container Insights counts (the cluster-level TaskCount).
    var.container_insights ? [{
      title   = "Running ECS runner tasks"
      stat    = "Maximum"
      metrics = [["ECS/ContainerInsights", "TaskCount", "ClusterName", var.cluster_name]]
    }] : [],
    [{
      title   = "RDS CPU (%)"
      stat    = "Average"
      metrics = [["AWS/RDS", "CPUUtilization", "DBInstanceIdentifier", var.db_instance_id]]
      },
      {
        title = "Database connections"
        stat  = "Maximum"
        metrics = concat(
          [["AWS/RDS", "DatabaseConnections", "DBInstanceIdentifier", var.db_instance_id]],
          var.db_proxy_name == "" ? [] : [["AWS/RDS", "ClientConnections", "ProxyName", var.db_proxy_name]],
        )
    }],
  )

  widgets = concat(
    [for i, w in local.crawlq_widgets : {
      type   = "metric"
      x      = (i % 3) * 8
      y      = floor(i / 3) * 6
      width  = 8
      height = 6
      properties = {
        title  = w.title
        region = var.region
        view   = "timeSeries"
        period = 60
        metrics = [[{
          id         = "e1"
          expression = "SEARCH('${w.dim == "queue" ? local.queue_search : local.spider_search}\"${w.metric}\"', '${w.stat}', 60)"
          label      = ""
        }]]
      }
    }],
    [for i, w in local.aws_widgets : {
      type   = "metric"
      x      = (i % 3) * 8
      y      = (ceil(length(local.crawlq_widgets) / 3) + floor(i / 3)) * 6
      width  = 8
      height = 6
      properties = {
        title   = w.title
        region  = var.region
        view    = "timeSeries"
        period  = 60
        stat    = w.stat
        metrics = w.metrics
      }
    }],
  )
}

resource "aws_cloudwatch_dashboard" "this" {
  dashboard_name = var.name
  dashboard_body = jsonencode({ widgets = local.widgets })
}

# Queue alarms use Metrics Insights so that they cover every queue, including ones created
# after this apply (alarms cannot use SEARCH).
resource "aws_cloudwatch_metric_alarm" "dead_jobs" {
  alarm_name          = "${var.name}-dead-jobs"
  alarm_description   = "Some queue has dead jobs (attempts exhausted): inspect with `crawlq jobs --state dead`, fix, `crawlq redrive`."
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  evaluation_periods  = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]

  metric_query {
    id          = "dead"
    expression  = "SELECT MAX(QueueDead) FROM SCHEMA(\"${var.namespace}\", Queue)"
    period      = 60
    return_data = true
  }
}

resource "aws_cloudwatch_metric_alarm" "oldest_past_due" {
  alarm_name          = "${var.name}-oldest-past-due-age"
  alarm_description   = "Jobs wait longer than ${var.oldest_past_due_threshold}s past due: workers are short, stuck or failing."
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.oldest_past_due_threshold
  evaluation_periods  = 5
  datapoints_to_alarm = 3
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]

  metric_query {
    id          = "age"
    expression  = "SELECT MAX(QueueOldestPastDueAge) FROM SCHEMA(\"${var.namespace}\", Queue)"
    period      = 60
    return_data = true
  }
}

resource "aws_cloudwatch_metric_alarm" "lambda_errors" {
  for_each = var.function_names

  alarm_name          = "${each.value}-errors"
  alarm_description   = "${each.value} returned errors."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = each.value }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.lambda_errors_threshold
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
}

# The NAT instance failing its status checks: the functions cannot reach AWS APIs (dispatch starts
# no tasks) until EC2 recovers or replaces it.
resource "aws_cloudwatch_metric_alarm" "nat_instance" {
  count               = var.nat_instance ? 1 : 0
  alarm_name          = "${var.name}-nat-instance"
  alarm_description   = "The NAT instance fails its status checks: the functions cannot reach AWS APIs. EC2 recovers it from host failures; otherwise replace it (terraform apply -replace=module.network.aws_instance.nat[0])."
  namespace           = "AWS/EC2"
  metric_name         = "StatusCheckFailed"
  dimensions          = { InstanceId = var.nat_instance_id }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 3
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  treat_missing_data  = "breaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
}

resource "aws_cloudwatch_metric_alarm" "rds_cpu" {
  alarm_name          = "${var.name}-rds-cpu"
  alarm_description   = "Database CPU above ${var.rds_cpu_threshold}% for 15 minutes."
  namespace           = "AWS/RDS"
  metric_name         = "CPUUtilization"
  dimensions          = { DBInstanceIdentifier = var.db_instance_id }
  statistic           = "Average"
  period              = 300
  evaluation_periods  = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.rds_cpu_threshold
  treat_missing_data  = "missing"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
}

output "dashboard_url" {
  value = "https://${var.region}.console.aws.amazon.com/cloudwatch/home?region=${var.region}#dashboards:name=${aws_cloudwatch_dashboard.this.dashboard_name}"
}

output "topic_arn" {
  value = aws_sns_topic.alarms.arn
}
