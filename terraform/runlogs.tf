# Run logs (internal/runlog): one CloudWatch Logs stream per run in one group, named in every
# function's and runner's environment as CRAWLQ_RUN_LOG_GROUP (main.tf), so what runners and
# the functions that publish run events write (a command spider's output; the run's state
# changes and monitor verdicts) is what `crawlq logs`, the api and the Scrapyd /logs.json read
# back.

resource "aws_cloudwatch_log_group" "runs" {
  name              = local.run_log_group
  retention_in_days = var.log_retention_days
}

locals {
  # Who writes run logs (the runner task: command spiders' output; it and the functions that
  # publish run events: a line per event) and who reads them (api). The role names are the
  # modules' own.
  run_log_writers = {
    runner   = "${var.name}-runner-task"
    dispatch = "${var.name}-dispatch"
    api      = "${var.name}-api"
    worker   = "${var.name}-worker"
  }
}

data "aws_iam_policy_document" "run_log_write" {
  statement {
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.runs.arn}:*"]
  }
}

resource "aws_iam_role_policy" "run_log_write" {
  for_each   = local.run_log_writers
  name       = "run-logs-write"
  role       = each.value
  policy     = data.aws_iam_policy_document.run_log_write.json
  depends_on = [module.ecs, module.functions]
}

data "aws_iam_policy_document" "run_log_read" {
  statement {
    actions   = ["logs:GetLogEvents"]
    resources = ["${aws_cloudwatch_log_group.runs.arn}:*"]
  }
}

resource "aws_iam_role_policy" "run_log_read" {
  name       = "run-logs-read"
  role       = "${var.name}-api"
  policy     = data.aws_iam_policy_document.run_log_read.json
  depends_on = [module.functions]
}
