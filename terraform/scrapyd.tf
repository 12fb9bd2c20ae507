# The Scrapyd-compatible HTTP API (internal/scrapyd) in AWS: a Lambda function URL on the api
# function, which answers both its JSON payloads and function URL events
# (scrapyd.LambdaHandler), with basic auth credentials from a Secrets Manager secret
# (CRAWLQ_SCRAPYD_SECRET_ARN in the api function's environment, main.tf). Its /logs.json reads
# the run logs of runlogs.tf. Off by default: it needs scrapyd_password.

variable "scrapyd_api" {
  description = "Serve the Scrapyd-compatible HTTP API through a Lambda function URL on the api function."
  type        = bool
  default     = false
}

variable "scrapyd_username" {
  description = "Basic auth user of the Scrapyd API."
  type        = string
  default     = "scrapyd"
}

variable "scrapyd_password" {
  description = "Basic auth password of the Scrapyd API (stored in Secrets Manager). Required with scrapyd_api."
  type        = string
  default     = ""
  sensitive   = true
  validation {
    condition     = length(var.scrapyd_password) == 0 || length(var.scrapyd_password) >= 12
    error_message = "scrapyd_password must be at least 12 characters."
  }
}

resource "aws_lambda_function_url" "scrapyd" {
  count              = var.scrapyd_api ? 1 : 0
  function_name      = local.function_names["api"]
  authorization_type = "NONE" # basic auth, checked by the function, as Scrapyd does
  depends_on         = [module.functions]
}

resource "aws_secretsmanager_secret" "scrapyd" {
  count = var.scrapyd_api ? 1 : 0
  name  = "${var.name}-scrapyd-credentials"
}

resource "aws_secretsmanager_secret_version" "scrapyd" {
  count         = var.scrapyd_api ? 1 : 0
  secret_id     = aws_secretsmanager_secret.scrapyd[0].id
  secret_string = jsonencode({ username = var.scrapyd_username, password = var.scrapyd_password })
}

data "aws_iam_policy_document" "scrapyd_api" {
  count = var.scrapyd_api ? 1 : 0
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [aws_secretsmanager_secret.scrapyd[0].arn]
  }
}

resource "aws_iam_role_policy" "scrapyd_api" {
  count      = var.scrapyd_api ? 1 : 0
  name       = "scrapyd-api"
  role       = "${var.name}-api"
  policy     = data.aws_iam_policy_document.scrapyd_api[0].json
  depends_on = [module.functions]
}

output "scrapyd_url" {
  description = "The Scrapyd-compatible API (scrapyd-deploy, ScrapydWeb: use this as the server URL)."
  value       = var.scrapyd_api ? aws_lambda_function_url.scrapyd[0].function_url : ""
}
