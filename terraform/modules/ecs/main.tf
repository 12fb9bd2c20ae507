# ECS: the Fargate cluster (FARGATE and FARGATE_SPOT), the ECR repository of the runner image,
# the runner task definition and its log group and roles. dispatch starts the tasks.

variable "name" {
  description = "Name prefix; also the cluster name."
  type        = string
}

variable "family" {
  description = "Task definition family of the runner."
  type        = string
}

variable "container_name" {
  description = "Name of the runner container (CRAWLQ_ECS_CONTAINER)."
  type        = string
}

variable "image_tag" {
  description = "Image tag in the runner repository."
  type        = string
}

variable "image" {
  description = "Full runner image reference; empty means <this stack's ECR repository>:image_tag."
  type        = string
}

variable "cpu" {
  description = "Task CPU units."
  type        = number
}

variable "memory" {
  description = "Task memory in MiB."
  type        = number
}

variable "environment" {
  description = "CRAWLQ_* environment of the runner."
  type        = map(string)
}

variable "log_retention_days" {
  description = "Log group retention."
  type        = number
}

variable "container_insights" {
  description = "Enable Container Insights."
  type        = bool
}

variable "access_policy_json" {
  description = "What the runner may do in AWS (connect to the database as the application role; write items)."
  type        = string
}

resource "aws_ecr_repository" "runner" {
  name                 = "${var.name}-runner"
  image_tag_mutability = "MUTABLE" # "latest" moves; pin var.image_tag to a digest-like tag for releases
  # The images are built from the repository and pushed by every deploy: destroy deletes them
  # with the repository (without this it fails on the pushed image, RepositoryNotEmptyException).
  force_delete = true

  image_scanning_configuration {
    scan_on_push = true
  }
  encryption_configuration {
    encryption_type = "AES256"
  }
}

resource "aws_ecr_lifecycle_policy" "runner" {
  repository = aws_ecr_repository.runner.name
  policy = jsonencode({
    rules = [{
      rulePriority = 1
      description  = "Keep the 20 most recent images"
      selection = {
        tagStatus   = "any"
        countType   = "imageCountMoreThan"
        countNumber = 20
      }
      action = { type = "expire" }
    }]
  })
}

resource "aws_ecs_cluster" "this" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = var.container_insights ? "enabled" : "disabled"
  }
}

resource "aws_ecs_cluster_capacity_providers" "this" {
  cluster_name       = aws_ecs_cluster.this.name
  capacity_providers = ["FARGATE", "FARGATE_SPOT"]

  default_capacity_provider_strategy {
    capacity_provider = "FARGATE_SPOT"
    weight            = 1
  }
}

resource "aws_cloudwatch_log_group" "runner" {
  name              = "/ecs/${var.family}"
  retention_in_days = var.log_retention_days
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "execution" {
  name               = "${var.name}-runner-execution"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

data "aws_iam_policy_document" "execution" {
  statement {
    sid       = "EcrLogin"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"] # the registry token has no resource-level permission
  }
  statement {
    sid       = "PullRunnerImage"
    actions   = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
    resources = [aws_ecr_repository.runner.arn]
  }
  statement {
    sid       = "WriteRunnerLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.runner.arn}:*"]
  }
}

resource "aws_iam_role_policy" "execution" {
  name   = "${var.name}-runner-execution"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.execution.json
}

resource "aws_iam_role" "task" {
  name               = "${var.name}-runner-task"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_iam_role_policy" "task" {
  name   = "${var.name}-runner-task"
  role   = aws_iam_role.task.id
  policy = var.access_policy_json
}

data "aws_region" "current" {}

resource "aws_ecs_task_definition" "runner" {
  family                   = var.family
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = tostring(var.cpu)
  memory                   = tostring(var.memory)
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }

  container_definitions = jsonencode([{
    name      = var.container_name
    image     = var.image != "" ? var.image : "${aws_ecr_repository.runner.repository_url}:${var.image_tag}"
    essential = true
    # No command: the image's entrypoint is the whole argv (["/crawlq", "runner"], see
    # internal/image), and the runner takes its settings from the environment and RunTask's
    # overrides. A command here would be appended to the entrypoint as extra arguments, which
    # the runner rejects; terraform/contract_test.go runs the composed argv to keep it so.
    # The runner drains its leases on SIGTERM; 120s (the Fargate maximum) gives it time to.
    stopTimeout = 120
    environment = [for k in sort(keys(var.environment)) : { name = k, value = var.environment[k] }]
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.runner.name
        awslogs-region        = data.aws_region.current.name
        awslogs-stream-prefix = "runner"
      }
    }
  }])
}

output "cluster_name" {
  value = aws_ecs_cluster.this.name
}

output "cluster_arn" {
  value = aws_ecs_cluster.this.arn
}

output "task_definition_family_arn" {
  description = "ARN matching every revision of the runner family."
  value       = "${replace(aws_ecs_task_definition.runner.arn_without_revision, "/:[0-9]+$/", "")}:*"
}

output "role_arns" {
  value = [aws_iam_role.execution.arn, aws_iam_role.task.arn]
}

output "repository_url" {
  value = aws_ecr_repository.runner.repository_url
}
